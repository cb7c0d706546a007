#!/usr/bin/env python3
"""What `profrun --pid PID --top` costs the program it watches, beside `perf top` at the same rate.

The programs are Debian's, unmodified (no frame pointers in xz's liblzma):

  xz     /usr/bin/xz -9 -T1 -c of --xz-mb MB of generated text (one busy thread)
  sort   /usr/bin/sort of --sort-lines generated lines (sort's threads on every core)

Every rep runs, per program, in shuffled order: the program alone, and the program with each
tool attached as soon as it started (its wall time is measured from its start to its exit):

  top         profrun --pid PID --top (its default rate, 199 Hz; --rate R sets another) with no
              terminal: a table per second, to /dev/null
  perf-top    perf top -p PID --stdio -F R -d 1 (self shares only: no stacks)
  perf-top-g  perf top -p PID --stdio -F R -d 1 --call-graph dwarf (stacks, as profrun's)
  perf-top-default  perf top -p PID --stdio -d 1: perf's own default rate (4000 Hz)

Printed per program: the median wall time of each mode and its ratio to the program alone
(per-rep ratios: median and range), and profrun's own CPU time per second watched. The target:
--top at most 1.05x, and never above perf top with stacks (perf-top-g).

  python3 tools/bench/top_cost.py --build build [--reps 5] [--rate 999]

Everything goes under --work (default /tmp/top_cost). Needs perf (root, or
kernel.perf_event_paranoid <= 1 for perf top -p) and a built profrun.
"""

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from libprofbench import host
from libprofbench.table import med, render_text

DEFAULT_TOP_RATE = 199  # profrun --top's default --rate


def generate(work, xz_mb, sort_lines):
    text, lines = work / f"text.{xz_mb}MB", work / f"lines.{sort_lines}"
    rnd = random.Random(7)
    words = [f"w{rnd.randrange(100000)}" for _ in range(5000)]
    if not text.exists():
        with open(text, "w") as f:
            size = 0
            while size < xz_mb << 20:
                line = " ".join(rnd.choice(words) for _ in range(12)) + "\n"
                f.write(line)
                size += len(line)
    if not lines.exists():
        with open(lines, "w") as f:
            for _ in range(sort_lines):
                f.write(f"{rnd.randrange(1 << 40):012x} {rnd.choice(words)}\n")
    return text, lines


def watched(argv, tool, rate, profrun):
    """The program's wall and CPU time (start to exit) with `tool` attached, and the tool's CPU
    time."""
    t0 = time.perf_counter()
    target = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    watcher = None
    if tool == "top":
        watcher = subprocess.Popen([profrun, "--pid", str(target.pid), "--top"]
                                   + (["--rate", str(rate)] if rate else []),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elif tool and tool.startswith("perf-top"):
        # perf top reads keys from its standard input: an open pipe it never gets a key from.
        cmd = ["perf", "top", "-p", str(target.pid), "--stdio", "-d", "1"]
        if tool != "perf-top-default":
            cmd += ["-F", str(rate or DEFAULT_TOP_RATE)]
        if tool == "perf-top-g":
            cmd += ["--call-graph", "dwarf"]
        watcher = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(target.pid, 0)
    wall = time.perf_counter() - t0
    target.returncode = code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"top_cost: {argv[0]} failed ({code})")
    program_cpu = usage.ru_utime + usage.ru_stime
    cpu = 0.0
    if watcher:
        # profrun leaves when the process exits; perf top stays: it is ended here. Its own CPU
        # time is its rusage (wait4), apart from the program's.
        if tool != "top":
            watcher.terminate()
        deadline = time.monotonic() + 5
        while True:
            pid, status, usage = os.wait4(watcher.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                watcher.terminate()
                pid, status, usage = os.wait4(watcher.pid, 0)
                break
            time.sleep(0.01)
        watcher.returncode = os.waitstatus_to_exitcode(status)
        if watcher.stdin:
            watcher.stdin.close()
        cpu = usage.ru_utime + usage.ru_stime
    return wall, program_cpu, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/top_cost"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rate", type=int, default=0,
                    help=f"samples per second for both tools (default: --top's, {DEFAULT_TOP_RATE})")
    ap.add_argument("--xz-mb", type=int, default=3)
    ap.add_argument("--sort-lines", type=int, default=1500000)
    ap.add_argument("--programs", default="xz,sort")
    args = ap.parse_args()
    profrun = str(args.build / "tools" / "profrun")
    if not Path(profrun).exists():
        sys.exit(f"top_cost: no {profrun}: build first")
    args.work.mkdir(parents=True, exist_ok=True)
    text, lines = generate(args.work, args.xz_mb, args.sort_lines)
    programs = {"xz": ["xz", "-9", "-T1", "-c", str(text)],
                "sort": ["sort", "-o", str(args.work / "sorted"), str(lines)]}
    wanted = [p for p in args.programs.split(",") if p in programs and shutil.which(p)]
    modes = ["alone", "top"]
    if shutil.which("perf"):
        modes += ["perf-top", "perf-top-g", "perf-top-default"]
    else:
        print("(perf not found: its rows are left out)")
    times = {(p, m): [] for p in wanted for m in modes}
    program_cpus = {(p, m): [] for p in wanted for m in modes}
    cpus = {p: [] for p in wanted}
    for rep in range(args.reps):
        order = [(p, m) for p in wanted for m in modes]
        random.Random(rep).shuffle(order)
        for p, m in order:
            wall, program_cpu, cpu = watched(programs[p], None if m == "alone" else m, args.rate,
                                             profrun)
            times[(p, m)].append(wall)
            program_cpus[(p, m)].append(program_cpu)
            if m == "top":
                cpus[p].append(cpu / wall)

    print(f"== profrun --top's cost to the program it watches, at {args.rate or DEFAULT_TOP_RATE} "
          f"Hz, {args.reps} reps")
    print(host.machine_line() + f"; load {host.loadavg()}")
    def ratios(table, p, m):
        return [x / a for x, a in zip(table[(p, m)], table[(p, "alone")])]

    def spread(xs):
        return f"{statistics.median(xs):.3f}x ({min(xs):.3f}-{max(xs):.3f})"

    for p in wanted:
        rows = []
        for m in modes:
            rows.append([m, f"{med(times[(p, m)]):.3f}",
                         "-" if m == "alone" else spread(ratios(times, p, m)),
                         f"{med(program_cpus[(p, m)]):.3f}",
                         "-" if m == "alone" else spread(ratios(program_cpus, p, m))])
        print(f"\n-- {p}: {shlex_join(programs[p])}")
        print(render_text(["mode", "wall s", "wall ratio, median (range)", "program CPU s",
                           "CPU ratio, median (range)"], rows))
        print(f"profrun --top's own CPU: {100 * med(cpus[p]):.1f}% of a CPU while watching")
        # On a shared machine a run's speed varies more than the tools cost: the program's CPU
        # time varies less than its wall time, and the verdict reads it.
        top = statistics.median(ratios(program_cpus, p, "top"))
        alone_spread = (max(program_cpus[(p, "alone")]) - min(program_cpus[(p, "alone")])) / \
            statistics.median(program_cpus[(p, "alone")])
        verdict = top <= 1.05
        text = f"--top {top:.3f}x the program's CPU time alone (its own spread alone: {alone_spread:.1%})"
        if "perf-top-g" in modes:
            perf_g = statistics.median(ratios(program_cpus, p, "perf-top-g"))
            verdict = verdict and top <= perf_g + alone_spread
            text += f"; perf top with stacks {perf_g:.3f}x"
        print(f"verdict: {text}: at most 1.05x and no more than perf top with stacks (within the "
              f"spread): {'met' if verdict else 'MISSED'}")


def shlex_join(argv):
    import shlex
    return shlex.join(argv)


if __name__ == "__main__":
    main()
