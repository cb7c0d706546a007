#!/usr/bin/env python3
"""What the latency distributions of the default recording cost (format 1.13, PROF_LATENCY_MIN).

Counting hooks (PROF_TIME=sampled, as the default records once a run has 100 samples) with
distributions (PROF_LATENCY_MIN=1000, the default) against the same hooks without them
(PROF_LATENCY_MIN=0), side by side in one run, alternating, on:
  - fib(32): 7.05 M calls, every one far under the threshold: the cost of the test of a call's
    count (goal: at most 1 ns per call);
  - SQLite (sqlite_mix, the amalgamation of better-sqlite3's tarball, GCC, prof::instrument's
    flags): a real program whose longer paths get timed (goal: at most 3 ns per call).
Prints per workload the medians of wall and CPU time of each side, the extra ns per call (the
median of the per-rep differences, with its range), and from one trace of the distributions side
the timed calls and paths (profreport latency --format json).

  python3 tools/bench/latency_cost.py --build build [--reps 7] [--work /tmp/latency_cost]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from libprofbench import sqlite  # noqa: E402
from libprofbench.calls import fib_calls  # noqa: E402
from libprofbench.host import machine_line  # noqa: E402
from libprofbench.runner import run  # noqa: E402

BENCH = Path(__file__).resolve().parent


def log(msg):
    print(f"latency_cost: {msg}", file=sys.stderr, flush=True)


def build_fib(work, build):
    out = work / "fib"
    libdir = build / "libprof"
    subprocess.run(["g++", "-O2", "-g", "-finstrument-functions", "-fno-optimize-sibling-calls",
                    str(BENCH / "workloads" / "fib.cpp"), "-o", str(out), f"-L{libdir}",
                    f"-Wl,-rpath,{libdir}", "-lprof"], check=True)
    return out


def env_for(latency_min, trace):
    env = dict(os.environ)
    env.update(PROF_TIME="sampled", PROF_LATENCY_MIN=str(latency_min), PROF_OUT=str(trace),
               PROF_FORCE="1", PROF_LOG="error")
    return env


def calls_of(build, trace):
    """Every call the trace counted (profreport's total) and what latency says was timed."""
    j = subprocess.run([str(build / "tools" / "profreport"), "--format", "json", str(trace)],
                       capture_output=True, text=True, check=True)
    total = json.loads(j.stdout)["total_calls"]
    lat = subprocess.run([str(build / "tools" / "profreport"), "latency", "--format", "json",
                          "--detail", "0", str(trace)], capture_output=True, text=True)
    if lat.returncode != 0:
        return total, 0, 0
    doc = json.loads(lat.stdout)
    return total, doc["calls"], len(doc["functions"])


def measure(name, argv, calls, build, work, reps):
    trace = work / f"{name}.trace"
    sides = {"off": [], "on": []}
    for rep in range(reps):
        order = ("off", "on") if rep % 2 == 0 else ("on", "off")
        for side in order:
            r = run(argv, env=env_for(1000 if side == "on" else 0, trace), cwd=work)
            sides[side].append(r)
    off_wall = [r.wall for r in sides["off"]]
    on_wall = [r.wall for r in sides["on"]]
    off_cpu = [r.cpu for r in sides["off"]]
    on_cpu = [r.cpu for r in sides["on"]]
    extra_wall = [(a - b) / calls * 1e9 for a, b in zip(on_wall, off_wall)]
    extra_cpu = [(a - b) / calls * 1e9 for a, b in zip(on_cpu, off_cpu)]
    run(argv, env=env_for(1000, trace), cwd=work)
    total, timed, functions = calls_of(build, trace)
    print(f"{name}: {calls:,} calls, {reps} reps alternating")
    print(f"  without distributions (PROF_LATENCY_MIN=0): wall {statistics.median(off_wall):.3f} s, "
          f"CPU {statistics.median(off_cpu):.3f} s")
    print(f"  with them (PROF_LATENCY_MIN=1000):         wall {statistics.median(on_wall):.3f} s, "
          f"CPU {statistics.median(on_cpu):.3f} s")
    print(f"  extra per call: wall {statistics.median(extra_wall):+.2f} ns "
          f"(range {min(extra_wall):+.2f} to {max(extra_wall):+.2f}), CPU "
          f"{statistics.median(extra_cpu):+.2f} ns (range {min(extra_cpu):+.2f} to "
          f"{max(extra_cpu):+.2f})")
    print(f"  timed: {timed:,} of {total:,} calls ({100 * timed / max(total, 1):.2f}%), "
          f"{functions} functions")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/latency_cost"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--fib", type=int, default=32)
    ap.add_argument("--sqlite-rows", type=int, default=40000)
    ap.add_argument("--sqlite-package", default=sqlite.SQLITE_PACKAGE)
    ap.add_argument("--no-sqlite", action="store_true")
    a = ap.parse_args()
    build = a.build.resolve()
    a.work.mkdir(parents=True, exist_ok=True)
    sqlite.log = log
    print(machine_line())
    fib = build_fib(a.work, build)
    measure(f"fib({a.fib})", [fib, str(a.fib)], fib_calls(a.fib), build, a.work, a.reps)
    if a.no_sqlite:
        return
    src = sqlite.fetch_sqlite(a.work, a.sqlite_package, None)
    binary, _ = sqlite.build_program(a.work, src, "gcc", build)
    db = a.work / "db"
    db.mkdir(exist_ok=True)
    argv = [binary, str(a.sqlite_rows), "1", str(db)]
    # Its calls: the counted trace's total (the same in every run).
    run(argv, env=env_for(0, a.work / "count.trace"), cwd=a.work)
    total, _, _ = calls_of(build, a.work / "count.trace")
    measure(f"SQLite GCC ({a.sqlite_rows} rows)", argv, total, build, a.work, a.reps)


if __name__ == "__main__":
    main()
