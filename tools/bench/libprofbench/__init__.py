"""libprof's benchmark kit: what the scripts of tools/bench share (running, building, perf, tables).

runner   fork/exec/wait4 with wall and CPU time (and sampled peak memory), taskset, environments
build    compiling the workloads with the flags a benchmark needs; the CMake-built programs
perf     one parser of `perf script` output
table    the text and Markdown tables, numbers and medians
host     the machine, load and tool versions a report prints
sqlite   the SQLite amalgamation and the sqlite_mix workload built from it
calls    the call workloads (fib, mix, threads), lines and alloc: builds, runs and per-call figures
"""
