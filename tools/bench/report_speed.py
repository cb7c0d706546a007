#!/usr/bin/env python3
"""profreport's speed and memory on a real program's trace: SQLite built with -finstrument-functions.

Fetches the SQLite amalgamation at bench time (from the npm registry's better-sqlite3 package,
which ships deps/sqlite3/sqlite3.c; or from --sqlite-src DIR, e.g. `apt-get source sqlite3`),
builds it with -finstrument-functions together with workloads/sqlite_mix.c (inserts in
transactions, index creations, range queries, an ORDER BY that sorts, a join with GROUP BY,
updates, deletes, ANALYZE), links it with the libprof.so of --build, and records traces:

  full     one run of ROWS rows (>= 500 M events and >= 900 functions in a full run)
  eighth   ROWS / 8 rows: the shorter trace of the memory comparison
  parts    N runs of ROWS / N rows each: several traces given to one profreport
  threads  one run of N threads of ROWS / N rows each (a database per thread)

Then it times every view of the profreport of --build on the full and the eighth trace, pinned to
one CPU (taskset -c 0), interleaved (each rep runs every view once, in shuffled order), and
prints per view: median CPU seconds (user + sys from wait4's rusage), events per CPU second,
the ratio to the default table's CPU time (per rep, median), peak memory (VmHWM, RssAnon and
RssFile sampled from /proc/PID/status every 2 ms) on both traces side by side, and the output
size. Last, the scaling where the work is independent: profreport on the parts together and on
the threads trace, wall time pinned to one CPU against allowed two (taskset -c 0,1).

Everything is cached in the work directory (--work): the downloaded package, the SQLite build
and the traces (re-recorded when the program changed, or with --rerecord). Standard library
only; needs gcc (or clang), npm (unless --sqlite-src), taskset, and a built profreport and
libprof.so (`ninja -C build prof profreport`).
"""

import argparse
import datetime
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from libprofbench import sqlite
from libprofbench.build import REPO
from libprofbench.host import loadavg, machine_line
from libprofbench.runner import clean_env, pinned, run
from libprofbench.sqlite import (CFLAGS, FI_FLAGS, SQLITE_PACKAGE, build_program, check, fetch_sqlite,
                                 sqlite_version, tools_line)
from libprofbench.table import fmt_int, med, render_md, render_text


# 256,000 rows give about 560 M events; --quick's trace is the full run's 1/8 trace (cached).
ROWS = {"full": 256_000, "quick": 32_000}
PARTS = 4            # --traces: traces of ROWS / PARTS rows given to one profreport
PROGRAM_THREADS = 4  # --program-threads: threads of ROWS / N rows in the threaded trace

# The targets.
TARGET_EPS = 100e6       # >= 100 M events per CPU second, default table, one core
TARGET_EVENTS = 500e6    # on a trace of >= 500 M events
TARGET_FUNCTIONS = 900   # and >= 900 distinct functions
TARGET_HTML = 1.3        # --html <= 1.3x the table's CPU time

# Views in table order: name -> (profreport options, output file name or None for standard
# output). "{out}" in the options is replaced by the output file's path.
VIEWS = {
    "table": ([], "table.txt"),
    "lines": (["--lines"], "lines.txt"),
    "tree": (["--tree"], "tree.txt"),
    "flamegraph": (["--flamegraph", "{out}"], "flame.svg"),
    "html": (["--html", "{out}"], "report.html"),
    "callgrind": (["--export", "callgrind", "-o", "{out}"], "callgrind.out"),
    "collapsed": (["--export", "collapsed", "-o", "{out}"], "collapsed.txt"),
    "callers": (["--callers", "."], "callers.txt"),
    "threads": (["--threads"], "threads.txt"),
}


def log(msg):
    print(f"report_speed: {msg}", file=sys.stderr, flush=True)


sqlite.log = log  # fetching and building report through the same lines



# ---- traces ----------------------------------------------------------------------------------

class Trace:
    def __init__(self, name, paths, rows, threads, meta):
        self.name, self.paths, self.rows, self.threads = name, paths, rows, threads
        self.events = meta["events"]
        self.functions = meta["functions"]
        self.calls = meta["calls"]
        self.bytes = sum(p.stat().st_size for p in paths)
        self.record = meta["record"]  # [{"wall", "cpu"}] per recorded file


def info_events(profreport, path):
    """The events profreport --info counts (its `thread:` lines end in `N events`), or None."""
    r = subprocess.run([str(profreport), "--info", str(path)], capture_output=True, text=True)
    counts = re.findall(r"^thread:.*?(\d+) events\s*$", r.stdout, re.M)
    return sum(map(int, counts)) if r.returncode == 0 and counts else None


def record(runner, name, rows, threads=1, files=1):
    """The trace(s) of one kind, recorded unless a cached one of the same program and size is
    there. A kind of `files` traces is `files` runs of the program, one trace each."""
    tdir = runner.work / "traces"
    tdir.mkdir(parents=True, exist_ok=True)
    key = {"program": runner.program_key, "rows": rows, "threads": threads, "files": files}
    # Named by size, not by kind: --quick's full trace is a full run's 1/8 trace.
    stem = f"{runner.cc}-{rows}r-{threads}t" + (f"-x{files}" if files > 1 else "")
    paths = [tdir / (f"{stem}.trace" if files == 1 else f"{stem}-{i}.trace") for i in range(files)]
    meta_path = tdir / f"{stem}.json"
    if not runner.rerecord and meta_path.exists() and all(p.exists() for p in paths):
        meta = json.loads(meta_path.read_text())
        if meta.get("key") == key:
            log(f"{name}: using the cached trace{'s' if files > 1 else ''} {paths[0].name}"
                + (f" .. {paths[-1].name}" if files > 1 else ""))
            return Trace(name, paths, rows, threads, meta)
    meta_path.unlink(missing_ok=True)
    recs = []
    for p in paths:
        p.unlink(missing_ok=True)
        env = clean_env()
        env["PROF_OUT"] = str(p)
        log(f"{name}: recording {p.name} ({rows} rows x {threads} thread{'s' if threads > 1 else ''})")
        r = run([runner.binary, rows, threads, runner.rundir], stdout=str(runner.rundir / "program.out"),
                cwd=runner.rundir, env=env, err_log=runner.err_log)
        recs.append({"wall": r.wall, "cpu": r.cpu})
        log(f"{name}: {p.stat().st_size / 1e6:,.0f} MB in {r.wall:.1f} s wall, {r.cpu:.1f} s CPU; "
            + (runner.rundir / "program.out").read_text().strip())
    # The event and function counts, once: events are the sum of threads[].events of the JSON
    # table (what --info counts), functions the table's rows.
    events = functions = calls = 0
    for p in paths:
        doc = json.loads(check([runner.profreport, "--format", "json", "-n", "0", p]))
        n = sum(t["events"] for t in doc["threads"])
        counted = info_events(runner.profreport, p)
        if counted is not None and counted != n:
            log(f"warning: {p.name}: --info counts {counted} events, the JSON table {n}")
        events += n
        calls += doc["total_calls"]
        functions = max(functions, len(doc["functions"]))
    meta = {"key": key, "events": events, "functions": functions, "calls": calls, "record": recs}
    meta_path.write_text(json.dumps(meta, indent=1))
    return Trace(name, paths, rows, threads, meta)


class Runner:
    def __init__(self, work, build, binary, program_key, cc, rerecord):
        self.work, self.build, self.binary, self.cc = work, build, binary, cc
        self.program_key = program_key
        self.rerecord = rerecord
        self.profreport = build / "tools" / "profreport"
        self.rundir = work / "run"
        self.outdir = work / "out"
        for d in (self.rundir, self.outdir):
            d.mkdir(parents=True, exist_ok=True)
        self.err_log = str(work / "last-stderr.txt")

    def view(self, view, trace, cpus="0", sample=True):
        """One run of profreport's `view` on the trace(s), pinned to `cpus`: (Result, output
        bytes)."""
        options, out_name = VIEWS[view]
        out = self.outdir / f"{trace.name}.{out_name}"
        writes_file = any("{out}" in o for o in options)
        argv = [self.profreport, *[o.replace("{out}", str(out)) for o in options], *trace.paths]
        out.unlink(missing_ok=True)
        r = run(pinned(argv, cpus), stdout=os.devnull if writes_file else str(out),
                cwd=self.rundir, err_log=self.err_log,
                sample=self.profreport.name if sample else None)
        return r, out.stat().st_size if out.exists() else 0


# ---- the report ------------------------------------------------------------------------------

def per_rep_ratio(xs, ys):
    return med([x / y for x, y in zip(xs, ys) if y > 0])


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Example: python3 tools/bench/report_speed.py --build build --work /tmp/report-speed "
               "--markdown /tmp/report-speed.md",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", type=Path, default=REPO / "build",
                    help="build directory holding tools/profreport and libprof/libprof.so "
                         "(default: build/ of this source tree)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/libprof-report-speed"),
                    help="scratch directory: download, SQLite build, traces, outputs "
                         "(default /tmp/libprof-report-speed; kept between runs as a cache)")
    ap.add_argument("--quick", action="store_true",
                    help=f"smaller traces ({ROWS['quick']:,} rows instead of {ROWS['full']:,}) "
                         "and 2 reps: a smoke run")
    ap.add_argument("--reps", type=int, help="timed reps of every run (default 3, 2 with --quick)")
    ap.add_argument("--rows", type=int, help="rows of the full trace (default: the size above)")
    ap.add_argument("--views", default=",".join(VIEWS),
                    help="comma-separated subset of " + ",".join(VIEWS) + " (default: all; the "
                         "table always runs, the other views' ratios are to it)")
    ap.add_argument("--traces", type=int, default=PARTS,
                    help=f"traces given to one profreport in the scaling runs (default {PARTS})")
    ap.add_argument("--program-threads", type=int, default=PROGRAM_THREADS,
                    help=f"threads of the multi-threaded trace (default {PROGRAM_THREADS})")
    ap.add_argument("--no-scaling", action="store_true", help="skip the one-CPU/two-CPU runs")
    ap.add_argument("--cc", choices=sorted(FI_FLAGS), default="gcc",
                    help="compiler of SQLite and the driver (default gcc: -finstrument-functions "
                         "with the exclude list; clang: -finstrument-functions-after-inlining)")
    ap.add_argument("--sqlite-package", default=SQLITE_PACKAGE,
                    help=f"npm package whose tarball holds deps/sqlite3/sqlite3.c (default {SQLITE_PACKAGE})")
    ap.add_argument("--sqlite-src", type=Path,
                    help="a directory holding sqlite3.c and sqlite3.h instead of the package")
    ap.add_argument("--rerecord", action="store_true", help="record the traces again")
    ap.add_argument("--markdown", type=Path, help="also write the figures as a Markdown section")
    args = ap.parse_args()

    views = [v for v in args.views.split(",") if v]
    for v in views:
        if v not in VIEWS:
            ap.error(f"unknown view {v!r} (choose from {', '.join(VIEWS)})")
    views = ["table"] + [v for v in VIEWS if v in views and v != "table"]
    reps = args.reps if args.reps is not None else (2 if args.quick else 3)
    if reps < 1 or args.traces < 1 or args.program_threads < 1:
        ap.error("--reps, --traces and --program-threads must be at least 1")
    if shutil.which("taskset") is None:
        sys.exit("report_speed: taskset not found (apt-get install util-linux)")
    if shutil.which(args.cc) is None:
        sys.exit(f"report_speed: {args.cc} not found")
    build = args.build.resolve()
    if not (build / "tools" / "profreport").exists():
        sys.exit(f"report_speed: {build}/tools/profreport not found (ninja -C {build} prof profreport)")
    repo = REPO
    work = args.work.resolve()
    if work == repo or repo in work.parents and not str(work).startswith(str(build)):
        sys.exit("report_speed: --work must be outside the source tree (or under the build directory)")
    work.mkdir(parents=True, exist_ok=True)
    command = shlex.join([os.path.basename(sys.executable), *sys.argv])
    started = datetime.datetime.now().astimezone()
    load_start = loadavg()
    t_start = time.monotonic()

    src = fetch_sqlite(work, args.sqlite_package, args.sqlite_src)
    binary, program_key = build_program(work, src, args.cc, build)
    runner = Runner(work, build, binary, program_key, args.cc, args.rerecord)
    rows = args.rows or ROWS["quick" if args.quick else "full"]
    full = record(runner, "full", rows)
    eighth = record(runner, "eighth", max(1, rows // 8))
    scaling = []
    if not args.no_scaling:
        scaling.append(record(runner, "parts", max(1, rows // args.traces), files=args.traces))
        scaling.append(record(runner, "threads", max(1, rows // args.program_threads),
                              threads=args.program_threads))
    prep = int(time.monotonic() - t_start)
    for t in (full, eighth, *scaling):
        log(f"{t.name}: {fmt_int(t.events)} events, {t.functions} functions, "
            f"{t.bytes / 1e6:,.0f} MB in {len(t.paths)} file{'s' if len(t.paths) > 1 else ''}")

    # Warm-up: every trace read once, so that all timed runs find it in the page cache.
    for t in (full, eighth, *scaling):
        for p in t.paths:
            with open(p, "rb") as f:
                while f.read(1 << 24):
                    pass

    # The views on both lengths, interleaved: runs[trace][view] = [(Result, output bytes)].
    runs = {t.name: {v: [] for v in views} for t in (full, eighth)}
    order = random.Random()
    for rep in range(reps):
        log(f"views: rep {rep + 1}/{reps}")
        for t in (full, eighth):
            shuffled = views[:]
            order.shuffle(shuffled)
            for v in shuffled:
                runs[t.name][v].append(runner.view(v, t))
        log(f"views: rep {rep + 1}: table {runs['full']['table'][-1][0].cpu:.2f} CPU s on the full trace")

    # Scaling: the same runs pinned to one CPU and allowed two, alternating.
    scale_runs = {t.name: {"1": [], "2": []} for t in scaling}
    for rep in range(reps if scaling else 0):
        log(f"scaling: rep {rep + 1}/{reps}")
        for t in scaling:
            for cpus in order.sample(["1", "2"], 2):
                r, _ = runner.view("table", t, cpus="0" if cpus == "1" else "0,1", sample=False)
                scale_runs[t.name][cpus].append(r)

    # ---- tables
    st = {name: {v: {"cpu": med([r.cpu for r, _ in rs]), "wall": med([r.wall for r, _ in rs]),
                     "hwm": max(r.hwm for r, _ in rs), "anon": max(r.anon for r, _ in rs),
                     "file": max(r.filed for r, _ in rs), "out": max(s for _, s in rs),
                     "cpus": [r.cpu for r, _ in rs]}
                 for v, rs in by_view.items()}
          for name, by_view in runs.items()}
    speed_head = ["view", "command", "median CPU s", "median wall s", "M events / CPU s",
                  "CPU ratio to the table", "output bytes"]
    speed_rows = []
    for v in views:
        s = st["full"][v]
        ratio = per_rep_ratio(s["cpus"], st["full"]["table"]["cpus"])
        options = " ".join(VIEWS[v][0]).replace("{out}", "F")
        speed_rows.append([v, f"`profreport {options + ' ' if options else ''}TRACE`",
                           f"{s['cpu']:.2f}", f"{s['wall']:.2f}", f"{full.events / s['cpu'] / 1e6:.1f}",
                           f"{ratio:.2f}x", fmt_int(s["out"])])
    mem_head = ["view", "VmHWM MiB: 1/8 / full", "RssAnon MiB: 1/8 / full",
                "RssFile MiB: 1/8 / full", "M events / CPU s: 1/8 / full"]
    mem_rows = []
    for v in views:
        a, b = st["eighth"][v], st["full"][v]
        mem_rows.append([v, f"{a['hwm']:.1f} / {b['hwm']:.1f}", f"{a['anon']:.1f} / {b['anon']:.1f}",
                         f"{a['file']:.1f} / {b['file']:.1f}",
                         f"{eighth.events / a['cpu'] / 1e6:.1f} / {full.events / b['cpu'] / 1e6:.1f}"])
    scale_head = ["input", "events", "median wall s, 1 CPU", "median wall s, 2 CPUs",
                  "wall 1 CPU / 2 CPUs", "median CPU s, 1 CPU / 2 CPUs", "CPUs used (CPU / wall), 2 CPUs"]
    scale_rows = []
    for t in scaling:
        one, two = scale_runs[t.name]["1"], scale_runs[t.name]["2"]
        w1, w2 = med([r.wall for r in one]), med([r.wall for r in two])
        what = (f"{len(t.paths)} traces of {fmt_int(t.rows)} rows, one profreport" if t.name == "parts"
                else f"{t.threads} threads x {fmt_int(t.rows)} rows, one trace")
        scale_rows.append([what, fmt_int(t.events), f"{w1:.2f}", f"{w2:.2f}",
                           f"{per_rep_ratio([r.wall for r in one], [r.wall for r in two]):.2f}x",
                           f"{med([r.cpu for r in one]):.2f} / {med([r.cpu for r in two]):.2f}",
                           f"{med([r.cpu / r.wall for r in two]):.2f}"])

    # ---- verdicts and notes
    eps = full.events / st["full"]["table"]["cpu"]
    notes = [
        f"target >= {TARGET_EPS / 1e6:.0f} M events per CPU second (default table, one core) on "
        f">= {TARGET_EVENTS / 1e6:.0f} M events and >= {TARGET_FUNCTIONS} functions: "
        f"{eps / 1e6:.1f} M events/s on {fmt_int(full.events)} events and {full.functions} functions; "
        + ("met" if eps >= TARGET_EPS else f"NOT met ({TARGET_EPS / eps:.2f}x short)")
        + ("" if full.events >= TARGET_EVENTS and full.functions >= TARGET_FUNCTIONS
           else " (the trace is smaller than the target's)")]
    if "html" in views:
        h = per_rep_ratio(st["full"]["html"]["cpus"], st["full"]["table"]["cpus"])
        notes.append(f"target --html <= {TARGET_HTML}x the table's CPU time: {h:.2f}x; "
                     + ("met" if h <= TARGET_HTML else "NOT met"))
    worst = max(views, key=lambda v: st["full"][v]["anon"] - st["eighth"][v]["anon"])
    a0, a1 = st["eighth"][worst]["anon"], st["full"][worst]["anon"]
    bounded = all(st["full"][v]["anon"] <= st["eighth"][v]["anon"] * 1.5 + 8 for v in views)
    notes.append(f"memory bounded by functions and stacks, not trace length: the heap (RssAnon) "
                 f"grows most in `{worst}`, {a0:.1f} -> {a1:.1f} MiB for "
                 f"{full.events / eighth.events:.1f}x the events; "
                 + ("bounded in every view" if bounded else "NOT bounded (over 1.5x + 8 MiB)")
                 + "; RssFile is the mapped trace, page cache the kernel can reclaim")
    rec = full.record[0]
    notes.append(f"recording the full trace: {rec['wall']:.1f} s wall, {rec['cpu']:.1f} s CPU "
                 f"({fmt_int(full.calls)} calls, {full.bytes / 1e9:.2f} GB, "
                 f"{full.bytes / full.events:.2f} B/event)")
    for t in (full, eighth, *scaling):
        notes.append(f"trace {t.name}: {fmt_int(t.events)} events, {t.functions} functions, "
                     f"{fmt_int(t.bytes)} bytes: " + ", ".join(str(p) for p in t.paths))

    took = int(time.monotonic() - t_start)
    cc_flags = shlex.join([*CFLAGS, *FI_FLAGS[args.cc]])
    source = (f"SQLite {sqlite_version(src)} from "
              + (str(src) if args.sqlite_src else f"npm package {args.sqlite_package}"))
    header = [("machine", machine_line()),
              ("tools", tools_line(repo, build, args.cc)),
              ("program", f"{source}, built `{args.cc} {cc_flags}` with "
                          f"tools/bench/workloads/sqlite_mix.c, {fmt_int(rows)} rows"),
              ("date", f"{started.isoformat(timespec='seconds')} (took {took // 60}:{took % 60:02d} "
                       f"min, of which {prep // 60}:{prep % 60:02d} fetching, building and recording or finding "
                       f"them cached; load average {load_start} at start, "
                       f"{loadavg()} at end)"),
              ("command", f"`{command}`"),
              ("reps", f"{reps} timed runs of each view, interleaved in shuffled order, after "
                       "reading every trace once into the page cache")]
    title_speed = (f"views on the full trace ({fmt_int(full.events)} events, {full.functions} "
                   f"functions, {full.bytes / 1e9:.2f} GB), taskset -c 0")
    title_mem = (f"peak memory: the 1/8 trace ({fmt_int(eighth.events)} events) and the full "
                 f"trace ({fmt_int(full.events)} events), taskset -c 0")
    title_scale = "scaling where the work is independent: the table, taskset -c 0 vs taskset -c 0,1"
    sections = [(title_speed, speed_head, speed_rows), (title_mem, mem_head, mem_rows)]
    if scaling:
        sections.append((title_scale, scale_head, scale_rows))
    footnotes = [
        "events: the sum of threads[].events of profreport's JSON table, the count --info "
        "shows (an enter and an exit per call); functions: the JSON table's rows",
        "CPU s: user + sys of profreport from wait4's rusage; M events / CPU s = events / median "
        "CPU s; ratio: median over reps of the view's CPU time / the table's in the same rep",
        "memory: VmHWM (the process's peak resident set), RssAnon (heap and other anonymous "
        "memory) and RssFile (file pages, mostly the mapped trace) from /proc/PID/status every "
        "2 ms, the largest over the reps",
        "outputs: text views to a file in the work directory, the others with their own file "
        "option (F); --callers . asks for the callers of every function; --lines has no "
        "PROF_LINE site in this program: it reads the trace and finds none",
        "scaling: wall time of the same command pinned to one CPU / allowed both, median over "
        "reps of the per-rep ratio; a profreport that does not use a second core gives ~1.0x",
    ]

    print()
    print("\n".join(f"{k}: {v.strip('`')}" for k, v in header))
    for title, head, rows_ in sections:
        print(f"\n== {title}\n")
        print(render_text(head, [[c.strip("`") for c in r] for r in rows_]))
    print()
    for line in notes + footnotes:
        print(f"- {line}")

    if args.markdown:
        md = [f"## profreport on a real program's trace: SQLite {sqlite_version(src)}", ""]
        md += [f"- {k}: {v}" for k, v in header]
        for title, head, rows_ in sections:
            md += ["", f"### {title}", "", render_md(head, rows_)]
        md += [""] + [f"- {line}" for line in notes] + [""] + [f"- {line}" for line in footnotes]
        args.markdown.write_text("\n".join(md) + "\n")
        log(f"wrote {args.markdown}")

    raw = {"command": command, "machine": machine_line(), "date": started.isoformat(),
           "traces": {t.name: {"paths": [str(p) for p in t.paths], "events": t.events,
                               "functions": t.functions, "calls": t.calls, "bytes": t.bytes,
                               "record": t.record} for t in (full, eighth, *scaling)},
           "views": {name: {v: [dict(r.as_dict(), output_bytes=s) for r, s in rs]
                            for v, rs in by_view.items()} for name, by_view in runs.items()},
           "scaling": {name: {c: [r.as_dict() for r in rs] for c, rs in d.items()}
                       for name, d in scale_runs.items()}}
    results = work / ("results-quick.json" if args.quick else "results.json")
    results.write_text(json.dumps(raw, indent=1))
    log(f"raw figures: {results}; took {took // 60}:{took % 60:02d} min")


if __name__ == "__main__":
    main()
