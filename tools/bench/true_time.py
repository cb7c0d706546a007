#!/usr/bin/env python3
"""True time: libprof's per-function times on SQLite against CPU samples of the uninstrumented program.

What a profiler's table should say is where an uninstrumented run spends its CPU time. This
benchmark builds SQLite (the amalgamation report_speed.py fetches) with
workloads/sqlite_mix.c four ways, with the same -O2 -g:

  clang        uninstrumented: clang's truth
  clang + fi   -finstrument-functions-after-inlining, linked with libprof.so of --build
               (what prof::instrument gives with Clang)
  gcc + fi     -finstrument-functions -finstrument-functions-exclude-file-list=/usr/include,
               linked with libprof.so (prof::instrument with GCC)
  gcc          uninstrumented: GCC's truth

Truth: `perf record --call-graph dwarf -F 999 -e cpu-clock` of each uninstrumented build. Every
sample is charged to the first frame, from the leaf, that lies in the program binary (a sample
in libc or in the kernel goes to the program function that called into it); a function's self
share is its samples over all samples charged to the program, its cumulative share the samples
with it anywhere on the chain. Clones (.isra, .part, .constprop, .cold) count as their origin.
Which frames are functions follows what the hooks time: for Clang (hooks after inlining) the
physical frames, for GCC (whose inlined bodies keep their hooks) the inlined functions too, as
the debugging information names them; the notes give the verdict with the other choice.

libprof: each instrumented build run with its defaults (`profrun -o TRACE -- PROGRAM`), read
with `profreport --format json`: a function's self share is its tottime over the sum of tottime,
its cumulative share its cumtime over that sum. Whatever time model the runtime and profreport
of --build use is what gets measured (the time-basis line of profreport's table says which).

Per build it prints the shares side by side for every function above 2% in either, the top
function of each, and the issue's targets: every function above 2% within 3 points, the same
top function, libprof's total within 1.25x the uninstrumented run's wall and CPU time; also
the instrumented run's own time, and what sampling costs (the instrumented run with the clock
per call, PROF_TIME=traced, against the same with PROF_SAMPLE_HZ=0, interleaved: without
samples the default never stops reading the clock). Last, the per-call cost on fib(30)
(workloads/fib.cpp built as bench.py builds it): uninstrumented, libprof's default,
PROF_TIME=sampled and `uftrace record --no-libcall`, in extra ns per call and against uftrace's.

Variables a runtime does not know (PROF_SAMPLE_HZ, PROF_TIME on older trees) are passed anyway;
the runtime ignores them. Every run of a rep runs once, in shuffled order; figures are medians
over reps. The download, the builds and the raw results (results.json) are kept in --work.

With --busy, each rep also runs the uninstrumented build and the instrumented one (defaults)
pinned to one CPU (`taskset -c 0`, --busy-cpu) beside a busy loop pinned to the same CPU
(`taskset -c 0 sh -c 'while :; do :; done'`, started before each run and killed after it). Both
instrumented runs, idle and busy, are then read with `profreport --format json --clock wall` and
`--clock cpu`; a further table per compiler gives, idle beside busy: the `--clock cpu` total
against the uninstrumented run's CPU time (target within 1.25x), the `--clock wall` total against
its wall time busy and idle, every function above 2% in both clocks against the idle perf truth
(target within 3 points), the JSON's time_split (on CPU, waiting for a CPU, blocked or
sleeping), as medians over reps with their min-max. Without --busy the output is as before.
Standard library only; needs clang, gcc, g++, perf (as root, or kernel.perf_event_paranoid <= 1
and kernel samples allowed), uftrace, npm (unless --sqlite-src) and a built libprof, profrun and
profreport (`ninja -C build prof profrun profreport`).
"""

import argparse
import concurrent.futures
import datetime
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from libprofbench import perf, sqlite
from libprofbench.build import COMMON_FLAGS, REPO
from libprofbench.calls import FIXED_COST_PAIRS, Build, Runner, fib_calls, fixed_cost, per_rep_ratio, summarize
from libprofbench.host import first_line, loadavg, machine_line
from libprofbench.runner import clean_env, event_logger, path_bytes, remove, run
from libprofbench.sqlite import (CFLAGS, FI_FLAGS, SQLITE_PACKAGE, build_program, fetch_sqlite,
                                 sqlite_version)
from libprofbench.table import fmt_int, med, render_md, render_text

# Rows of sqlite_mix: the uninstrumented run takes 2-3 s here (about 2.3 CPU s, half of it
# system time writing the database file); --quick runs an eighth.
ROWS = {"full": 160_000, "quick": 20_000}
COMPILERS = ("clang", "gcc")
PERF_HZ = 999
PERF_RECORD = ["perf", "record", "-q", "--call-graph", "dwarf", "-F", str(PERF_HZ), "-e", "cpu-clock"]
FIB_N = 30
# Which of perf's frames stand for the functions libprof times. Clang's
# -finstrument-functions-after-inlining puts hooks in the functions left after inlining, the
# physical frames; GCC's -finstrument-functions keeps the hooks of an inlined function in its
# inlined body, so libprof times it as a function, as DWARF's inlined frames name it.
FRAME_VIEWS = {"physical": "physical frames only (perf script --no-inline)",
               "inlined": "inlined functions as frames of their own (perf script --inline)"}
PERF_VIEW = {"clang": "physical", "gcc": "inlined"}

# The issue's targets.
SHARE_FLOOR = 2.0     # functions above 2% (self) in either profile are compared
TARGET_POINTS = 3.0   # each within 3 points
TARGET_TOTAL = 1.25   # libprof's total within 1.25x the uninstrumented run's time

# GCC's and Clang's clone suffixes: foo.isra.0, foo.part.0, foo.constprop.0.isra.0, foo.cold.
CLONE = re.compile(r"(?:\.(?:isra|part|constprop|cold|lto_priv|llvm|specialized|localalias)"
                   r"(?:\.\d+)*)+$")


log = event_logger("true_time")  # one `true_time: event=... key=value ...` line


# The fetch and build steps log in the same format here.
sqlite.log = lambda msg: log("step", msg=msg)


def origin(name):
    """A clone's origin: sqlite3VdbeExec.part.0 -> sqlite3VdbeExec."""
    return CLONE.sub("", name)


def rel(a, b):
    return a / b if b else float("nan")


BUSY_LOOP = ["sh", "-c", "while :; do :; done"]


class Busy:
    """A busy loop pinned to `cpu` for the duration of a `with` block: started before the run,
    killed (by its own pid) and reaped after it, also when the run fails."""

    def __init__(self, cpu):
        self.cpu = cpu
        self.proc = None

    def __enter__(self):
        self.proc = subprocess.Popen(["taskset", "-c", self.cpu, *BUSY_LOOP],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        time.sleep(0.05)  # let it exec and start spinning before the program starts
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()
        return False


# ---- perf: the truth -------------------------------------------------------------------------

class Samples:
    """perf samples of one run charged to program functions: self and cumulative weight (the
    samples' periods, ns of CPU time) per function, by origin name."""

    def __init__(self):
        self.self = defaultdict(float)
        self.cum = defaultdict(float)
        self.program = 0.0    # weight of samples with a program frame
        self.outside = 0.0    # weight of samples with none (loader, exit, unwinding failures)
        self.to_main = 0.0    # weight of samples whose chain reaches main
        self.samples = 0
        self.misaligned = 0   # samples whose inlined frames did not line up (physical used)
        self.clones = defaultdict(float)  # raw clone name -> self weight

    def record(self):
        """Shares in percent of the program's samples, as kept per rep."""
        all_w = self.program + self.outside
        pct = lambda d: {f: 100 * w / self.program for f, w in d.items()}  # noqa: E731
        return {"self": pct(self.self), "cum": pct(self.cum), "clones": pct(self.clones),
                "outside": 100 * self.outside / all_w, "to_main": 100 * self.to_main / self.program,
                "sampled_cpu": all_w / 1e9, "misaligned": self.misaligned}


def charge(samples, binary, inlined=None, hooked=None):
    """Charges each sample to the first program frame from its leaf (frames in libc, the
    kernel, [unknown] and PLT stubs are passed over). With `inlined`, the same samples as perf
    script gives them with inlined frames: each physical frame of the program then stands for
    the functions inlined at its address, innermost first, followed by itself (the lines of
    one address are matched to the physical frame of that address; perf repeats or leaves out
    the physical line of some addresses). With `hooked`, a function it rejects (libprof has no
    such function: no hooks) is left out of the chain, so its samples go to its caller."""
    exe = os.path.realpath(binary)
    comm = Path(binary).name[:15]
    s = Samples()
    for i, (who, period, frames) in enumerate(samples):
        if who != comm:
            continue
        s.samples += 1
        logical = None
        if inlined is not None:
            logical, j, prev = [], 0, None
            extra = inlined[i][2]
            for ip, sym, dso in frames:
                names = []
                while j < len(extra) and extra[j][0] == ip:
                    names.append(extra[j][1])
                    j += 1
                if not names and prev and prev[0] == ip:  # recursion at one address
                    names = prev[1]
                prev = (ip, names)
                if not names:
                    logical = None
                    break
                logical.append((sym, dso, names))
            if logical is None or j != len(extra):
                s.misaligned += 1
                logical = None
        chain = []  # program functions from the leaf
        for k, (sym, dso) in enumerate((sym, dso) for _, sym, dso in frames):
            if dso != exe and os.path.basename(dso) != os.path.basename(exe):
                continue
            if sym == "[unknown]" or sym.endswith("@plt"):
                continue
            if logical is None:
                chain.append(sym)
                continue
            seen = []
            for name in logical[k][2]:
                if hooked is not None and not hooked(name):
                    continue  # no hooks (an excluded header's): its caller's
                if name != "[unknown]" and origin(name) not in (origin(x) for x in seen):
                    seen.append(name)
            # The physical function too, when libprof has it: one without hooks (an excluded
            # header's, or one -finstrument-functions-exclude-function-list names) is its
            # caller's there, as its inlined functions are.
            if (hooked is None or hooked(sym)) and origin(sym) not in (origin(x) for x in seen):
                seen.append(sym)
            chain.extend(seen)
        if not chain:
            s.outside += period
            continue
        s.program += period
        leaf = origin(chain[0])
        s.self[leaf] += period
        if chain[0] != leaf:
            s.clones[chain[0]] += period
        for f in {origin(f) for f in chain}:
            s.cum[f] += period
        if "main" in chain:
            s.to_main += period
    return s


# ---- libprof's table -------------------------------------------------------------------------

class Table:
    """profreport's JSON table of one trace, by origin name."""

    def __init__(self, doc):
        self.total = doc["total_time"]
        self.calls = doc["total_calls"]
        self.functions = len(doc["functions"])
        self.tot = defaultdict(float)
        self.cumtime = defaultdict(float)
        self.clones = {}
        self.ncalls = defaultdict(int)  # by name as printed: the exact counts
        for f in doc["functions"]:
            self.ncalls[f["name"]] += f["ncalls"]
            name = origin(f["name"])
            if name != f["name"]:
                self.clones[f["name"]] = f["tottime"]
            self.tot[name] += f["tottime"]
            self.cumtime[name] += f["cumtime"]

    def shares(self):
        # A run too short for any time (a smoke run's few rows on a busy machine): no shares.
        total = self.total or float("inf")
        return ({f: 100 * t / total for f, t in self.tot.items()},
                {f: 100 * t / total for f, t in self.cumtime.items()})


def time_basis(profreport, trace):
    """The line under the header of profreport's text table that says how times were obtained
    (none on a tree before the sampled time model)."""
    r = subprocess.run([str(profreport), "-n", "1", str(trace)], capture_output=True, text=True)
    lines = r.stdout.splitlines()
    for i, line in enumerate(lines):
        if "function calls" in line:
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return nxt if nxt.startswith("times") else ""
    return ""


def header_lines(profreport, trace):
    """The header lines of profreport's text table in both clocks after the call count: the
    time basis (with its notes, e.g. threads starved of samples) and the time split."""
    lines = {}
    for clock in ("wall", "cpu"):
        r = subprocess.run([str(profreport), "-n", "1", "--clock", clock, str(trace)],
                           capture_output=True, text=True)
        out = r.stdout.splitlines()
        for i, line in enumerate(out):
            if "function calls" in line:
                lines[clock] = [x.strip() for x in out[i + 1:i + 3] if x.strip()]
                break
    return lines


# ---- the runs --------------------------------------------------------------------------------

class Bench:
    def __init__(self, work, build, rows, keep_traces, quick, busy_cpu=None):
        self.work, self.build, self.rows = work, build, rows
        self.busy_cpu = busy_cpu  # --busy: the CPU the busy runs share with a busy loop
        self.keep_traces = keep_traces
        self.profrun = build / "tools" / "profrun"
        self.profreport = build / "tools" / "profreport"
        self.rundir = work / "run"
        self.perfdir = work / "perf"
        self.outdir = work / ("out-quick" if quick else "out")  # profreport's JSON, this run's
        for d in (self.rundir, self.perfdir, self.outdir):
            d.mkdir(parents=True, exist_ok=True)
        for old in self.outdir.glob("*.json"):
            old.unlink()
        self.err_log = str(work / "last-stderr.txt")
        self.stdout = self.rundir / "program.out"
        self.programs = {}   # (cc, instrumented) -> binary
        self.checksums = defaultdict(int)  # the program's output line -> runs that printed it
        self.basis = {}      # cc -> profreport's time-basis line
        self.split_line = {}  # cc + tag -> profreport's header lines in both clocks (--busy)

    def argv(self, cc, instrumented):
        return [self.programs[cc, instrumented], self.rows, 1, self.rundir]

    def timed(self, argv, env=None, busy=False):
        """One run; with busy=True pinned to --busy-cpu beside a busy loop pinned there too."""
        if busy:
            with Busy(self.busy_cpu):
                return self.timed(["taskset", "-c", self.busy_cpu, *argv], env)
        r = run(argv, stdout=str(self.stdout), cwd=self.rundir,
                             env=env if env is not None else clean_env(), err_log=self.err_log)
        line = self.stdout.read_text(errors="replace").strip().splitlines()
        self.checksums[line[-1] if line else ""] += 1
        return r

    def plain(self, cc, busy=False):
        r = self.timed(self.argv(cc, False), busy=busy)
        return {"wall": r.wall, "cpu": r.cpu}

    def perf(self, cc, rep):
        """One perf record of the uninstrumented build, its samples charged to functions two
        ways: physical frames only, and with inlined functions as frames of their own."""
        data = self.perfdir / f"{cc}.data"
        data.unlink(missing_ok=True)
        r = self.timed([*PERF_RECORD, "-o", data, "--", *self.argv(cc, False)])
        read = {}
        for view, extra in (("physical", ["--no-inline"]), ("inlined", ["--inline"])):
            script = self.perfdir / f"{cc}.{view}.txt"
            p = perf.script(data, script, *extra)
            if p.returncode != 0:
                sys.exit(f"true_time: perf script failed ({p.returncode}): {p.stderr[-2000:]}")
            read[view] = [(x.comm, x.period, x.frames) for x in perf.read(script)]
            script.unlink()
        binary = self.programs[cc, False]
        rec = {"wall": r.wall, "cpu": r.cpu}
        for view in ("physical", "inlined"):
            s = charge(read["physical"], binary, read["inlined"] if view == "inlined" else None)
            if s.program == 0:
                sys.exit(f"true_time: no perf sample of {cc}'s run lies in the program "
                         f"({s.samples} samples; see {data})")
            rec["samples"] = s.samples
            rec[view] = s.record()
        log("perf", cc=cc, rep=rep, wall_s=r.wall, cpu_s=r.cpu, samples=rec["samples"],
            outside_pct=rec["physical"]["outside"], to_main_pct=rec["physical"]["to_main"],
            inline_misaligned=rec["inlined"]["misaligned"])
        return rec

    def profiled(self, cc, rep, sample_hz=None, counting=False, traced=False, busy=False):
        """One run of the instrumented build under profrun with the runtime's defaults (or
        PROF_SAMPLE_HZ=sample_hz, or the counting mode, profrun --time sampled, or the clock
        per call throughout, --time traced); with the defaults and in the counting mode also its
        table; busy=True runs it beside a busy loop on its CPU (--busy). With --busy the default
        mode's table is also read in both clocks, idle and busy (rec["clocks"])."""
        tag = "" if sample_hz is None else "-hz" + sample_hz
        tag += "-counting" if counting else ""
        tag += "-traced" if traced else ""
        tag += "-busy" if busy else ""
        trace = self.rundir / f"{cc}{tag}.trace"
        trace.unlink(missing_ok=True)
        env = clean_env()
        if sample_hz is not None:
            env["PROF_SAMPLE_HZ"] = sample_hz
        if SAMPLE_TIMER:
            env["PROF_SAMPLE_TIMER"] = SAMPLE_TIMER
        mode = ["--time", "sampled"] if counting else ["--time", "traced"] if traced else []
        r = self.timed([self.profrun, "-q", "-f", *mode, "-o", trace, "--", *self.argv(cc, True)],
                       env, busy=busy)
        rec = {"wall": r.wall, "cpu": r.cpu, "trace_bytes": trace.stat().st_size}
        if sample_hz is None and not traced:
            out = self.outdir / f"{cc}{tag}.rep{rep}.json"
            with open(out, "w") as f:
                p = subprocess.run([str(self.profreport), "--format", "json", "-n", "0", str(trace)],
                                   stdout=f, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                sys.exit(f"true_time: profreport failed on {trace}: {p.stderr[-2000:]}")
            t = Table(json.loads(out.read_text()))
            if cc + tag not in self.basis:
                self.basis[cc + tag] = time_basis(self.profreport, trace)
            self_share, cum_share = t.shares()
            rec.update(total=t.total, calls=t.calls, functions=t.functions, self=self_share,
                       cum=cum_share, clones=t.clones, ncalls=t.ncalls)
            if self.busy_cpu is not None and not counting:
                rec["clocks"] = self.clocks(trace, f"{cc}{tag}.rep{rep}")
                if cc + tag not in self.split_line:
                    self.split_line[cc + tag] = header_lines(self.profreport, trace)
            log("libprof", cc=cc, rep=rep, counting=counting, wall_s=r.wall, cpu_s=r.cpu,
                total_s=t.total, calls=t.calls, trace_mb=rec["trace_bytes"] / 1e6,
                **({"busy": True, "cpu_clock_total_s": rec["clocks"]["cpu"]["total"]}
                   if busy else {}))
            if self.keep_traces:
                return rec
        else:
            log("libprof", cc=cc, rep=rep, sample_hz=sample_hz, traced=traced, wall_s=r.wall,
                cpu_s=r.cpu)
        trace.unlink()
        return rec

    def clocks(self, trace, name):
        """The trace's table in both clocks (profreport --format json --clock wall|cpu): per
        clock its total, self and cumulative shares and the time split."""
        out = {}
        for clock in ("wall", "cpu"):
            path = self.outdir / f"{name}.{clock}.json"
            with open(path, "w") as f:
                p = subprocess.run([str(self.profreport), "--format", "json", "--clock", clock,
                                    "-n", "0", str(trace)],
                                   stdout=f, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                sys.exit(f"true_time: profreport --clock {clock} failed on {trace}: "
                         f"{p.stderr[-2000:]}")
            doc = json.loads(path.read_text())
            t = Table(doc)
            self_share, cum_share = t.shares()
            out[clock] = {"total": t.total, "self": self_share, "cum": cum_share,
                          "clock": doc.get("clock"), "time_split": doc.get("time_split")}
        return out


# ---- fib: the per-call cost ------------------------------------------------------------------

class FibRunner(Runner):
    """bench.py's runner of the fib workload, on fib(n) and with the libprof of --build."""

    def __init__(self, build, n):
        super().__init__(build, quick=False)
        self.n = n

    def args(self, w, tiny=False):
        return ["1"] if tiny else [str(self.n)]


FIB_CONFIGS = {
    "base": "uninstrumented",
    "fi": "libprof, defaults",
    "sampled": "libprof, PROF_TIME=sampled",
    "uftrace": "uftrace record --no-libcall --no-event",
}


def fib_once(runner, cfg):
    """One run of a fib config: (bench.Result, trace bytes or None)."""
    argv, env = runner.command("fib", "fi" if cfg == "sampled" else cfg)
    if cfg == "sampled":
        env["PROF_TIME"] = "sampled"
    out = runner.output("fib", "fi" if cfg == "sampled" else cfg)
    if out:
        remove(out)
    r = run(argv, env=env, cwd=runner.rundir, err_log=runner.err_log)
    size = path_bytes(out) if out else None
    if out:
        remove(out)
    return r, size


def fib_bench(work, repo, build, n, reps):
    """fib(n) in bench.py's builds (base, -finstrument-functions linked with the libprof of
    --build, the same without libprof for uftrace), interleaved. Returns (title, head, rows,
    notes, raw)."""
    b = Build(work / "fib", repo, build)
    # One binary directory per build directory: a binary linked to another build's libprof.so
    # (its rpath) is never taken for this one's.
    b.bin = work / "fib" / ("bin-" + hashlib.sha256(str(build).encode()).hexdigest()[:10])
    b.workload("fib", ("base", "fi", "noop"))
    runner = FibRunner(b, n)
    calls = fib_calls(n) + 1  # fib's calls and main's
    # The count cross-checked against what libprof records.
    runner.once("fib", "fi", keep=True)
    doc = runner.profreport_json(runner.output("fib", "fi"))
    remove(runner.output("fib", "fi"))
    ncalls = sum(f["ncalls"] for f in doc["functions"])
    runs = {c: [] for c in FIB_CONFIGS}
    order = random.Random()
    for rep in range(-1, reps):  # rep -1: the warm-up pass
        cfgs = list(FIB_CONFIGS)
        order.shuffle(cfgs)
        for cfg in cfgs:
            r, size = fib_once(runner, cfg)
            if rep >= 0:
                runs[cfg].append((r, size))
    stats = summarize(runs, calls)
    fixed = fixed_cost(runner, "fib")
    ut = stats["uftrace"]
    head = ["config", "median wall ms", "wall ratio", "extra wall ns/call", "extra CPU ns/call",
            "extra wall / uftrace's", "extra CPU / uftrace's", "trace bytes"]
    rows = []
    for cfg, label in FIB_CONFIGS.items():
        s = stats[cfg]
        base = cfg == "base"
        size = med([sz for _, sz in runs[cfg] if sz is not None]) if cfg != "base" else None
        rows.append([label, f"{s['wall'] * 1e3:.1f}", f"{s['wall_ratio']:.2f}x",
                     "-" if base else f"{med(s['wall_ns']):.1f}",
                     "-" if base else f"{med(s['cpu_ns']):.1f}",
                     "-" if base else f"{per_rep_ratio(s['wall_ns'], ut['wall_ns']):.2f}x",
                     "-" if base else f"{per_rep_ratio(s['cpu_ns'], ut['cpu_ns']):.2f}x",
                     "-" if not size else fmt_int(size)])
    notes = [f"calls: {fmt_int(calls)} (2 F({n + 1}) - 1 calls of fib and main's); libprof's table "
             f"counts {fmt_int(ncalls)}: " + ("the same" if ncalls == calls else "DIFFERENT"),
             f"libprof's fixed cost per process (fib(1), instrumented - uninstrumented, median of "
             f"{FIXED_COST_PAIRS} pairs): {fixed * 1e3:.1f} ms = {fixed / calls * 1e9:.1f} ns "
             f"per call of fib({n}); without it the default costs "
             f"{med([x - fixed / calls * 1e9 for x in stats['fi']['wall_ns']]):.1f} wall ns/call"]
    title = (f"per-call cost: fib({n}), {fmt_int(calls)} calls, bench.py's builds (g++ "
             f"{' '.join(COMMON_FLAGS)}), {reps} interleaved reps")
    raw = {"n": n, "calls": calls, "libprof_ncalls": ncalls, "fixed_cost_s": fixed,
           "runs": {c: [{"wall": r.wall, "cpu": r.cpu, "bytes": sz} for r, sz in rs]
                    for c, rs in runs.items()}}
    return title, head, rows, notes, raw


# ---- summaries -------------------------------------------------------------------------------

def median_shares(recs, key):
    """Per function, the median over reps of its share (0 in a rep where it does not appear)."""
    names = set().union(*(r[key] for r in recs))
    return {f: med([r[key].get(f, 0.0) for r in recs]) for f in names}


def per_rep(xs, ys, key):
    return [x[key] / y[key] for x, y in zip(xs, ys) if y[key] > 0]


def spread(ratios):
    return f"{med(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "-"


def compare(p_self, l_self):
    """The functions above the floor in either profile, by the larger share; how many are
    within the target; the worst one; the top function of each."""
    shown = sorted({f for f, v in p_self.items() if v > SHARE_FLOOR}
                   | {f for f, v in l_self.items() if v > SHARE_FLOOR},
                   key=lambda f: -max(p_self.get(f, 0), l_self.get(f, 0)))
    diff = {f: l_self.get(f, 0.0) - p_self.get(f, 0.0) for f in shown}
    worst = max(shown, key=lambda f: abs(diff[f])) if shown else None
    within = sum(1 for f in shown if abs(diff[f]) <= TARGET_POINTS)
    text = f"{within} of {len(shown)}" + (f"; worst {worst} {diff[worst]:+.1f}" if worst else "")
    return {"shown": shown, "within": within, "text": text, "met": within == len(shown),
            "p_top": max(p_self, key=p_self.get), "l_top": max(l_self, key=l_self.get)}


def verdict(ok):
    return "met" if ok else "NOT met"


def summarize_build(cc, runs, basis, view):
    """The share table, the targets and the notes of one compiler's builds; `view` is perf's
    frames the table uses (physical, or inlined functions as frames of their own)."""
    perf, prof = runs["perf"], runs["prof"]
    plain, nosample, traced = runs["plain"], runs["nosample"], runs["traced"]
    pv = [r[view] for r in perf]
    p_self, p_cum = median_shares(pv, "self"), median_shares(pv, "cum")
    l_self, l_cum = median_shares(prof, "self"), median_shares(prof, "cum")
    c = compare(p_self, l_self)
    counting = runs.get("counting", [])
    k_self = median_shares(counting, "self") if counting else {}
    kc = compare(p_self, k_self) if counting else None
    head = ["function", "perf self %", "libprof self %", "self diff points", "perf cum %",
            "libprof cum %", "cum diff points"]
    if counting:
        head += ["PROF_TIME=sampled self %", "its diff points"]
    rows = []
    for f in sorted(set(c["shown"]) | set(kc["shown"] if kc else []),
                    key=lambda f: -p_self.get(f, 0.0)):
        ps, ls = p_self.get(f, 0.0), l_self.get(f, 0.0)
        pc, lc = p_cum.get(f, 0.0), l_cum.get(f, 0.0)
        rows.append([f, f"{ps:.1f}", f"{ls:.1f}", f"{ls - ps:+.1f}", f"{pc:.1f}", f"{lc:.1f}",
                     f"{lc - pc:+.1f}"])
        if counting:
            ks = k_self.get(f, 0.0)
            rows[-1] += [f"{ks:.1f}", f"{ks - ps:+.1f}"]
    p_top, l_top = c["p_top"], c["l_top"]

    plain_wall, plain_cpu = med([r["wall"] for r in plain]), med([r["cpu"] for r in plain])
    total = med([r["total"] for r in prof])
    tw, tc = total / plain_wall, total / plain_cpu
    ok_w = 1 / TARGET_TOTAL <= tw <= TARGET_TOTAL
    ok_c = 1 / TARGET_TOTAL <= tc <= TARGET_TOTAL
    inst_wall, inst_cpu = per_rep(prof, plain, "wall"), per_rep(prof, plain, "cpu")
    hz_wall, hz_cpu = per_rep(traced, nosample, "wall"), per_rep(traced, nosample, "cpu")
    traced_cpu = per_rep(traced, plain, "cpu")
    targets = {
        "shares": (c["text"], c["met"]),
        "top": (f"perf {p_top} ({p_self[p_top]:.1f}%), libprof {l_top} ({l_self[l_top]:.1f}%)",
                p_top == l_top),
        "total_wall": (f"{total:.2f} s / {plain_wall:.2f} s = {tw:.2f}x", ok_w),
        "total_cpu": (f"{total:.2f} s / {plain_cpu:.2f} s = {tc:.2f}x", ok_c),
    }
    notes = [
        f"target every function above {SHARE_FLOOR:.0f}% within {TARGET_POINTS:.0f} points: "
        f"{targets['shares'][0]}; {verdict(targets['shares'][1])}",
        f"target the top function the same: {targets['top'][0]}; {verdict(targets['top'][1])}",
        f"target libprof's total (sum of tottime, median {total:.3f} s) within {TARGET_TOTAL}x the "
        f"uninstrumented run's time: {tw:.2f}x its wall time ({plain_wall:.3f} s), {verdict(ok_w)}; "
        f"{tc:.2f}x its CPU time ({plain_cpu:.3f} s), {verdict(ok_c)}",
        f"the instrumented run itself (profrun, defaults): {med([r['wall'] for r in prof]):.2f} s "
        f"wall, {med([r['cpu'] for r in prof]):.2f} s CPU: {spread(inst_wall)} the uninstrumented "
        f"run's wall time, {spread(inst_cpu)} its CPU time (per-rep ratios, median (min-max))",
        f"sampling's cost: the instrumented run with PROF_TIME=traced / with PROF_TIME=traced "
        f"PROF_SAMPLE_HZ=0: wall {spread(hz_wall)}, CPU {spread(hz_cpu)} (interleaved, per-rep "
        f"ratios; the clock per call both ways, since without samples the default never stops "
        f"reading it)",
        f"PROF_TIME=traced (the clock per call throughout): the run {spread(traced_cpu)} the "
        f"uninstrumented run's CPU time",
        "time basis: " + (basis or "profreport printed no time-basis line: times traced by the "
                                   "hooks, less their measured cost"),
    ]
    if counting:
        # The counting mode: its counts must be the default mode's, function by function.
        same = all(r["ncalls"] == prof[0]["ncalls"] for r in counting + prof)
        differ = sorted(f for f in prof[0]["ncalls"]
                        if any(r["ncalls"].get(f) != prof[0]["ncalls"][f] for r in counting))
        k_total = med([r["total"] for r in counting])
        k_cpu = per_rep(counting, plain, "cpu")
        k_vs = per_rep(counting, prof, "cpu")
        targets["counting_shares"] = (kc["text"], kc["met"])
        targets["counting_top"] = (f"perf {kc['p_top']}, libprof {kc['l_top']}",
                                   kc["p_top"] == kc["l_top"])
        targets["counting_counts"] = (
            "every function's ncalls equal to the default mode's in every rep" if same else
            f"{len(differ)} functions' ncalls differ: {', '.join(differ[:5])}", same)
        notes += [
            f"PROF_TIME=sampled (profrun --time sampled): every function above "
            f"{SHARE_FLOOR:.0f}% within {TARGET_POINTS:.0f} points: {kc['text']}; "
            f"{verdict(kc['met'])}; top function perf {kc['p_top']}, libprof {kc['l_top']}; "
            f"total {k_total:.3f} s = {k_total / plain_cpu:.2f}x the uninstrumented CPU time",
            f"PROF_TIME=sampled: the run itself {spread(k_cpu)} the uninstrumented run's CPU time, "
            f"{spread(k_vs)} the default mode's; counts: {targets['counting_counts'][0]}",
        ]
    # The same comparison with perf's other view of the frames.
    other = "inlined" if view == "physical" else "physical"
    o_self = median_shares([r[other] for r in perf], "self")
    oc = compare(o_self, l_self)
    notes.append(f"perf's frames: {FRAME_VIEWS[view]}. With {FRAME_VIEWS[other]} instead: "
                 f"{oc['within']} of {len(oc['shown'])} functions within {TARGET_POINTS:.0f} "
                 f"points, {verdict(oc['met'])}; perf's top function {oc['p_top']} "
                 f"({o_self[oc['p_top']]:.1f}%)")
    # What perf measured, and how well its stacks unwound.
    samples = med([r["samples"] for r in perf])
    sampled_cpu = med([r["sampled_cpu"] for r in pv])
    misaligned = max(r["inlined"]["misaligned"] for r in perf)
    notes.append(
        f"perf: {fmt_int(samples)} samples per run (median; a 10% share is known to about "
        f"+-{196 * (0.1 * 0.9 / samples) ** 0.5:.1f} points per run at 95%), standing for "
        f"{sampled_cpu:.2f} CPU s = {sampled_cpu / plain_cpu:.2f}x the uninstrumented run's CPU "
        f"time without perf; {med([r['outside'] for r in pv]):.2f}% of them with no program "
        f"frame (loader, exit; left out of the shares), "
        f"{med([r['to_main'] for r in pv]):.1f}% of the program's unwound to main"
        + (f", up to {misaligned} per run whose inlined frames did not line up (physical frames "
           f"used)" if misaligned else "")
        + f"; the perf runs took {med([r['wall'] for r in perf]):.2f} s wall, "
        f"{med([r['cpu'] for r in perf]):.2f} s CPU (perf's own included)")
    # Names one side has and the other not.
    only_prof = sorted((f for f in l_self if f not in p_cum and l_self[f] > 0.1),
                       key=lambda f: -l_self[f])
    only_perf = sorted((f for f in p_self if f not in l_cum and p_self[f] > 0.1),
                       key=lambda f: -p_self[f])
    if only_prof:
        notes.append(f"{len(only_prof)} functions libprof times at > 0.1% are on no perf "
                     f"sample's chain (inlined, or left by a tail call, in the uninstrumented "
                     f"build; or too brief to be sampled), "
                     f"{sum(l_self[f] for f in only_prof):.1f}% of libprof's total together: "
                     + ", ".join(f"{f} {l_self[f]:.1f}%" for f in only_prof[:8])
                     + (", ..." if len(only_prof) > 8 else ""))
    if only_perf:
        notes.append(f"{len(only_perf)} functions perf charges > 0.1% to have no row in libprof's "
                     f"table (not instrumented, or inlined in the instrumented build): "
                     + ", ".join(f"{f} {p_self[f]:.1f}%" for f in only_perf[:8])
                     + (", ..." if len(only_perf) > 8 else ""))
    # Clone names are the symbols of physical frames (inlined frames carry DWARF's names).
    clones = defaultdict(float)
    for r in perf:
        for k, v in r["physical"]["clones"].items():
            clones[k] += v / len(perf)
    if clones:
        big = sorted(clones, key=lambda k: -clones[k])
        notes.append(f"{len(big)} clones in perf's samples (physical frames, self %) counted "
                     f"as their origin: "
                     + ", ".join(f"{k} {clones[k]:.1f}%" for k in big[:8])
                     + (", ..." if len(big) > 8 else ""))
    lclones = set().union(*(r["clones"] for r in prof))
    notes.append(f"libprof's table: {med([r['functions'] for r in prof]):.0f} functions, "
                 f"{fmt_int(med([r['calls'] for r in prof]))} calls, trace "
                 f"{med([r['trace_bytes'] for r in prof]) / 1e6:,.0f} MB"
                 + (f"; clone names in it: {', '.join(sorted(lclones)[:8])}" if lclones
                    else "; no clone names in it (the hooks name the origin)"))
    summary = {"view": view, "p_self": p_self, "l_self": l_self, "p_cum": p_cum, "l_cum": l_cum,
               "shown": c["shown"], "within": c["within"], "p_top": p_top, "l_top": l_top,
               "other_view": {"view": other, "within": oc["within"], "shown": oc["shown"],
                              "p_top": oc["p_top"]},
               "total": total, "plain_wall": plain_wall, "plain_cpu": plain_cpu,
               "inst_wall": med(inst_wall), "inst_cpu": med(inst_cpu),
               "hz_wall": med(hz_wall) if hz_wall else None, "hz_cpu": med(hz_cpu) if hz_cpu else None,
               "counting_cpu": med(per_rep(counting, plain, "cpu")) if counting else None,
               "targets": {k: {"text": t, "met": ok} for k, (t, ok) in targets.items()}}
    return head, rows, notes, summary


def mm(xs, fmt="{:.3f}"):
    """Median (min-max) of the values, or '-'."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{fmt.format(med(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


def ratio_cell(xs, ys):
    """Per-rep ratios x/y as median (min-max), and whether the median is within the target."""
    r = [x / y for x, y in zip(xs, ys) if y]
    if not r:
        return "-", False
    return f"{med(r):.2f}x ({min(r):.2f}-{max(r):.2f})", 1 / TARGET_TOTAL <= med(r) <= TARGET_TOTAL


def summarize_busy(cc, runs, view, split_lines):
    """--busy: the instrumented run idle and beside a busy loop on its CPU, read in both clocks,
    against the idle perf truth and the uninstrumented run idle and busy. Returns the figures
    table, the share table, the notes and a summary."""
    pv = [r[view] for r in runs["perf"]]
    p_self = median_shares(pv, "self")
    plain, plain_b = runs["plain"], runs["plain_busy"]
    conds = {"idle": (runs["prof"], plain), "busy": (runs["prof_busy"], plain_b)}
    figs = {}  # (cond, clock) -> compare() of the median self shares against the idle truth
    shares = {}
    ranges = {}
    for cond, (prof, _) in conds.items():
        for clock in ("wall", "cpu"):
            recs = [r["clocks"][clock] for r in prof]
            shares[cond, clock] = median_shares(recs, "self")
            ranges[cond, clock] = recs
            figs[cond, clock] = compare(p_self, shares[cond, clock])
    total = lambda prof, clock: [r["clocks"][clock]["total"] for r in prof]  # noqa: E731
    split = lambda prof, key: [(r["clocks"]["wall"]["time_split"] or {}).get(key)  # noqa: E731
                               for r in prof]
    head = ["figure", "idle", f"busy (taskset -c, a busy loop on the same CPU)"]
    rows = [
        ["uninstrumented run: wall s", mm([r["wall"] for r in plain]), mm([r["wall"] for r in plain_b])],
        ["uninstrumented run: CPU s", mm([r["cpu"] for r in plain]), mm([r["cpu"] for r in plain_b])],
        ["instrumented run (profrun, defaults): wall s",
         *[mm([r["wall"] for r in conds[c][0]]) for c in conds]],
        ["instrumented run: CPU s", *[mm([r["cpu"] for r in conds[c][0]]) for c in conds]],
        ["--clock cpu total s", *[mm(total(conds[c][0], "cpu")) for c in conds]],
        ["--clock wall total s", *[mm(total(conds[c][0], "wall")) for c in conds]],
    ]
    targets = {}
    cells = {}
    for c, (prof, pl) in conds.items():
        cells[c, "cpu_same"] = ratio_cell(total(prof, "cpu"), [r["cpu"] for r in pl])
        cells[c, "cpu_idle"] = ratio_cell(total(prof, "cpu"), [r["cpu"] for r in plain])
        cells[c, "wall_same"] = ratio_cell(total(prof, "wall"), [r["wall"] for r in pl])
        cells[c, "wall_idle"] = ratio_cell(total(prof, "wall"), [r["wall"] for r in plain])
    v = lambda cell: f"{cell[0]} {'met' if cell[1] else 'NOT met'}"  # noqa: E731
    rows += [
        [f"--clock cpu total / uninstrumented CPU time, same condition (target <= {TARGET_TOTAL}x)",
         *[v(cells[c, "cpu_same"]) for c in conds]],
        ["--clock cpu total / idle uninstrumented CPU time", *[v(cells[c, "cpu_idle"]) for c in conds]],
        ["--clock wall total / uninstrumented wall time, same condition",
         *[v(cells[c, "wall_same"]) for c in conds]],
        ["--clock wall total / idle uninstrumented wall time (no target: busy, the loop takes "
         "about half the CPU)", *[cells[c, "wall_idle"][0] for c in conds]],
    ]
    for key, label in (("on_cpu", "on CPU"), ("runnable", "waiting for a CPU"),
                       ("blocked", "blocked or sleeping"), ("off_cpu", "off CPU (the two above)")):
        rows.append([f"time_split {key} s ({label})", *[mm(split(conds[c][0], key)) for c in conds]])
    for clock in ("wall", "cpu"):
        rows.append([f"--clock {clock}: functions above {SHARE_FLOOR:.0f}% within "
                     f"{TARGET_POINTS:.0f} points of the idle truth",
                     *[f"{figs[c, clock]['text']}; {verdict(figs[c, clock]['met'])}" for c in conds]])
        rows.append([f"--clock {clock}: top function (perf's: {figs['idle', clock]['p_top']})",
                     *[f"{figs[c, clock]['l_top']} "
                       f"({shares[c, clock][figs[c, clock]['l_top']]:.1f}%)" for c in conds]])
    for c in conds:
        targets[f"{c}_cpu_total"] = (cells[c, "cpu_same"][0], cells[c, "cpu_same"][1])
        for clock in ("wall", "cpu"):
            targets[f"{c}_{clock}_shares"] = (figs[c, clock]["text"], figs[c, clock]["met"])
    # The shares: every function above the floor in perf or in any of the four.
    shown = sorted(set().union(*(f["shown"] for f in figs.values())), key=lambda f: -p_self.get(f, 0.0))
    share_head = ["function", "perf self % (idle)"]
    for c in conds:
        for clock in ("wall", "cpu"):
            share_head.append(f"{c} --clock {clock} (diff) [min-max]")
    share_rows = []
    for f in shown:
        ps = p_self.get(f, 0.0)
        row = [f, f"{ps:.1f}"]
        for c in conds:
            for clock in ("wall", "cpu"):
                x = shares[c, clock].get(f, 0.0)
                per = [r["self"].get(f, 0.0) for r in ranges[c, clock]]
                row.append(f"{x:.1f} ({x - ps:+.1f}) [{min(per):.1f}-{max(per):.1f}]")
        share_rows.append(row)
    # Functions whose share moves most under contention, per clock.
    notes = []
    for clock in ("wall", "cpu"):
        moved = sorted(shown, key=lambda f: -abs(shares["busy", clock].get(f, 0.0)
                                                 - shares["idle", clock].get(f, 0.0)))[:3]
        notes.append(f"--clock {clock}, busy - idle share: " + ", ".join(
            f"{f} {shares['busy', clock].get(f, 0.0) - shares['idle', clock].get(f, 0.0):+.1f}"
            for f in moved))
    for tag in (cc, cc + "-busy"):
        for clock, lines in (split_lines.get(tag) or {}).items():
            notes.append(f"profreport's header, {'busy' if tag.endswith('-busy') else 'idle'}, "
                         f"--clock {clock}: " + " | ".join(lines))
    summary = {"shares": {f"{c}_{k}": shares[c, k] for c, k in shares},
               "shown": shown, "targets": {k: {"text": t, "met": ok} for k, (t, ok) in targets.items()},
               "wall_ratio": {f"{c}_{k}": cells[c, k][0] for c, k in cells}}
    return (head, rows), (share_head, share_rows), notes, summary


def tools_line(repo, build):
    base = sqlite.tools_line(repo, build, "clang")
    return (f"{base}; {first_line(['gcc', '--version'])}; {first_line(['perf', '--version'])}; "
            f"{first_line(['uftrace', '--version'])}")


def perf_ready():
    """What perf needs here: the binary, and the right to sample the kernel too (root, or
    kernel.perf_event_paranoid <= 1). Returns a description for the header."""
    if shutil.which("perf") is None:
        sys.exit("true_time: perf not found (apt-get install linux-perf)")
    try:
        paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        paranoid = None
    root = os.geteuid() == 0
    if not root and paranoid is not None and paranoid > 1:
        sys.exit(f"true_time: perf cannot sample the kernel as this user "
                 f"(kernel.perf_event_paranoid={paranoid}); run as root or "
                 f"`sysctl kernel.perf_event_paranoid=1`")
    return (f"{'root' if root else 'uid ' + str(os.geteuid())}, "
            f"kernel.perf_event_paranoid={paranoid}")


SAMPLE_TIMER = None  # --sample-timer


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Example: python3 tools/bench/true_time.py --build build --markdown /tmp/true-time.md",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", type=Path, default=REPO / "build",
                    help="build directory holding libprof/libprof.so, tools/profrun and "
                         "tools/profreport (default: build/ of this source tree)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/libprof-true-time"),
                    help="scratch directory: download, builds, perf data, results "
                         "(default /tmp/libprof-true-time; kept between runs as a cache)")
    ap.add_argument("--reps", type=int, help="reps of every SQLite run (default 3, 2 with --quick)")
    ap.add_argument("--rows", type=int, help=f"rows of sqlite_mix (default {ROWS['full']:,}, "
                                             f"{ROWS['quick']:,} with --quick)")
    ap.add_argument("--quick", action="store_true", help="an eighth of the rows, 2 reps, fewer fib reps")
    ap.add_argument("--compilers", default=",".join(COMPILERS),
                    help="comma-separated subset of clang,gcc (default both)")
    ap.add_argument("--fib", type=int, default=FIB_N, help=f"N of the fib(N) runs (default {FIB_N})")
    ap.add_argument("--fib-reps", type=int, help="reps of the fib runs (default 11, 5 with --quick)")
    ap.add_argument("--no-fib", action="store_true", help="skip the per-call cost on fib")
    ap.add_argument("--sample-timer", choices=["perf", "posix"],
                    help="PROF_SAMPLE_TIMER of the instrumented runs (default: the runtime's)")
    ap.add_argument("--perf-frames", choices=["auto", *FRAME_VIEWS], default="auto",
                    help="perf's frames the tables compare with: physical, inlined (inlined "
                         "functions as frames of their own) or auto (default: physical for "
                         "clang, inlined for gcc); the notes give the other one's verdict")
    ap.add_argument("--keep-traces", action="store_true",
                    help="keep the last libprof trace of each build in WORK/run (1-2 GB each)")
    ap.add_argument("--sqlite-package", default=SQLITE_PACKAGE,
                    help=f"npm package whose tarball holds deps/sqlite3/sqlite3.c (default {SQLITE_PACKAGE})")
    ap.add_argument("--sqlite-src", type=Path,
                    help="a directory holding sqlite3.c and sqlite3.h instead of the package")
    ap.add_argument("--markdown", type=Path, help="also write the tables as a Markdown section")
    ap.add_argument("--busy", action="store_true",
                    help="also run the uninstrumented and the instrumented build pinned to one CPU "
                         "beside a busy loop pinned there, and compare both clocks (profreport "
                         "--clock wall|cpu) idle and busy with the idle truth")
    ap.add_argument("--busy-cpu", default="0", help="the CPU of --busy (default 0)")
    args = ap.parse_args()
    global SAMPLE_TIMER
    SAMPLE_TIMER = args.sample_timer

    compilers = [c for c in args.compilers.split(",") if c]
    for c in compilers:
        if c not in COMPILERS:
            ap.error(f"unknown compiler {c!r} (choose from {', '.join(COMPILERS)})")
    reps = args.reps if args.reps is not None else (2 if args.quick else 3)
    fib_reps = args.fib_reps if args.fib_reps is not None else (5 if args.quick else 11)
    if reps < 1 or fib_reps < 1:
        ap.error("--reps and --fib-reps must be at least 1")
    rows = args.rows or ROWS["quick" if args.quick else "full"]
    if args.busy:
        if shutil.which("taskset") is None:
            sys.exit("true_time: --busy needs taskset (apt-get install util-linux)")
        if not args.busy_cpu.isdigit() or int(args.busy_cpu) not in os.sched_getaffinity(0):
            ap.error(f"--busy-cpu {args.busy_cpu}: not a CPU this process may run on")
    for tool in [*compilers, "perf", "g++"] + ([] if args.no_fib else ["uftrace"]):
        if shutil.which(tool) is None:
            sys.exit(f"true_time: {tool} not found")
    perf_rights = perf_ready()
    build = args.build.resolve()
    for f in ("libprof/libprof.so", "tools/profrun", "tools/profreport"):
        if not (build / f).exists():
            sys.exit(f"true_time: {build / f} not found (ninja -C {build} prof profrun profreport)")
    repo = REPO
    work = args.work.resolve()
    if work == repo or repo in work.parents and not str(work).startswith(str(build)):
        sys.exit("true_time: --work must be outside the source tree (or under the build directory)")
    work.mkdir(parents=True, exist_ok=True)
    command = shlex.join([os.path.basename(sys.executable), *sys.argv])
    started = datetime.datetime.now().astimezone()
    load_start = loadavg()
    t_start = time.monotonic()
    log("start", build=build, work=work, rows=rows, reps=reps, compilers=",".join(compilers),
        perf=perf_rights)

    # ---- builds: the four programs on both cores
    src = fetch_sqlite(work, args.sqlite_package, args.sqlite_src)
    b = Bench(work, build, rows, args.keep_traces, args.quick,
              busy_cpu=args.busy_cpu if args.busy else None)
    jobs = [(cc, inst) for cc in compilers for inst in (False, True)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1))) as ex:
        built = ex.map(lambda j: build_program(work, src, j[0], build, instrument=j[1]), jobs)
        for job, (binary, _) in zip(jobs, built):
            b.programs[job] = binary
    prep = int(time.monotonic() - t_start)
    log("built", seconds=prep, programs=" ".join(str(p) for p in b.programs.values()))

    # ---- the SQLite runs, interleaved: runs[cc][kind] = [record per rep]
    runs = {cc: {"perf": [], "plain": [], "prof": [], "traced": [], "nosample": [],
                 "counting": [], **({"plain_busy": [], "prof_busy": []} if args.busy else {})}
            for cc in compilers}
    order = random.Random()
    for rep in range(reps):
        tasks = [(cc, kind) for cc in compilers for kind in runs[cc]]
        order.shuffle(tasks)
        log("rep", rep=rep + 1, of=reps, order=",".join(f"{cc}:{k}" for cc, k in tasks))
        for cc, kind in tasks:
            if kind == "perf":
                rec = b.perf(cc, rep + 1)
            elif kind == "plain":
                rec = b.plain(cc)
                log("plain", cc=cc, rep=rep + 1, wall_s=rec["wall"], cpu_s=rec["cpu"])
            elif kind == "prof":
                rec = b.profiled(cc, rep + 1)
            elif kind == "plain_busy":
                rec = b.plain(cc, busy=True)
                log("plain", cc=cc, rep=rep + 1, busy=True, wall_s=rec["wall"], cpu_s=rec["cpu"])
            elif kind == "prof_busy":
                rec = b.profiled(cc, rep + 1, busy=True)
            elif kind == "counting":
                rec = b.profiled(cc, rep + 1, counting=True)
            elif kind == "traced":
                rec = b.profiled(cc, rep + 1, traced=True)
            else:  # sampling's cost: the clock per call both ways, samples on and off
                rec = b.profiled(cc, rep + 1, sample_hz="0", traced=True)
            runs[cc][kind].append(rec)

    fib = None
    if not args.no_fib:
        log("fib", n=args.fib, reps=fib_reps)
        fib = fib_bench(work, repo, build, args.fib, fib_reps)

    # ---- the report
    sections, summaries = [], {}
    for cc in compilers:
        view = PERF_VIEW[cc] if args.perf_frames == "auto" else args.perf_frames
        head, rows_, notes, summary = summarize_build(cc, runs[cc], b.basis.get(cc, ""), view)
        summaries[cc] = summary
        title = (f"{cc}: `{cc} {' '.join(CFLAGS + FI_FLAGS[cc])}` + libprof against `{cc} "
                 f"{' '.join(CFLAGS)}` under perf ({view} frames): self and cumulative shares, "
                 f"functions above {SHARE_FLOOR:.0f}% in either (medians of {reps} "
                 f"run{'s' if reps > 1 else ''} each)")
        sections.append((title, head, rows_, notes))
        if args.busy:
            (fh, fr), (sh, sr), bnotes, bsum = summarize_busy(cc, runs[cc], view, b.split_line)
            summaries[cc]["busy"] = bsum
            sections.append((f"{cc}, busy: the instrumented and the uninstrumented build idle and "
                             f"pinned to CPU {args.busy_cpu} beside a busy loop pinned there "
                             f"(medians of {reps}, min-max)", fh, fr, []))
            sections.append((f"{cc}, busy: self shares in both clocks (profreport --clock wall|cpu) "
                             f"against the idle perf truth ({view} frames), functions above "
                             f"{SHARE_FLOOR:.0f}% in any", sh, sr, bnotes))
    if fib:
        title, head, rows_, notes, _ = fib
        sections.append((title, head, rows_, notes))

    def cell(cc, key):
        t = summaries[cc]["targets"][key]
        return f"{t['text']}: {'met' if t['met'] else 'NOT met'}"
    target_head = ["target", *compilers]
    target_rows = [
        [f"every function above {SHARE_FLOOR:.0f}% within {TARGET_POINTS:.0f} points (self)",
         *[cell(cc, "shares") for cc in compilers]],
        ["the top function the same", *[cell(cc, "top") for cc in compilers]],
        [f"libprof's total within {TARGET_TOTAL}x the uninstrumented wall time",
         *[cell(cc, "total_wall") for cc in compilers]],
        [f"libprof's total within {TARGET_TOTAL}x the uninstrumented CPU time",
         *[cell(cc, "total_cpu") for cc in compilers]],
        ["instrumented run / uninstrumented, wall (CPU)",
         *[f"{summaries[cc]['inst_wall']:.2f}x ({summaries[cc]['inst_cpu']:.2f}x)" for cc in compilers]],
        ["sampling's cost: PROF_TIME=traced / the same with PROF_SAMPLE_HZ=0, wall (CPU)",
         *[f"{summaries[cc]['hz_wall']:.2f}x ({summaries[cc]['hz_cpu']:.2f}x)" for cc in compilers]],
        [f"PROF_TIME=sampled: every function above {SHARE_FLOOR:.0f}% within "
         f"{TARGET_POINTS:.0f} points", *[cell(cc, "counting_shares") for cc in compilers]],
        ["PROF_TIME=sampled: the top function the same",
         *[cell(cc, "counting_top") for cc in compilers]],
        ["PROF_TIME=sampled: counts equal to the default mode's",
         *[cell(cc, "counting_counts") for cc in compilers]],
        ["PROF_TIME=sampled run / uninstrumented, CPU",
         *[f"{summaries[cc]['counting_cpu']:.2f}x" for cc in compilers]],
    ]
    if args.busy:
        def bcell(cc, key):
            t = summaries[cc]["busy"]["targets"][key]
            return f"{t['text']}: {'met' if t['met'] else 'NOT met'}"
        target_rows += [
            [f"busy: --clock cpu total within {TARGET_TOTAL}x the uninstrumented CPU time (busy)",
             *[bcell(cc, "busy_cpu_total") for cc in compilers]],
            [f"busy: --clock wall, every function above {SHARE_FLOOR:.0f}% within "
             f"{TARGET_POINTS:.0f} points of the idle truth",
             *[bcell(cc, "busy_wall_shares") for cc in compilers]],
            [f"busy: --clock cpu, every function above {SHARE_FLOOR:.0f}% within "
             f"{TARGET_POINTS:.0f} points of the idle truth",
             *[bcell(cc, "busy_cpu_shares") for cc in compilers]],
            ["busy: --clock wall total / uninstrumented wall time, busy (idle)",
             *[f"{summaries[cc]['busy']['wall_ratio']['busy_wall_same']} "
               f"({summaries[cc]['busy']['wall_ratio']['busy_wall_idle']})" for cc in compilers]],
            [f"idle: --clock cpu, every function above {SHARE_FLOOR:.0f}% within "
             f"{TARGET_POINTS:.0f} points", *[bcell(cc, "idle_cpu_shares") for cc in compilers]],
        ]
    checks = [f"checksums: " + ("every run printed the same line: " + next(iter(b.checksums))
                                if len(b.checksums) == 1 else
                                "the runs DIFFER: " + "; ".join(f"{n} x {k}" for k, n in b.checksums.items()))]
    took = int(time.monotonic() - t_start)
    source = (f"SQLite {sqlite_version(src)} from "
              + (str(src) if args.sqlite_src else f"npm package {args.sqlite_package}"))
    header = [("machine", machine_line()),
              ("tools", tools_line(repo, build)),
              ("program", f"{source} with tools/bench/workloads/sqlite_mix.c, {fmt_int(rows)} rows, "
                          "one thread"),
              ("perf", f"`{' '.join(PERF_RECORD)}` ({perf_rights}); `perf script --no-inline` "
                       "and `perf script --inline` of the same data"),
              ("date", f"{started.isoformat(timespec='seconds')} (took {took // 60}:{took % 60:02d} "
                       f"min, of which {prep // 60}:{prep % 60:02d} fetching and building or finding "
                       f"them built; load average {load_start} at start, {loadavg()} at end)"),
              ("command", f"`{command}`"),
              ("reps", f"{reps} rep{'s' if reps > 1 else ''}; each runs, per compiler, the uninstrumented build, the same "
                       "under perf, the instrumented build with the defaults, with "
                       "PROF_TIME=traced, with PROF_TIME=traced PROF_SAMPLE_HZ=0 and with "
                       "PROF_TIME=sampled, all in shuffled order"
                       + (f"; with --busy also the uninstrumented and the instrumented build "
                          f"(defaults) under `taskset -c {args.busy_cpu}` beside "
                          f"`taskset -c {args.busy_cpu} {shlex.join(BUSY_LOOP)}`, started before "
                          f"and killed after each run" if args.busy else ""))]
    footnotes = [
        "perf self %: samples whose first program frame from the leaf is the function, over all "
        "samples with a program frame (a sample in libc or the kernel goes to the program function "
        "that called into it); perf cum %: samples with the function anywhere on the chain. Sample "
        "weights are their periods. Clones (.isra, .part, .constprop, .cold) count as their "
        "origin. Physical frames: an inlined function is part of the function it is inlined "
        "into; inlined frames: each physical frame stands for the functions inlined at its "
        "address (DWARF), innermost first, and itself.",
        "libprof self %: tottime over the sum of tottime (the table's total); cum %: cumtime over "
        "that sum. Shares are medians over reps (0 in a rep without the function); diff = "
        "libprof - perf in points.",
        "times: wall time around fork/exec/wait4, CPU time user + sys from wait4's rusage (all "
        "threads and children: profrun's and perf's own included).",
        *checks,
        f"raw results: {work / ('results-quick.json' if args.quick else 'results.json')}; "
        f"profreport's JSON of every rep: {b.outdir}",
    ]

    print()
    print("\n".join(f"{k}: {v.replace('`', '')}" for k, v in header))
    print("\n== targets\n")
    print(render_text(target_head, target_rows))
    for title, head, rows_, notes in sections:
        print(f"\n== {title.replace('`', '')}\n")
        print(render_text(head, rows_))
        for line in notes:
            print(f"  {line}")
    print()
    for line in footnotes:
        print(f"- {line}")

    if args.markdown:
        md = ["## True time: libprof's shares against perf's on SQLite (tools/bench/true_time.py)", ""]
        md += [f"- {k}: {v}" for k, v in header]
        md += ["", "### targets", "", render_md(target_head, target_rows)]
        for title, head, rows_, notes in sections:
            md += ["", f"### {title}", "", render_md(head, rows_), ""] + [f"- {n}" for n in notes]
        md += [""] + [f"- {line}" for line in footnotes]
        args.markdown.write_text("\n".join(md) + "\n")
        log("markdown", path=args.markdown)

    raw = {"command": command, "machine": machine_line(), "date": started.isoformat(),
           "rows": rows, "reps": reps, "basis": b.basis,
           "programs": {f"{cc}{'+fi' if inst else ''}": str(p) for (cc, inst), p in b.programs.items()},
           "runs": runs, "checksums": b.checksums,
           "summary": {cc: {k: v for k, v in s.items() if k not in ("p_self", "l_self", "p_cum", "l_cum")}
                       for cc, s in summaries.items()},
           "fib": fib[4] if fib else None}
    results = work / ("results-quick.json" if args.quick else "results.json")
    results.write_text(json.dumps(raw, indent=1))
    log("done", results=results, seconds=took)


if __name__ == "__main__":
    main()
