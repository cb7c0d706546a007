#!/usr/bin/env python3
"""True shares: libprof's per-function time shares on code nobody tuned for it, against perf.

Issue 31's benchmark. true_time.py asks the question on SQLite; this one asks it on three
programs written without libprof in mind, each fetched at bench time into --work (never
committed) and built the same four ways with -O2 -g:

  zopfli   node-zopfli@2.1.4's zopfli sources (package/zopfli/src/zopfli/*.c) with their own
           command line: `zopfli --i15 -c CORPUS` (its gzip output is checked, not kept)
  snappy   snappy 1.1.7 from snappy@6.3.5 (deps/snappy) with workloads/snappy_driver.cc:
           CORPUS compressed and uncompressed 800 times
  sqlite   workloads/sqlite_mix.c on the SQLite amalgamation true_time.py builds, 160,000 rows

CORPUS is made from the fetched sources themselves, so it is the same on every machine: the
zopfli .c/.h files, the snappy .cc files, the snappy .h files and the zopfli files again, each
group in byte order of the names (513,575 bytes).

Builds: uninstrumented GCC and Clang (the truths); GCC with -finstrument-functions
-fno-optimize-sibling-calls -finstrument-functions-exclude-file-list=/usr/include and Clang
with -finstrument-functions-after-inlining -fno-optimize-sibling-calls (what prof::instrument
gives), both linked with libprof.so of --build.

Per rep, every run once, in shuffled order: per program and compiler one `perf record -q
--call-graph dwarf -F 999 -e cpu-clock` of the uninstrumented build, one plain run of it (its
wall and CPU time) and one `profrun -q -f -o TRACE` of the instrumented build with the runtime's
defaults, read with `profreport --format json -n 0`. perf's samples are charged as true_time.py
charges them (true_time.charge): a sample in libc or the kernel goes to the first program
frame; for GCC, whose inlined bodies keep their hooks, inlined functions count as frames of
their own unless libprof's table lacks them, and so do physical ones (no hooks: an excluded
/usr/include header's code, or a function gcc-hint's list names, is its caller's); for Clang,
whose hooks come after inlining, physical frames only. libprof's
self share is tottime / total_time, its cumulative share cumtime / total_time.

Functions are compared by a key, the name without clone suffixes (.isra, .part, .constprop,
.cold), parameters, templates, return type and namespaces: perf's inlined frames carry DWARF's
short names, libprof's table demangled names with parameters.

Printed per program and compiler: every function above 2% (self) in either, with the medians
over reps, the difference, min-max of the per-rep shares and the verdict (within 3 points);
the count off by more than 3 points; the top function of each; libprof's total against the
uninstrumented run's CPU and wall time; the run-to-run spread of each share (target: at most 3
points). With --busy, each rep also runs both builds pinned to one CPU beside a busy loop
pinned there (true_time.Busy); the busy traces are read with --clock cpu and --clock wall: the
cpu total against the busy uninstrumented CPU time (target within 1.25x), and the shares in
both clocks against the idle perf truth. Every run's output is checked to be the same.

Standard library only; needs gcc, g++, clang, clang++, perf (root, or
kernel.perf_event_paranoid <= 1), npm (or cached downloads in --work) and a built libprof,
profrun and profreport.
"""

import argparse
import concurrent.futures
import datetime
import hashlib
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from collections import defaultdict
from pathlib import Path

from libprofbench import marked_lines, perf, sqlite
from libprofbench.build import REPO, WORKLOADS, check, stale
from libprofbench.host import first_line, git_revision, loadavg, machine_line
from libprofbench.runner import clean_env, event_logger, run
from libprofbench.sqlite import CFLAGS, FI_FLAGS
from libprofbench.table import fmt_int, med, render_text
from true_time import PERF_RECORD, Busy, charge, origin

log = event_logger("true_shares")  # one `true_shares: event=... key=value ...` line
sqlite.log = lambda msg: log("step", msg=msg)  # importing true_time set its own

PROGRAMS = ("zopfli", "snappy", "sqlite")
COMPILERS = {"gcc": {"c": "gcc", "c++": "g++"}, "clang": {"c": "clang", "c++": "clang++"},
             "gcc-hint": {"c": "gcc", "c++": "g++"}}
# gcc-hint: the GCC recipe plus the exclusion list the report's hint: line gave for the program
# (profreport --format json: costly_hooks.gcc_exclude_function_list), read from one run of its
# GCC build before the reps; program -> the flag, or nothing when the report gave no hint.
HINTS = {}


def fi_flags(program, cc):
    """The instrumentation flags of a build: the recipe's, and for gcc-hint the hint's list."""
    return FI_FLAGS["gcc"] + HINTS.get(program, []) if cc == "gcc-hint" else FI_FLAGS[cc]
ZOPFLI_PACKAGE = "node-zopfli@2.1.4"
SNAPPY_PACKAGE = "snappy@6.3.5"
SNAPPY_DIR = "package/deps/snappy/snappy-1.1.7/"
# Work per run: zopfli's iterations, snappy's round trips, sqlite_mix's rows. The full sizes
# take about 2 s each uninstrumented here; --smoke also cuts the corpus to its first 16 KiB.
SIZES = {"full": {"zopfli": 15, "snappy": 800, "sqlite": 160_000},
         "quick": {"zopfli": 5, "snappy": 200, "sqlite": 20_000},
         "smoke": {"zopfli": 1, "snappy": 2000, "sqlite": 4000}}
SMOKE_CORPUS = 16 * 1024

# The issue's targets.
SHARE_FLOOR = 2.0    # functions above 2% (self) in either are compared
TARGET_POINTS = 3.0  # each within 3 points; a share's spread across reps at most 3 points
TARGET_TOTAL = 1.25  # --busy: the --clock cpu total within 1.25x the uninstrumented CPU time


def short(name):
    """The comparison key's last step: `ns::Class<T>::f(int) const` -> `f`. Parameters,
    templates, return type and namespaces dropped: perf's inlined frames carry DWARF's short
    names, libprof's table demangled ones; good enough to line the two up."""
    name = name.replace("(anonymous namespace)", "anon")
    out, depth = [], 0
    for ch in name:
        if ch in "(<":
            if depth == 0 and ch == "(" and out:
                break
            depth += 1
            continue
        if ch in ")>":
            depth -= 1
            continue
        if depth == 0:
            out.append(ch)
    return "".join(out).strip().split(" ")[-1].split("::")[-1]


def key(name):
    """A function's key on both sides: its clone's origin, shortened."""
    return short(origin(name.split(" [clone ")[0]))


def by_key(weights, total, largest=False):
    """{name: weight} -> {key: percent of total}, summed over the names of a key; with
    largest=True (cumulative shares) the largest: overloads sharing a key often nest
    (Compress(const char*, ...) calls Compress(Source*, Sink*)), and a sum would count the
    inner one twice."""
    out = defaultdict(float)
    for name, w in weights.items():
        share, k = 100 * w / total if total else 0.0, key(name)
        out[k] = max(out[k], share) if largest else out[k] + share
    return dict(out)


# ---- the programs: fetched, built, run -------------------------------------------------------

def npm_members(work, package, wanted):
    """The files of an npm package's tarball that wanted(member name) maps to a path,
    downloaded once (npm pack) and extracted once into WORK/src/PACKAGE; only regular files
    are written, by the mapped names, so the tarball's own paths never leave the directory."""
    safe = package.replace("/", "_")
    dest = work / "src" / safe
    if (dest / ".complete").exists():
        return dest
    dl = work / "download" / safe
    dl.mkdir(parents=True, exist_ok=True)
    tgz = next(iter(sorted(dl.glob("*.tgz"))), None)
    if tgz is None:
        if shutil.which("npm") is None:
            sys.exit(f"true_shares: npm not found (apt-get install npm) to fetch {package}")
        log("step", msg=f"downloading {package} (npm pack) into {dl}")
        out = check(["npm", "pack", "--json", package], "true_shares", cwd=dl, tail=4000)
        tgz = dl / json.loads(out[out.index("["):])[0]["filename"]
    with tarfile.open(tgz) as tar:
        for m in tar.getmembers():
            rel = wanted(m.name)
            if rel and m.isfile():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                (dest / rel).write_bytes(tar.extractfile(m).read())
    (dest / ".complete").touch()
    return dest


def files_in(prefix, suffixes):
    """wanted() for npm_members: the files directly in `prefix` with one of the suffixes,
    under the last part of the prefix."""
    sub = prefix.rstrip("/").rsplit("/", 1)[-1]

    def wanted(name):
        rest = name[len(prefix):] if name.startswith(prefix) else ""
        return f"{sub}/{rest}" if rest and "/" not in rest and rest.endswith(suffixes) else None
    return wanted


def make_corpus(work, zopfli, snappy, smoke):
    """The input of zopfli and snappy, from the fetched sources (see the top of the file)."""
    z = sorted((zopfli / "zopfli").glob("*.[ch]"))
    s = sorted((snappy / "snappy-1.1.7").glob("*.cc")) + sorted((snappy / "snappy-1.1.7").glob("*.h"))
    data = b"".join(p.read_bytes() for p in z + s + z)
    corpus = work / ("corpus-smoke.txt" if smoke else "corpus.txt")
    data = data[:SMOKE_CORPUS] if smoke else data
    if not corpus.exists() or corpus.read_bytes() != data:
        corpus.write_bytes(data)
    return corpus


class Program:
    """One program: how it is built (sources, flags, language) and run (argv after the
    binary); `sqlite` is built by libprofbench.sqlite instead."""

    def __init__(self, name, lang, binary, sources, flags, libs, args, what):
        self.name, self.lang, self.binary, self.sources = name, lang, binary, sources
        self.flags, self.libs, self.args, self.what = flags, libs, args, what


def programs(work, names, size, smoke, sqlite_src):
    """The Program of each name, its sources fetched; the corpus' description for the header."""
    out, corpus = {}, None
    if "zopfli" in names or "snappy" in names:
        zsrc = npm_members(work, ZOPFLI_PACKAGE, files_in("package/zopfli/src/zopfli/", (".c", ".h")))
        ssrc = npm_members(work, SNAPPY_PACKAGE, lambda n: (
            files_in(SNAPPY_DIR, (".cc", ".h"))(n)
            or files_in("package/deps/snappy/linux/generic/", (".h",))(n)))
        corpus = make_corpus(work, zsrc, ssrc, smoke)
        if "zopfli" in names:
            out["zopfli"] = Program(
                "zopfli", "c", "zopfli", sorted((zsrc / "zopfli").glob("*.c")), [], ["-lm"],
                [f"--i{size['zopfli']}", "-c", corpus],
                f"zopfli of {ZOPFLI_PACKAGE}: zopfli --i{size['zopfli']} -c CORPUS")
        if "snappy" in names:
            sd = ssrc / "snappy-1.1.7"
            out["snappy"] = Program(
                "snappy", "c++", "snappy_driver",
                [sd / f for f in ("snappy.cc", "snappy-sinksource.cc", "snappy-stubs-internal.cc")]
                + [WORKLOADS / "snappy_driver.cc"],
                ["-DHAVE_CONFIG_H", f"-I{sd}", f"-I{ssrc / 'generic'}"], [],
                [size["snappy"], corpus],
                f"snappy 1.1.7 of {SNAPPY_PACKAGE} with workloads/snappy_driver.cc: "
                f"{size['snappy']} round trips of CORPUS")
    if "sqlite" in names:
        src = sqlite.fetch_sqlite(work, sqlite.SQLITE_PACKAGE, sqlite_src)
        out["sqlite"] = Program(
            "sqlite", "c", "sqlite_mix", [src], [], [], [size["sqlite"], 1, work / "run"],
            f"SQLite {sqlite.sqlite_version(src)} ({sqlite_src or sqlite.SQLITE_PACKAGE}) with "
            f"workloads/sqlite_mix.c, {fmt_int(size['sqlite'])} rows")
    return out, corpus


def build(work, libprof, prog, cc, instrumented):
    """The program built with -O2 -g, instrumented and linked with libprof.so or not; compiled
    again only when a source or the command changes."""
    if prog.name == "sqlite":
        return sqlite.build_program(work, prog.sources[0], cc, libprof, instrument=instrumented)[0]
    out = work / "bin" / f"{prog.name}-{cc}-{'fi' if instrumented else 'plain'}" / prog.binary
    out.parent.mkdir(parents=True, exist_ok=True)
    lib = libprof / "libprof"
    cmd = [COMPILERS[cc][prog.lang], *CFLAGS, *(fi_flags(prog.name, cc) if instrumented else []),
           *prog.flags, "-o", out, *prog.sources,
           *([f"-L{lib}", f"-Wl,-rpath,{lib}", "-lprof"] if instrumented else []), *prog.libs]
    line, stamp = shlex.join(map(str, cmd)), out.parent / "command.txt"
    if stale(out, prog.sources) or not stamp.exists() or stamp.read_text() != line:
        log("step", msg=f"building {out}")
        check(cmd, "true_shares", tail=4000)
        stamp.write_text(line)
    return out


class Bench:
    """The runs. Every run's standard output is hashed per program: the same work each time."""

    def __init__(self, work, libprof, progs, busy_cpu, prof_env=None):
        self.work, self.progs, self.busy_cpu = work, progs, busy_cpu
        self.prof_env = prof_env or {}  # --prof-env: runtime settings of every run
        self.profrun = libprof / "tools" / "profrun"
        self.profreport = libprof / "tools" / "profreport"
        self.rundir = work / "run"
        self.rundir.mkdir(parents=True, exist_ok=True)
        self.stdout, self.err_log = self.rundir / "program.out", str(work / "last-stderr.txt")
        self.binaries = {}  # (program, cc, instrumented) -> path
        self.outputs = defaultdict(lambda: defaultdict(int))  # program -> output hash -> runs
        self.samples = defaultdict(list)  # (program, cc) -> per rep (physical, inlined or None)
        self.lines = {}  # the marked-lines case's builds: "marked", "plain"

    def argv(self, p, cc, instrumented):
        return [self.binaries[p, cc, instrumented], *self.progs[p].args]

    def timed(self, p, argv, busy=False):
        if busy:
            with Busy(self.busy_cpu):
                return self.timed(p, ["taskset", "-c", self.busy_cpu, *argv])
        r = run(argv, stdout=str(self.stdout), cwd=self.rundir,
                env={**clean_env(), **self.prof_env}, err_log=self.err_log)
        self.outputs[p][hashlib.sha256(self.stdout.read_bytes()).hexdigest()[:16]] += 1
        return r

    def plain(self, p, cc, rep, busy=False):
        r = self.timed(p, self.argv(p, cc, False), busy)
        log("plain", program=p, cc=cc, rep=rep, busy=busy, wall_s=r.wall, cpu_s=r.cpu)
        return {"wall": r.wall, "cpu": r.cpu}

    def perf(self, p, cc, rep):
        """perf record of the uninstrumented build; its samples are charged once every
        libprof table is read (GCC's inlined frames need the names libprof has)."""
        data = self.work / "perf" / f"{p}-{cc}.data"
        data.parent.mkdir(exist_ok=True)
        r = self.timed(p, [*PERF_RECORD, "-o", data, "--", *self.argv(p, cc, False)])
        views = {}
        for view in ("physical", "inlined") if cc.startswith("gcc") else ("physical",):
            script = data.with_suffix(f".{view}.txt")
            done = perf.script(data, script, "--no-inline" if view == "physical" else "--inline")
            if done.returncode != 0:
                sys.exit(f"true_shares: perf script failed ({done.returncode}): {done.stderr[-2000:]}")
            views[view] = [(x.comm, x.period, x.frames) for x in perf.read(script)]
            script.unlink()
        self.samples[p, cc].append((views["physical"], views.get("inlined")))
        log("perf", program=p, cc=cc, rep=rep, wall_s=r.wall, cpu_s=r.cpu,
            samples=len(views["physical"]))
        return {"wall": r.wall, "cpu": r.cpu}

    def profiled(self, p, cc, rep, busy=False):
        """profrun of the instrumented build with the runtime's defaults; its table (busy: in
        both clocks) by key."""
        trace = self.rundir / f"{p}-{cc}.trace"
        trace.unlink(missing_ok=True)
        r = self.timed(p, [self.profrun, "-q", "-f", "-o", trace, "--", *self.argv(p, cc, True)], busy)
        rec = {"wall": r.wall, "cpu": r.cpu, "trace_bytes": trace.stat().st_size, "tables": {}}
        for clock in ("cpu", "wall") if busy else ("default",):
            clock_arg = [] if clock == "default" else ["--clock", clock]
            done = subprocess.run([self.profreport, "--format", "json", "-n", "0", *clock_arg,
                                   trace], capture_output=True, text=True)
            if done.returncode != 0 and clock == "cpu" and "no CPU samples" in done.stderr:
                # A run too short for a sample (the smoke test's): nothing on the CPU clock.
                log("warning", program=p, cc=cc, rep=rep, msg=done.stderr.strip())
                done.returncode, done.stdout = 0, '{"functions": [], "total_time": 0, "total_calls": 0}'
            if done.returncode != 0:
                sys.exit(f"true_shares: profreport failed on {trace}: {done.stderr[-2000:]}")
            doc = json.loads(done.stdout)
            fs, total = doc["functions"], doc["total_time"]
            rec["tables"][clock] = {"total": total, "calls": doc["total_calls"],
                          "self": by_key({f["name"]: f["tottime"] for f in fs}, total),
                          "cum": by_key({f["name"]: f["cumtime"] for f in fs}, total, True)}
        trace.unlink()
        log("libprof", program=p, cc=cc, rep=rep, busy=busy, wall_s=r.wall, cpu_s=r.cpu,
            total_s=rec["tables"]["cpu" if busy else "default"]["total"],
            trace_mb=rec["trace_bytes"] / 1e6)
        return rec

    def hint(self, p):
        """The exclusion flag the report's hint gives for one run of the GCC build (gcc-hint)."""
        trace = self.rundir / f"{p}-hint.trace"
        self.timed(p, [self.profrun, "-q", "-f", "-o", trace, "--", *self.argv(p, "gcc", True)])
        done = subprocess.run([self.profreport, "--format", "json", "-n", "0", trace],
                              capture_output=True, text=True)
        trace.unlink()
        if done.returncode != 0:
            sys.exit(f"true_shares: profreport failed on {trace}: {done.stderr[-2000:]}")
        names = json.loads(done.stdout).get("costly_hooks", {}).get("gcc_exclude_function_list")
        log("hint", program=p, exclude=names or "(no hint)")
        return [f"-finstrument-functions-exclude-function-list={names}"] if names else []

    def lines_perf(self, rep):
        """perf record of the unmarked build of the marked-lines case: its truth."""
        data = self.work / "perf" / "snappy-lines.data"
        data.parent.mkdir(exist_ok=True)
        plain = self.lines["plain"]
        r = self.timed("snappy", [*PERF_RECORD, "-o", data, "--", plain, *self.progs["snappy"].args])
        share, lines = marked_lines.truth(data, plain)
        log("perf", program="snappy-lines", rep=rep, wall_s=r.wall, cpu_s=r.cpu,
            compress_fragment_pct=share)
        return {"perf_share": share, "perf_lines": lines}

    def lines_plain(self, rep):
        r = self.timed("snappy", [self.lines["plain"], *self.progs["snappy"].args])
        log("plain", program="snappy-lines", rep=rep, wall_s=r.wall, cpu_s=r.cpu)
        return {"plain_cpu": r.cpu}

    def lines_profiled(self, rep):
        trace = self.rundir / "snappy-lines.trace"
        trace.unlink(missing_ok=True)
        r = self.timed("snappy", [self.profrun, "-q", "-f", "-o", trace, "--",
                                  self.lines["marked"], *self.progs["snappy"].args])
        done = subprocess.run([self.profreport, "--lines", "--format", "json", trace],
                              capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"true_shares: profreport --lines failed on {trace}: {done.stderr[-2000:]}")
        total, lines = marked_lines.ours(json.loads(done.stdout))
        trace.unlink()
        log("libprof", program="snappy-lines", rep=rep, wall_s=r.wall, cpu_s=r.cpu, total_s=total)
        return {"total": total, "lines": lines}

    def truth(self, p, cc, hooked_keys):
        """perf's shares per rep, by key: GCC with inlined frames whose key libprof's table has."""
        binary = self.binaries[p, cc, False]
        out = []
        for phys, inl in self.samples[p, cc]:
            s = charge(phys, binary, inl, hooked=(lambda n: key(n) in hooked_keys) if inl else None)
            if s.program == 0:
                sys.exit(f"true_shares: no perf sample of {p} ({cc}) lies in the program")
            out.append({"self": by_key(s.self, s.program), "cum": by_key(s.cum, s.program, True),
                        "samples": s.samples, "outside": 100 * s.outside / (s.program + s.outside),
                        "misaligned": s.misaligned})
        return out


# ---- the report ------------------------------------------------------------------------------

def shares(recs, side="self"):
    """{key: [share per rep]} (0 in a rep without the function)."""
    keys = set().union(*(r[side] for r in recs))
    return {k: [r[side].get(k, 0.0) for r in recs] for k in keys}


def mm(xs, fmt="{:.1f}"):
    return f"{fmt.format(min(xs))}-{fmt.format(max(xs))}"


def with_range(xs, unit=" s"):
    return f"{med(xs):.2f}{unit} ({mm(xs, '{:.2f}')})"


def compare_table(truth, sides):
    """Rows for every key above the floor (median self share) in the truth or any side:
    truth and sides [(label, {key: [shares]})]. Returns (head, rows, per side (off, compared,
    worst))."""
    t_med = {k: med(v) for k, v in truth.items()}
    s_med = [{k: med(v) for k, v in s.items()} for _, s in sides]
    shown = {k for k, v in t_med.items() if v > SHARE_FLOOR}
    for m in s_med:
        shown |= {k for k, v in m.items() if v > SHARE_FLOOR}
    order = sorted(shown, key=lambda k: -max([t_med.get(k, 0)] + [m.get(k, 0) for m in s_med]))
    head, rows, stats = ["function"], [[k] for k in order], []
    for (label, s), m in zip(sides, s_med):
        head += [f"{label} %", "perf %", "diff", f"{label} min-max", "perf min-max", "within 3"]
        off, worst = 0, (0.0, "-")
        for row, k in zip(rows, order):
            d = m.get(k, 0.0) - t_med.get(k, 0.0)
            off += abs(d) > TARGET_POINTS
            worst = max(worst, (abs(d), f"{k} {d:+.1f}"))
            zero = [0.0] * len(next(iter(truth.values())))
            row += [f"{m.get(k, 0.0):.1f}", f"{t_med.get(k, 0.0):.1f}", f"{d:+.1f}",
                    mm(s.get(k, [0.0])), mm(truth.get(k, zero)),
                    "yes" if abs(d) <= TARGET_POINTS else "NO"]
        stats.append((off, len(order), worst[1]))
    return head, rows, stats


def top(med_shares):
    k = max(med_shares, key=med_shares.get)
    return f"{k} ({med_shares[k]:.1f}%)", k


def worst_spread(per_rep, keys):
    """The largest max-min of a share across reps among `keys`: (points, key)."""
    return max(((max(per_rep.get(k, [0])) - min(per_rep.get(k, [0])), k) for k in keys),
               default=(0.0, "-"))


def section(p, cc, recs, truth, reps, busy_cpu):
    """The printed blocks of one program and compiler: [(title, head, rows, notes)] and its
    line of the summary."""
    view = "inlined functions as frames unless libprof has no such function" if cc.startswith("gcc") \
        else "physical frames"
    t_self = shares(truth)
    l_self = shares([r["tables"]["default"] for r in recs["prof"]])
    head, rows, [(off, n, worst)] = compare_table(t_self, [("libprof", l_self)])
    t_cum, l_cum = shares(truth, "cum"), shares([r["tables"]["default"] for r in recs["prof"]], "cum")
    head += ["libprof cum %", "perf cum %"]
    for row in rows:
        row += [f"{med(l_cum.get(row[0], [0])):.1f}", f"{med(t_cum.get(row[0], [0])):.1f}"]
    t_top, t_key = top({k: med(v) for k, v in t_self.items()})
    l_top, l_key = top({k: med(v) for k, v in l_self.items()})
    totals = [r["tables"]["default"]["total"] for r in recs["prof"]]
    cpu, wall = [r["cpu"] for r in recs["plain"]], [r["wall"] for r in recs["plain"]]
    l_spread = worst_spread(l_self, [r[0] for r in rows])
    p_spread = worst_spread(t_self, [r[0] for r in rows])
    samples = med([t["samples"] for t in truth])
    notes = [
        f"off by more than {TARGET_POINTS:.0f} points: {off} of {n} functions (worst: {worst})",
        f"top function: libprof {l_top}, perf {t_top}: "
        + ("the same" if t_key == l_key else "DIFFERENT"),
        f"libprof's total {with_range(totals)} = {med(totals) / med(cpu):.2f}x the uninstrumented "
        f"run's CPU time {with_range(cpu)}, {med(totals) / med(wall):.2f}x its wall time "
        f"{with_range(wall)}",
        f"run-to-run spread (max-min of a share over {reps} reps, functions above): libprof "
        f"{l_spread[0]:.1f} points at most ({l_spread[1]}), perf {p_spread[0]:.1f} ({p_spread[1]}); "
        f"target at most {TARGET_POINTS:.0f} points: " + ("met" if l_spread[0] <= TARGET_POINTS
                                                          else "NOT met"),
        f"perf: {fmt_int(samples)} samples per run (a 10% share is within about "
        f"+-{196 * (0.09 / samples) ** 0.5:.1f} points at 95%), "
        f"{med([t['outside'] for t in truth]):.1f}% with no program frame (left out); "
        f"libprof: {fmt_int(med([r['tables']['default']['calls'] for r in recs['prof']]))} "
        f"calls, trace "
        f"{med([r['trace_bytes'] for r in recs['prof']]) / 1e6:.0f} MB, the run "
        f"{med([r['cpu'] for r in recs['prof']]) / med(cpu):.2f}x the uninstrumented CPU time",
    ]
    out = [(f"{p}, {cc}: self shares of libprof ({cc} {' '.join(CFLAGS + fi_flags(p, cc))}) "
            f"against perf of the uninstrumented build ({view}), functions above "
            f"{SHARE_FLOOR:.0f}% in either, medians of {reps} rep{'s' * (reps > 1)}",
            head, rows, notes)]
    summary = [p, cc, f"{n - off} of {n}", "yes" if t_key == l_key else "NO",
               f"{med(totals) / med(cpu):.2f}x", f"{l_spread[0]:.1f}"]
    if busy_cpu is not None:
        sides = [(f"busy {c}", shares([r["tables"][c] for r in recs["prof_busy"]]))
                 for c in ("cpu", "wall")]
        bhead, brows, bstats = compare_table(t_self, sides)
        ctot = [r["tables"]["cpu"]["total"] for r in recs["prof_busy"]]
        wtot = [r["tables"]["wall"]["total"] for r in recs["prof_busy"]]
        bcpu = [r["cpu"] for r in recs["plain_busy"]]
        bwall = [r["wall"] for r in recs["plain_busy"]]
        ratio = med(ctot) / med(bcpu)
        bnotes = [f"--clock {c}: off by more than {TARGET_POINTS:.0f} points: {o} of {k} "
                  f"(worst: {w})" for c, (o, k, w) in zip(("cpu", "wall"), bstats)]
        bnotes += [
            f"--clock cpu total {with_range(ctot)} = {ratio:.2f}x the uninstrumented run's CPU "
            f"time beside the busy loop {with_range(bcpu)}; target within {TARGET_TOTAL}x: "
            + ("met" if 1 / TARGET_TOTAL <= ratio <= TARGET_TOTAL else "NOT met"),
            f"--clock wall total {with_range(wtot)} = {med(wtot) / med(bwall):.2f}x the "
            f"uninstrumented run's wall time beside the busy loop {with_range(bwall)}"]
        out.append((f"{p}, {cc}, busy: both builds pinned to CPU {busy_cpu} beside a busy loop "
                    f"pinned there; libprof's self shares with --clock cpu and --clock wall "
                    f"against the idle perf truth, medians of {reps} rep{'s' * (reps > 1)}",
                    bhead, brows, bnotes))
        summary += [f"{ratio:.2f}x", f"{bstats[0][1] - bstats[0][0]} of {bstats[0][1]}"]
    return out, summary


def perf_rights():
    """What perf needs to charge kernel time to the program: root or a paranoid level <= 1."""
    try:
        level = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        level = None
    if os.geteuid() != 0 and level is not None and level > 1:
        sys.exit(f"true_shares: perf cannot sample the kernel (kernel.perf_event_paranoid="
                 f"{level}); run as root or `sysctl kernel.perf_event_paranoid=1`")
    return f"{'root' if os.geteuid() == 0 else f'uid {os.geteuid()}'}, paranoid {level}"


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example: python3 tools/bench/true_shares.py --build build --reps 3\n\n"
               + __doc__.split("\n", 2)[2])
    ap.add_argument("--build", type=Path, default=REPO / "build",
                    help="libprof's build directory (libprof.so, profrun, profreport)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/true_shares"),
                    help="downloads, builds and runs, kept as a cache (default /tmp/true_shares)")
    ap.add_argument("--programs", default=",".join(PROGRAMS), help="default: zopfli,snappy,sqlite")
    ap.add_argument("--compilers", default="gcc,clang",
                    help="default: gcc,clang; gcc-hint: GCC with the exclusion list the report's "
                         "hint: line gives after one run of the GCC build (zopfli, snappy)")
    ap.add_argument("--reps", type=int, default=5, help="reps (default 5)")
    q = SIZES["quick"]
    ap.add_argument("--quick", action="store_true",
                    help=f"smaller inputs: zopfli --i{q['zopfli']}, snappy {q['snappy']} round "
                         f"trips, sqlite {q['sqlite']:,} rows")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny inputs (a 16 KiB corpus) for the smoke test; the figures mean nothing")
    ap.add_argument("--busy", action="store_true",
                    help="also run both builds pinned to --busy-cpu beside a busy loop pinned there")
    ap.add_argument("--busy-cpu", default="0", help="the CPU of --busy (default 0)")
    ap.add_argument("--sqlite-src", type=Path,
                    help="a directory with sqlite3.c and sqlite3.h instead of the npm package's")
    ap.add_argument("--no-lines", action="store_true",
                    help="leave out the marked-lines case (run with snappy and gcc)")
    ap.add_argument("--json", type=Path, help="write the raw per-rep results to this file")
    ap.add_argument("--prof-env", action="append", default=[], metavar="PROF_NAME=VALUE",
                    help="a runtime setting for every run (repeatable), to compare a setting's "
                         "effect, e.g. PROF_LATENCY_MIN=0")
    args = ap.parse_args()
    prof_env = {}
    for setting in args.prof_env:
        name, eq, value = setting.partition("=")
        if not eq or not name.startswith("PROF_"):
            ap.error(f"--prof-env expects PROF_NAME=VALUE, got {setting!r}")
        prof_env[name] = value

    names = [p for p in args.programs.split(",") if p]
    ccs = [c for c in args.compilers.split(",") if c]
    for x, known in [(p, PROGRAMS) for p in names] + [(c, tuple(COMPILERS)) for c in ccs]:
        if x not in known:
            ap.error(f"unknown {x!r} (choose from {', '.join(known)})")
    if "gcc-hint" in ccs and "sqlite" in names:
        ap.error("gcc-hint builds zopfli and snappy only (leave sqlite out of --programs)")
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    if args.busy and (shutil.which("taskset") is None or not args.busy_cpu.isdigit()
                      or int(args.busy_cpu) not in os.sched_getaffinity(0)):
        ap.error("--busy needs taskset and --busy-cpu a CPU this process may run on")
    tools = ["perf"] + [COMPILERS[c][lang] for c in ccs for lang in ("c", "c++")]
    for tool in tools:
        if shutil.which(tool) is None:
            sys.exit(f"true_shares: {tool} not found")
    rights = perf_rights()
    libprof, work = args.build.resolve(), args.work.resolve()
    for f in ("libprof/libprof.so", "tools/profrun", "tools/profreport"):
        if not (libprof / f).exists():
            sys.exit(f"true_shares: {libprof / f} not found (cmake --build {libprof} --target "
                     f"prof profrun profreport)")
    if work == REPO or REPO in work.parents and libprof not in work.parents:
        sys.exit("true_shares: --work must be outside the source tree (or under the build directory)")
    work.mkdir(parents=True, exist_ok=True)
    size = SIZES["smoke" if args.smoke else "quick" if args.quick else "full"]
    command = shlex.join([os.path.basename(sys.executable), *sys.argv])
    started, load_start, t0 = datetime.datetime.now().astimezone(), loadavg(), time.monotonic()
    log("start", build=libprof, work=work, programs=",".join(names), compilers=",".join(ccs),
        reps=args.reps, perf=rights)

    progs, corpus = programs(work, names, size, args.smoke, args.sqlite_src)
    b = Bench(work, libprof, progs, args.busy_cpu if args.busy else None, prof_env)
    jobs = [(p, cc, inst) for p in names for cc in ccs for inst in (False, True)]
    # dict.fromkeys: the GCC build once, when gcc is asked for too.
    first = list(dict.fromkeys([j for j in jobs if j[1] != "gcc-hint"] +
                               [(p, "gcc", True) for p in names]))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:  # the machine's 2 cores
        def build_all(some):
            for job, binary in zip(some, ex.map(lambda j: build(work, libprof, progs[j[0]], *j[1:]),
                                                some)):
                b.binaries[job] = binary
        build_all(first)
        if "gcc-hint" in ccs:
            for p in names:
                HINTS[p] = b.hint(p)
            build_all([j for j in jobs if j[1] == "gcc-hint"])
    lines_case = "snappy" in names and "gcc" in ccs and not args.no_lines
    if lines_case:
        b.lines, lines_source, scope_end = marked_lines.build(work, libprof, progs["snappy"], log)
    prep = time.monotonic() - t0
    log("built", seconds=prep)

    kinds = ["perf", "plain", "prof"] + (["plain_busy", "prof_busy"] if args.busy else [])
    recs = {(p, cc): {k: [] for k in kinds} for p in names for cc in ccs}
    line_recs = []  # the marked-lines case, per rep
    shuffle = random.Random()
    for rep in range(1, args.reps + 1):
        tasks = [(p, cc, k) for p in names for cc in ccs for k in kinds]
        tasks += [("lines", None, k) for k in ("perf", "plain", "prof")] if lines_case else []
        shuffle.shuffle(tasks)
        log("rep", rep=rep, of=args.reps)
        if lines_case:
            line_recs.append({"source": lines_source, "scope_end": scope_end})
        for p, cc, kind in tasks:
            if p == "lines":
                line_recs[-1].update({"perf": b.lines_perf, "plain": b.lines_plain,
                                      "prof": b.lines_profiled}[kind](rep))
                continue
            run_one = {"perf": b.perf, "plain": b.plain, "prof": b.profiled,
                       "plain_busy": lambda *a: b.plain(*a, busy=True),
                       "prof_busy": lambda *a: b.profiled(*a, busy=True)}[kind]
            recs[p, cc][kind].append(run_one(p, cc, rep))

    blocks, summary, truths = [], [], {}
    for p in names:
        for cc in ccs:
            r = recs[p, cc]
            hooked = set().union(*(t["self"].keys() | t["cum"].keys()
                                   for k in ("prof", "prof_busy") for rec in r.get(k, [])
                                   for t in rec["tables"].values()))
            truths[p, cc] = b.truth(p, cc, hooked)
            out, line = section(p, cc, r, truths[p, cc], args.reps, b.busy_cpu)
            blocks += out
            summary.append(line)
    lines_block, lines_summary = marked_lines.report(line_recs, args.reps) if lines_case else (None, None)
    took = time.monotonic() - t0

    rev = git_revision(REPO, ["libprof", "tools/profreport", "tools/profrun"], "libprof/ or tools/")
    header = [
        ("machine", machine_line()),
        ("tools", f"{first_line(['gcc', '--version'])}; {first_line(['clang', '--version'])}; "
                  f"{first_line(['perf', '--version'])}; libprof, profrun and profreport at {rev} "
                  f"({libprof})"),
        *[(p, progs[p].what) for p in names],
        *([("CORPUS", f"{corpus} ({fmt_int(corpus.stat().st_size)} bytes, sha256 "
                      f"{hashlib.sha256(corpus.read_bytes()).hexdigest()[:16]})")] if corpus else []),
        ("perf", f"{' '.join(PERF_RECORD)} ({rights})"),
        ("command", command),
        ("date", f"{started.isoformat(timespec='seconds')}, took {took / 60:.1f} min of which "
                 f"{prep / 60:.1f} fetching and building; load average {load_start} at start, "
                 f"{loadavg()} at end"),
        ("reps", f"{args.reps}; each runs every program and compiler's perf record, plain run "
                 f"and profrun" + (", and both builds beside a busy loop" if args.busy else "")
                 + ", all in shuffled order"),
    ]
    print("\n".join(f"{k}: {v}" for k, v in header))
    shead = ["program", "compiler", f"within {TARGET_POINTS:.0f} points", "same top",
             "total / CPU", "worst spread"] + (["busy cpu total / CPU", "busy cpu within 3"]
                                               if args.busy else [])
    print(f"\n== summary: functions above {SHARE_FLOOR:.0f}% (self) within {TARGET_POINTS:.0f} "
          f"points of perf, the same top function, libprof's total over the uninstrumented CPU "
          f"time, the largest run-to-run spread of a share (points)\n")
    print(render_text(shead, summary))
    if lines_summary:
        print(f"\nmarked lines (snappy, gcc): CompressFragment's total {lines_summary[0]} its "
              f"uninstrumented time (target within 1.3x either way), the FindMatchLength line "
              f"{lines_summary[1]} points from perf's share (target within 5)")
    for title, head, rows, notes in blocks + ([lines_block] if lines_block else []):
        print(f"\n== {title}\n")
        print(render_text(head, rows))
        for line in notes:
            print(f"  {line}")
    print()
    for p in names:
        seen = b.outputs[p]
        print(f"- output of {p}: " + (f"the same in all {sum(seen.values())} runs (sha256 "
                                      f"{next(iter(seen))})" if len(seen) == 1 else
                                      "DIFFERENT: " + ", ".join(f"{n} x {h}" for h, n in seen.items())))
    print("- shares: perf's are a sample's period over all samples with a program frame; "
          "libprof's tottime (self) or cumtime (cum) over profreport's total_time; diff = "
          "libprof - perf in points, of the medians over reps; min-max over reps. Functions are "
          "keyed by their short name (no clone suffix, parameters, templates or namespaces): "
          "the self shares of a key are summed over its functions, the cum shares the largest")

    if args.json:
        args.json.write_text(json.dumps({
            "command": command, "machine": machine_line(), "date": started.isoformat(),
            "sizes": size, "outputs": b.outputs,
            "runs": {f"{p}/{cc}": {**r, "perf_shares": truths[p, cc]} for (p, cc), r in recs.items()},
            "marked_lines": [{k: v for k, v in r.items() if k != "source"} for r in line_recs]},
            indent=1, default=str))
        log("json", path=args.json)
    log("done", seconds=took)
    if any(len(seen) > 1 for seen in b.outputs.values()):
        sys.exit("true_shares: a program's output differed between runs (see above)")


if __name__ == "__main__":
    main()
