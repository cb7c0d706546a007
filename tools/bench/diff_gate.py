#!/usr/bin/env python3
"""The regression gate on real code: `profreport diff --fail-above 10%`, three runs a side.

snappy 1.1.7 (fetched with true_shares.py's helpers: npm pack, never committed) with
workloads/snappy_driver.cc, built with Clang after inlining (--compiler gcc: GCC's default
recipe, whose hooks in snappy's tiny inlined helpers leave the program a tenth of the samples)
twice:
the base, whose checksum() runs 5 passes per round trip, and a build whose checksum() runs 7
(40% slower in that one function, nothing else changed). Both run the same round trips of the
same corpus with the runtime's defaults (times from CPU samples). Then:

  identical  --comparisons pairs of 3 base runs against 3 other base runs (drawn from the
             --base-runs runs): the gate must never fail
  slower     --comparisons pairs of 3 base runs against 3 runs of the slower build: the gate
             must fail every time, and name checksum() alone among the functions

The runs of the two builds alternate. The gate compares tottime (--metric): checksum()'s
callers grow in cumtime as well, and rightly, as does the total.

Printed: how many of each failed, the functions named, and for the slower pairs checksum()'s
change with its uncertainty (median and range). Each comparison also draws the differential
flame graph (diff --flamegraph): printed, how many frames it coloured as changed beyond their
noise and their share of the graph's width (identical pairs: what noise alone paints), and
whether checksum()'s frame was red in every slower pair. Targets: 0 false alarms in the identical
pairs; every slower pair caught, with checksum() the only function named.

  python3 tools/bench/diff_gate.py --build build [--comparisons 20] [--base-runs 9]

Everything goes under --work (default /tmp/diff_gate). Needs g++, npm (or the cached
downloads) and a built libprof.
"""

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
from pathlib import Path

import true_shares as ts
from libprofbench import host
from libprofbench.table import render_text

PASSES_BASE, PASSES_SLOW = 5, 7


def interleave(base, slow):
    """The runs' order: the two builds spread evenly through it."""
    order, b, s = [], 0, 0
    while b < base or s < slow:
        if s >= slow or (b < base and b * slow <= s * base):
            order.append("base")
            b += 1
        else:
            order.append("slow")
            s += 1
    return order


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/diff_gate"))
    ap.add_argument("--comparisons", type=int, default=20)
    ap.add_argument("--base-runs", type=int, default=9)
    ap.add_argument("--slow-runs", type=int, default=6)
    ap.add_argument("--round-trips", type=int, default=1500)
    ap.add_argument("--fail-above", default="10")
    ap.add_argument("--compiler", choices=("clang", "gcc"), default="clang")
    ap.add_argument("--sample-timer", choices=("posix", "perf"),
                    help="PROF_SAMPLE_TIMER of the runs (default: the runtime's)")
    ap.add_argument("--metric", default="tottime",
                    help="what the gate compares (default tottime: a slower function's callers "
                         "grow in cumtime too, rightly)")
    args = ap.parse_args()
    build = args.build.resolve()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    progs, _ = ts.programs(work, {"snappy"}, {"snappy": args.round_trips}, False, None)
    base_prog = progs["snappy"]
    binaries = {}
    for name, passes in (("base", PASSES_BASE), ("slow", PASSES_SLOW)):
        p = ts.Program(f"snappy-{name}", base_prog.lang, base_prog.binary, base_prog.sources,
                       base_prog.flags + [f"-DSNAPPY_DRIVER_CHECKSUM_PASSES={passes}"],
                       base_prog.libs, base_prog.args, base_prog.what)
        binaries[name] = (ts.build(work, build, p, args.compiler, True), p.args)

    profrun = build / "tools" / "profrun"
    profreport = build / "tools" / "profreport"
    # The builds' runs alternate, so that the machine's changes of speed over the runs (this
    # kind of host varies by tens of percent within minutes) fall on both alike.
    traces = {"base": [], "slow": []}
    for name in interleave(args.base_runs, args.slow_runs):
        binary, argv = binaries[name]
        trace = work / f"{name}-{len(traces[name])}.trace"
        env = dict(os.environ)
        if args.sample_timer:
            env["PROF_SAMPLE_TIMER"] = args.sample_timer
        r = subprocess.run([profrun, "-q", "-f", "-o", trace, "--", binary, *map(str, argv)],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            sys.exit(f"diff_gate: {binary} failed ({r.returncode}): {r.stderr[-2000:]}")
        traces[name].append(trace)

    svg = work / "diff.svg"

    def coloured():
        """The differential flame graph's frames coloured as changed: (count, share of the
        root's width, whether a checksum() frame is red)."""
        frames = re.findall(r'<g class="f" data-o="\d+" data-n="(\d+)" data-d="(\d+)"[^>]*>'
                            r'<title>([^\n]*)\n.*?fill="(rgb\([0-9,]+\))"', svg.read_text(),
                            re.S)
        root = max(int(n) for n, d, _, _ in frames if d == "0")
        changed = [(int(n), name, fill) for n, d, name, fill in frames
                   if d != "0" and fill != "rgb(226,226,216)"]
        checksum_red = any(name.startswith("checksum(") and fill.startswith("rgb(255,")
                           for _, name, fill in changed)
        return len(changed), sum(n for n, _, _ in changed) / root, checksum_red, len(frames)

    def gate(a, b):
        r = subprocess.run([profreport, "diff", "--metric", args.metric, "--fail-above",
                            args.fail_above, "--flamegraph", svg, *a, "--vs", *b],
                           capture_output=True, text=True)
        if r.returncode not in (0, 3):
            sys.exit(f"diff_gate: profreport diff failed ({r.returncode}): {r.stderr[-2000:]}")
        named = re.findall(r'regression: (?:\w+ of \S+?:\d+\((.*?)\)|total (time|calls)) regressed',
                           r.stderr)
        names = sorted({n for n, _ in named if n})
        total = any(t for _, t in named)
        change = re.search(r"([+-][0-9.]+)% \+-([0-9.]+)  \S+\(checksum\(", r.stdout)
        # What a gate blind to the noise would have failed on: every change above the limit.
        blind = r.returncode == 3 or "undecided: " in r.stderr
        pictures.append(coloured())
        return r.returncode == 3, names, change, total, blind

    pictures = []

    rnd = random.Random(1)
    identical_fails, identical_named, identical_blind = 0, set(), 0
    for _ in range(args.comparisons):
        runs = rnd.sample(traces["base"], 6)
        failed, names, _, _, blind = gate(runs[:3], runs[3:])
        identical_fails += failed
        identical_blind += blind
        identical_named.update(names)
    identical_pictures = pictures[:]
    pictures.clear()
    caught, alone, changes, slow_named, totals = 0, 0, [], set(), 0
    for _ in range(args.comparisons):
        failed, names, change, total, _ = gate(rnd.sample(traces["base"], 3),
                                               rnd.sample(traces["slow"], 3))
        totals += total
        caught += failed
        alone += len(names) == 1 and names[0].startswith("checksum(")
        slow_named.update(names)
        if change:
            changes.append((float(change.group(1)), float(change.group(2))))

    print(f"== diff --metric {args.metric} --fail-above {args.fail_above}% on snappy "
          f"({args.compiler}), 3 runs a side, {args.comparisons} comparisons each, "
          f"{args.round_trips} round trips a run, sample timer "
          f"{args.sample_timer or 'the default'}")
    print(host.machine_line() + f"; load {host.loadavg()}")
    print(f"runs: {args.base_runs} of the base build, {args.slow_runs} of the build whose "
          f"checksum() does {PASSES_SLOW} passes for {PASSES_BASE} (+40%)")
    rows = [["identical builds", f"{identical_fails} of {args.comparisons}",
             ", ".join(sorted(n.split("(")[0] for n in identical_named)) or "-", "-"],
            ["checksum() 40% slower", f"{caught} of {args.comparisons}",
             ", ".join(sorted(n.split("(")[0] for n in slow_named)) or "-",
             (f"median {statistics.median(c for c, _ in changes):+.1f}% "
              f"+-{statistics.median(u for _, u in changes):.1f} "
              f"(range {min(c for c, _ in changes):+.1f} to {max(c for c, _ in changes):+.1f})")
             if changes else "-"]]
    print(render_text(["pairs", "failed the gate", "functions named", "checksum() change"], rows))
    print(f"the total's time named as well in {totals} of the slower pairs (it grew by "
          f"checksum()'s change); a gate blind to the noise (any change above the limit) would "
          f"have failed {identical_blind} of the {args.comparisons} identical pairs")
    count = [c for c, _, _, _ in identical_pictures]
    width = [w for _, w, _, _ in identical_pictures]
    frames = statistics.median(f for _, _, _, f in identical_pictures)
    print(f"differential flame graph, identical pairs: frames coloured as changed median "
          f"{statistics.median(count):.0f} of {frames:.0f} (range {min(count)}-{max(count)}), "
          f"{100 * statistics.median(width):.1f}% of the width (max {100 * max(width):.1f}%)")
    red = sum(r for _, _, r, _ in pictures)
    print(f"differential flame graph, slower pairs: checksum() red in {red} of {len(pictures)}")
    ok = identical_fails == 0 and caught == args.comparisons and alone == args.comparisons
    print(f"verdict: no false alarm, every slower pair caught with checksum() the only function "
          f"named "
          f"({alone} of {args.comparisons}): {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
