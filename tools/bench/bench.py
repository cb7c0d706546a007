#!/usr/bin/env python3
"""Overhead benchmark for libprof's call profiler and line/scope macros against minimal baselines.

Builds libprof and the workloads under a scratch directory, runs every configuration interleaved
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

Wall time is measured around fork/exec/wait4; CPU time is user + sys from wait4's rusage, which
includes every thread and every child the process waited for (uftrace's writer threads too).
"calls" is the number of __cyg_profile_func_enter events, counted once per workload with a
counting-hooks build. Standard library only; needs g++, cmake, ninja, libprof's build
dependencies and, for the call workloads, uftrace.
"""

import argparse
import datetime
import json
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

CXX = os.environ.get("CXX", "g++")
COMMON_FLAGS = ["-std=c++20", "-O2", "-g", "-fno-omit-frame-pointer",
                "-fno-optimize-sibling-calls", "-pthread"]
# What prof::instrument uses with GCC: without the exclude list every inlined standard-library
# helper gets its own hooks.
FI_FLAGS = ["-finstrument-functions", "-finstrument-functions-exclude-file-list=/usr/include"]

# name -> (source, arguments for a full run, for --quick, for a near-empty run, description)
WORKLOADS = {
    "fib": ("fib.cpp", ["32"], ["27"], ["1"], "recursive fib(N)"),
    "mix": ("mix.cpp", ["1.0"], ["0.2"], ["0.0001"], "sort / std::map / hash / short strings (scale S)"),
    "threads": ("threads.cpp", ["800000"], ["150000"], ["1"], "4 threads x N iterations of 3 calls"),
}

# Binary variants of each workload: name -> (extra compile flags, hook library linked or None).
# "prof" is the libprof.so built from the repository; the others are built from hooks/.
VARIANTS = {
    "base": ([], None),
    "fi": (FI_FLAGS, "prof"),
    "floor": (FI_FLAGS, "floor"),
    "empty": (FI_FLAGS, "empty"),
    "count": (FI_FLAGS, "count"),
    "noop": (FI_FLAGS, None),  # glibc's own no-op __cyg_profile_func_* (for uftrace)
    "pg": (["-pg"], None),
}

# Configurations in table order: name -> (label, binary variant).
CONFIGS = {
    "base": ("base (no instrumentation)", "base"),
    "fi": ("fi: libprof full call trace", "fi"),
    "floor": ("floor: rdtsc + 16 B record -> file", "floor"),
    "empty": ("empty hooks (.so, via PLT)", "empty"),
    "pg": ("gprof (-pg)", "pg"),
    "uftrace": ("uftrace record (fi binary, no-op hooks)", "noop"),
}
TRACED = ("fi", "floor", "uftrace")  # configs whose trace size is measured

# ---- the line/scope layer: workloads/lines.cpp ----
# One binary per marking (-DVARIANT=...), each linked against libprof without
# -finstrument-functions; every one, the bare one included, loads the runtime and writes a trace.
LINES = "lines"
LINES_SOURCE = "lines.cpp"
LINE_VARIANTS = {"bare": "V_BARE", "floor": "V_FLOOR", "line": "V_LINE", "scope": "V_SCOPE"}
# Hits per run, (most configs, the PROF_LINE_RSS pair), for a full run and for --quick. The
# PROF_LINE_RSS pair runs fewer hits (two system calls each) and has its own bare baseline.
LINE_HITS = {"full": (20_000_000, 200_000), "quick": (4_000_000, 40_000)}
# Configurations in table order: name -> (label, binary variant, extra environment, size, base).
LINE_CONFIGS = {
    "bare": ("bare statement", "bare", {}, 0, "bare"),
    "floor": ("floor: 2x __rdtsc() + TLS add", "floor", {}, 0, "bare"),
    "line": ("PROF_LINE(statement)", "line", {}, 0, "bare"),
    "scope": ("{ PROF_SCOPE(\"step\"); statement }", "scope", {}, 0, "bare"),
    "bare_rss": ("bare statement (RSS-run size)", "bare", {}, 1, "bare_rss"),
    "line_rss": ("PROF_LINE with PROF_LINE_RSS=1", "line", {"PROF_LINE_RSS": "1"}, 1, "bare_rss"),
}
LINE_TARGET = 1.3  # the target: PROF_LINE and PROF_SCOPE at most 1.3x the floor

UFTRACE_RECORD = ["uftrace", "record", "--no-libcall", "--no-event"]
UFTRACE_RECORD_SIZE = 16  # bytes per entry or exit record (no arguments recorded)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def check(cmd, **kw):
    """Runs a build step; on failure shows its output and stops."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"bench: command failed ({r.returncode}): {shlex.join(map(str, cmd))}\n{r.stdout}")
    return r.stdout


def stale(out, inputs):
    return not out.exists() or any(out.stat().st_mtime < Path(i).stat().st_mtime for i in inputs)


# ---- build -----------------------------------------------------------------------------------

class Build:
    """Paths of everything the benchmark builds under the work directory."""

    def __init__(self, work, repo):
        self.work = work
        self.repo = repo
        self.libprof_dir = work / "libprof"
        self.libprof_lib = self.libprof_dir / "libprof"
        self.profreport = self.libprof_dir / "tools" / "profreport"
        self.hooks = work / "hooks"
        self.bin = work / "bin"

    def binary(self, workload, variant):
        return self.bin / f"{workload}_{variant}"

    def all(self, workloads):
        log(f"bench: building libprof in {self.libprof_dir}")
        check(["cmake", "-S", self.repo, "-B", self.libprof_dir, "-G", "Ninja",
               "-DCMAKE_BUILD_TYPE=Release", "-DPROF_BUILD_TESTS=OFF", "-DPROF_BUILD_SAMPLES=OFF"])
        check(["ninja", "-C", self.libprof_dir, "prof", "profreport"])
        self.hooks.mkdir(parents=True, exist_ok=True)
        self.bin.mkdir(parents=True, exist_ok=True)
        for name in ("floor", "empty", "count"):
            src, out = HERE / "hooks" / f"{name}.cpp", self.hooks / f"lib{name}.so"
            if stale(out, [src]):
                check([CXX, "-std=c++20", "-O2", "-g", "-fPIC", "-shared", src, "-o", out])
        log("bench: building workloads")
        if LINES in workloads:
            self.lines()
        for w in workloads:
            if w == LINES:
                continue
            src = HERE / "workloads" / WORKLOADS[w][0]
            for variant, (flags, lib) in VARIANTS.items():
                libdir = self.libprof_lib if lib == "prof" else self.hooks
                link = ["-L", libdir, f"-l{lib}", f"-Wl,-rpath,{libdir}"] if lib else []
                out = self.binary(w, variant)
                if stale(out, [src] + ([libdir / f"lib{lib}.so"] if lib else [])):
                    check([CXX, *COMMON_FLAGS, *flags, src, "-o", out, *link])

    def lines(self):
        """The line/scope workload, one binary per marking, against prof::prof only (the public
        headers and libprof.so: what a program using the macros compiles and links with)."""
        src = HERE / "workloads" / LINES_SOURCE
        include = self.repo / "libprof" / "include"
        lib = self.libprof_lib / "libprof.so"
        deps = [src, lib, include / "prof" / "prof.hpp", include / "prof" / "prof.h"]
        for variant, define in LINE_VARIANTS.items():
            out = self.binary(LINES, variant)
            if stale(out, deps):
                check([CXX, *COMMON_FLAGS, f"-DVARIANT={define}", "-I", include, src, "-o", out,
                       "-L", self.libprof_lib, "-lprof", f"-Wl,-rpath,{self.libprof_lib}"])


# ---- running ---------------------------------------------------------------------------------

class Result:
    def __init__(self, wall, cpu, maxrss_kib):
        self.wall, self.cpu, self.maxrss_kib = wall, cpu, maxrss_kib


def run(cmd, env=None, cwd=None, stdout=os.devnull, err_log=None):
    """fork/exec/wait4 with wall time and rusage; raises if the command fails."""
    env = dict(env if env is not None else os.environ)
    cmd = [str(c) for c in cmd]
    err_path = err_log or os.devnull
    out_fd = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err_fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child
        try:
            if cwd:
                os.chdir(cwd)
            os.dup2(out_fd, 1)
            os.dup2(err_fd, 2)
            os.execvpe(cmd[0], cmd, env)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    os.close(out_fd)
    os.close(err_fd)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        tail = Path(err_path).read_text(errors="replace")[-2000:] if err_log else ""
        raise RuntimeError(f"exit {code}: {shlex.join(cmd)}\n{tail}")
    return Result(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss)


def base_env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith("PROF_") and k not in ("FLOOR_OUT", "COUNT_OUT", "LD_PRELOAD")}


def remove(path):
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def path_bytes(path):
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size if path.exists() else 0


class Runner:
    """Runs one configuration of one workload and cleans up its outputs."""

    def __init__(self, build, quick):
        self.b = build
        self.quick = quick
        self.rundir = build.work / "run"
        self.rundir.mkdir(parents=True, exist_ok=True)
        self.err_log = str(build.work / "last-stderr.txt")

    def args(self, w, tiny=False):
        return WORKLOADS[w][3 if tiny else 2 if self.quick else 1]

    def line_hits(self, cfg):
        """Hits (loop iterations) of one run of a `lines` configuration."""
        return LINE_HITS["quick" if self.quick else "full"][LINE_CONFIGS[cfg][3]]

    def output(self, w, cfg):
        """The trace (file or directory) a configuration writes, or None."""
        if w == LINES:
            return self.rundir / f"{w}_{cfg}.trace"
        return {"fi": self.rundir / f"{w}.trace", "floor": self.rundir / f"{w}.floor",
                "uftrace": self.rundir / f"{w}.uftrace", "pg": self.rundir / "gmon.out"}.get(cfg)

    @staticmethod
    def traced(w, cfg):
        """Whether the size of the configuration's trace is measured."""
        return w == LINES or cfg in TRACED

    def command(self, w, cfg, tiny=False):
        """(argv, environment) of one run."""
        if w == LINES:  # every lines binary runs libprof: always give it its trace path
            _, variant, extra_env, _, _ = LINE_CONFIGS[cfg]
            env = base_env()
            env["PROF_OUT"] = str(self.output(w, cfg))
            env.update(extra_env)
            return [self.b.binary(w, variant), str(self.line_hits(cfg))], env
        binary = self.b.binary(w, CONFIGS[cfg][1])
        env = base_env()
        argv = [binary, *self.args(w, tiny)]
        if cfg == "fi":
            env["PROF_OUT"] = str(self.output(w, cfg))
        elif cfg == "floor":
            env["FLOOR_OUT"] = str(self.output(w, cfg))
        elif cfg == "uftrace":
            argv = [*UFTRACE_RECORD, "-d", self.output(w, cfg), *argv]
        return argv, env

    def once(self, w, cfg, keep=False, tiny=False):
        """Runs one configuration; returns (Result, trace bytes or None)."""
        out = self.output(w, cfg)
        if out:
            remove(out)
        argv, env = self.command(w, cfg, tiny)
        r = run(argv, env=env, cwd=self.rundir, err_log=self.err_log)
        size = path_bytes(out) if self.traced(w, cfg) else None
        if out and not keep:
            remove(out)
        return r, size

    def count_calls(self, w):
        """Exact enter-hook count from the counting-hooks build."""
        count_file = self.rundir / f"{w}.count"
        env = base_env()
        env["COUNT_OUT"] = str(count_file)
        run([self.b.binary(w, "count"), *self.args(w)], env=env, cwd=self.rundir,
            err_log=self.err_log)
        enters, exits = map(int, count_file.read_text().split())
        count_file.unlink()
        if enters != exits:
            log(f"bench: warning: {w}: {enters} enters but {exits} exits")
        return enters

    def profreport_json(self, trace, *options):
        text = check([self.b.profreport, trace, "--format", "json", *options])
        return json.loads(text)

    def check_lines(self):
        """Runs the marked `lines` configurations once and compares what profreport --lines
        reads back with the hits they ran. Returns (description, {cfg: trace seconds per hit})."""
        parts, recorded = [], {}
        for cfg in ("line", "scope", "line_rss"):
            self.once(LINES, cfg, keep=True)
            trace = self.output(LINES, cfg)
            rows = self.profreport_json(trace, "--lines")["lines"]
            remove(trace)
            n = self.line_hits(cfg)
            hits = sum(r["hits"] for r in rows)
            ok = len(rows) == 1 and hits == n
            text = f"{cfg} {fmt_int(hits)} hits"
            if cfg == "line_rss":
                samples = sum(r.get("occurrences", 0) for r in rows)
                ok = ok and samples == n
                text += f" with {fmt_int(samples)} RSS samples"
            parts.append(text + ("" if ok else f" (expected {fmt_int(n)} - DIFFERS)"))
            recorded[cfg] = sum(r["time"] for r in rows) / hits if hits else float("nan")
        return "lines: profreport --lines reads back " + "; ".join(parts), recorded


# ---- statistics and tables -------------------------------------------------------------------

def med(xs):
    return statistics.median(xs) if xs else float("nan")


def summarize(runs, calls):
    """Per-config statistics from runs[cfg] = list of (Result, bytes), rep-aligned with base."""
    base = runs["base"]
    stats = {}
    for cfg, rs in runs.items():
        pairs = list(zip(rs, base))
        wall_ratio = [r.wall / b.wall for (r, _), (b, _) in pairs]
        cpu_ratio = [r.cpu / b.cpu if b.cpu > 0 else float("nan") for (r, _), (b, _) in pairs]
        stats[cfg] = {
            "reps": len(rs),
            "wall": med([r.wall for r, _ in rs]),
            "cpu": med([r.cpu for r, _ in rs]),
            "wall_ratio": med(wall_ratio), "wall_ratio_min": min(wall_ratio),
            "wall_ratio_max": max(wall_ratio),
            "cpu_ratio": med(cpu_ratio),
            "wall_ns": [(r.wall - b.wall) / calls * 1e9 for (r, _), (b, _) in pairs],
            "cpu_ns": [(r.cpu - b.cpu) / calls * 1e9 for (r, _), (b, _) in pairs],
            "bytes": med([s for _, s in rs]) if cfg in TRACED else None,
        }
    return stats


FIXED_COST_PAIRS = 9


def fixed_cost(runner, w, reps=FIXED_COST_PAIRS):
    """libprof's per-process cost apart from the events: fi minus base on a near-empty input
    (startup, first chunk, and the symbol table written at exit). Median over interleaved pairs."""
    diffs = []
    for _ in range(reps):
        base, _ = runner.once(w, "base", tiny=True)
        fi, _ = runner.once(w, "fi", tiny=True)
        diffs.append(fi.wall - base.wall)
    return med(diffs)


def per_rep_ratio(a, b):
    """Median over reps of a[i] / b[i] (extra-ns lists of two configs from the same reps)."""
    return med([x / y for x, y in zip(a, b) if y > 0])


def fmt_int(n):
    return f"{int(round(n)):,}"


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
    for cfg, name in (("line", "PROF_LINE"), ("scope", "PROF_SCOPE")):
        s = stats[cfg]
        x = med(s["wall_floor"])
        verdict = "met" if x <= LINE_TARGET else "NOT met"
        out.append(f"{name}: {med(s['wall_ns']):.1f} ns/hit = {x:.2f}x the floor wall "
                   f"({med(s['cpu_floor']):.2f}x CPU); target <= {LINE_TARGET}x: {verdict}")
    rss, line = stats["line_rss"], stats["line"]
    out.append(f"PROF_LINE with PROF_LINE_RSS=1: {med(rss['wall_ns']):.0f} ns/hit "
               f"({med(rss['wall_ns']) / med(line['wall_ns']):.0f}x plain PROF_LINE): each hit "
               "also reads /proc/self/statm twice (two pread() system calls plus parsing)")
    # Lines are summed in the process: their trace should not grow with the hits.
    constant = abs(line["extra_bytes"] - rss["extra_bytes"]) < 4096
    out.append(f"PROF_LINE's trace is {fmt_int(line['extra_bytes'])} B larger than the bare run's at "
               f"{fmt_int(line['hits'])} hits and {fmt_int(rss['extra_bytes'])} B at "
               f"{fmt_int(rss['hits'])} (PROF_LINE_RSS): "
               + ("a per-thread constant (the thread's first chunk and one LineStats record), not a "
                  "per-hit cost" if constant else "it GROWS with the hits"))
    if recorded:
        out.append("time the trace itself attributes per hit (profreport --lines time / hits): "
                   + ", ".join(f"{cfg} {t * 1e9:.1f} ns" for cfg, t in recorded.items()))
    return out


def render_text(head, rows):
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def render_md(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


# ---- report speed ----------------------------------------------------------------------------

def report_speed(runner, w, reps=3):
    """profreport on a fresh libprof trace of `w`, and uftrace report on a fresh uftrace record."""
    b = runner.b
    runner.once(w, "fi", keep=True)
    trace = runner.output(w, "fi")
    doc = runner.profreport_json(trace)
    events = sum(t["events"] for t in doc["threads"])
    prof = [run([b.profreport, trace], cwd=runner.rundir, err_log=runner.err_log) for _ in range(reps)]
    trace_bytes = path_bytes(trace)
    remove(trace)

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
    rows = [row(f"profreport ({w} trace)", events, "events", trace_bytes, prof),
            row(f"uftrace report ({w} trace)", records, "records", ut_bytes, ut)]
    return head, rows


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
    "(trace bytes - the bare run's) / hits: PROF_LINE sums hits per thread in the process (one "
    "record per site at thread end), PROF_SCOPE writes an enter and an exit event per hit.",
    "lines: floor = two __rdtsc() reads around the statement with their difference added to a "
    "local-exec thread-local in memory, the two cycle-counter reads the target refers to.",
]



def machine_line():
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), Linux {platform.release()}"


def tool_versions(repo):
    def first_line(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
        except (OSError, IndexError):
            return "not found"
    rev = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "--no-optional-locks", "-C", str(repo), "status", "--porcelain",
                            "--", "libprof", "tools"], capture_output=True, text=True).stdout.strip()
    rev += " with uncommitted changes under libprof/ or tools/" if dirty else ""
    return f"{first_line([CXX, '--version'])}; {first_line(['uftrace', '--version'])}; libprof at {rev}"


def loadavg():
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, help="timed reps (default 7, 2 with --quick)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/libprof-bench"),
                    help="scratch directory for builds and traces (default /tmp/libprof-bench)")
    ap.add_argument("--workloads", default=",".join([*WORKLOADS, LINES]),
                    help="comma-separated subset of " + ",".join([*WORKLOADS, LINES])
                    + " (default: all)")
    ap.add_argument("--repo", type=Path, default=HERE.parent.parent,
                    help="libprof source tree to build (default: the one holding this script)")
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer reps (smoke test)")
    ap.add_argument("--markdown", type=Path, help="also write the tables as Markdown to this file")
    args = ap.parse_args()
    workloads = [w for w in args.workloads.split(",") if w]
    for w in workloads:
        if w not in WORKLOADS and w != LINES:
            ap.error(f"unknown workload {w!r} (choose from {', '.join([*WORKLOADS, LINES])})")
    call_workloads = [w for w in workloads if w in WORKLOADS]
    reps = args.reps if args.reps is not None else (2 if args.quick else 7)
    if reps < 1:
        ap.error("--reps must be at least 1")
    if call_workloads and shutil.which("uftrace") is None:
        sys.exit("bench: uftrace not found (apt-get install uftrace)")
    command = shlex.join([os.path.basename(sys.executable), *sys.argv])
    started = datetime.datetime.now().astimezone()
    load_start = loadavg()

    work = args.work.resolve()
    build = Build(work, args.repo.resolve())
    build.all(workloads)
    runner = Runner(build, args.quick)
    configs = {w: list(LINE_CONFIGS if w == LINES else CONFIGS) for w in workloads}

    calls, check_lines, line_recorded = {}, [], {}
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
    runs = {w: {c: [] for c in configs[w]} for w in workloads}
    order = random.Random()
    for rep in range(-1, reps):  # rep -1 is the uncounted warm-up pass
        log(f"bench: {'warm-up' if rep < 0 else f'rep {rep + 1}/{reps}'}")
        for w in workloads:
            shuffled = configs[w][:]
            order.shuffle(shuffled)
            for cfg in shuffled:
                r, size = runner.once(w, cfg)
                if rep >= 0:
                    runs[w][cfg].append((r, size))

    sections = []  # (title, head, rows, notes)
    raw = {"command": command, "machine": machine_line(), "calls": calls, "fixed_cost_s": {},
           "runs": {}}
    for w in workloads:
        if w == LINES:
            continue
        n = calls[w]
        stats = summarize(runs[w], n)
        desc = WORKLOADS[w][4]
        title = (f"{w}: {desc}, args {' '.join(runner.args(w))}: {fmt_int(n)} calls "
                 f"({fmt_int(2 * n)} events), base {stats['base']['wall'] * 1e3:.1f} ms")
        fixed = fixed_cost(runner, w)
        notes = comparison_lines(stats, n, fixed)
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

    # Reader speed on the call workload with the largest libprof trace.
    if call_workloads:
        biggest = max(call_workloads, key=lambda w: med([s for _, s in runs[w]["fi"]]))
        log(f"bench: timing profreport and uftrace report on the {biggest} traces")
        head, rows = report_speed(runner, biggest)
        raw["readers"] = [dict(zip(head, r)) for r in rows]
        sections.append((f"trace readers on the {biggest} traces (events = sum of threads[].events "
                         f"in profreport's JSON; uftrace records = .dat bytes / "
                         f"{UFTRACE_RECORD_SIZE})", head, rows, []))

    footnotes = []
    if call_workloads:
        footnotes += call_footnotes(call_workloads)
    if LINES in workloads:
        footnotes += LINE_FOOTNOTES
    footnotes += [*check_lines, f"raw per-run times: {work / 'results.json'}"]
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
