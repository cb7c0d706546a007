#!/usr/bin/env python3
"""Smoke run of the benchmarks: each script with tiny sizes and one rep, in seconds, checked for
an exit status of 0 and the headings and rows of its report. Run by ctest (`bench: smoke: NAME`,
with -DPROF_BUILD_BENCH=ON) against the build directory; by hand:

  python3 tools/bench/smoke.py --build build [NAME ...]

A benchmark whose tool is missing here (perf, uftrace, heaptrack) is skipped, or runs without that
part, with the reason printed; the exit status is then 77 (ctest's SKIP_RETURN_CODE), never 0. The
SQLite benchmarks build against a stand-in for the amalgamation (the system's libsqlite3, see
libprofbench/sqlite.py) unless --sqlite-src names a real one. The figures mean nothing.
"""

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from libprofbench import sqlite
from libprofbench.build import HERE, has_hooks

SKIP = 77


def perf_missing():
    if shutil.which("perf") is None:
        return "perf not found"
    r = subprocess.run(["perf", "stat", "-e", "cpu-clock", "-x,", "--", "true"],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else f"perf cannot count here: {r.stderr.strip()[:200]}"


def sqlite_src(args, work):
    """A real amalgamation (--sqlite-src), or the stand-in."""
    return args.sqlite_src or sqlite.standin(work)


# name -> (argv after the script, the patterns its standard output must hold, what it needs:
# a function returning the reason it cannot run here, or None)
def benchmarks(args, work):
    build = str(args.build)
    src = lambda: str(sqlite_src(args, work))  # noqa: E731
    return {
        "bench": (lambda: ["--build", build, "--work", work / "bench", "--workloads", "fib,lines",
                           "--smoke"],
                  [r"^== fib: recursive fib\(N\), args 27: ", r"^config +reps +median wall s",
                   r"^fi: libprof full call trace ", r"^== lines: PROF_LINE / PROF_SCOPE",
                   r"^PROF_LINE\(statement\) ", r"^== trace readers on the fib traces",
                   r"^profreport \(fib trace\) "],
                  lambda: None if has_hooks(args.build) else
                  f"{args.build}/tools/bench has no hook libraries (PROF_BUILD_BENCH=ON, built)"),
        "report_speed": (lambda: ["--build", build, "--work", work / "report_speed", "--sqlite-src",
                                  src(), "--rows", "400", "--reps", "1", "--traces", "2",
                                  "--program-threads", "2", "--views", "table,tree,collapsed"],
                         [r"^== ", r"^view +command +median CPU s", r"^table +profreport TRACE ",
                          r"^collapsed ", r"^input +events +median wall s, 1 CPU"],
                         lambda: None if sqlite_src(args, work) else "no SQLite amalgamation nor "
                         "/usr/include/sqlite3.h for the stand-in"),
        "true_time": (lambda: ["--build", build, "--work", work / "true_time", "--sqlite-src", src(),
                               "--rows", "400", "--reps", "1", "--compilers", "gcc", "--fib", "12",
                               "--fib-reps", "1"]
                      + (["--no-fib"] if shutil.which("uftrace") is None else []),
                      [r"^== targets", r"^target +", r"^== [^\n]*gcc"]
                      + ([] if shutil.which("uftrace") is None else [r"^== per-call cost: fib\(12\)"]),
                      lambda: perf_missing() or (None if sqlite_src(args, work) else "no SQLite")),
        "true_shares": (lambda: ["--build", build, "--work", work / "true_shares", "--smoke",
                                 "--reps", "1", "--busy", "--sqlite-src", src()],
                        [r"^== summary: ", r"^program +compiler +within 3 points",
                         r"^== zopfli, gcc: ", r"^== snappy, clang: ", r"^== sqlite, gcc, busy: ",
                         r"^function +libprof % +perf % +diff", r"^- output of snappy: the same"],
                        lambda: perf_missing() or next((f"{t} not found" for t in ("npm", "clang++")
                                                        if shutil.which(t) is None), None)
                        or (None if sqlite_src(args, work) else "no SQLite")),
        "sample_vs_perf": (lambda: ["--build", build, "--work", work / "sample_vs_perf", "--sqlite-src",
                                    src(), "--reps", "1", "--rows", "400", "--xz-mb", "0.05",
                                    "--sort-lines", "2000", "--no-attach"],
                           [r"^== overhead: time against the program alone", r"^== verdicts"],
                           lambda: perf_missing() or (None if sqlite_src(args, work) else "no SQLite")),
        "idle_cost": (lambda: ["--build", build, "--work", work / "idle_cost", "--reps", "1",
                               "--naps", "2", "--round-trips", "200"],
                      [r"^## naps: naps 2, alone ", r"^\| sample \| ", r"^\| idle \| ",
                       r"^## pingpong: pingpong 200, alone "],
                      lambda: None if (Path(build) / "tests/programs/test_spinners").exists() else
                      f"{build}/tests/programs/test_spinners not built"),
        "run_scale": (lambda: ["--build", build, "--processes", "4", "--fib", "12", "--reps", "1",
                               "--jobs", "2"],
                      [r"^run: 4 processes of fib\(12\)", r"^reading +seconds +peak RSS MiB",
                       r"^run -j 1 ", r"^one trace -j 1 ", r"^speedup -j 2 over -j 1: "],
                      lambda: None if (Path(build) / "samples/fib").exists() else
                      f"{build}/samples/fib not built (PROF_BUILD_SAMPLES=ON)"),
        "mem_end_to_end": (lambda: ["--build", build, "--work", work / "mem_end_to_end",
                                    "--entries", "2000", "--reps", "1"],
                           [r"^== perl, 2,000 hash entries: [0-9,]+ allocator calls",
                            r"^command +median wall s", r"^alone ", r"^mem ", r"^mem_pack "],
                           lambda: None if shutil.which("perl") else "perl not found"),
        "dump_cost": (lambda: ["--build", build, "--work", work / "dump_cost", "--threads", "8",
                               "--reps", "1"],
                      [r"^== profrun --dump of a 9-thread process", r"^tool +wall s",
                       r"^profrun --dump +[0-9.]+ \(", r"stacks complete"],
                      lambda: None),
        "top_cost": (lambda: ["--build", build, "--work", work / "top_cost", "--reps", "1",
                              "--xz-mb", "1", "--sort-lines", "20000"],
                     [r"^== profrun --top's cost to the program it watches, at 199 Hz",
                      r"^-- xz: ", r"^top +[0-9.]+ ", r"^verdict: --top "],
                     lambda: next((f"{t} not found" for t in ("xz", "sort")
                                   if shutil.which(t) is None), None)),
        "diff_gate": (lambda: ["--build", build, "--work", work / "diff_gate", "--comparisons",
                               "1", "--base-runs", "6", "--slow-runs", "3", "--round-trips", "10"],
                      [r"^== diff --metric tottime --fail-above 10% on snappy \(clang\)",
                       r"^identical builds +",
                       r"^checksum\(\) 40% slower +", r"^verdict: "],
                      lambda: next((f"{t} not found" for t in ("npm", "clang++")
                                    if shutil.which(t) is None), None)),
        "sampling": (lambda: ["--build", build, "--reps", "1", "--fib", "20", "--cost-seconds", "0.05"],
                     [r"^\| fib 20 \| wall s \| CPU s \|", r"^\| sample_cost, 0.05 CPU s \|",
                      r"^cost per sample, at 125 Hz"],
                     lambda: None if (Path(build) / "tools/bench/sample_cost").exists() else
                     f"{build}/tools/bench/sample_cost not built (PROF_BUILD_BENCH=ON)"),
    }


def smoke(name, argv, patterns, work):
    """Runs one benchmark; returns (status, skipped parts): status 0, SKIP or 1."""
    cmd = [sys.executable, "-B", str(HERE / f"{name}.py"), *map(str, argv)]
    print(f"smoke: {name}: {shlex.join(cmd)}", flush=True)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    took = time.monotonic() - t0
    missing = [pat for pat in patterns if not re.search(pat, p.stdout, re.M)]
    if p.returncode != 0 or missing:
        print(p.stdout[-6000:])
        print(p.stderr[-6000:], file=sys.stderr)
        print(f"smoke: {name}: FAILED after {took:.1f} s: exit status {p.returncode}"
              + "".join(f"\n  no line matches {pat!r}" for pat in missing))
        return 1, []
    skipped = re.findall(r"smoke: skipped: (.*)", p.stdout)
    if "--no-fib" in argv:
        skipped.append("uftrace not found: the per-call cost on fib is left out (--no-fib)")
    for reason in skipped:
        print(f"smoke: {name}: skipped a part: {reason}")
    print(f"smoke: {name}: ok in {took:.1f} s ({len(p.stdout.splitlines())} lines of report)")
    return (SKIP if skipped else 0), skipped


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", type=Path, default=HERE.parent.parent / "build",
                    help="libprof's build directory, configured with -DPROF_BUILD_BENCH=ON")
    ap.add_argument("--work", type=Path,
                    help="scratch directory, outside the source tree (default: one per build "
                         "directory under /tmp, kept between runs as a cache)")
    ap.add_argument("--sqlite-src", type=Path, help="a real SQLite amalgamation instead of the stand-in")
    ap.add_argument("names", nargs="*", help="benchmarks to run (default: every one)")
    args = ap.parse_args()
    args.build = args.build.resolve()
    # Outside the source tree, which some benchmarks refuse to write into; one per build.
    tag = hashlib.sha256(str(args.build).encode()).hexdigest()[:10]
    work = (args.work or Path(tempfile.gettempdir()) / f"libprof-bench-smoke-{tag}").resolve()
    work.mkdir(parents=True, exist_ok=True)
    table = benchmarks(args, work)
    for name in args.names:
        if name not in table:
            ap.error(f"unknown benchmark {name!r} (choose from {', '.join(table)})")
    statuses = []
    for name in args.names or list(table):
        argv, patterns, needs = table[name]
        reason = needs()
        if reason:
            print(f"smoke: {name}: SKIPPED: {reason}")
            statuses.append(SKIP)
            continue
        status, _ = smoke(name, argv(), patterns, work)
        statuses.append(status)
    sys.exit(1 if 1 in statuses else SKIP if SKIP in statuses else 0)


if __name__ == "__main__":
    os.environ.pop("PROF_OUT", None)
    main()
