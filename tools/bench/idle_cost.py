#!/usr/bin/env python3
"""What `profrun --idle` costs and how exact its off-CPU time is, side by side with perf record.

Two programs of the test suite (tests/programs/spinners.cpp, built without instrumentation and
without frame pointers), each measuring itself:

  naps      `spinners naps N`: N rounds of 10 ms of CPU in work() and a 20 ms sleep in nap(),
            while a second thread blocks in wait_for_pipe() until main ends; it prints its own
            nap_wall, work_cpu and wait_wall
  pingpong  `spinners pingpong N`: N round trips of a byte between two threads over pipes, two
            context switches each, the worst case for a switch-driven sampler

Every rep runs, per program, in shuffled order:
  alone           the program
  sample          profrun --sample -o TRACE -- PROGRAM
  idle            profrun --sample --idle -o TRACE -- PROGRAM (as this user: root samples every
                  switch out with its stack)
  idle-user       the same as uid 65534 (setpriv), where the kernel gives no stacks of the
                  switches and profrun reads the waiting threads' stacks from /proc (root only)
  perf            perf record -e cpu-clock -F 999 --call-graph dwarf
  perf-switches   perf record -e cpu-clock/freq=999/ -e context-switches/period=1/
                  --call-graph dwarf: perf's own way to off-CPU stacks (root)

Printed: per program and mode, the median wall time and its ratio to the program alone (per-rep
ratios, median and range), bytes written (trace or perf.data) per context switch, lost samples
(perf) and, for naps, the off-CPU accuracy: nap()'s and wait_for_pipe()'s cumtime against the
program's own nap_wall and wait_wall, and the part charged to a last CPU sample's stack.

Everything goes under --work (default /tmp/idle_cost). Standard library only; needs a built
tree (`ninja -C build`), perf and root for the perf and idle-user modes (skipped otherwise).
"""

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from libprofbench import runner

HERE = Path(__file__).resolve().parent


def run(cmd, cwd, user=False):
    if user:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
    try:
        r = runner.run(cmd, cwd=cwd, capture=True)
    except runner.RunError as e:
        sys.exit(f"failed: {e}")
    return r.wall, r.out, r.err


def figures(out):
    f = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                f[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return f


def cumtime(report, name):
    for fn in report["functions"]:
        if re.search(r"[(:]" + re.escape(name) + r"(\(|\)$)", fn["name"]):
            return fn["cumtime"]
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", type=Path, default=HERE.parent.parent / "build")
    ap.add_argument("--work", type=Path, default=Path("/tmp/idle_cost"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--naps", type=int, default=40, help="rounds of naps (30 ms each)")
    ap.add_argument("--round-trips", type=int, default=100000, help="round trips of pingpong")
    a = ap.parse_args()
    build = a.build.resolve()
    profrun = build / "tools/profrun"
    profreport = build / "tools/profreport"
    spinners = build / "tests/programs/test_spinners"
    for f in (profrun, profreport, spinners):
        if not f.exists():
            sys.exit(f"{f} is missing: ninja -C {build}")
    work = a.work
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    os.chmod(work, 0o777)
    root = os.geteuid() == 0
    perf = shutil.which("perf") if root else None
    programs = {
        "naps": [str(spinners), "naps", str(a.naps)],
        "pingpong": [str(spinners), "pingpong", str(a.round_trips)],
    }
    modes = ["alone", "sample", "idle"] + (["idle-user"] if root else []) + \
        (["perf", "perf-switches"] if perf else [])
    results = {p: {m: [] for m in modes} for p in programs}
    for rep in range(a.reps):
        order = [(p, m) for p in programs for m in modes]
        random.shuffle(order)
        for prog, mode in order:
            cmd = programs[prog]
            out_file = work / f"{prog}.{mode}.{rep}"
            rec = {}
            if mode == "alone":
                wall, out, err = run(cmd, work)
            elif mode in ("sample", "idle", "idle-user"):
                extra = ["--idle"] if mode != "sample" else []
                wall, out, err = run([str(profrun), "--sample"] + extra +
                                     ["-o", str(out_file)] + ["--"] + cmd, work, mode == "idle-user")
                rec["bytes"] = out_file.stat().st_size
                rep_json = subprocess.run([str(profreport), "--format", "json", "-n", "0",
                                           str(out_file)], capture_output=True, text=True)
                report = json.loads(rep_json.stdout)
                rec["nap"] = cumtime(report, "nap")
                rec["wait"] = cumtime(report, "wait_for_pipe")
                m = re.search(r"; ([0-9.]+) s at the thread's last CPU sample", err)
                rec["approximate"] = float(m.group(1)) if m else 0.0
                m = re.search(r"off CPU in (\d+) stretches", err)
                rec["stretches"] = int(m.group(1)) if m else 0
                out_file.unlink()
            else:
                events = ["-e", "cpu-clock", "-F", "999"] if mode == "perf" else \
                    ["-e", "cpu-clock/freq=999/", "-e", "context-switches/period=1/"]
                wall, out, err = run([perf, "record", "-q", "-o", str(out_file)] + events +
                                     ["--call-graph", "dwarf", "--"] + cmd, work)
                rec["bytes"] = out_file.stat().st_size
                lost = subprocess.run([perf, "report", "-i", str(out_file), "--stdio",
                                       "--sort", "comm"], capture_output=True, text=True)
                m = re.search(r"Total Lost Samples: (\d+)", lost.stdout + lost.stderr)
                rec["lost"] = int(m.group(1)) if m else 0
                out_file.unlink()
            rec["wall"] = wall
            rec.update(figures(out))
            results[prog][mode].append(rec)
            print(json.dumps({"event": "run", "rep": rep, "program": prog, "mode": mode,
                              "wall": round(wall, 4)}), flush=True)

    (work / "results.json").write_text(json.dumps(results, indent=1))
    print()
    for prog in programs:
        alone = [r["wall"] for r in results[prog]["alone"]]
        base = statistics.median(alone)
        switches = 2 * a.round_trips if prog == "pingpong" else None
        print(f"## {prog}: {' '.join(programs[prog][1:])}, alone {base:.3f} s (median of {len(alone)})")
        print("| mode | wall (median) | ratio to alone (median, min-max) | bytes written | lost |")
        print("|---|---|---|---|---|")
        for mode in modes[1:]:
            rs = results[prog][mode]
            ratios = [r["wall"] / al for r, al in zip(rs, alone)]
            b = statistics.median(r["bytes"] for r in rs)
            per = f" ({b / switches:.1f} per switch)" if switches and mode != "sample" and mode != "perf" else ""
            print(f"| {mode} | {statistics.median(r['wall'] for r in rs):.3f} s | "
                  f"{statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f}) | "
                  f"{b:,.0f}{per} | {statistics.median(r.get('lost', 0) for r in rs):,.0f} |")
        if prog == "naps":
            print()
            print("| mode | nap() cumtime / nap_wall | wait_for_pipe() cumtime / wait_wall | at a last sample's stack |")
            print("|---|---|---|---|")
            for mode in [m for m in modes if m.startswith("idle") or m == "sample"]:
                rs = results[prog][mode]
                nap = statistics.median(r["nap"] / r["nap_wall"] for r in rs)
                wait = statistics.median(r["wait"] / r["wait_wall"] for r in rs)
                approx = statistics.median(r["approximate"] for r in rs)
                print(f"| {mode} | {nap:.4f} | {wait:.4f} | {approx:.3f} s |")
        print()


if __name__ == "__main__":
    main()
