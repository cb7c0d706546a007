#!/usr/bin/env python3
"""What `profrun --mem` costs end to end, against the program alone and heaptrack.

Runs one perl program that allocates (a hash of --entries strings and an array of half as many
small arrays: about 3.2 allocator calls per entry, 775k calls at the default 240,000), in every
rep and in shuffled order:

  alone      perl -e PROGRAM
  mem        profrun --mem -- perl -e PROGRAM            (the defaults: the trace as written)
  mem_pack   profrun --mem --pack -- perl -e PROGRAM     (packed after the run, profpack)
  heaptrack  heaptrack -o FILE perl -e PROGRAM           (when installed)

each timed (wall and CPU of the whole command, children included: profrun's packing, heaptrack's
interpreter process). Prints the medians (min-max) over the reps, each one's ratio to the
program alone, heaptrack's time over libprof's, and the bytes each leaves on disk per allocator
call (profreport --memory counts the calls). Standard library only.
"""

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from libprofbench.runner import RunError, path_bytes, remove, run
from libprofbench.table import med, render_text


def program(entries):
    return (f'my %h; for my $i (1..{entries}) {{ $h{{"k$i"}} = "v" x ($i % 50) }} '
            f'my @a = map {{ [$_] }} 1..{entries // 2 + entries // 6};')


def spread(xs, unit="{:.3f}"):
    return f"{unit.format(med(xs))} ({unit.format(min(xs))}-{unit.format(max(xs))})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", type=Path, required=True, help="libprof's CMake build directory")
    ap.add_argument("--entries", type=int, default=240000, help="hash entries (default 240000)")
    ap.add_argument("--reps", type=int, default=5, help="runs of each command (default 5)")
    ap.add_argument("--work", type=Path, help="scratch directory (default: a temporary one)")
    args = ap.parse_args()
    profrun = args.build / "tools" / "profrun"
    profreport = args.build / "tools" / "profreport"
    for tool in (profrun, profreport):
        if not tool.exists():
            sys.exit(f"mem_end_to_end: {tool} not built")
    if shutil.which("perl") is None:
        sys.exit("mem_end_to_end: perl not found")
    work = args.work or Path(tempfile.mkdtemp(prefix="libprof-mem-e2e-"))
    work.mkdir(parents=True, exist_ok=True)
    trace, ht = work / "mem.trace", work / "heaptrack.out"
    perl = ["perl", "-e", program(args.entries)]
    commands = {
        "alone": perl,
        "mem": [profrun, "-q", "-f", "--mem", "-o", trace, "--", *perl],
        "mem_pack": [profrun, "-q", "-f", "--mem", "--pack", "-o", trace, "--", *perl],
    }
    if shutil.which("heaptrack"):
        commands["heaptrack"] = ["heaptrack", "-o", ht, *perl]
    else:
        print("smoke: skipped: heaptrack not found: its column is left out")
    times = {name: [] for name in commands}
    disk = {}
    for _ in range(args.reps):
        order = list(commands)
        random.shuffle(order)
        for name in order:
            for f in work.glob("heaptrack.out*"):
                remove(f)
            try:
                r = run(commands[name], cwd=work)
            except RunError as e:
                sys.exit(f"mem_end_to_end: {name} failed: {e}")
            times[name].append((r.wall, r.cpu))
            if name.startswith("mem"):
                disk[name] = path_bytes(trace)
            elif name == "heaptrack":
                disk[name] = sum(path_bytes(f) for f in work.glob("heaptrack.out*"))
    summary = json.loads(subprocess.run([profreport, "memory", "--format", "json", trace],
                                        capture_output=True, text=True, check=True).stdout)["summary"]
    calls = summary["allocations"] + summary["frees"]
    alone_wall = med([w for w, _ in times["alone"]])
    alone_cpu = med([c for _, c in times["alone"]])
    print(f"== perl, {args.entries:,} hash entries: {calls:,} allocator calls, {args.reps} reps")
    head = ["command", "median wall s", "median CPU s", "wall / alone", "CPU / alone",
            "B on disk per call"]
    rows = []
    for name, ts in times.items():
        walls, cpus = [w for w, _ in ts], [c for _, c in ts]
        rows.append([name, spread(walls), spread(cpus), f"{med(walls) / alone_wall:.2f}x",
                     f"{med(cpus) / alone_cpu:.2f}x",
                     f"{disk[name] / calls:.2f}" if name in disk else "-"])
    print(render_text(head, rows))
    if "heaptrack" in times:
        ht_wall = med([w for w, _ in times["heaptrack"]])
        for name in ("mem", "mem_pack"):
            print(f"heaptrack / {name}, wall: {ht_wall / med([w for w, _ in times[name]]):.2f}x")


if __name__ == "__main__":
    main()
