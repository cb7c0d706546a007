#!/usr/bin/env python3
"""How a run of many processes reads: profreport on 1 core and on every core.

Records, with an existing build (--build, the CMake build directory), one run of N processes
(default 64) into a scratch directory: `profrun -d DIR -- sh -c '...'` starting the bundled
fib sample N times, four at a time, each fib(--fib) a process with a trace of its own. Then, in
every rep, in shuffled order:

  profreport -j 1 DIR        the merged table, the traces read one after another
  profreport -j CORES DIR    the same, CORES traces at once (default: every core)
  profreport -j 1 TRACE      one of the run's traces alone

each timed (wall clock) with its peak resident memory (wait4's ru_maxrss). Prints the medians
(with min-max) over the reps, the speedup of CORES over 1, events per second for the run and
for one trace (each call is two events, enter and exit), and the memory of the run against one
trace's: a run's memory is bounded by the functions and call stacks it keeps, not by its events.
Standard library only.
"""

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from libprofbench.runner import RunError, run


def timed(cmd):
    """Wall seconds and peak RSS (MiB) of cmd; its standard output."""
    try:
        r = run(cmd, capture=True)
    except RunError as e:
        sys.exit(f"run_scale: {' '.join(cmd)} failed: {e}")
    return r.wall, r.maxrss_kib / 1024.0, r.out


def calls_of(report):
    m = re.search(r"(\d+) function calls", report)
    if not m:
        sys.exit("run_scale: no 'function calls' in the report")
    return int(m.group(1))


def spread(values, fmt="{:.3f}"):
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="CMake build directory (default: build)")
    ap.add_argument("--processes", type=int, default=64)
    ap.add_argument("--fib", type=int, default=27, help="fib(N) per process (default 27)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                    help="the -j of the parallel reading (default: every core)")
    ap.add_argument("--keep", help="record the run into this directory and keep it")
    args = ap.parse_args()
    build = Path(args.build).resolve()
    profrun, profreport = build / "tools/profrun", build / "tools/profreport"
    fib = build / "samples/fib"
    for tool in (profrun, profreport, fib):
        if not tool.exists():
            sys.exit(f"run_scale: {tool} is missing (build the project first)")
    scratch = Path(tempfile.mkdtemp(prefix="libprof-scale-"))
    try:
        run_dir = Path(args.keep) if args.keep else scratch / "run"
        if run_dir.exists():
            shutil.rmtree(run_dir)
        script = (f"i=0; while [ $i -lt {args.processes} ]; do "
                  f"for k in 1 2 3 4; do '{fib}' {args.fib} > /dev/null & done; wait; "
                  f"i=$((i + 4)); done")
        subprocess.run([str(profrun), "-d", str(run_dir), "--", "sh", "-c", script], check=True,
                       stderr=subprocess.DEVNULL)
        traces = sorted(run_dir.glob("*.trace"))
        if len(traces) < args.processes:
            sys.exit(f"run_scale: {len(traces)} traces in the run, expected {args.processes}")
        size = sum(t.stat().st_size for t in traces)
        print(f"run: {len(traces)} processes of fib({args.fib}), {size / 1e6:.0f} MB of traces, "
              f"{os.cpu_count()} cores; {args.reps} reps, medians (min-max)")
        configs = {
            "run -j 1": [str(profreport), "-j", "1", "--limit", "5", str(run_dir)],
            f"run -j {args.jobs}": [str(profreport), "-j", str(args.jobs), "--limit", "5",
                                    str(run_dir)],
            "one trace -j 1": [str(profreport), "-j", "1", "--limit", "5", str(traces[0])],
        }
        seconds = {k: [] for k in configs}
        memory = {k: [] for k in configs}
        calls = {}
        for _ in range(args.reps):
            order = list(configs)
            random.shuffle(order)
            for k in order:
                s, rss, out = timed(configs[k])
                seconds[k].append(s)
                memory[k].append(rss)
                calls[k] = calls_of(out)
        if calls["run -j 1"] != calls[f"run -j {args.jobs}"]:
            sys.exit("run_scale: the two readings of the run disagree on the calls")
        print(f"\n{'reading':<18} {'seconds':>22} {'peak RSS MiB':>22} {'M events/s':>12}")
        for k in configs:
            events = 2 * calls[k]
            rate = events / statistics.median(seconds[k]) / 1e6
            print(f"{k:<18} {spread(seconds[k]):>22} {spread(memory[k], '{:.0f}'):>22} "
                  f"{rate:>12.1f}")
        one, par = statistics.median(seconds["run -j 1"]), statistics.median(
            seconds[f"run -j {args.jobs}"])
        per_event_run = one / (2 * calls["run -j 1"])
        per_event_one = statistics.median(seconds["one trace -j 1"]) / (2 * calls["one trace -j 1"])
        # Each rep's own ratio too: the machine's load moves both readings of a rep alike.
        ratios = [a / b for a, b in zip(seconds["run -j 1"], seconds[f"run -j {args.jobs}"])]
        print(f"\nspeedup -j {args.jobs} over -j 1: {one / par:.2f}x (per rep: "
              f"{spread(ratios, '{:.2f}')})")
        print(f"time per event, run against one trace (-j 1): {per_event_run * 1e9:.1f} ns vs "
              f"{per_event_one * 1e9:.1f} ns ({per_event_run / per_event_one:.2f}x)")
        print(f"peak memory, run of {len(traces)} against one trace: "
              f"{statistics.median(memory[f'run -j {args.jobs}']):.0f} MiB (-j {args.jobs}) and "
              f"{statistics.median(memory['run -j 1']):.0f} MiB (-j 1) vs "
              f"{statistics.median(memory['one trace -j 1']):.0f} MiB")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
