"""The call workloads (fib, mix, threads), the line/scope workload and the allocation workload:
their builds (binary variants compiled with the flags each configuration compares, against the
libprof and hook libraries of a CMake build), their runs, and the per-call figures of a group."""

import json
import sys
from pathlib import Path

from .build import (COMMON_FLAGS, CXX, FI_FLAGS, WORKLOADS as SOURCES, bench_dir, check, has_hooks,
                    stale)
from .runner import base_env, path_bytes, remove, run
from .table import fmt_int, med


def log(msg):
    print(msg, file=sys.stderr, flush=True)


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
    "floor_noclock": (FI_FLAGS, "floor_noclock"),
    "empty": (FI_FLAGS, "empty"),
    "count": (FI_FLAGS, "count"),
    "noop": (FI_FLAGS, None),  # glibc's own no-op __cyg_profile_func_* (for uftrace)
    "pg": (["-pg"], None),
}

# Configurations in table order: name -> (label, binary variant).
CONFIGS = {
    "base": ("base (no instrumentation)", "base"),
    "fi": ("fi: libprof full call trace", "fi"),
    "counts": ("fi: libprof, PROF_TIME=sampled (no clock per call)", "fi"),
    "floor": ("floor: rdtsc + 16 B record -> file", "floor"),
    "floor_noclock": ("floor without rdtsc: 16 B record -> file", "floor_noclock"),
    "empty": ("empty hooks (.so, via PLT)", "empty"),
    "pg": ("gprof (-pg)", "pg"),
    "uftrace": ("uftrace record (fi binary, no-op hooks)", "noop"),
}
TRACED = ("fi", "counts", "floor", "floor_noclock", "uftrace")  # configs whose trace size is measured

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
    # Every hit timed, as before PROF_LINE_CLOCK_EVERY (default 16: one short hit in 16 timed).
    "line_every": ("PROF_LINE, PROF_LINE_CLOCK_EVERY=1", "line", {"PROF_LINE_CLOCK_EVERY": "1"},
                   0, "bare"),
    "scope_every": ("PROF_SCOPE, PROF_LINE_CLOCK_EVERY=1", "scope",
                    {"PROF_LINE_CLOCK_EVERY": "1"}, 0, "bare"),
    "scope_records": ("the same with PROF_SCOPE_RUNS=0", "scope", {"PROF_SCOPE_RUNS": "0"}, 0, "bare"),
    "bare_rss": ("bare statement (RSS-run size)", "bare", {}, 1, "bare_rss"),
    "line_rss": ("PROF_LINE with PROF_LINE_RSS=1", "line", {"PROF_LINE_RSS": "1"}, 1, "bare_rss"),
}
LINE_TARGET = 1.3  # the target: PROF_LINE and PROF_SCOPE at most 1.3x the floor

# ---- the memory profiler: workloads/alloc.cpp ----
# 2 threads of mixed-size malloc/free and new[]/delete[] through a live window plus realloc growth
# (the research note's alloc.cpp); it prints its own allocator-call and allocation counts.
ALLOC = "alloc"
ALLOC_SOURCE = "alloc.cpp"
ALLOC_ARGS = {"full": "2000000", "quick": "400000"}  # alloc+free pairs per thread
# Binary variants: name -> (compile flags replacing -fno-omit-frame-pointer, link libprof).
ALLOC_VARIANTS = {
    "base": (["-fno-omit-frame-pointer"], False),
    "nofp": (["-fomit-frame-pointer"], False),  # for the DWARF unwinder: no frame chain at all
    "fi": (["-fno-omit-frame-pointer", *FI_FLAGS], True),  # call profiler: shadow-stack stacks
}
# Memory floor preloads built from hooks/memfloor.cpp: variant -> -DMODE_...
MEMFLOOR_MODES = {"count": "MODE_COUNT", "event": "MODE_EVENT", "stack": "MODE_STACK"}
# Configurations in table order: name -> (label, binary variant, what runs, baseline config).
# What runs: None (the binary alone), "calls" (libprof call trace only), "mem" (libprofmem.so
# preloaded), "dwarf" (the same with PROF_MEM_UNWIND=dwarf), "floor:<mode>", "heaptrack".
ALLOC_CONFIGS = {
    "base": ("base (-fno-omit-frame-pointer)", "base", None, "base"),
    "base_nofp": ("base built -fomit-frame-pointer", "nofp", None, "base_nofp"),
    "mem_fp": ("libprofmem, frame-pointer stacks", "base", "mem", "base"),
    "mem_dwarf": ("libprofmem, PROF_MEM_UNWIND=dwarf, -fomit-frame-pointer build", "nofp", "dwarf",
                  "base_nofp"),
    "calls": ("fi build + libprof: call trace only", "fi", "calls", "base"),
    "mem_shadow": ("fi build + libprofmem: shadow-stack stacks (net of the call trace)", "fi", "mem",
                   "calls"),
    "floor_count": ("floor preload: TLS counters", "base", "floor:count", "base"),
    "floor_event": ("floor preload: + 24 B event -> file", "base", "floor:event", "base"),
    "floor_stack": ("floor preload: + 24 B event + frame-pointer stack -> file", "base",
                    "floor:stack", "base"),
    "heaptrack": ("heaptrack record", "base", "heaptrack", "base"),
}
# The memory issue's targets.
MEM_TARGET_SHADOW_NS = 60      # <= ns per allocation with shadow-stack stacks
MEM_TARGET_FP_X = 20           # >= x cheaper than heaptrack with frame-pointer stacks
MEM_TARGET_DWARF_X = 5         # >= x cheaper than heaptrack with DWARF stacks, same depth
MEM_TARGET_BYTES = 2.2         # <= bytes per allocator call on disk

UFTRACE_RECORD = ["uftrace", "record", "--no-libcall", "--no-event"]
UFTRACE_RECORD_SIZE = 16  # bytes per entry or exit record (no arguments recorded)


class Build:
    """Paths of everything the benchmark builds: libprof, its tools and the hook libraries from
    a CMake build (its own under the work directory, or an existing one given as `build`), the
    workload binaries under the work directory."""

    def __init__(self, work, repo, build=None):
        self.work = work
        self.repo = repo
        self.own = build is None
        self.libprof_dir = work / "libprof" if build is None else Path(build).resolve()
        self.libprof_lib = self.libprof_dir / "libprof"
        self.profreport = self.libprof_dir / "tools" / "profreport"
        self.profpack = self.libprof_dir / "tools" / "profpack"
        self.profmem = self.libprof_lib / "libprofmem.so"
        self.hooks = bench_dir(self.libprof_dir)
        self.bin = work / "bin"

    def binary(self, workload, variant):
        return self.bin / f"{workload}_{variant}"

    def all(self, workloads):
        """libprof, the tools and the hook libraries (tools/bench/CMakeLists.txt), then the
        workloads' binaries."""
        if self.own:
            log(f"bench: building libprof in {self.libprof_dir}")
            check(["cmake", "-S", self.repo, "-B", self.libprof_dir, "-G", "Ninja",
                   "-DCMAKE_BUILD_TYPE=Release", "-DPROF_BUILD_TESTS=OFF", "-DPROF_BUILD_SAMPLES=OFF",
                   "-DPROF_BUILD_BENCH=ON"])
            check(["ninja", "-C", self.libprof_dir, "prof", "profmem", "profreport", "profpack",
                   "bench_hooks"])
        missing = [p for p in (self.libprof_lib / "libprof.so", self.profmem, self.profreport)
                   if not p.exists()]
        if missing or not has_hooks(self.libprof_dir):
            sys.exit(f"bench: {self.libprof_dir} lacks {', '.join(map(str, missing)) or 'the hook libraries'}"
                     f" (configure it with -DPROF_BUILD_BENCH=ON and build it)")
        self.bin.mkdir(parents=True, exist_ok=True)
        log("bench: building workloads")
        if LINES in workloads:
            self.lines()
        if ALLOC in workloads:
            self.alloc()
        for w in workloads:
            if w in WORKLOADS:
                self.workload(w)

    def workload(self, w, variants=tuple(VARIANTS)):
        """The binaries of one call workload, one per variant; "fi" links libprof.so of
        libprof_lib (true_time.py points it at another build), the hook variants need the
        hook libraries that all() builds first."""
        self.bin.mkdir(parents=True, exist_ok=True)
        src = SOURCES / WORKLOADS[w][0]
        for variant in variants:
            flags, lib = VARIANTS[variant]
            libdir = self.libprof_lib if lib == "prof" else self.hooks
            link = ["-L", libdir, f"-l{lib}", f"-Wl,-rpath,{libdir}"] if lib else []
            out = self.binary(w, variant)
            if stale(out, [src] + ([libdir / f"lib{lib}.so"] if lib else [])):
                check([CXX, *COMMON_FLAGS, *flags, src, "-o", out, *link])

    def memfloor(self, mode):
        return self.hooks / f"libmemfloor_{mode}.so"

    def alloc(self):
        """The allocation workload in its three builds (the floor preloads are CMake's)."""
        src = SOURCES / ALLOC_SOURCE
        flags = [f for f in COMMON_FLAGS if f != "-fno-omit-frame-pointer"]
        for variant, (extra, prof) in ALLOC_VARIANTS.items():
            out = self.binary(ALLOC, variant)
            link = ["-L", self.libprof_lib, "-lprof", f"-Wl,-rpath,{self.libprof_lib}"] if prof else []
            if stale(out, [src] + ([self.libprof_lib / "libprof.so"] if prof else [])):
                check([CXX, *flags, *extra, src, "-o", out, *link])

    def lines(self):
        """The line/scope workload, one binary per marking, against prof::prof only (the public
        headers and libprof.so: what a program using the macros compiles and links with)."""
        src = SOURCES / LINES_SOURCE
        include = self.repo / "libprof" / "include"
        lib = self.libprof_lib / "libprof.so"
        deps = [src, lib, *(include / "prof").glob("*.h*")]
        for variant, define in LINE_VARIANTS.items():
            out = self.binary(LINES, variant)
            if stale(out, deps):
                check([CXX, *COMMON_FLAGS, f"-DVARIANT={define}", "-I", include, src, "-o", out,
                       "-L", self.libprof_lib, "-lprof", f"-Wl,-rpath,{self.libprof_lib}"])




class Runner:
    """Runs one configuration of one workload and cleans up its outputs."""

    def __init__(self, build, quick):
        self.b = build
        self.quick = quick
        self.rundir = build.work / "run"
        self.rundir.mkdir(parents=True, exist_ok=True)
        self.err_log = str(build.work / "last-stderr.txt")

    def args(self, w, tiny=False):
        if w == ALLOC:
            return ["1" if tiny else ALLOC_ARGS["quick" if self.quick else "full"]]
        return WORKLOADS[w][3 if tiny else 2 if self.quick else 1]

    def line_hits(self, cfg):
        """Hits (loop iterations) of one run of a `lines` configuration."""
        return LINE_HITS["quick" if self.quick else "full"][LINE_CONFIGS[cfg][3]]

    def output(self, w, cfg):
        """The trace (file or directory) a configuration writes, or None."""
        if w == LINES:
            return self.rundir / f"{w}_{cfg}.trace"
        if w == ALLOC:
            what = ALLOC_CONFIGS[cfg][2]
            if what in ("calls", "mem", "dwarf"):
                return self.rundir / f"{w}_{cfg}.trace"
            if what in ("floor:event", "floor:stack"):
                return self.rundir / f"{w}_{cfg}.bin"
            if what == "heaptrack":  # heaptrack -o NAME writes NAME.zst
                return self.rundir / f"{w}_{cfg}.zst"
            return None
        return {"fi": self.rundir / f"{w}.trace", "counts": self.rundir / f"{w}.counts.trace",
                "floor": self.rundir / f"{w}.floor",
                "floor_noclock": self.rundir / f"{w}.floor-noclock",
                "uftrace": self.rundir / f"{w}.uftrace", "pg": self.rundir / "gmon.out"}.get(cfg)

    @staticmethod
    def traced(w, cfg):
        """Whether the size of the configuration's trace is measured."""
        return w in (LINES, ALLOC) or cfg in TRACED

    def command(self, w, cfg, tiny=False):
        """(argv, environment) of one run."""
        if w == LINES:  # every lines binary runs libprof: always give it its trace path
            _, variant, extra_env, _, _ = LINE_CONFIGS[cfg]
            env = base_env()
            env["PROF_OUT"] = str(self.output(w, cfg))
            env.update(extra_env)
            return [self.b.binary(w, variant), str(self.line_hits(cfg))], env
        if w == ALLOC:
            return self.alloc_command(cfg, tiny)
        binary = self.b.binary(w, CONFIGS[cfg][1])
        env = base_env()
        argv = [binary, *self.args(w, tiny)]
        if cfg == "fi":
            env["PROF_OUT"] = str(self.output(w, cfg))
        elif cfg == "counts":
            env["PROF_OUT"] = str(self.output(w, cfg))
            env["PROF_TIME"] = "sampled"
        elif cfg in ("floor", "floor_noclock"):
            env["FLOOR_OUT"] = str(self.output(w, cfg))
        elif cfg == "uftrace":
            argv = [*UFTRACE_RECORD, "-d", self.output(w, cfg), *argv]
        return argv, env

    def alloc_command(self, cfg, tiny=False):
        _, variant, what, _ = ALLOC_CONFIGS[cfg]
        env = base_env()
        argv = [self.b.binary(ALLOC, variant), *self.args(ALLOC, tiny)]
        out = self.output(ALLOC, cfg)
        if what in ("calls", "mem", "dwarf"):
            env["PROF_OUT"] = str(out)
        if what in ("mem", "dwarf"):
            env["LD_PRELOAD"] = str(self.b.profmem)
        if what == "dwarf":
            env["PROF_MEM_UNWIND"] = "dwarf"
        if what and what.startswith("floor:"):
            env["LD_PRELOAD"] = str(self.b.memfloor(what.split(":")[1]))
            env["MEMFLOOR_OUT"] = str(out) if out else "/dev/null"
        if what == "heaptrack":
            argv = ["heaptrack", "-o", str(out.with_suffix("")), *argv]
        return argv, env

    def once(self, w, cfg, keep=False, tiny=False):
        """Runs one configuration; returns (Result, trace bytes or None)."""
        out = self.output(w, cfg)
        if out:
            remove(out)
        argv, env = self.command(w, cfg, tiny)
        r = run(argv, env=env, cwd=self.rundir, err_log=self.err_log)
        size = path_bytes(out) if out and self.traced(w, cfg) else None
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
        for cfg in ("line", "scope", "scope_records", "line_rss"):
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


# ---- the alloc group -------------------------------------------------------------------------

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



def fib_calls(n):
    """Calls fib(n) makes: 2 * F(n+1) - 1."""
    a, b = 0, 1
    for _ in range(n + 1):
        a, b = b, a + b
    return 2 * a - 1
