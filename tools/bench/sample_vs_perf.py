#!/usr/bin/env python3
"""Sampling side by side: `profrun --sample` against `perf record` on the same programs, in the same run.

profrun --sample (and --pid) samples an unmodified program with perf_event_open (cpu-clock) and
unwinds the copied user stacks after the run. This benchmark measures it where perf record is
the reference, on the same binaries, interleaved in one run:

  sqlite fp     SQLite (the amalgamation report_speed.py fetches) with workloads/sqlite_mix.c,
                gcc -O2 -g -fno-omit-frame-pointer
  sqlite nofp   the same, gcc -O2 -g (GCC's default: no frame pointers)
  xz            Debian's /usr/bin/xz -9 -T1 -c of generated text (--xz-mb), unmodified
  sort          Debian's /usr/bin/sort of a generated file of lines (--sort-lines), unmodified

Every rep runs, per program, in shuffled order: the program alone (wall time around
fork/exec/wait4, CPU time user + sys from wait4's rusage, children and the tool's own threads
included), `profrun --sample --rate 999 -o TRACE -f -- PROGRAM` (default --stack-bytes) and
`perf record -e cpu-clock -F 999 --call-graph dwarf -o DATA -- PROGRAM`; on the fp build also
`perf record ... --call-graph fp`. perf's samples are read with `perf script --no-inline -F
comm,pid,tid,period,ip,sym,dso` (physical frames, as profrun has them): a function's self share
is the samples whose leaf frame is the function over all samples, its cumulative share the
samples with it anywhere on the stack (once per sample). profrun's: `profreport --format json
-n 0 --no-inline TRACE` (physical frames, as perf's --no-inline), self share tottime over the sum
of tottime, cumulative share cumtime over that sum.

Names are compared as both tools print them, made comparable the same way on both sides: a
symbol's version (@@GLIBC_2.2.5) and clone suffixes (.isra.0, .part.0, .constprop.0, .cold) are
dropped; aliases of one address (__memmove_avx_unaligned_erms and __memcpy_avx_unaligned_erms,
malloc and __libc_malloc), as the modules' symbol tables and their detached debugging files
(/usr/lib/debug/.build-id) list them with nm, become one name; code without a symbol is
[MODULE] (perf's `[unknown] (/usr/lib/.../liblzma.so.5)` and profrun's `[liblzma.so.5]`), and
an address in no module is [unknown]. perf's end-of-chain marker (ip ffffffffffffffff) is not a
frame. Nothing else is charged specially: every frame counts as it is. perf samples the kernel
too (run as root): its kernel frames are functions of their own in the first view; the second
view is perf's samples as profrun's sampler sees them: without the kernel frames (a sample in a
system call goes to the user code that made it) when profrun says it samples "CPU time (user and
system)", or only the samples taken in user mode when it samples user CPU time only.

Printed per program: the shares (medians over reps, 0 in a rep without the function) of every
function above 2% self in either tool, with the differences, and the same for cumulative shares
(every function above 2% cumulative in either); the top function of each; the verdicts for the
issue's targets: every function above 2% self within 2.5 points, the same top function, and on
the build without frame pointers cumulative shares within 3 points. Then attaching: the SQLite
build without frame pointers run with enough rows to outlast the window, and, started together,
`perf record -p PID -e cpu-clock -F 999 --call-graph dwarf -- sleep D` and `profrun --pid PID
--duration D`; self shares within 3.5 points. Last, the overhead: median wall and CPU time of
profrun --sample and of perf record against the program alone (per-rep ratios, median and
range), targets profrun <= 1.10x wall and no more than perf record's; and bytes per sample:
what profrun reads from the kernel per sample (its info line), its trace's bytes per sample,
perf.data's bytes per sample.

Everything it writes (the download, the builds, the generated inputs, traces, perf.data,
results.json) goes under --work (default /tmp/sample_vs_perf), never into the source tree. It
exits 0 when a target is missed (the verdict says MISSED); non-zero only on errors (a run that
failed is reported with its command and output, and makes the exit status 1). Standard library
only; needs gcc, nm, perf (as root, or kernel.perf_event_paranoid <= 1), xz, sort, npm (unless
--sqlite-src) and a built profrun and profreport (`ninja -C build profrun profreport`).
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.dont_write_bytecode = True  # nothing written into the source tree, not even __pycache__

from libprofbench import perf, sqlite  # noqa: E402
from libprofbench.build import REPO, stale
from libprofbench.host import first_line, loadavg, machine_line
from libprofbench.perf import END_OF_CHAIN, is_kernel
from libprofbench.runner import clean_env, event_logger, run
from libprofbench.sqlite import DRIVER, check, fetch_sqlite, link_libs, sqlite_version
from libprofbench.table import fmt_int, med, render_text

RATE = 999
CC = "gcc"
CFLAGS = ["-O2", "-g"]
FP_FLAGS = ["-fno-omit-frame-pointer"]
# Rows of sqlite_mix: 1.2-1.3 s here alone on 2026-12-03 (0.8 s user, 0.5 s system writing the
# database file; 3.5 s on the slower host of 2026-12-02).
ROWS = 160_000
XZ_MB = 4            # xz -9 takes 0.8-1.7 s per MB of the generated text here
SORT_LINES = 2_000_000
ATTACH_SECONDS = 10.0
ATTACH_WARMUP = 2.0  # seconds the attached program runs before both tools attach

SHARE_FLOOR = 2.0    # functions above 2% in either tool are compared
TARGET_SELF = 2.5    # points
TARGET_CUM = 3.0     # points, on the build without frame pointers
TARGET_ATTACH = 3.5  # points
TARGET_WALL = 1.10   # profrun --sample within 10% of the program's wall time alone


CLONE = re.compile(r"(?:\.(?:isra|part|constprop|cold|lto_priv|llvm|specialized|localalias)"
                   r"(?:\.\d+)*)+$")
VERSION = re.compile(r"@@?[A-Z][A-Za-z0-9_.]*$")   # pthread_mutex_lock@@GLIBC_2.2.5
ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")


log = event_logger("sample_vs_perf")  # one `sample_vs_perf: event=... key=value ...` line


sqlite.log = lambda msg: log("step", msg=msg)


def verdict(ok):
    return "met" if ok else "MISSED"


# ---- names -----------------------------------------------------------------------------------

class Names:
    """One name per function, the same way for both tools: versions and clone suffixes dropped,
    aliases of one address (from nm of the module and of its detached debugging file) merged
    into one (the one with the fewest leading underscores, then the shortest, then the first
    alphabetically)."""

    def __init__(self):
        self.aliases = {}   # module path -> {name: canonical name}
        self.merged = defaultdict(set)  # canonical -> names seen merged into it (both tools)
        self.kernel = set()  # names of perf's kernel frames

    @staticmethod
    def debug_file(path):
        notes = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
        m = re.search(r"Build ID:\s*([0-9a-f]{4,})", notes)
        if not m:
            return None
        bid = m.group(1)
        f = Path("/usr/lib/debug/.build-id") / bid[:2] / (bid[2:] + ".debug")
        return str(f) if f.is_file() else None

    def load(self, path):
        at = defaultdict(set)
        files = [path]
        dbg = self.debug_file(path)
        if dbg:
            files.append(dbg)
        for f in files:
            for extra in ([], ["-D"]):
                out = subprocess.run(["nm", "--defined-only", *extra, f], capture_output=True,
                                     text=True).stdout
                for line in out.splitlines():
                    parts = line.split()
                    if len(parts) == 3 and parts[1] in "TtWwiI":
                        try:
                            at[int(parts[0], 16)].add(VERSION.sub("", parts[2]))
                        except ValueError:
                            pass
        rank = lambda n: (len(n) - len(n.lstrip("_")) + (10 if n.startswith("__GI_") else 0),  # noqa: E731
                          len(n), n)
        table = {}
        for names in at.values():
            if len(names) > 1:
                c = min(names, key=rank)
                for n in names:
                    table.setdefault(n, c)
        return table

    def canon(self, module, name):
        name = VERSION.sub("", name)
        if module and module.startswith("/") and os.path.isfile(module):
            if module not in self.aliases:
                self.aliases[module] = self.load(module)
            name = self.aliases[module].get(name, name)
        out = CLONE.sub("", name)
        return out

    def note(self, canonical, raw):
        if raw != canonical:
            self.merged[canonical].add(raw)

    def perf(self, sym, dso, kernel=False):
        if sym == "[unknown]":
            c = "[unknown]" if dso in ("[unknown]", "") else f"[{os.path.basename(dso)}]"
        else:
            c = self.canon(dso, sym)
            self.note(c, sym)
        if kernel:
            self.kernel.add(c)
        return c

    def profrun(self, name, module):
        if ADDRESS.match(name) and not module:
            return "[unknown]"
        if name.startswith("[") and name.endswith("]"):
            return name
        c = self.canon(module, name)
        self.note(c, name)
        return c


# ---- perf ------------------------------------------------------------------------------------

VIEWS = {
    "all": "every frame as perf gives it, the kernel's included",
    "user": "perf's kernel frames left out (a sample in a system call goes to the user code "
            "that made it), as profrun samples user and system time without kernel stacks",
    "umode": "only perf's samples taken in user mode, as profrun samples user CPU time only",
}


def perf_shares(samples, names, view):
    """Self and cumulative shares (percent of the samples counted in the view) by name."""
    selfc, cumc = Counter(), Counter()
    n = no_user = kernel_leaf = ended = 0
    for frames in samples:
        fr = [f for f in frames if f[0] != END_OF_CHAIN]
        if len(fr) != len(frames):
            ended += 1
        if fr and is_kernel(fr[0]):
            kernel_leaf += 1
            if view == "umode":
                continue
        if view != "all":
            fr = [f for f in fr if not is_kernel(f)]
        if not fr:
            no_user += 1
            continue
        n += 1
        chain = [names.perf(sym, dso, is_kernel((ip, sym, dso))) for ip, sym, dso in fr]
        selfc[chain[0]] += 1
        for name in set(chain):
            cumc[name] += 1
    pct = lambda c: {k: 100.0 * v / n for k, v in c.items()} if n else {}  # noqa: E731
    return {"self": pct(selfc), "cum": pct(cumc), "samples": n, "raw_samples": len(samples),
            "kernel_leaf_pct": 100.0 * kernel_leaf / len(samples) if samples else 0.0,
            "end_marker_pct": 100.0 * ended / len(samples) if samples else 0.0,
            "dropped": no_user}


# ---- profrun ---------------------------------------------------------------------------------

INFO = re.compile(r"(\d+) samples at ([\d.]+) Hz of (.*?), (\d+) bytes each from the kernel; "
                  r"stacks: (\d+) unwound from their stack copy \((\d+) completed by frame "
                  r"pointers\), (\d+) from frame pointers only")


def profrun_info(stderr):
    """What profrun's info line says, and its warnings and errors."""
    info = {"samples": None, "bytes_each": None, "kernel": None, "basis": "", "warnings": []}
    for line in stderr.splitlines():
        m = INFO.search(line)
        if m:
            info.update(samples=int(m.group(1)), basis=m.group(3), bytes_each=int(m.group(4)),
                        dwarf=int(m.group(5)), spliced=int(m.group(6)), fp_only=int(m.group(7)))
            info["kernel"] = "user and system" in m.group(3)
        elif "level=info" not in line and line.strip():
            info["warnings"].append(line.strip())
    return info


def profreport_shares(profreport, trace, out_json, names):
    """Self and cumulative shares from profreport's JSON table (tottime and cumtime over the
    sum of tottime), and from its folded stacks the exact cumulative shares of the same names
    (a check of the JSON's cumtime once names are merged)."""
    with open(out_json, "w") as f:
        p = subprocess.run([str(profreport), "--no-inline", "--format", "json", "-n", "0", str(trace)],
                           stdout=f, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {shlex.join([str(profreport), '--no-inline', '--format', 'json', '-n', '0', str(trace)])}"
                           f"\n{p.stderr[-2000:]}")
    doc = json.loads(Path(out_json).read_text())
    tot, cum = defaultdict(float), defaultdict(float)
    total = sum(f["tottime"] or 0.0 for f in doc["functions"])
    by_raw = {}
    for f in doc["functions"]:
        name = names.profrun(f["name"], f.get("module", ""))
        by_raw[f["name"]] = name
        tot[name] += f["tottime"] or 0.0
        cum[name] += f["cumtime"] or 0.0
    pct = lambda d: {k: 100.0 * v / total for k, v in d.items()} if total else {}  # noqa: E731
    folded = subprocess.run([str(profreport), "--no-inline", "--export", "collapsed", str(trace)],
                            capture_output=True, text=True)
    fcum, ftotal = defaultdict(float), 0.0
    if folded.returncode == 0:
        for line in folded.stdout.splitlines():
            stack, _, w = line.rpartition(" ")
            try:
                w = float(w)
            except ValueError:
                continue
            ftotal += w
            for name in {by_raw.get(x, names.profrun(x, "")) for x in stack.split(";")}:
                fcum[name] += w
    return {"self": pct(tot), "cum": pct(cum), "total_s": total,
            "folded_cum": {k: 100.0 * v / ftotal for k, v in fcum.items()} if ftotal else {},
            "functions": len(doc["functions"]), "dropped": [t.get("dropped", 0) for t in doc.get("threads", [])]}


# ---- programs --------------------------------------------------------------------------------

def build_sqlite(work, src, variant):
    """sqlite3.c and sqlite_mix.c with gcc -O2 -g (and -fno-omit-frame-pointer for fp), in
    WORK/build-VARIANT; rebuilt when a source or the flags change."""
    out = work / f"build-{variant}"
    out.mkdir(parents=True, exist_ok=True)
    flags = [*CFLAGS, *(FP_FLAGS if variant == "fp" else []), "-I", str(src)]
    stamp = out / "flags.txt"
    changed = not stamp.exists() or stamp.read_text() != shlex.join(flags)
    objs = []
    for source, obj in ((src / "sqlite3.c", out / "sqlite3.o"), (DRIVER, out / "sqlite_mix.o")):
        if changed or stale(obj, [source]):
            log("compile", source=source.name, flags=shlex.join(flags[:-2]))
            t0 = time.monotonic()
            check([CC, *flags, "-c", source, "-o", obj])
            log("compiled", source=source.name, seconds=time.monotonic() - t0)
        objs.append(obj)
    stamp.write_text(shlex.join(flags))
    binary = out / "sqlite_mix"
    if stale(binary, objs):
        check([CC, "-o", binary, *objs, *link_libs(src)])
    return binary


WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at "
         "which but have an they you were her she there been one all we their has would when "
         "if so no will more can said who about out up what some into them time could only new "
         "than other these two may first then do any like my now over such our man me even most "
         "made after also did many before must through back years where much your way well down "
         "should because each just those people how too little state good very make world still "
         "own see men work long get here between both life being under never day same another "
         "know while last might us great old year off come since against go came right used take "
         "three").split()


def generate_text(path, size):
    """Deterministic English-like text of `size` bytes (words, numbers, punctuation)."""
    if path.is_file() and path.stat().st_size == size:
        return
    log("generate", path=path, bytes=size)
    r = random.Random(20240611)
    parts, n = [], 0
    while n < size:
        line = " ".join(r.choice(WORDS) if r.random() < 0.9 else str(r.randrange(100000))
                        for _ in range(r.randint(6, 16)))
        line = line.capitalize() + (". " if r.random() < 0.7 else ", ") + "\n"
        parts.append(line)
        n += len(line)
    data = "".join(parts).encode()[:size]
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def generate_lines(path, lines):
    """Deterministic lines of random words and a number, in random order."""
    stamp = path.with_suffix(".lines")
    if path.is_file() and stamp.is_file() and stamp.read_text() == str(lines):
        return
    log("generate", path=path, lines=lines)
    r = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(r.choice(letters) for _ in range(r.randint(3, 10))) for _ in range(5000)]
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        for _ in range(lines):
            f.write(" ".join(r.choice(vocab) for _ in range(6)) + f" {r.randrange(10**9)}\n")
    tmp.replace(path)
    stamp.write_text(str(lines))


class Program:
    def __init__(self, key, title, argv, perf_modes, cum_target=False, checksum=False):
        self.key, self.title, self.argv = key, title, [str(a) for a in argv]
        self.perf_modes = perf_modes   # "dwarf", and "fp" on the frame-pointer build
        self.cum_target = cum_target
        self.checksum = checksum


# ---- the runs --------------------------------------------------------------------------------

class Bench:
    def __init__(self, work, build, rate, stack_bytes):
        self.work, self.rate, self.stack_bytes = work, rate, stack_bytes
        self.profrun = build / "tools" / "profrun"
        self.profreport = build / "tools" / "profreport"
        self.rundir = work / "run"
        self.outdir = work / "out"
        for d in (self.rundir, self.outdir, work / "tmp"):
            d.mkdir(parents=True, exist_ok=True)
        self.names = Names()
        self.failures = []   # (what, command, output)
        self.checksums = defaultdict(Counter)
        self.env = clean_env()
        self.env["TMPDIR"] = str(work / "tmp")

    def timed(self, program, argv, tag):
        """One run: (Result or None, its stderr)."""
        err = self.rundir / f"{program.key}.{tag}.stderr"
        out = self.rundir / f"{program.key}.{tag}.stdout"
        try:
            r = run(argv, stdout=str(out) if program.checksum else os.devnull,
                    cwd=self.rundir, env=self.env, err_log=str(err))
        except RuntimeError as e:
            self.failures.append((f"{program.key} {tag}", shlex.join(map(str, argv)), str(e)))
            log("FAILED", program=program.key, run=tag, error=str(e).splitlines()[0])
            return None, err.read_text(errors="replace") if err.exists() else ""
        if program.checksum:
            lines = out.read_text(errors="replace").strip().splitlines()
            self.checksums[program.key][lines[-1] if lines else ""] += 1
        return r, err.read_text(errors="replace")

    def plain(self, p, rep):
        r, _ = self.timed(p, p.argv, "plain")
        if r is None:
            return None
        log("plain", program=p.key, rep=rep, wall_s=r.wall, cpu_s=r.cpu)
        return {"wall": r.wall, "cpu": r.cpu}

    def profrun_cmd(self, trace):
        cmd = [self.profrun, "--sample", "--rate", str(self.rate)]
        if self.stack_bytes is not None:
            cmd += ["--stack-bytes", str(self.stack_bytes)]
        return [*map(str, cmd), "-o", str(trace), "-f"]

    def sampled(self, p, rep):
        trace = self.rundir / f"{p.key}.trace"
        argv = [*self.profrun_cmd(trace), "--", *p.argv]
        r, err = self.timed(p, argv, "profrun")
        if r is None:
            return None
        info = profrun_info(err)
        rec = {"wall": r.wall, "cpu": r.cpu, "trace_bytes": trace.stat().st_size, **info}
        try:
            rec.update(profreport_shares(self.profreport, trace,
                                         self.outdir / f"{p.key}.rep{rep}.json", self.names))
        except RuntimeError as e:
            self.failures.append((f"{p.key} profreport", "profreport --format json -n 0 " + str(trace), str(e)))
            return None
        log("profrun", program=p.key, rep=rep, wall_s=r.wall, cpu_s=r.cpu, samples=info["samples"],
            bytes_each=info["bytes_each"], trace_kb=rec["trace_bytes"] / 1e3,
            warnings=len(info["warnings"]))
        return rec

    def perf_record(self, p, rep, mode):
        data = self.rundir / f"{p.key}.{mode}.data"
        data.unlink(missing_ok=True)
        argv = ["perf", "record", "-e", "cpu-clock", "-F", str(self.rate), "--call-graph", mode,
                "-o", str(data), "--", *p.argv]
        r, err = self.timed(p, argv, "perf-" + mode)
        if r is None:
            return None
        rec = {"wall": r.wall, "cpu": r.cpu, "data_bytes": data.stat().st_size,
               "record_notes": [l.strip() for l in err.splitlines()
                                if re.search(r"lost|warning|error", l, re.I)]}
        rec.update(self.perf_read(p.key + "." + mode, data))
        log("perf", program=p.key, rep=rep, mode=mode, wall_s=r.wall, cpu_s=r.cpu,
            samples=rec["all"]["raw_samples"], data_mb=rec["data_bytes"] / 1e6,
            script_s=rec["script_s"])
        return rec

    def perf_read(self, tag, data, pid=None):
        script = self.rundir / f"{tag}.script.txt"
        t0 = time.monotonic()
        p = perf.script(data, script, "--no-inline")
        took = time.monotonic() - t0
        if p.returncode != 0:
            raise SystemExit(f"sample_vs_perf: perf script failed ({p.returncode}) on {data}: "
                             f"{p.stderr[-2000:]}")
        samples = [x.frames for x in perf.read(script, pid)]
        script.unlink()
        rec = {"script_s": took,
               "script_notes": [l.strip() for l in p.stderr.splitlines()
                                if re.search(r"lost|warning|error", l, re.I)]}
        for view in VIEWS:
            rec[view] = perf_shares(samples, self.names, view)
        return rec

    def attach(self, program, rows, seconds):
        """The program started, and after ATTACH_WARMUP seconds perf record -p and profrun
        --pid attached together for `seconds`; the program is killed after both ended."""
        adir = self.rundir / "attach"
        shutil.rmtree(adir, ignore_errors=True)
        adir.mkdir(parents=True)
        argv = [program.argv[0], str(rows), "1", str(adir)]
        log("attach", argv=shlex.join(argv), seconds=seconds)
        with open(adir / "program.out", "w") as out:
            victim = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=adir,
                                      env=self.env)
        time.sleep(ATTACH_WARMUP)
        if victim.poll() is not None:
            self.failures.append(("attach", shlex.join(argv), "the program ended before the "
                                  f"window (exit {victim.returncode}); give it more --rows"))
            return None
        data, trace = adir / "attach.data", adir / "attach.trace"
        perf_cmd = ["perf", "record", "-p", str(victim.pid), "-e", "cpu-clock", "-F", str(self.rate),
                    "--call-graph", "dwarf", "-o", str(data), "--", "sleep", f"{seconds:g}"]
        prof_cmd = [str(self.profrun), "--pid", str(victim.pid), "--duration", f"{seconds:g}",
                    "--rate", str(self.rate), "-o", str(trace), "-f"]
        if self.stack_bytes is not None:
            prof_cmd[-3:-3] = ["--stack-bytes", str(self.stack_bytes)]
        t0 = time.monotonic()
        perf_p = subprocess.Popen(perf_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, env=self.env)
        prof_p = subprocess.Popen(prof_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, env=self.env)
        prof_err = prof_p.communicate()[1]
        prof_end = time.monotonic() - t0
        perf_err = perf_p.communicate()[1]
        perf_end = time.monotonic() - t0
        still_running = victim.poll() is None
        if still_running:
            victim.send_signal(signal.SIGKILL)
        victim.wait()
        rec = {"rows": rows, "seconds": seconds, "program_outlived": still_running,
               "perf_s": perf_end, "profrun_s": prof_end,
               "perf_cmd": shlex.join(perf_cmd), "profrun_cmd": shlex.join(prof_cmd)}
        if not still_running:
            said = (adir / "program.out").read_text(errors="replace")[-2000:]
            rec["program_exit"] = victim.returncode
            if victim.returncode != 0:
                self.failures.append(("attach: the program failed during the window",
                                      shlex.join(argv), f"exit {victim.returncode}\n{said}"))
        ok = True
        if prof_p.returncode != 0:
            self.failures.append(("attach profrun", shlex.join(prof_cmd),
                                  f"exit {prof_p.returncode}\n{prof_err[-3000:]}"))
            ok = False
        # perf record -p ends by SIGTERM when its target exits before the command does.
        perf_ok = perf_p.returncode == 0 or (not still_running and data.exists()
                                            and perf_p.returncode == -signal.SIGTERM)
        if not perf_ok:
            self.failures.append(("attach perf", shlex.join(perf_cmd),
                                  f"exit {perf_p.returncode}\n{perf_err[-3000:]}"))
            ok = False
        if not ok:
            return rec
        rec["profrun_info"] = profrun_info(prof_err)
        rec["perf_notes"] = [l.strip() for l in perf_err.splitlines()
                             if re.search(r"lost|warning|error", l, re.I)]
        rec["perf"] = self.perf_read("attach", data, pid=victim.pid)
        rec["profrun"] = profreport_shares(self.profreport, trace, self.outdir / "attach.json",
                                           self.names)
        rec["trace_bytes"] = trace.stat().st_size
        rec["data_bytes"] = data.stat().st_size
        log("attached", perf_samples=rec["perf"]["all"]["raw_samples"],
            profrun_samples=rec["profrun_info"]["samples"], outlived=still_running)
        shutil.rmtree(adir / "db", ignore_errors=True)
        for f in adir.iterdir():
            if f.suffix not in (".data", ".trace", ".out"):
                f.unlink(missing_ok=True)
        return rec


# ---- summaries -------------------------------------------------------------------------------

def median_shares(dicts):
    names = set().union(*dicts) if dicts else set()
    return {f: med([d.get(f, 0.0) for d in dicts]) for f in names}


def pick(shares_list, floor):
    """Functions above the floor in any of the share dicts, largest first."""
    names = set()
    for s in shares_list:
        names |= {f for f, v in s.items() if v > floor}
    return sorted(names, key=lambda f: (-max(s.get(f, 0.0) for s in shares_list), f))


def within(ref, lib, names, points, ref_reps=None, lib_reps=None):
    """How many of `names` are within `points`; the worst one (with its range over the reps
    in each tool, when given the per-rep share dicts)."""
    diffs = {f: lib.get(f, 0.0) - ref.get(f, 0.0) for f in names}
    worst = max(names, key=lambda f: abs(diffs[f])) if names else None
    n_ok = sum(1 for f in names if abs(diffs[f]) <= points)
    text = f"{n_ok} of {len(names)}" + (f", worst {worst} {diffs[worst]:+.1f}" if worst else "")
    if worst and ref_reps and lib_reps and len(ref_reps) > 1:
        span = lambda rs: f"{min(r.get(worst, 0.0) for r in rs):.1f}-{max(r.get(worst, 0.0) for r in rs):.1f}"  # noqa: E731
        text += f" (over the reps: libprof {span(lib_reps)}, perf {span(ref_reps)})"
    return n_ok == len(names), text


def top(shares):
    return max(shares, key=lambda f: (shares[f], f)) if shares else "-"


def short(name, width=44):
    return name if len(name) <= width else name[:width - 1] + "~"


def pf(x):
    return f"{x:.1f}"


def share_table(lib, refs, names, kernel=()):
    """Rows: function, libprof, then per reference its share and libprof - it. Functions of
    the kernel that libprof does not have (profrun records no kernel frames) are left out of
    the rows and returned in a line of their own (they count in the verdicts all the same)."""
    head = ["function", "libprof"]
    for label, _ in refs:
        head += [label, "diff"]
    rows = []
    kern = [f for f in names if f in kernel and lib.get(f, 0.0) == 0.0]
    line = ""
    if kern:
        line = (f"  + {len(kern)} kernel functions, 0 in libprof (profrun records no kernel frames), "
                f"{refs[0][0]}: " + ", ".join(f"{f} {refs[0][1].get(f, 0.0):.1f}" for f in kern))
    for f in names:
        if f in kern:
            continue
        row = [short(f), pf(lib.get(f, 0.0))]
        for _, ref in refs:
            row += [pf(ref.get(f, 0.0)), f"{lib.get(f, 0.0) - ref.get(f, 0.0):+.1f}"]
        rows.append(row)
    return head, rows, line


def ratio_text(xs):
    xs = [x for x in xs if x == x]
    return f"{med(xs):.3f}x ({min(xs):.3f}-{max(xs):.3f})" if xs else "-"


def summarize_program(p, runs, view, kernel):
    """The printed section of one program and its verdicts."""
    lib_recs = [r for r in runs["profrun"] if r]
    out, verdicts = [], []
    if not lib_recs or not any(runs.get("perf-" + m) for m in p.perf_modes):
        out.append("  (no complete runs: see the failures)")
        return out, verdicts
    l_self = median_shares([r["self"] for r in lib_recs])
    l_cum = median_shares([r["cum"] for r in lib_recs])
    refs_self, refs_cum, ref_of = [], [], {}
    for mode in p.perf_modes:
        recs = [r for r in runs["perf-" + mode] if r]
        for v in ("all", view):
            label = f"perf {mode}" + ("" if v == "all" else "/" + ("u" if v == "user" else "um"))
            s = median_shares([r[v]["self"] for r in recs])
            c = median_shares([r[v]["cum"] for r in recs])
            refs_self.append((label, s))
            refs_cum.append((label, c))
            ref_of[mode, v] = (label, s, c, [r[v]["self"] for r in recs], [r[v]["cum"] for r in recs])
    self_names = pick([l_self] + [s for _, s in refs_self], SHARE_FLOOR)
    cum_names = pick([l_cum] + [c for _, c in refs_cum], SHARE_FLOOR)
    for kind, lib, refs, names_shown in (("self", l_self, refs_self, self_names),
                                         ("cumulative", l_cum, refs_cum, cum_names)):
        head, rows, kline = share_table(lib, refs, names_shown, kernel)
        out.append(f"{kind} shares (%), every function above {SHARE_FLOOR:.0f}% {kind} in either tool:")
        out.append(render_text(head, rows))
        if kline:
            out.append(kline)
        out.append("")
    out.append(f"top function: libprof {l_self and top(l_self)} ({l_self.get(top(l_self), 0):.1f}%); "
               + "; ".join(f"{label} {top(s)} ({s.get(top(s), 0):.1f}%)" for label, s in refs_self))
    out.append("verdicts (against perf --call-graph dwarf; 'as is' = every perf frame, "
               f"'{ref_of['dwarf', view][0]}' = {VIEWS[view]}):")
    for mode in p.perf_modes:
        for v in ("all", view):
            label, s, c, s_reps, c_reps = ref_of[mode, v]
            names_s = pick([l_self, s], SHARE_FLOOR)
            ok_s, txt_s = within(s, l_self, names_s, TARGET_SELF, s_reps,
                                 [r["self"] for r in lib_recs])
            ok_t = top(s) == top(l_self)
            names_c = pick([l_cum, c], SHARE_FLOOR)
            ok_c, txt_c = within(c, l_cum, names_c, TARGET_CUM, c_reps,
                                 [r["cum"] for r in lib_recs])
            target = mode == "dwarf"
            tag = "" if target else " (not a target: perf fp)"
            which = "as is" if v == "all" else label
            out.append(f"  [{which}] every function above {SHARE_FLOOR:.0f}% self within "
                       f"{TARGET_SELF} points: {txt_s}: {verdict(ok_s)}{tag}")
            out.append(f"  [{which}] top function the same: libprof {top(l_self)}, perf {top(s)}: "
                       f"{verdict(ok_t)}{tag}")
            cum_tag = tag if not target else ("" if p.cum_target else
                                              " (not a target on this program)")
            out.append(f"  [{which}] cumulative shares within {TARGET_CUM:.0f} points (above "
                       f"{SHARE_FLOOR:.0f}% in either): {txt_c}: {verdict(ok_c)}{cum_tag}")
            if target:
                verdicts.append((f"{p.key}: self within {TARGET_SELF} [{which}]", ok_s))
                verdicts.append((f"{p.key}: same top function [{which}]", ok_t))
                if p.cum_target:
                    verdicts.append((f"{p.key}: cumulative within {TARGET_CUM:.0f} [{which}]", ok_c))
    # Notes: samples, kernel share, truncation, lost samples, the JSON's cum against folded stacks.
    notes = []
    ls = [r["samples"] for r in lib_recs if r.get("samples") is not None]
    for mode in p.perf_modes:
        recs = [r for r in runs["perf-" + mode] if r]
        if not recs:
            continue
        notes.append(f"perf {mode}: {fmt_int(med([r['all']['raw_samples'] for r in recs]))} samples "
                     f"per run (median), {med([r['all']['kernel_leaf_pct'] for r in recs]):.1f}% of "
                     f"them in the kernel, {med([r['all']['end_marker_pct'] for r in recs]):.1f}% "
                     "ending in perf's ffffffffffffffff marker (an unwinding that stopped on a "
                     "return address it could not follow; the marker is not counted as a frame); "
                     f"{view} view: {fmt_int(med([r[view]['samples'] for r in recs]))} samples")
        lost = sorted({n for r in recs for n in r["record_notes"] + r["script_notes"]})
        notes.append(f"perf {mode} said: " + " | ".join(lost[:6]) if lost else
                     f"perf {mode}: no lost events and no warnings from perf record or perf script")
    if ls:
        n = med(ls)
        half = 196 * (0.1 * 0.9 / n) ** 0.5 if n else float("nan")
        notes.append(f"libprof: {fmt_int(n)} samples per run (median; {lib_recs[0]['basis']}); "
                     f"a 10% share is within +-{half:.1f} points (95%) per run from sampling alone; "
                     f"stacks per run: {fmt_int(med([r.get('dwarf', 0) for r in lib_recs]))} unwound "
                     f"from the copy ({fmt_int(med([r.get('spliced', 0) for r in lib_recs]))} of them "
                     f"completed by frame pointers), {fmt_int(med([r.get('fp_only', 0) for r in lib_recs]))} "
                     "from frame pointers only")
    warns = sorted({w for r in lib_recs for w in r["warnings"]})
    notes.append("profrun said: " + " | ".join(warns[:6]) if warns else
                 "profrun: no lost samples and no warnings")
    dropped = [d for r in lib_recs for d in r.get("dropped", []) if d]
    if dropped:
        notes.append(f"profreport's threads report dropped events: {dropped}")
    fc = median_shares([r["folded_cum"] for r in lib_recs])
    gaps = {f: l_cum.get(f, 0.0) - fc.get(f, 0.0) for f in cum_names}
    worst = max(gaps, key=lambda f: abs(gaps[f])) if gaps else None
    if worst is not None:
        notes.append(f"check: profreport's JSON cumtime against its folded stacks (once per "
                     f"stack, merged names): largest gap {worst} {gaps[worst]:+.2f} points")
    out.append("notes:")
    out += [f"  - {n}" for n in notes]
    return out, verdicts


def overhead_section(programs, runs):
    head = ["program", "alone wall s", "alone CPU s", "profrun wall", "profrun CPU",
            "perf dwarf wall", "perf dwarf CPU", "perf fp wall", "perf fp CPU"]
    rows, verdicts, bytes_rows = [], [], []
    for p in programs:
        r = runs[p.key]
        pairs = lambda kind: [(x, b) for x, b in zip(r.get(kind, []), r["plain"]) if x and b]  # noqa: E731
        def ratios(kind, key):
            return [x[key] / b[key] for x, b in pairs(kind) if b[key] > 0]
        plain = [b for b in r["plain"] if b]
        if not plain:
            continue
        row = [p.key, f"{med([b['wall'] for b in plain]):.2f}", f"{med([b['cpu'] for b in plain]):.2f}"]
        for kind in ("profrun", "perf-dwarf", "perf-fp"):
            row += [ratio_text(ratios(kind, "wall")), ratio_text(ratios(kind, "cpu"))]
        rows.append(row)
        pw, fw = med(ratios("profrun", "wall")), med(ratios("perf-dwarf", "wall"))
        verdicts.append((f"{p.key}: profrun --sample wall <= {TARGET_WALL:.2f}x alone "
                         f"({pw:.3f}x)", pw <= TARGET_WALL))
        verdicts.append((f"{p.key}: profrun --sample wall <= perf record's ({pw:.3f}x vs "
                         f"{fw:.3f}x)", pw <= fw))
        lib = [x for x in r["profrun"] if x and x.get("samples")]
        prf = [x for x in r["perf-dwarf"] if x]
        bytes_rows.append([
            p.key,
            fmt_int(med([x["samples"] for x in lib])) if lib else "-",
            fmt_int(med([x["bytes_each"] for x in lib])) if lib else "-",
            fmt_int(med([x["trace_bytes"] for x in lib])) if lib else "-",
            fmt_int(med([x["trace_bytes"] / x["samples"] for x in lib])) if lib else "-",
            fmt_int(med([x["all"]["raw_samples"] for x in prf])) if prf else "-",
            fmt_int(med([x["data_bytes"] / max(1, x["all"]["raw_samples"]) for x in prf])) if prf else "-",
            f"{med([x['script_s'] for x in prf]):.1f}" if prf else "-",
        ])
    bytes_head = ["program", "profrun samples", "bytes/sample from kernel", "trace bytes", "trace bytes/sample",
                  "perf samples", "perf.data bytes/sample", "perf script s"]
    return head, rows, verdicts, bytes_head, bytes_rows


def attach_section(rec, view, kernel):
    out, verdicts = [], []
    if not rec or "perf" not in rec:
        out.append("  (no attach results: see the failures)")
        return out, verdicts
    lib = rec["profrun"]
    pv = {"all": rec["perf"]["all"], view: rec["perf"][view]}
    labels = {"all": "perf", view: "perf/" + ("u" if view == "user" else "um")}
    names = pick([lib["self"]] + [pv[v]["self"] for v in pv], SHARE_FLOOR)
    head, rows, kline = share_table(lib["self"], [(labels[v], pv[v]["self"]) for v in pv], names,
                                    kernel)
    info = rec["profrun_info"]
    out.append(f"`{rec['perf_cmd']}` and `{rec['profrun_cmd']}` started together, "
               f"{ATTACH_WARMUP:g} s after the program ({fmt_int(rec['rows'])} rows); "
               f"perf ended after {rec['perf_s']:.1f} s, profrun after {rec['profrun_s']:.1f} s; "
               f"the program {'outlived both (killed after)' if rec['program_outlived'] else 'ENDED before them'}")
    out.append(f"samples: perf {fmt_int(rec['perf']['all']['raw_samples'])} "
               f"({rec['perf']['all']['kernel_leaf_pct']:.1f}% in the kernel), profrun "
               f"{fmt_int(info['samples'] or 0)} ({info['basis']}); perf.data "
               f"{fmt_int(rec['data_bytes'])} bytes, trace {fmt_int(rec['trace_bytes'])} bytes")
    said = info["warnings"] + rec["perf_notes"] + rec["perf"].get("script_notes", [])
    out.append("said: " + " | ".join(said) if said else
               "lost samples and warnings: none from perf record, perf script or profrun")
    out.append(f"self shares (%), every function above {SHARE_FLOOR:.0f}% self in either:")
    out.append(render_text(head, rows))
    if kline:
        out.append(kline)
    out.append(f"top function: libprof {top(lib['self'])}, perf {top(pv['all']['self'])}, "
               f"{labels[view]} {top(pv[view]['self'])}")
    for v in pv:
        n = pick([lib["self"], pv[v]["self"]], SHARE_FLOOR)
        ok, txt = within(pv[v]["self"], lib["self"], n, TARGET_ATTACH)
        which = "as is" if v == "all" else labels[v]
        out.append(f"  [{which}] every function above {SHARE_FLOOR:.0f}% self within "
                   f"{TARGET_ATTACH} points: {txt}: {verdict(ok)}")
        verdicts.append((f"attach: self within {TARGET_ATTACH} [{which}]", ok))
    return out, verdicts


# ---- main ------------------------------------------------------------------------------------

def perf_ready():
    if shutil.which("perf") is None:
        sys.exit("sample_vs_perf: perf not found (apt-get install linux-perf)")
    try:
        paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        paranoid = None
    root = os.geteuid() == 0
    if not root and paranoid is not None and paranoid > 1:
        sys.exit(f"sample_vs_perf: perf cannot sample as this user (kernel.perf_event_paranoid="
                 f"{paranoid}); run as root or `sysctl kernel.perf_event_paranoid=1`")
    return f"{'root' if root else 'uid ' + str(os.geteuid())}, kernel.perf_event_paranoid={paranoid}"


def tool_state(build):
    p = build / "tools" / "profrun"
    st = p.stat()
    return {"mtime": datetime.datetime.fromtimestamp(st.st_mtime).isoformat(timespec="seconds"),
            "size": st.st_size, "version": first_line([str(p), "--version"])}


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Example: python3 tools/bench/sample_vs_perf.py --reps 3",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", type=Path, default=REPO / "build",
                    help="build directory holding tools/profrun and tools/profreport "
                         "(default: build/ of this source tree)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/sample_vs_perf"),
                    help="directory for everything this writes (default /tmp/sample_vs_perf)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved reps (default 3)")
    ap.add_argument("--rate", type=int, default=RATE, help=f"samples per second, both tools (default {RATE})")
    ap.add_argument("--stack-bytes", type=int, help="profrun's --stack-bytes (default: profrun's)")
    ap.add_argument("--rows", type=int, default=ROWS, help=f"rows of sqlite_mix (default {ROWS:,})")
    ap.add_argument("--xz-mb", type=float, default=XZ_MB, help=f"MB of text for xz -9 (default {XZ_MB})")
    ap.add_argument("--sort-lines", type=int, default=SORT_LINES,
                    help=f"lines of the file sort sorts (default {SORT_LINES:,})")
    ap.add_argument("--programs", default="fp,nofp,xz,sort",
                    help="comma-separated subset of fp,nofp,xz,sort (default all)")
    ap.add_argument("--attach-seconds", type=float, default=ATTACH_SECONDS,
                    help=f"the attach window D (default {ATTACH_SECONDS:g} s)")
    ap.add_argument("--no-attach", action="store_true", help="skip the attach comparison")
    ap.add_argument("--sqlite-package", default=sqlite.SQLITE_PACKAGE,
                    help="npm package whose tarball holds deps/sqlite3/sqlite3.c")
    ap.add_argument("--sqlite-src", type=Path, help="a directory holding sqlite3.c and sqlite3.h")
    args = ap.parse_args()
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    chosen = [x for x in args.programs.split(",") if x]
    for x in chosen:
        if x not in ("fp", "nofp", "xz", "sort"):
            ap.error(f"unknown program {x!r}")

    build = args.build.resolve()
    for f in ("tools/profrun", "tools/profreport"):
        if not (build / f).exists():
            sys.exit(f"sample_vs_perf: {build / f} not found (ninja -C {build} profrun profreport)")
    repo = REPO
    work = args.work.resolve()
    if work == repo or repo in work.parents:
        sys.exit("sample_vs_perf: --work must be outside the source tree")
    for tool in (CC, "nm", "readelf", "xz", "sort"):
        if shutil.which(tool) is None:
            sys.exit(f"sample_vs_perf: {tool} not found")
    rights = perf_ready()
    work.mkdir(parents=True, exist_ok=True)
    command = shlex.join([os.path.basename(sys.executable), *sys.argv])
    started = datetime.datetime.now().astimezone()
    load_start = loadavg()
    t_start = time.monotonic()
    state_start = tool_state(build)
    log("start", work=work, reps=args.reps, programs=",".join(chosen), perf=rights)

    # ---- programs
    programs = []
    need_sqlite = any(x in chosen for x in ("fp", "nofp")) or not args.no_attach
    src = fetch_sqlite(work, args.sqlite_package, args.sqlite_src) if need_sqlite else None
    variants = sorted({x for x in chosen if x in ("fp", "nofp")} | ({"nofp"} if not args.no_attach else set()))
    binaries = {}
    if variants:
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
            for v, b in zip(variants, ex.map(lambda v: build_sqlite(work, src, v), variants)):
                binaries[v] = b
    rundb = work / "run" / "db"
    rundb.mkdir(parents=True, exist_ok=True)
    if "fp" in chosen:
        programs.append(Program("sqlite-fp", f"SQLite {sqlite_version(src)} + sqlite_mix, "
                                f"{CC} {' '.join(CFLAGS + FP_FLAGS)}, {fmt_int(args.rows)} rows",
                                [binaries["fp"], args.rows, 1, rundb], ["dwarf", "fp"], checksum=True))
    if "nofp" in chosen:
        programs.append(Program("sqlite-nofp", f"SQLite {sqlite_version(src)} + sqlite_mix, "
                                f"{CC} {' '.join(CFLAGS)} (no frame pointers), {fmt_int(args.rows)} rows",
                                [binaries["nofp"], args.rows, 1, rundb], ["dwarf"], cum_target=True,
                                checksum=True))
    inputs = work / "inputs"
    inputs.mkdir(exist_ok=True)
    if "xz" in chosen:
        text = inputs / f"text-{args.xz_mb:g}MB.txt"
        generate_text(text, int(args.xz_mb * 1_000_000))
        programs.append(Program("xz", f"{shutil.which('xz')} -9 -T1 -c of {args.xz_mb:g} MB of "
                                f"generated text ({first_line(['xz', '--version'])})",
                                [shutil.which("xz"), "-9", "-T1", "-c", text], ["dwarf"]))
    if "sort" in chosen:
        lines = inputs / f"lines-{args.sort_lines}.txt"
        generate_lines(lines, args.sort_lines)
        programs.append(Program("sort", f"{shutil.which('sort')} -T WORK/tmp of "
                                f"{fmt_int(args.sort_lines)} generated lines "
                                f"({lines.stat().st_size / 1e6:.0f} MB; {first_line(['sort', '--version'])}, "
                                "its default threads)",
                                [shutil.which("sort"), "-T", work / "tmp", lines], ["dwarf"]))
    prep = time.monotonic() - t_start
    log("ready", seconds=prep)

    b = Bench(work, build, args.rate, args.stack_bytes)
    # One untimed run of each program first: the inputs and binaries in the page cache.
    for p in programs:
        b.timed(p, p.argv, "warmup")
    runs = {p.key: {"plain": [], "profrun": [], **{"perf-" + m: [] for m in p.perf_modes}}
            for p in programs}
    order = random.Random()
    for rep in range(1, args.reps + 1):
        tasks = [(p, kind) for p in programs for kind in runs[p.key]]
        order.shuffle(tasks)
        log("rep", rep=rep, of=args.reps, order=",".join(f"{p.key}:{k}" for p, k in tasks))
        for p, kind in tasks:
            if kind == "plain":
                rec = b.plain(p, rep)
            elif kind == "profrun":
                rec = b.sampled(p, rep)
            else:
                rec = b.perf_record(p, rep, kind.split("-", 1)[1])
            runs[p.key][kind].append(rec)

    attach = None
    if not args.no_attach:
        nofp = next((p for p in programs if p.key == "sqlite-nofp"), None)
        plain_wall = med([r["wall"] for r in runs["sqlite-nofp"]["plain"] if r]) if nofp else None
        if not plain_wall or plain_wall != plain_wall:
            plain_wall = 3.5 * args.rows / ROWS
        factor = max(2, int((args.attach_seconds + ATTACH_WARMUP + 5) / plain_wall) + 1)
        attach_prog = Program("attach", "", [binaries["nofp"]], ["dwarf"])
        attach = b.attach(attach_prog, args.rows * factor, args.attach_seconds)

    # ---- the report: which of perf's views is profrun's
    kernel_flags = {r.get("kernel") for rs in runs.values() for r in rs["profrun"] if r}
    if attach and attach.get("profrun_info"):
        kernel_flags.add(attach["profrun_info"].get("kernel"))
    view = "user" if True in kernel_flags else "umode"
    took = time.monotonic() - t_start
    state_end = tool_state(build)

    print()
    print(f"machine: {machine_line()}; load average {load_start} at start, {loadavg()} at end")
    print(f"tools: {first_line([CC, '--version'])}; {first_line(['perf', '--version'])} ({rights}); "
          f"profrun {state_start['version']} (binary of {state_start['mtime']}); libprof at "
          f"{first_line(['git', '-C', str(repo), 'rev-parse', '--short', 'HEAD'])}"
          + (" with uncommitted changes" if subprocess.run(
              ["git", "--no-optional-locks", "-C", str(repo), "status", "--porcelain", "--", "libprof", "tools"],
              capture_output=True, text=True).stdout.strip() else ""))
    if state_end != state_start:
        print(f"WARNING: profrun was rebuilt during the run ({state_start['mtime']} -> "
              f"{state_end['mtime']}): the reps may mix two builds")
    print(f"date: {started.isoformat(timespec='seconds')}; took {int(took) // 60}:{int(took) % 60:02d} min "
          f"({int(prep)} s fetching, building, generating)")
    print(f"command: {command}")
    print(f"runs: {args.reps} interleaved reps, each in shuffled order: the program alone, "
          f"`profrun --sample --rate {args.rate}{'' if args.stack_bytes is None else ' --stack-bytes ' + str(args.stack_bytes)} "
          f"-o TRACE -f -- PROGRAM`, `perf record -e cpu-clock -F {args.rate} --call-graph dwarf "
          "-o DATA -- PROGRAM` (and --call-graph fp on the fp build)")
    print(f"perf views: 'perf MODE' = {VIEWS['all']}; 'perf MODE/{'u' if view == 'user' else 'um'}' = "
          f"{VIEWS[view]}")
    print(f"shares: medians over reps (0 in a rep without the function), in percent; diff = libprof - perf, "
          "in points")

    all_verdicts = []
    for p in programs:
        print(f"\n== {p.key}: {p.title}\n")
        lines, v = summarize_program(p, runs[p.key], view, b.names.kernel)
        print("\n".join(lines))
        all_verdicts += v
        if p.checksum and b.checksums[p.key]:
            c = b.checksums[p.key]
            print("  - checksums: " + ("every run printed the same line" if len(c) == 1 else
                                       "the runs DIFFER: " + "; ".join(f"{n} x {k}" for k, n in c.items())))

    if attach is not None:
        print(f"\n== attach: SQLite without frame pointers, both tools attached for "
              f"{args.attach_seconds:g} s\n")
        lines, v = attach_section(attach, view, b.names.kernel)
        print("\n".join(lines))
        all_verdicts += v

    head, rows, v, bhead, brows = overhead_section(programs, runs)
    print("\n== overhead: time against the program alone (per-rep ratios: median (min-max))\n")
    print(render_text(head, rows))
    print("\n  bytes per sample (medians):\n")
    print(render_text(bhead, brows))
    print("  - the trace file grows by whole chunks (--chunk-size, 256 KiB by default), so its "
          "bytes per sample are an upper bound at these sample counts")
    print("  - wall and CPU time of profrun include its unwinding after the run and the trace "
          "written; perf record's include writing perf.data but not perf script's unwinding "
          "(its time is the last column)")
    all_verdicts += v

    print("\n== verdicts\n")
    for text, ok in all_verdicts:
        print(f"  {verdict(ok):6s}  {text}")
    merged = {k: sorted(v) for k, v in b.names.merged.items()
              if any(not CLONE.search(x) and VERSION.sub("", x) != k for x in v)}
    if merged:
        print("\n  aliases merged (name: the other names seen): "
              + "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(merged.items())[:30]))
    if b.failures:
        print("\n== FAILURES\n")
        for what, cmd, text in b.failures:
            print(f"  {what}: {cmd}\n    " + "\n    ".join(text.splitlines()[-30:]))

    raw = {"command": command, "date": started.isoformat(), "reps": args.reps, "view": view,
           "programs": {p.key: {"title": p.title, "argv": p.argv} for p in programs},
           "runs": runs, "attach": attach, "verdicts": all_verdicts,
           "failures": b.failures, "profrun": [state_start, state_end]}
    (work / "results.json").write_text(json.dumps(raw, indent=1, default=str))
    print(f"\nraw results: {work / 'results.json'}; profreport's JSON of every rep: {b.outdir}")
    log("done", seconds=took, failures=len(b.failures))
    return 1 if b.failures else 0


if __name__ == "__main__":
    sys.exit(main())
