#!/usr/bin/env python3
"""Overhead benchmark for libprof's call profiler and line/scope macros against minimal baselines.

Builds libprof with the hook libraries of hooks/ (-DPROF_BUILD_BENCH=ON; or takes --build DIR)
and the workloads under a scratch directory, runs every configuration interleaved
(one warm-up pass, then N reps, each running all configurations once in shuffled order) and
prints per-workload tables. The call workloads (fib, mix, threads) compare libprof's
-finstrument-functions tracer with a minimal tracer, empty hooks, gprof and uftrace:

  ratio          median over reps of t_cfg / t_base (same rep), with the min-max spread
  extra ns/call  median over reps of (t_cfg - t_base) / calls
  bytes/event    trace bytes / (2 * calls)

The `lines` group times PROF_LINE and PROF_SCOPE around a one-instruction statement against the
bare statement and against the floor, two __rdtsc() reads per hit (workloads/lines.cpp):

  extra ns/hit   median over reps of (t_cfg - t_bare) / hits
  x floor        median over reps of extra_cfg / extra_floor (same rep); the target is <= 1.3x
  bytes/hit      (trace bytes - the bare run's trace bytes) / hits

The `alloc` group (workloads/alloc.cpp, 2 threads, ~8.5 M allocator calls) runs libprofmem.so
with frame-pointer stacks, with PROF_MEM_UNWIND=dwarf on a -fomit-frame-pointer build, and with
the call profiler's shadow-stack stacks (net of the same build's call trace), against minimal
LD_PRELOAD floors (hooks/memfloor.cpp) and heaptrack, and checks the memory issue's targets.
The `report` group times profreport (pinned to one CPU) on fib(N) traces up to >= 100 M events
and uftrace report on the uftrace record of the largest; the fib group also checks profreport's
overhead compensation (sum of tottime against the uninstrumented wall time).

Wall time is measured around fork/exec/wait4; CPU time is user + sys from wait4's rusage, which
includes every thread and every child the process waited for (uftrace's writer threads too).
"calls" is the number of __cyg_profile_func_enter events, counted once per workload with a
counting-hooks build. Standard library only; needs g++, cmake, ninja, libprof's build
dependencies, uftrace (call workloads, report) and heaptrack (alloc).
"""

import argparse
import datetime
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from libprofbench.build import CXX
from libprofbench.calls import (ALLOC, ALLOC_CONFIGS, CONFIGS, FIXED_COST_PAIRS,
                                LINE_CONFIGS, LINE_TARGET, LINES, MEM_TARGET_BYTES,
                                MEM_TARGET_DWARF_X, MEM_TARGET_FP_X, MEM_TARGET_SHADOW_NS,
                                UFTRACE_RECORD, UFTRACE_RECORD_SIZE, WORKLOADS, Build, Runner,
                                fib_calls, fixed_cost, per_rep_ratio, summarize)
from libprofbench.host import first_line, git_revision, loadavg, machine_line
from libprofbench.runner import base_env, path_bytes, pinned, remove, run
from libprofbench.table import fmt_int, med, render_md, render_text


HERE = Path(__file__).resolve().parent


# ---- report speed at scale: profreport and uftrace report on fib(N) traces ----
REPORT = "report"
REPORT_FIB = {"full": (37, (30, 33)), "quick": (30, (26, 28))}  # (big N, smaller Ns for memory)
REPORT_TARGET_EPS = 50e6       # profreport >= 50 M events/s on one core
REPORT_TARGET_X = 4            # and >= 4x uftrace report
COMPENSATION_TARGET = 0.15     # compensated sum of tottime within 15 % of the base wall time


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- the alloc group -------------------------------------------------------------------------

def alloc_counts(runner):
    """(allocator calls, allocations) that workloads/alloc.cpp reports for its own calls."""
    out = runner.rundir / "alloc.stdout"
    run([runner.b.binary(ALLOC, "base"), *runner.args(ALLOC)], env=base_env(), cwd=runner.rundir,
        stdout=str(out), err_log=runner.err_log)
    words = out.read_text().split()
    out.unlink()
    return int(words[1]), int(words[4])


def heaptrack_depth(path):
    """(allocation calls, mean physical frames per allocation) from heaptrack_print's "MOST CALLS
    TO ALLOCATION FUNCTIONS" section (inlined frames, which have no `in MODULE` line, are not
    counted), or None when heaptrack_print is missing."""
    if shutil.which("heaptrack_print") is None:
        return None
    text = subprocess.run(["heaptrack_print", "-f", str(path), "-n", "1000", "-s", "1000",
                           "--print-peaks=0", "--print-temporary=0", "--print-leaks=0"],
                          capture_output=True, text=True).stdout
    total = weighted = top_frames = 0
    cur = None  # [calls, frames] of the backtrace being read
    section = False
    for line in text.splitlines():
        if line.startswith("MOST CALLS TO ALLOCATION FUNCTIONS"):
            section = True
            continue
        if not section:
            continue
        if not line.strip() or line.isupper():
            if line.strip():
                break
            continue
        words = line.split()
        if line[0].isdigit() and "calls to allocation functions" in line:
            if cur:
                total += cur[0]; weighted += cur[0] * (top_frames + cur[1])
            cur, top_frames = None, 0
            top = True
            continue
        if line[0].isdigit() and " calls with " in line:
            if cur:
                total += cur[0]; weighted += cur[0] * (top_frames + cur[1])
            cur = [int(words[0]), 0]
            top = False
            continue
        if words[0] == "in":
            if top:
                top_frames += 1
            elif cur:
                cur[1] += 1
    if cur:
        total += cur[0]; weighted += cur[0] * (top_frames + cur[1])
    calls = next((int(l.split(":")[1].split()[0]) for l in text.splitlines()
                  if l.startswith("calls to allocation functions:")), 0)
    return calls, (weighted / total if total else float("nan"))


def report_cost(name, cmd, trace, calls, runner):
    """One timed run of a memory report tool on a kept trace: a note line."""
    r = run(cmd, cwd=runner.rundir, err_log=runner.err_log)
    return (f"{name} on that trace ({os.path.getsize(trace) / 2**20:.0f} MiB): {r.wall:.2f} s wall, "
            f"{calls / r.cpu / 1e6:.1f} M allocator calls per CPU second, peak RSS "
            f"{r.maxrss_kib / 1024:.1f} MiB")


def check_alloc(runner, counts):
    """One kept run of each libprofmem config and of heaptrack: what the traces say (allocations,
    frees, mean frames per allocation) against the workload's own counts. Returns (text lines,
    {cfg: mean frames})."""
    lines, depth = [], {}
    calls, allocations = counts
    for cfg in ("mem_fp", "mem_dwarf", "mem_shadow"):
        runner.once(ALLOC, cfg, keep=True)
        trace = runner.output(ALLOC, cfg)
        doc = runner.profreport_json(trace, "--memory", "--limit", "1000000")
        if cfg == "mem_fp":
            lines.append(report_cost("profreport --memory", [runner.b.profreport, "--memory", trace],
                                     trace, calls, runner))
        remove(trace)
        summ, sites = doc["summary"], doc["sites"]
        n = sum(x["allocations"] for x in sites)
        depth[cfg] = sum(len(x["stack"]) * x["allocations"] for x in sites) / n if n else float("nan")
        top = max(sites, key=lambda x: x["allocations"]) if sites else {"stack": []}
        lines.append(f"{cfg}: profreport --memory: {fmt_int(summ['allocations'])} allocations + "
                     f"{fmt_int(summ['frees'])} frees = {fmt_int(summ['allocations'] + summ['frees'])} "
                     f"calls (the workload counts {fmt_int(allocations)} + "
                     f"{fmt_int(calls - allocations)} = {fmt_int(calls)} of its own; the rest are "
                     f"std::thread's and the C++ runtime's), {len(sites)} sites, "
                     f"{depth[cfg]:.2f} frames per allocation; top stack: "
                     + " < ".join(f["name"].replace("(anonymous namespace)::", "").split("(")[0][:28]
                                  for f in top["stack"]))
    runner.once(ALLOC, "heaptrack", keep=True)
    if shutil.which("heaptrack_print"):
        path = runner.output(ALLOC, "heaptrack")
        lines.append(report_cost("heaptrack_print", ["heaptrack_print", "-f", path], path, calls, runner))
    ht = heaptrack_depth(runner.output(ALLOC, "heaptrack"))
    remove(runner.output(ALLOC, "heaptrack"))
    if ht:
        depth["heaptrack"] = ht[1]
        lines.append(f"heaptrack: heaptrack_print counts {fmt_int(ht[0])} calls to allocation "
                     f"functions (allocations only), {ht[1]:.2f} physical frames per allocation "
                     "(inlined frames not counted)")
    return lines, depth


ALLOC_TABLE_HEAD = ["config", "reps", "vs", "median wall s", "wall ratio (min-max)", "CPU ratio",
                    "extra wall ns/call", "extra CPU ns/call", "extra CPU ns/alloc",
                    "bytes on disk", "B/call", "peak RSS MiB", "heaptrack CPU ns ÷ this"]


def alloc_summarize(runs, calls, allocations):
    """Per-config statistics of the alloc group; each config against its own baseline config
    (same rep). "ht_x" = heaptrack's extra CPU time over this config's, per rep."""
    stats = {}
    for cfg, rs in runs.items():
        base_cfg = ALLOC_CONFIGS[cfg][3]
        base = runs[base_cfg]
        pairs = list(zip(rs, base))
        st = stats[cfg] = {
            "reps": len(rs), "base": base_cfg,
            "wall": med([r.wall for r, _ in rs]),
            "wall_ratio": [r.wall / b.wall for (r, _), (b, _) in pairs],
            "cpu_ratio": [r.cpu / b.cpu for (r, _), (b, _) in pairs if b.cpu > 0],
            "wall_ns": [(r.wall - b.wall) / calls * 1e9 for (r, _), (b, _) in pairs],
            "cpu_ns": [(r.cpu - b.cpu) / calls * 1e9 for (r, _), (b, _) in pairs],
            "cpu_ns_alloc": [(r.cpu - b.cpu) / allocations * 1e9 for (r, _), (b, _) in pairs],
            "wall_ns_alloc": [(r.wall - b.wall) / allocations * 1e9 for (r, _), (b, _) in pairs],
            "rss": med([r.maxrss_kib for r, _ in rs]) / 1024,
            "bytes": med([sz for _, sz in rs]) if any(sz for _, sz in rs) else None,
        }
        # The shadow-stack config's own bytes: its trace minus the call-only trace (same rep).
        if st["bytes"] is not None and base_cfg != cfg and runs[base_cfg][0][1]:
            st["extra_bytes"] = med([sz - sb for (_, sz), (_, sb) in pairs])
        else:
            st["extra_bytes"] = st["bytes"]
    ht = stats["heaptrack"]["cpu_ns"]
    for cfg, st in stats.items():
        st["ht_x"] = [h / x for h, x in zip(ht, st["cpu_ns"]) if x > 0]
    return stats


def alloc_rows(stats, calls):
    rows = []
    for cfg, (label, _, _, base_cfg) in ALLOC_CONFIGS.items():
        s = stats[cfg]
        is_base = cfg == base_cfg
        wr = s["wall_ratio"]
        b = s["extra_bytes"]
        rows.append([
            label, str(s["reps"]), "-" if is_base else base_cfg, f"{s['wall']:.3f}",
            f"{med(wr):.2f}x ({min(wr):.2f}-{max(wr):.2f})", f"{med(s['cpu_ratio']):.2f}x",
            "-" if is_base else f"{med(s['wall_ns']):.1f}",
            "-" if is_base else f"{med(s['cpu_ns']):.1f}",
            "-" if is_base else f"{med(s['cpu_ns_alloc']):.1f}",
            "-" if b is None else fmt_int(b),
            "-" if b is None else f"{b / calls:.2f}",
            f"{s['rss']:.1f}",
            "-" if is_base or cfg in ("heaptrack", "calls") or not s["ht_x"]
            else f"{med(s['ht_x']):.1f}x",
        ])
    return rows


def alloc_packed(runner, calls, reps=3):
    """What profrun --mem --pack keeps: the traces of the memory configs (and the call-only trace the
    shadow-stack config is net of) packed by profpack, with profpack's own CPU time. Medians of
    `reps` runs: {cfg: {"raw": bytes, "packed": bytes, "pack_cpu_ns": per allocator call}}."""
    out = {}
    for cfg in ("mem_fp", "mem_dwarf", "mem_shadow", "calls"):
        raw, packed, cpu = [], [], []
        for _ in range(reps):
            _, size = runner.once(ALLOC, cfg, keep=True)
            trace = runner.output(ALLOC, cfg)
            dest = trace.with_suffix(".packed")
            r = run([runner.b.profpack, "-q", "-o", dest, trace], err_log=runner.err_log)
            raw.append(size)
            packed.append(path_bytes(dest))
            cpu.append(r.cpu / calls * 1e9)
            remove(trace)
            remove(dest)
        out[cfg] = {"raw": med(raw), "packed": med(packed), "pack_cpu_ns": med(cpu)}
    return out


def alloc_fixed_cost(runner, reps=9):
    """libprofmem's per-process cost apart from the allocator calls (calibration at start, the
    symbol table at exit): mem_fp minus base with 1 alloc+free pair per thread, median of
    interleaved pairs; and the same for heaptrack."""
    mem, ht = [], []
    for _ in range(reps):
        base, _ = runner.once(ALLOC, "base", tiny=True)
        m, _ = runner.once(ALLOC, "mem_fp", tiny=True)
        h, _ = runner.once(ALLOC, "heaptrack", tiny=True)
        mem.append((m.wall - base.wall, m.cpu - base.cpu))
        ht.append((h.wall - base.wall, h.cpu - base.cpu))
    return {"mem": (med([w for w, _ in mem]), med([c for _, c in mem])),
            "heaptrack": (med([w for w, _ in ht]), med([c for _, c in ht]))}


def alloc_notes(stats, calls, allocations, depth, fixed, packed):
    """The memory issue's targets checked on this run."""
    def verdict(ok):
        return "met" if ok else "NOT met"
    out = []
    (mw, mc), (hw, hc) = fixed["mem"], fixed["heaptrack"]
    fp_net = med(stats["mem_fp"]["cpu_ns"]) - mc / calls * 1e9
    ht_net = med(stats["heaptrack"]["cpu_ns"]) - hc / calls * 1e9
    out.append(f"fixed cost per process (1 alloc+free pair per thread, minus base, median of "
               f"9 pairs): libprofmem {mw * 1e3:.0f} ms wall / {mc * 1e3:.0f} ms "
               f"CPU (calibration at start, symbol table at exit) = {mc / calls * 1e9:.1f} CPU ns per "
               f"allocator call of this run; heaptrack {hw * 1e3:.0f} ms wall / {hc * 1e3:.0f} ms CPU. "
               f"Without them: libprofmem frame-pointer stacks {fp_net:.1f}, heaptrack {ht_net:.1f} "
               f"CPU ns per call ({ht_net / fp_net:.1f}x)")
    sh = stats["mem_shadow"]
    net_cpu, net_wall = med(sh["cpu_ns_alloc"]), med(sh["wall_ns_alloc"])
    gross = med([a + b for a, b in zip(sh["cpu_ns_alloc"], stats["calls"]["cpu_ns_alloc"])])
    out.append(f"target <= {MEM_TARGET_SHADOW_NS} ns per allocation with shadow-stack stacks: "
               f"{net_cpu:.1f} CPU ns ({net_wall:.1f} wall ns) per allocation net of the call "
               f"trace (fi build + libprofmem minus fi build alone, same rep); "
               f"{verdict(net_cpu <= MEM_TARGET_SHADOW_NS)}"
               + ("" if net_cpu <= MEM_TARGET_SHADOW_NS else
                  f" by {net_cpu / MEM_TARGET_SHADOW_NS:.1f}x")
               + f". Gross against the plain build: {gross:.1f} CPU ns per allocation, of which "
               f"the call trace of the same build (every function of the workload traced) is "
               f"{med(stats['calls']['cpu_ns_alloc']):.1f}.")
    fp_x = med(stats["mem_fp"]["ht_x"])
    out.append(f"target >= {MEM_TARGET_FP_X}x cheaper than heaptrack with frame-pointer stacks: "
               f"{fp_x:.1f}x (extra CPU {med(stats['mem_fp']['cpu_ns']):.1f} vs "
               f"{med(stats['heaptrack']['cpu_ns']):.1f} ns per allocator call); "
               f"{verdict(fp_x >= MEM_TARGET_FP_X)}"
               + ("" if fp_x >= MEM_TARGET_FP_X else f", {MEM_TARGET_FP_X / fp_x:.1f}x short"))
    dw_x = med(stats["mem_dwarf"]["ht_x"])
    d = ", ".join(f"{k} {v:.2f}" for k, v in depth.items())
    out.append(f"target >= {MEM_TARGET_DWARF_X}x cheaper than heaptrack with DWARF stacks at the "
               f"same depth: {dw_x:.2f}x (extra CPU {med(stats['mem_dwarf']['cpu_ns_alloc']):.0f} "
               f"vs heaptrack's {med(stats['heaptrack']['cpu_ns_alloc']):.0f} ns per allocation); "
               f"{verdict(dw_x >= MEM_TARGET_DWARF_X)}"
               + ("" if dw_x >= MEM_TARGET_DWARF_X else f", {MEM_TARGET_DWARF_X / dw_x:.1f}x short")
               + (f". Frames per allocation: {d}" if d else ""))
    # Bytes on disk: as profrun --mem --pack keeps them, and as the runtime writes them.
    def packed_bytes(cfg):
        p = packed[cfg]["packed"]
        return p - packed["calls"]["packed"] if cfg == "mem_shadow" else p
    mem_cfgs = ("mem_fp", "mem_dwarf", "mem_shadow")
    parts = ", ".join(f"{cfg} {packed_bytes(cfg) / calls:.2f}" for cfg in mem_cfgs)
    raw_parts = ", ".join(f"{cfg} {stats[cfg]['extra_bytes'] / calls:.2f}" for cfg in mem_cfgs)
    worst = max(packed_bytes(c) / calls for c in mem_cfgs)
    pack_cpu = ", ".join(f"{cfg} {packed[cfg]['pack_cpu_ns']:.0f}" for cfg in mem_cfgs)
    out.append(f"target <= {MEM_TARGET_BYTES} B per allocator call on disk: packed (profpack, "
               f"what profrun --mem --pack keeps; the shadow-stack config net of the packed call-only "
               f"trace) {parts} B/call (heaptrack {stats['heaptrack']['bytes'] / calls:.2f}); "
               f"{verdict(worst <= MEM_TARGET_BYTES)}"
               + ("" if worst <= MEM_TARGET_BYTES else f", up to {worst / MEM_TARGET_BYTES:.2f}x over")
               + f". As the runtime writes them: {raw_parts} B/call. profpack's own CPU time, "
               f"after the run: {pack_cpu} ns per allocator call (heaptrack's CPU figures above "
               f"include its heaptrack_interpret; the recording costs above do not include "
               f"profpack). Medians of 3 runs each.")
    fl = stats["floor_stack"]
    out.append(f"against the floor preload with frame-pointer stacks ({med(fl['cpu_ns']):.1f} CPU ns "
               f"per call): libprofmem frame-pointer stacks cost "
               f"{med([a / b for a, b in zip(stats['mem_fp']['cpu_ns'], fl['cpu_ns']) if b > 0]):.2f}x "
               "as much")
    return out


# ---- statistics and tables -------------------------------------------------------------------


TABLE_HEAD = ["config", "reps", "median wall s", "wall ratio (min-max)", "extra ns/call",
              "CPU ratio", "extra CPU ns/call", "trace bytes", "bytes/event"]


def table_rows(stats, calls, configs):
    rows = []
    for cfg in configs:
        s = stats[cfg]
        is_base = cfg == "base"
        rows.append([
            CONFIGS[cfg][0], str(s["reps"]), f"{s['wall']:.3f}",
            f"{s['wall_ratio']:.2f}x ({s['wall_ratio_min']:.2f}-{s['wall_ratio_max']:.2f})",
            "-" if is_base else f"{med(s['wall_ns']):.1f}",
            f"{s['cpu_ratio']:.2f}x",
            "-" if is_base else f"{med(s['cpu_ns']):.1f}",
            "-" if s["bytes"] is None else fmt_int(s["bytes"]),
            "-" if s["bytes"] is None else f"{s['bytes'] / (2 * calls):.2f}",
        ])
    return rows


def comparison_lines(stats, calls, fixed):
    """libprof's extra cost relative to the floor and to uftrace (medians of per-rep ratios)."""
    out = []
    fi = stats.get("fi")
    if not fi:
        return out
    for kind, key in (("wall", "wall_ns"), ("CPU", "cpu_ns")):
        parts = [f"libprof {kind}: {med(fi[key]):.1f} extra ns/call"]
        if "floor" in stats:
            parts.append(f"{per_rep_ratio(fi[key], stats['floor'][key]):.2f}x the floor's")
        if "uftrace" in stats:
            x = per_rep_ratio(stats["uftrace"][key], fi[key])
            parts.append(f"{x:.1f}x cheaper than uftrace" if x >= 1
                         else f"{1 / x:.1f}x costlier than uftrace")
        out.append(", ".join(parts))
    counts = stats.get("counts")
    for kind, key in (("wall", "wall_ns"), ("CPU", "cpu_ns")):
        if not counts:
            break
        parts = [f"libprof PROF_TIME=sampled {kind}: {med(counts[key]):.1f} extra ns/call "
                 f"(target <= 10)", f"{per_rep_ratio(fi[key], counts[key]):.2f}x cheaper than "
                 f"the full call trace"]
        if "floor_noclock" in stats:
            parts.append(f"{per_rep_ratio(counts[key], stats['floor_noclock'][key]):.2f}x the "
                         f"floor's without a clock")
        if "uftrace" in stats:
            x = per_rep_ratio(stats["uftrace"][key], counts[key])
            parts.append(f"{x:.1f}x cheaper than uftrace (target >= 7x)")
        out.append(", ".join(parts))
    per_call = med([ns - fixed / calls * 1e9 for ns in fi["wall_ns"]])
    line = (f"libprof fixed cost per process (near-empty run, fi - base): {fixed * 1e3:.1f} ms; "
            f"wall extra without it: {per_call:.1f} ns/call")
    if "floor" in stats:
        line += f" ({per_call / med(stats['floor']['wall_ns']):.2f}x the floor's)"
    out.append(line)
    return out


# ---- the lines group -------------------------------------------------------------------------

LINE_TABLE_HEAD = ["config", "reps", "hits/run", "median wall s", "extra ns/hit (min-max)",
                   "extra CPU ns/hit", "x floor (min-max)", "trace bytes", "bytes/hit"]


def lines_summarize(runs, hits):
    """Per-config statistics of the lines group from runs[cfg] = [(Result, bytes)] (rep-aligned)
    and hits[cfg]. Each config is compared with its bare baseline of the same size and rep;
    "x floor" divides its extra time by the floor's extra time from the same rep."""
    stats = {}
    for cfg, rs in runs.items():
        base, n = runs[LINE_CONFIGS[cfg][4]], hits[cfg]
        pairs = list(zip(rs, base))
        stats[cfg] = {
            "reps": len(rs), "hits": n,
            "wall": med([r.wall for r, _ in rs]),
            "wall_ns": [(r.wall - b.wall) / n * 1e9 for (r, _), (b, _) in pairs],
            "cpu_ns": [(r.cpu - b.cpu) / n * 1e9 for (r, _), (b, _) in pairs],
            "bytes": med([s for _, s in rs]),
            "extra_bytes": med([s - sb for (_, s), (_, sb) in pairs]),
        }
        stats[cfg]["bytes_per_hit"] = stats[cfg]["extra_bytes"] / n
    floor = stats["floor"]
    for st in stats.values():
        for kind in ("wall", "cpu"):
            st[f"{kind}_floor"] = [x / f for x, f in zip(st[f"{kind}_ns"], floor[f"{kind}_ns"])
                                   if f > 0]
    return stats


def lines_rows(stats):
    rows = []
    for cfg, (label, _, _, _, base) in LINE_CONFIGS.items():
        s = stats[cfg]
        is_base = cfg == base
        ns, fl = s["wall_ns"], s["wall_floor"]
        rows.append([
            label, str(s["reps"]), fmt_int(s["hits"]), f"{s['wall']:.3f}",
            "-" if is_base else f"{med(ns):.1f} ({min(ns):.1f}-{max(ns):.1f})",
            "-" if is_base else f"{med(s['cpu_ns']):.1f}",
            "-" if is_base else f"{med(fl):.2f}x ({min(fl):.2f}-{max(fl):.2f})",
            fmt_int(s["bytes"]),
            "-" if is_base else f"{s['bytes_per_hit']:.3f}",
        ])
    return rows


def lines_notes(stats, recorded):
    """The issue's target checked on this run, and what PROF_LINE_RSS adds."""
    floor = stats["floor"]
    out = [f"floor (two __rdtsc() reads + a thread-local add): {med(floor['wall_ns']):.1f} ns/hit wall, "
           f"{med(floor['cpu_ns']):.1f} ns/hit CPU"]
    for cfg, name in (("line", "PROF_LINE"), ("scope", "PROF_SCOPE"),
                      ("line_every", "PROF_LINE with every hit timed"),
                      ("scope_every", "PROF_SCOPE with every activation timed"),
                      ("scope_records", "PROF_SCOPE with PROF_SCOPE_RUNS=0")):
        if cfg not in stats:
            continue
        s = stats[cfg]
        x = med(s["wall_floor"])
        verdict = "met" if x <= LINE_TARGET else "NOT met"
        if cfg == "scope_records":  # not the target's configuration: what a scope that records
            verdict = "(an Enter and an Exit record per hit, as for a scope with records inside)"
        elif cfg.endswith("_every"):
            verdict = (f"PROF_LINE_CLOCK_EVERY=1; the default times one short hit in 16: "
                       f"{med(s['wall_ns']) / med(stats[cfg[:-6]]['wall_ns']):.1f}x dearer")
        else:
            verdict = f"target <= {LINE_TARGET}x: {verdict}"
        out.append(f"{name}: {med(s['wall_ns']):.1f} ns/hit = {x:.2f}x the floor wall "
                   f"({med(s['cpu_floor']):.2f}x CPU); {verdict}")
    rss, line = stats["line_rss"], stats["line"]
    out.append(f"PROF_LINE with PROF_LINE_RSS=1: {med(rss['wall_ns']):.0f} ns/hit "
               f"({med(rss['wall_ns']) / med(line['wall_ns']):.0f}x plain PROF_LINE): each hit "
               "also reads /proc/self/statm twice (two pread() system calls plus parsing)")
    # Lines are summed in the process: their trace should not grow with the hits.
    constant = abs(line["extra_bytes"] - rss["extra_bytes"]) < 4096
    out.append(f"PROF_LINE's trace is {fmt_int(line['extra_bytes'])} B larger than the bare run's at "
               f"{fmt_int(line['hits'])} hits and {fmt_int(rss['extra_bytes'])} B at "
               f"{fmt_int(rss['hits'])} (PROF_LINE_RSS): "
               + ("a per-thread constant (the thread's first chunk and one LineCounts or LineStats record), not a "
                  "per-hit cost" if constant else "it GROWS with the hits"))
    if recorded:
        out.append("time the trace itself attributes per hit (profreport --lines time / hits): "
                   + ", ".join(f"{cfg} {t * 1e9:.1f} ns" for cfg, t in recorded.items()))
    return out


# ---- report speed ----------------------------------------------------------------------------

def report_speed(runner, w, reps=3, uftrace=True):
    """profreport on a fresh libprof trace of `w`, and uftrace report on a fresh uftrace record."""
    b = runner.b
    runner.once(w, "fi", keep=True)
    trace = runner.output(w, "fi")
    doc = runner.profreport_json(trace)
    events = sum(t["events"] for t in doc["threads"])
    prof = [run([b.profreport, trace], cwd=runner.rundir, err_log=runner.err_log) for _ in range(reps)]
    trace_bytes = path_bytes(trace)
    remove(trace)

    if uftrace:
        runner.once(w, "uftrace", keep=True)
        udir = runner.output(w, "uftrace")
        records = sum(f.stat().st_size for f in udir.glob("*.dat")) // UFTRACE_RECORD_SIZE
        ut = [run(["uftrace", "report", "-d", udir], cwd=runner.rundir, err_log=runner.err_log)
              for _ in range(reps)]
        ut_bytes = path_bytes(udir)
        remove(udir)

    def row(tool, n, unit, size, rs):
        t = med([r.wall for r in rs])
        rss = max(r.maxrss_kib for r in rs) / 1024
        return [tool, fmt_int(size), f"{fmt_int(n)} {unit}", f"{t:.3f}", f"{n / t / 1e6:.1f} M {unit}/s",
                f"{rss:.1f}"]

    head = ["reader", "trace bytes", "input", f"median wall s ({reps} runs)", "speed", "peak RSS MiB"]
    rows = [row(f"profreport ({w} trace)", events, "events", trace_bytes, prof)]
    if uftrace:
        rows.append(row(f"uftrace report ({w} trace)", records, "records", ut_bytes, ut))
    return head, rows



def peak_rss_split(argv, cwd):
    """Runs argv once, sampling /proc/PID/status every 2 ms: (VmHWM, peak RssAnon, peak
    RssFile) in MiB. VmHWM is the process's own high-water mark (ru_maxrss from wait4 also
    counts the forked Python harness before exec, about 16 MiB).
    File-backed resident pages (a mapped trace) are page cache the kernel can drop; anonymous
    pages (heap) are the reader's own memory."""
    r = run(argv, cwd=cwd, sample=Path(str(argv[0])).name)
    return r.hwm, r.anon, r.filed


def report_scale(runner, reps=3):
    """profreport on fib(N) traces of several lengths (the largest >= 100 M events in a full run)
    and uftrace report on the uftrace record of the largest. Returns (head, rows, notes)."""
    b = runner.b
    big, smaller = REPORT_FIB["quick" if runner.quick else "full"]
    notes = []
    free = shutil.disk_usage(runner.rundir).free
    n = big
    while n > smaller[-1] + 1 and 2 * fib_calls(n) * UFTRACE_RECORD_SIZE * 1.2 > free * 0.8:
        n -= 1
    if n != big:
        notes.append(f"fib({big})'s uftrace record (~{2 * fib_calls(big) * 16 / 1e9:.1f} GB) does "
                     f"not fit in 80 % of the free disk ({free / 1e9:.1f} GB): using fib({n})")
        big = n
    rows, speeds = [], {}
    trace = runner.rundir / "report.trace"
    for n in (*smaller, big):
        remove(trace)
        env = base_env()
        env["PROF_OUT"] = str(trace)
        run([b.binary("fib", "fi"), str(n)], env=env, cwd=runner.rundir, err_log=runner.err_log)
        doc = runner.profreport_json(trace)
        events = sum(t["events"] for t in doc["threads"])
        size = path_bytes(trace)
        rs = [run(pinned([b.profreport, trace]), cwd=runner.rundir, err_log=runner.err_log)
              for _ in range(reps)]
        t, cpu = med([r.wall for r in rs]), med([r.cpu for r in rs])
        rss, anon, filed = peak_rss_split([b.profreport, trace], runner.rundir)
        speeds[("profreport", n)] = (events / t, rss, events, events / cpu, anon)
        rows.append([f"profreport, fib({n}) trace", fmt_int(size), f"{fmt_int(events)} events",
                     f"{t:.3f}", f"{cpu:.3f}", f"{events / t / 1e6:.1f} M/s",
                     f"{events / cpu / 1e6:.1f} M/s", f"{rss:.1f}", f"{anon:.1f} / {filed:.1f}"])
    remove(trace)
    udir = runner.rundir / "report.uftrace"
    remove(udir)
    run([*UFTRACE_RECORD, "-d", udir, b.binary("fib", "noop"), str(big)], env=base_env(),
        cwd=runner.rundir, err_log=runner.err_log)
    records = sum(f.stat().st_size for f in udir.glob("*.dat")) // UFTRACE_RECORD_SIZE
    rs = [run(pinned(["uftrace", "report", "-d", udir]), cwd=runner.rundir, err_log=runner.err_log)
          for _ in range(reps)]
    rss = peak_rss_split(["uftrace", "report", "-d", udir], runner.rundir)[0]
    ut_bytes = path_bytes(udir)
    remove(udir)
    t, cpu = med([r.wall for r in rs]), med([r.cpu for r in rs])
    rows.append([f"uftrace report, fib({big}) record", fmt_int(ut_bytes), f"{fmt_int(records)} records",
                 f"{t:.3f}", f"{cpu:.3f}", f"{records / t / 1e6:.1f} M/s",
                 f"{records / cpu / 1e6:.1f} M/s", f"{rss:.1f}", "-"])
    eps, prss, pev, eps_cpu, _ = speeds[("profreport", big)]
    x, x_cpu = eps / (records / t), eps_cpu / (records / cpu)
    notes.append(f"target profreport >= {REPORT_TARGET_EPS / 1e6:.0f} M events/s on one core: "
                 f"{eps / 1e6:.1f} M events/s of wall time ({eps_cpu / 1e6:.1f} M per CPU second) on "
                 f"{fmt_int(pev)} events; "
                 + ("met" if eps >= REPORT_TARGET_EPS else
                    f"NOT met on wall time ({REPORT_TARGET_EPS / eps:.2f}x short)"))
    notes.append(f"target >= {REPORT_TARGET_X}x uftrace report: {x:.1f}x on wall time, {x_cpu:.1f}x on "
                 f"CPU time ({eps / 1e6:.1f} M events/s vs {records / t / 1e6:.1f} M records/s on the "
                 f"same fib({big}) run); "
                 + ("met" if x >= REPORT_TARGET_X else f"NOT met ({REPORT_TARGET_X / x:.2f}x short)"))
    rss_rows = [(n, speeds[("profreport", n)]) for n in (*smaller, big)]
    (n0, (_, r0, e0, _, a0)), (n1, (_, r1, e1, _, a1)) = rss_rows[0], rss_rows[-1]
    notes.append(f"profreport peak RSS: {r0:.1f} MiB on {fmt_int(e0)} events (fib({n0})) -> "
                 f"{r1:.1f} MiB on {fmt_int(e1)} events (fib({n1})), {e1 / e0:.0f}x the events; "
                 f"anonymous memory (heap) {a0:.1f} -> {a1:.1f} MiB: "
                 + ("the heap is bounded" if a1 <= a0 * 1.5 + 8 else
                    f"the heap grows {a1 / a0:.1f}x with the trace length")
                 + ("; the growth of the peak RSS is the mapped trace file (file-backed pages, "
                    "page cache the kernel can reclaim), not profreport's own memory"
                    if r1 > r0 * 1.5 + 8 else ""))
    head = ["reader", "trace bytes", "input", f"median wall s ({reps} runs, taskset -c 0)",
            "median CPU s", "speed (wall)", "speed (CPU)", "peak RSS (VmHWM) MiB",
            "peak RssAnon / RssFile MiB"]
    return big, head, rows, notes


def compensation_check(runner, base_wall, reps=3):
    """profreport's sum of tottime on fib (compensated and --no-compensation) against the
    uninstrumented run's wall time. Returns note lines."""
    b = runner.b
    tiny = med([run([b.binary("fib", "base"), *runner.args("fib", tiny=True)], env=base_env(),
                    cwd=runner.rundir, err_log=runner.err_log).wall for _ in range(5)])
    comp, raw = [], []
    for _ in range(reps):
        runner.once("fib", "fi", keep=True)
        trace = runner.output("fib", "fi")
        comp.append(sum(f["tottime"] for f in runner.profreport_json(trace)["functions"]))
        raw.append(sum(f["tottime"] for f in
                       runner.profreport_json(trace, "--no-compensation")["functions"]))
        remove(trace)
    c, r = med(comp), med(raw)
    dev = c / base_wall - 1
    work = base_wall - tiny
    return [f"compensation (fib, args {' '.join(runner.args('fib'))}): sum of tottime "
            f"{c * 1e3:.1f} ms compensated, {r * 1e3:.1f} ms raw (--no-compensation), medians of "
            f"{reps} traces; the uninstrumented run takes {base_wall * 1e3:.1f} ms wall (median of "
            f"the timed reps; {work * 1e3:.1f} ms without the {tiny * 1e3:.1f} ms of a near-empty "
            f"run). Compensated / base = {c / base_wall:.2f} (raw {r / base_wall:.2f}); target "
            f"within {COMPENSATION_TARGET:.0%}: "
            + ("met" if abs(dev) <= COMPENSATION_TARGET else
               f"NOT met ({dev:+.0%}, {abs(dev) / COMPENSATION_TARGET:.0f}x the allowed error)")]


# ---- main ------------------------------------------------------------------------------------

def call_footnotes(call_workloads):
    return [
        "ratio: median over reps of t_cfg / t_base from the same rep (min-max in brackets); "
        "extra ns/call: median over reps of (t_cfg - t_base) / calls; bytes/event: trace bytes / (2 x calls).",
        "calls = enter hooks counted with a counting-hooks build; every row divides by it. "
        "gprof's mcount runs only in functions that were not inlined, so its per-call figure for mix "
        "(where an inlined helper keeps its hooks) is per hook call, not per mcount call.",
        f"uftrace: `{' '.join(UFTRACE_RECORD)} -d DIR` on the -finstrument-functions binary linked "
        "without libprof (glibc's no-op hooks); it records exactly the hook events. Its CPU time "
        "includes its writer threads.",
        "floor: tools/bench/hooks/floor.cpp (rdtsc per event, 16 B record into a 256 KiB "
        "initial-exec TLS buffer, writev() per full buffer), built as a .so like libprof.",
        "fixed cost: the fi binary minus the base binary on a near-empty input ("
        + ", ".join(f"{w} {' '.join(WORKLOADS[w][3])}" for w in call_workloads)
        + f"), median of {FIXED_COST_PAIRS} interleaved pairs: libprof's start-up and exit work (the symbol table "
        "written at exit), paid once per process whatever the number of calls.",
        "CPU time is user + sys of all threads; in `threads` (4 threads on the machine's CPUs) "
        "wall ns/call is below CPU ns/call only when the other CPUs were free.",
    ]


LINE_FOOTNOTES = [
    "lines: tools/bench/workloads/lines.cpp, one loop of `acc += i * 3` (acc kept in a register "
    "behind an empty asm) in one binary per marking, built with the public headers and linked "
    "with -lprof only (no -finstrument-functions). Every binary, the bare one included, loads "
    "libprof and writes a trace, so start-up and exit work cancel out in extra ns/hit and in bytes/hit.",
    "lines: extra ns/hit: median over reps of (t_cfg - t_bare) / hits, with the bare run of the "
    "same size and rep; x floor: median over reps of extra_cfg / extra_floor from the same rep; "
    f"the issue's target is PROF_LINE and PROF_SCOPE at most {LINE_TARGET}x the floor. bytes/hit: "
    "(trace bytes - the bare run's) / hits: PROF_LINE adds each hit in place to one LineCounts "
    "record per site, thread and chunk (format 1.3; with PROF_LINE_RSS=1, sums in the process, "
    "one LineStats record per site at thread end); PROF_SCOPE adds each hit to one ScopeRun record of the "
    "trace (consecutive activations with nothing recorded inside, format 1.3), and with "
    "PROF_SCOPE_RUNS=0 writes an Enter and an Exit record per hit, what an activation with "
    "records inside it always costs.",
    "lines: floor = two __rdtsc() reads around the statement with their difference added to a "
    "local-exec thread-local in memory, the two cycle-counter reads the target refers to.",
]


ALLOC_FOOTNOTES = [
    "alloc: tools/bench/workloads/alloc.cpp, built -O2 -g -fno-omit-frame-pointer (base, and the "
    "fi build: + -finstrument-functions linked with libprof) or -O2 -g -fomit-frame-pointer (for "
    "the DWARF config). Calls and allocations are the workload's own counts (it counts every "
    "malloc/new[]/realloc and free/delete[] it makes); libprofmem and heaptrack also see a few "
    "allocations of std::thread and the C++ runtime (see the check lines).",
    "alloc: each config is compared with its `vs` config from the same rep: the DWARF config with "
    "the -fomit-frame-pointer build, the shadow-stack config with the same fi build traced without "
    "libprofmem (so its figures are the memory profiler's own cost; the call trace of every "
    "workload function is not in them). extra ns/call divides by all allocator calls, extra CPU "
    "ns/alloc by the allocations (malloc/new[]/realloc). CPU = user + sys of the whole process "
    "tree (heaptrack's heaptrack_interpret too); its ratios are medians over reps.",
    "alloc: bytes on disk = the trace as the runtime writes it (libprof; the notes give the packed "
    "size profrun --mem --pack keeps), the floor's event file, or heaptrack's .zst; for "
    "the shadow-stack config, its trace minus the call-only trace of the same rep. B/call = bytes "
    "/ allocator calls. libprof's traces include its fixed per-process content (symbol table, "
    "module list, calibration, about 0.5-2 MB).",
    "alloc: peak RSS = ru_maxrss from wait4: the largest process of the tree (for heaptrack, the "
    "program or heaptrack_interpret, whichever is larger); it has a floor of about 16 MiB, the "
    "forked Python harness before exec.",
    "alloc: heaptrack ÷ this = heaptrack's extra CPU time over this config's (per rep, median); "
    "the issue's targets are >= 20x for frame-pointer stacks and >= 5x for DWARF stacks.",
    "alloc: floor preloads: tools/bench/hooks/memfloor.cpp (dlsym(RTLD_NEXT) wrappers of malloc, "
    "free, calloc, realloc, posix_memalign, aligned_alloc, memalign; initial-exec TLS; 24 B "
    "{ptr, size|type, rdtsc} records in a 256 KiB buffer written with write(); the stack variant "
    "appends {depth, frame-pointer return addresses}, no deduplication).",
]


def tool_versions(repo):
    rev = git_revision(repo, ["libprof", "tools"], "libprof/ or tools/")
    return f"{first_line([CXX, '--version'])}; {first_line(['uftrace', '--version'])}; libprof at {rev}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, help="timed reps (default 7, 2 with --quick)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/libprof-bench"),
                    help="scratch directory for builds and traces (default /tmp/libprof-bench)")
    groups = [*WORKLOADS, LINES, ALLOC, REPORT]
    ap.add_argument("--workloads", default=",".join(groups),
                    help="comma-separated subset of " + ",".join(groups) + " (default: all)")
    ap.add_argument("--repo", type=Path, default=HERE.parent.parent,
                    help="libprof source tree to build (default: the one holding this script)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer reps (smoke test)")
    ap.add_argument("--build", type=Path,
                    help="an existing libprof build directory configured with -DPROF_BUILD_BENCH=ON "
                         "(default: build one, Release, under --work)")
    ap.add_argument("--smoke", action="store_true",
                    help="--quick with 1 rep by default, leaving out (with a printed reason) the "
                         "configurations whose tool (uftrace, heaptrack) is missing")
    ap.add_argument("--markdown", type=Path, help="also write the tables as Markdown to this file")
    args = ap.parse_args()
    workloads = [w for w in args.workloads.split(",") if w]
    for w in workloads:
        if w not in groups:
            ap.error(f"unknown workload {w!r} (choose from {', '.join(groups)})")
    call_workloads = [w for w in workloads if w in WORKLOADS]
    args.quick = args.quick or args.smoke
    reps = args.reps if args.reps is not None else (1 if args.smoke else 2 if args.quick else 7)
    if reps < 1:
        ap.error("--reps must be at least 1")
    skipped = []  # what --smoke leaves out, with the reason, printed in the report
    have_uftrace = shutil.which("uftrace") is not None
    if (call_workloads or REPORT in workloads) and not have_uftrace:
        if not args.smoke:
            sys.exit("bench: uftrace not found (apt-get install uftrace)")
        skipped.append("uftrace not found: the uftrace configurations and readers are left out")
        if REPORT in workloads:
            workloads.remove(REPORT)
            skipped.append("uftrace not found: the report group is left out")
    if ALLOC in workloads and shutil.which("heaptrack") is None:
        if not args.smoke:
            sys.exit("bench: heaptrack not found (apt-get install heaptrack)")
        workloads.remove(ALLOC)
        skipped.append("heaptrack not found: the alloc group is left out")
    command = shlex.join([os.path.basename(sys.executable), *sys.argv])
    started = datetime.datetime.now().astimezone()
    load_start = loadavg()

    work = args.work.resolve()
    build = Build(work, args.repo.resolve(), args.build)
    # The report group and the compensation check run the fib binaries.
    build.all(workloads + (["fib"] if REPORT in workloads and "fib" not in workloads else []))
    runner = Runner(build, args.quick)
    timed = [w for w in workloads if w != REPORT]  # the groups run interleaved
    configs = {w: list(LINE_CONFIGS if w == LINES else ALLOC_CONFIGS if w == ALLOC else CONFIGS)
               for w in timed}
    if not have_uftrace:
        configs = {w: [c for c in cs if c != "uftrace"] for w, cs in configs.items()}

    calls, check_lines, line_recorded = {}, [], {}
    alloc_depth = {}
    if ALLOC in workloads:
        alloc_calls = alloc_counts(runner)
        log(f"bench: alloc: {fmt_int(alloc_calls[0])} allocator calls, "
            f"{fmt_int(alloc_calls[1])} allocations")
        texts, alloc_depth = check_alloc(runner, alloc_calls)
        for text in texts:
            check_lines.append("alloc: " + text)
            log(f"bench: {check_lines[-1]}")
    if LINES in workloads:
        text, line_recorded = runner.check_lines()
        check_lines.append(text)
        log(f"bench: {text}")
    for w in call_workloads:
        calls[w] = runner.count_calls(w)
        # Cross-check the count with what libprof itself recorded.
        runner.once(w, "fi", keep=True)
        doc = runner.profreport_json(runner.output(w, "fi"))
        remove(runner.output(w, "fi"))
        ncalls = sum(f["ncalls"] for f in doc["functions"])
        events = sum(t["events"] for t in doc["threads"])
        ok = "matches" if ncalls == calls[w] and events == 2 * calls[w] else "DIFFERS from"
        check_lines.append(f"{w}: counting hooks {fmt_int(calls[w])} calls; profreport sum of ncalls "
                           f"{fmt_int(ncalls)}, events {fmt_int(events)} ({ok} the hook count)")
        log(f"bench: {check_lines[-1]}")

    # runs[w][cfg] = [(Result, bytes)], one entry per rep, in rep order.
    runs = {w: {c: [] for c in configs[w]} for w in timed}
    order = random.Random()
    for rep in range(-1, reps):  # rep -1 is the uncounted warm-up pass
        log(f"bench: {'warm-up' if rep < 0 else f'rep {rep + 1}/{reps}'}")
        for w in timed:
            shuffled = configs[w][:]
            order.shuffle(shuffled)
            for cfg in shuffled:
                r, size = runner.once(w, cfg)
                if rep >= 0:
                    runs[w][cfg].append((r, size))

    sections = []  # (title, head, rows, notes)
    raw = {"command": command, "machine": machine_line(), "calls": calls, "fixed_cost_s": {},
           "runs": {}}
    for w in call_workloads:
        n = calls[w]
        stats = summarize(runs[w], n)
        desc = WORKLOADS[w][4]
        title = (f"{w}: {desc}, args {' '.join(runner.args(w))}: {fmt_int(n)} calls "
                 f"({fmt_int(2 * n)} events), base {stats['base']['wall'] * 1e3:.1f} ms")
        fixed = fixed_cost(runner, w)
        notes = comparison_lines(stats, n, fixed)
        if w == "fib":
            notes += compensation_check(runner, stats["base"]["wall"])
            log(f"bench: {notes[-1]}")
        sections.append((title, TABLE_HEAD, table_rows(stats, n, configs[w]), notes))
        raw["fixed_cost_s"][w] = fixed
        raw["runs"][w] = {c: [{"wall": r.wall, "cpu": r.cpu, "bytes": s} for r, s in rs]
                          for c, rs in runs[w].items()}

    if LINES in workloads:
        hits = {cfg: runner.line_hits(cfg) for cfg in LINE_CONFIGS}
        stats = lines_summarize(runs[LINES], hits)
        title = (f"lines: PROF_LINE / PROF_SCOPE around one addition, {fmt_int(hits['bare'])} hits "
                 f"per run ({fmt_int(hits['bare_rss'])} with PROF_LINE_RSS=1), "
                 f"bare {stats['bare']['wall'] * 1e3:.1f} ms")
        sections.append((title, LINE_TABLE_HEAD, lines_rows(stats),
                         lines_notes(stats, line_recorded)))
        raw["line_hits"] = hits
        raw["runs"][LINES] = {c: [{"wall": r.wall, "cpu": r.cpu, "bytes": s} for r, s in rs]
                              for c, rs in runs[LINES].items()}

    if ALLOC in workloads:
        n, na = alloc_calls
        stats = alloc_summarize(runs[ALLOC], n, na)
        title = (f"alloc: 2 threads, mixed sizes, malloc/free + new[]/delete[] + realloc growth, "
                 f"args {' '.join(runner.args(ALLOC))}: {fmt_int(n)} allocator calls, "
                 f"{fmt_int(na)} allocations, base {stats['base']['wall'] * 1e3:.0f} ms")
        fixed = alloc_fixed_cost(runner)
        packed = alloc_packed(runner, n)
        sections.append((title, ALLOC_TABLE_HEAD, alloc_rows(stats, n),
                         alloc_notes(stats, n, na, alloc_depth, fixed, packed)))
        raw["alloc_fixed_cost"] = fixed
        raw["alloc_packed"] = packed
        raw["alloc_calls"] = alloc_calls
        raw["alloc_depth"] = alloc_depth
        raw["runs"][ALLOC] = {c: [{"wall": r.wall, "cpu": r.cpu, "maxrss_kib": r.maxrss_kib,
                                   "bytes": s} for r, s in rs] for c, rs in runs[ALLOC].items()}

    if REPORT in workloads:
        log("bench: report group: profreport and uftrace report on fib traces")
        big, head, rows, notes = report_scale(runner)
        raw["report"] = [dict(zip(head, r)) for r in rows]
        sections.append((f"report: trace readers on fib traces up to fib({big}) ({fmt_int(2 * fib_calls(big))} "
                         f"events; profreport events = sum of threads[].events in its JSON; uftrace "
                         f"records = .dat bytes / {UFTRACE_RECORD_SIZE})", head, rows, notes))
    # Reader speed on the call workload with the largest libprof trace (superseded by the
    # report group when it runs).
    elif call_workloads:
        biggest = max(call_workloads, key=lambda w: med([s for _, s in runs[w]["fi"]]))
        log(f"bench: timing profreport and uftrace report on the {biggest} traces")
        head, rows = report_speed(runner, biggest, uftrace=have_uftrace)
        raw["readers"] = [dict(zip(head, r)) for r in rows]
        sections.append((f"trace readers on the {biggest} traces (events = sum of threads[].events "
                         f"in profreport's JSON; uftrace records = .dat bytes / "
                         f"{UFTRACE_RECORD_SIZE})", head, rows, []))

    footnotes = []
    if call_workloads:
        footnotes += call_footnotes(call_workloads)
    if LINES in workloads:
        footnotes += LINE_FOOTNOTES
    if ALLOC in workloads:
        footnotes += ALLOC_FOOTNOTES
    footnotes += [*check_lines, f"raw per-run times: {work / 'results.json'}"]
    footnotes += [f"smoke: skipped: {reason}" for reason in skipped]
    ended = datetime.datetime.now().astimezone()
    took = int((ended - started).total_seconds())
    header = [("machine", machine_line()),
              ("tools", tool_versions(args.repo)),
              ("date", f"{started.isoformat(timespec='seconds')} (took {took // 60}:{took % 60:02d} min; "
                       f"load average {load_start} at start, {loadavg()} at end)"),
              ("command", f"`{command}`"),
              ("reps", f"{reps} timed, after one warm-up pass; configs shuffled within each rep")]

    print()
    print("\n".join(f"{key}: {value.strip('`')}" for key, value in header))
    for title, head, rows, notes in sections:
        print(f"\n== {title}\n")
        print(render_text(head, rows))
        for line in notes:
            print(f"  {line}")
    print()
    for line in footnotes:
        print(f"- {line}")

    if args.markdown:
        md = ["# libprof overhead", ""]
        md += [f"- {key}: {value}" for key, value in header]
        for title, head, rows, notes in sections:
            md += ["", f"## {title}", "", render_md(head, rows)]
            if notes:
                md += [""] + [f"- {line}" for line in notes]
        md += ["", "## Notes", ""] + [f"- {line}" for line in footnotes]
        args.markdown.write_text("\n".join(md) + "\n")
        log(f"bench: wrote {args.markdown}")

    (work / "results.json").write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
