#!/usr/bin/env python3
"""What `profrun --pid PID --dump` costs a running process, beside gdb's `thread apply all bt`.

The target (workloads/dump_target.c, built -O2 -g without frame pointers) runs N threads (default
64): a quarter spin in a compute loop, the others wait in the kernel in read, a condition variable
and nanosleep. Each rep starts it, waits for its threads, then dumps it with each tool in turn:

  profrun   profrun --pid PID --dump --format json: threads blocked in the kernel are read from
            /proc without a stop; the running ones are stopped one at a time
  gdb       gdb -p PID -batch -ex "thread apply all bt": every thread stopped from the attach to
            the detach (skipped when gdb is missing)

Printed, medians over the reps with their range: the end-to-end wall time; for profrun, how many
threads it stopped, and per stopped thread the time from its stop's report to the detach (held:
what the dump holds it) and from the interrupt to the detach (stop: with the time the thread took
to reach the stop, which on a loaded machine is mostly its wait for a CPU); and the stacks that
reached their first frame. gdb stops the whole process for about its whole wall time. With a
quarter of the threads spinning on a machine of few cores, each tool gets a small share of a CPU:
its wall time is mostly that wait, and its CPU time is its work.

  python3 tools/bench/dump_cost.py --build build [--threads 64] [--reps 5]

Everything goes under --work (default /tmp/dump_cost). Standard library only.
"""

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from libprofbench import build as bbuild
from libprofbench import host
from libprofbench.table import med, render_text

HERE = Path(__file__).resolve().parent


def start_target(binary, threads):
    p = subprocess.Popen([str(binary), str(threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    ready, _, _ = select.select([p.stdout], [], [], 30)
    line = p.stdout.readline() if ready else ""
    if not line.startswith("ready "):
        p.kill()
        sys.exit(f"dump_cost: the target did not start: {line!r}")
    time.sleep(0.3)  # into their waits
    return p


def finish_target(p):
    out, _ = p.communicate("go\n", timeout=60)
    if p.returncode != 0 or "rounds " not in out:
        sys.exit(f"dump_cost: the target failed ({p.returncode}): {out!r}")


def timed(cmd):
    """Wall time, CPU time (user + system) and the run's result."""
    t0 = time.perf_counter()
    before = os.times()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system -
                                                          before.children_system)
    return time.perf_counter() - t0, cpu, r


def spread(xs, scale=1.0, digits=3):
    if not xs:
        return "-"
    return (f"{med(xs) * scale:.{digits}f} ({min(xs) * scale:.{digits}f}-"
            f"{max(xs) * scale:.{digits}f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", type=Path, required=True, help="the build tree (profrun)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/dump_cost"))
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    profrun = args.build / "tools" / "profrun"
    if not profrun.exists():
        sys.exit(f"dump_cost: no {profrun}: build first")
    args.work.mkdir(parents=True, exist_ok=True)
    source = bbuild.WORKLOADS / "dump_target.c"
    binary = bbuild.compile_if_stale(
        args.work / "dump_target", [source],
        [os.environ.get("CC", "gcc"), "-O2", "-g", "-fomit-frame-pointer", "-pthread", source,
         "-o", args.work / "dump_target"], tool="dump_cost")
    gdb = shutil.which("gdb")

    walls, cpus, stopped, held, stops, complete = [], [], [], [], [], []
    gdb_walls, gdb_cpus, gdb_threads = [], [], []
    for rep in range(args.reps):
        target = start_target(binary, args.threads)
        try:
            wall, cpu, r = timed([profrun, "--pid", target.pid, "--dump", "--format", "json"])
            if r.returncode != 0:
                sys.exit(f"dump_cost: profrun --dump failed: {r.stderr.strip()}")
            d = json.loads(r.stdout)
            walls.append(wall)
            cpus.append(cpu)
            threads = d["threads"]
            stopped.append(sum(t["stopped"] for t in threads))
            held += [t["held_seconds"] for t in threads if t["stopped"]]
            stops += [t["stop_seconds"] for t in threads if t["stopped"]]
            complete.append(sum(t["stack_end"] is None and t["error"] is None for t in threads))
            if gdb:
                wall, cpu, r = timed([gdb, "-p", target.pid, "-batch", "-ex",
                                      "thread apply all bt"])
                gdb_walls.append(wall)
                gdb_cpus.append(cpu)
                gdb_threads.append(sum(1 for line in r.stdout.splitlines()
                                       if line.startswith("Thread ")))
        finally:
            finish_target(target)

    n = args.threads + 1
    print(f"== profrun --dump of a {n}-thread process ({args.threads // 4 + (args.threads % 4 > 0)} "
          f"spinning, the others waiting in the kernel), {args.reps} reps")
    print(host.machine_line() + f"; load {host.loadavg()}")
    head = ["tool", "wall s, median (range)", "CPU s", "threads stopped", "held per stopped thread, us",
            "stop per stopped thread, us", "stacks complete"]
    rows = [["profrun --dump", spread(walls), spread(cpus), f"{med(stopped):.0f} of {n}",
             f"median {med(held) * 1e6:.0f}, max {max(held, default=0) * 1e6:.0f}",
             f"median {med(stops) * 1e6:.0f}, max {max(stops, default=0) * 1e6:.0f}",
             f"{med(complete):.0f} of {n}"]]
    if gdb:
        rows.append(["gdb thread apply all bt", spread(gdb_walls), spread(gdb_cpus),
                     f"all {med(gdb_threads):.0f}",
                     "the whole process, for its wall time", "-", "-"])
    else:
        print("(gdb not found: its row is left out)")
    print(render_text(head, rows))
    if gdb and walls:
        print(f"\ngdb's whole-process stop / profrun's end to end: "
              f"{statistics.median(gdb_walls) / statistics.median(walls):.1f}x")


if __name__ == "__main__":
    main()
