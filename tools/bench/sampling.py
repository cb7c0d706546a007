#!/usr/bin/env python3
"""What the CPU-time sampler (PROF_SAMPLE_HZ, trace format 1.5 Sample records) costs.

Against an existing build of libprof (--build, the CMake build directory, configured with
-DPROF_BUILD_BENCH=ON), builds under a scratch directory the bench's fib workload
(workloads/fib.cpp, instrumented as bench.py builds it) and takes from the build sample_cost
(sample_cost.cpp: a cycle-counter loop that notes its interruptions) and sample_stats
(sample_stats.cpp: the Sample records of a trace, through the reader library). Then, in every
rep, runs in shuffled order:

  fib N        with PROF_SAMPLE_HZ=0, and at the default rate signalled by each timer
               (PROF_SAMPLE_TIMER=posix, the default, and perf): wall time, CPU time (user + sys
               from wait4), and of the sampled run's trace the samples, the samples that landed
               in the profiler, and the bytes of the Sample records
  sample_cost  the same three ways: the time the interruptions of 5 to 500 us took (the timer
               ticks, and the samples' work); with sampling, the extra over the run without,
               divided by the samples, is one sample's cost; and with the POSIX timer at
               PROF_SAMPLE_HZ=125, a sample every other tick: the median interruption with a
               sample against the median one without, in the same run (the same load)

and prints medians over the reps (with min-max), and the per-sample figures derived from them.
Standard library only; needs g++, and the build's libprof.so, sample_cost and sample_stats.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from libprofbench.build import COMMON_FLAGS, CXX, FI_FLAGS, REPO, WORKLOADS, bench_dir, built
from libprofbench.runner import RunError, run

def check(cmd, **kw):
    subprocess.run(cmd, check=True, **kw)


def build(build_dir: Path, work: Path):
    """fib instrumented as bench.py builds it, against the build's libprof.so; sample_cost and
    sample_stats as the build made them (PROF_BUILD_BENCH=ON)."""
    lib = build_dir / "libprof"
    fib = work / "fib"
    check([CXX, *COMMON_FLAGS, *FI_FLAGS, str(WORKLOADS / "fib.cpp"), "-o", str(fib),
           "-L", str(lib), "-lprof", f"-Wl,-rpath,{lib}"])
    cost, stats = built(build_dir, "sample_cost"), built(build_dir, "sample_stats")
    if cost is None or stats is None:
        sys.exit(f"sampling: {bench_dir(build_dir)}/sample_cost and sample_stats not found "
                 f"(configure with -DPROF_BUILD_BENCH=ON, then ninja -C {build_dir} sample_cost sample_stats)")
    return fib, cost, stats


def timed(cmd, env):
    """Runs cmd; returns (wall seconds, CPU seconds, stdout)."""
    try:
        r = run(cmd, env=env, capture=True)
    except RunError as e:
        sys.exit(f"{cmd} failed: {e}")
    return r.wall, r.cpu, r.out


def env_with(trace: Path, hz, timer):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROF_")}
    env["PROF_OUT"] = str(trace)
    env["PROF_FORCE"] = "1"
    if hz is not None:
        env["PROF_SAMPLE_HZ"] = str(hz)
    if timer is not None:
        env["PROF_SAMPLE_TIMER"] = timer
    return env


# Each run's configuration: PROF_SAMPLE_HZ (None: the default) and PROF_SAMPLE_TIMER.
CONFIGS = {
    "fib off": (0, None), "fib on": (None, None), "fib perf": (None, "perf"),
    "cost off": (0, None), "cost on": (None, None), "cost perf": (None, "perf"),
    "cost 125": (125, "posix"),
}
LABELS = {"off": "PROF_SAMPLE_HZ=0", "on": "default (POSIX timer)",
          "perf": "PROF_SAMPLE_TIMER=perf", "125": "PROF_SAMPLE_TIMER=posix PROF_SAMPLE_HZ=125"}


def med(values):
    return statistics.median(values), min(values), max(values)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=str(REPO / "build"), help="libprof's CMake build directory")
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--fib", default="34", help="fib's argument")
    ap.add_argument("--cost-seconds", default="2", help="CPU seconds of each sample_cost run")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="libprof-sampling-") as tmp:
        work = Path(tmp)
        fib, cost, stats = build(Path(args.build), work)
        trace = work / "run.trace"
        runs = {k: [] for k in CONFIGS}
        load = [os.getloadavg()[0]]
        for rep in range(args.reps + 1):  # the first pass warms up and is not counted
            order = list(runs)
            random.shuffle(order)
            for name in order:
                hz, timer = CONFIGS[name]
                cmd = [str(fib), args.fib] if name.startswith("fib") else [str(cost), args.cost_seconds]
                wall, cpu, out = timed(cmd, env_with(trace, hz, timer))
                row = {"wall": wall, "cpu": cpu}
                if name.startswith("cost"):
                    row.update(json.loads(out))
                if hz != 0:
                    row.update(json.loads(subprocess.run([str(stats), str(trace)], check=True,
                                                         capture_output=True, text=True).stdout))
                if rep:
                    runs[name].append(row)
        load.append(os.getloadavg()[0])

    def col(name, key):
        return [r[key] for r in runs[name]]

    print(f"reps: {args.reps} (after one warm-up pass), load average {load[0]:.2f} at start, "
          f"{load[1]:.2f} at end")
    print()
    print(f"| fib {args.fib} | wall s | CPU s | samples | in the profiler | Sample bytes |")
    print("|---|---|---|---|---|---|")
    for name in ("fib off", "fib on", "fib perf"):
        w, c = med(col(name, "wall")), med(col(name, "cpu"))
        cells = [f"{w[0]:.3f} ({w[1]:.3f}-{w[2]:.3f})", f"{c[0]:.3f} ({c[1]:.3f}-{c[2]:.3f})"]
        if name != "fib off":
            s, o, b = (statistics.median(col(name, k)) for k in ("samples", "own_samples", "bytes"))
            cells += [f"{s:.0f}", f"{o:.0f}", f"{b:.0f}"]
        else:
            cells += ["0", "0", "0"]
        print(f"| {LABELS[name.split()[1]]} | " + " | ".join(cells) + " |")
    print()
    for name in ("fib on", "fib perf"):
        ratios = [on["cpu"] / off["cpu"] for on, off in zip(runs[name], runs["fib off"])]
        walls = [on["wall"] / off["wall"] for on, off in zip(runs[name], runs["fib off"])]
        r, w = med(ratios), med(walls)
        records = statistics.median(col(name, "records"))
        every = [r["samples"] + r["own_samples"] for r in runs[name]]
        print(f"fib, {LABELS[name.split()[1]]} / PROF_SAMPLE_HZ=0, same rep: CPU {r[0]:.4f}x "
              f"({r[1]:.4f}-{r[2]:.4f}), wall {w[0]:.4f}x ({w[1]:.4f}-{w[2]:.4f}); "
              f"{statistics.median(every):.0f} samples per run (program and profiler), "
              f"{records:.0f} Sample records, "
              f"{statistics.median(col(name, 'bytes')) / records:.1f} bytes per record")
    print()
    print(f"| sample_cost, {args.cost_seconds} CPU s | interruptions of 5-500 us | their time, us | samples | Sample bytes per record |")
    print("|---|---|---|---|---|")
    for name in ("cost off", "cost on", "cost perf", "cost 125"):
        n, t = (statistics.median(col(name, k)) for k in ("long_gaps", "long_gap_total_us"))
        extra = ["0", "-"]
        if name != "cost off":
            extra = [f"{statistics.median(col(name, 'samples')):.0f}",
                     f"{statistics.median(col(name, 'bytes')) / statistics.median(col(name, 'records')):.1f}"]
        print(f"| {LABELS[name.split()[1]]} | {n:.0f} | {t:.0f} | " + " | ".join(extra) + " |")
    paired = [r["sampled_median_us"] - r["other_median_us"] for r in runs["cost 125"]]
    q = med(paired)
    s125, o125 = (statistics.median(col("cost 125", k)) for k in ("sampled_median_us", "other_median_us"))
    print()
    for name in ("cost on", "cost perf"):
        per = [(on["long_gap_total_us"] - off["long_gap_total_us"]) / on["samples"]
               for on, off in zip(runs[name], runs["cost off"]) if on["samples"]]
        p = med(per)
        print(f"cost per sample, {LABELS[name.split()[1]]}, extra interruption time / samples "
              f"(same rep): {p[0]:.1f} us ({p[1]:.1f}-{p[2]:.1f})")
    print(f"cost per sample, at 125 Hz: a tick with a sample {s125:.1f} us, without {o125:.1f} us "
          f"(medians); the difference in the same run: {q[0]:.1f} us ({q[1]:.1f}-{q[2]:.1f}), "
          f"{statistics.median(col('cost 125', 'sampled_gaps')):.0f} samples")


if __name__ == "__main__":
    main()
