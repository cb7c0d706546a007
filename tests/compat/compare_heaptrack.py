# Compares libprofmem's memory summary (profreport --memory) with heaptrack's for one program run.
"""Usage: compare_heaptrack.py --profreport PATH --libprofmem PATH/libprofmem.so
                               [--stdin FILE] [--cwd DIR] [--startup-diff N] [--keep DIR]
                               [--heaptrack PATH] [--heaptrack-print PATH] [--no-plain]
                               -- CMD ARGS...

Runs CMD three times with the same arguments, standard input and working directory: once plain
(its output and exit status are the reference; skipped with --no-plain), once under `heaptrack`
and once with LD_PRELOAD=libprofmem.so (PROF_OUT in a scratch directory). It then reads
heaptrack_print's summary lines and `profreport --memory --format json`'s summary and prints them
side by side with the difference (libprof - heaptrack) and the ratio (libprof / heaptrack):

  allocation calls     "calls to allocation functions" / summary.allocations
  temporary            "temporary memory allocations" / summary.temporary_allocations
  temporary (live)     heaptrack's own "heaptrack stats" line at the end of the run
  peak heap            "peak heap memory consumption" / summary.peak_heap
  leaked bytes         "total memory leaked" / summary.leaked_bytes
  leaked blocks        heaptrack stats "leaked allocations" / summary.leaked_blocks

heaptrack_print rounds bytes to two decimals of 1000-based units (e.g. "138.77K"); a libprof figure
within that rounding of heaptrack's is treated as equal. heaptrack_print counts a free as temporary
when the previous allocation had the same size and call stack (it does not keep pointers), while
heaptrack's live stats and libprof compare pointers; both heaptrack figures are shown. heaptrack's
built-in and embedded leak suppressions are disabled so that leaks are comparable (libprof has none).

Only the process started is compared: heaptrack does not trace children (it removes LD_PRELOAD),
libprofmem writes one `<trace>.<pid>` per forked or exec'd child, which are listed.

Exit status: 0 all checks pass; 1 allocation calls differ by more than --startup-diff (default 0),
or peak heap or leaked bytes differ by more than 1%, or the program's output or exit status under
libprofmem differs from the plain run; 2 a tool failed."""
import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOLERANCE = 0.01  # relative, for peak heap and leaked bytes
UNIT = {"B": 1, "K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4}


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def run(cmd, args, env, stdout_path, stderr_path):
    """Runs cmd with the comparison's stdin and cwd; returns its exit status."""
    with open(args.stdin or os.devnull, "rb") as stdin, open(stdout_path, "wb") as out, \
            open(stderr_path, "wb") as err:
        try:
            proc = subprocess.run(cmd, stdin=stdin, stdout=out, stderr=err, env=env, cwd=args.cwd,
                                  timeout=args.timeout)
        except FileNotFoundError as e:
            fail(f"cannot run {cmd[0]}: {e}")
        except subprocess.TimeoutExpired:
            fail(f"{' '.join(cmd)} did not finish within {args.timeout} s")
    return proc.returncode


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def parse_bytes(text):
    """heaptrack's formatBytes: '123B', '138.77K', '-1.50M'. Returns (bytes, rounding half-width)."""
    m = re.fullmatch(r"(-?[0-9.]+)([BKMGT])", text.strip())
    if not m:
        raise ValueError(f"unexpected byte figure {text!r}")
    unit = UNIT[m.group(2)]
    value = float(m.group(1)) * unit
    return round(value), (0 if unit == 1 else unit * 0.005)


def heaptrack_summary(print_output, run_stderr):
    s = {}
    patterns = {
        "allocations": r"^calls to allocation functions: (\d+)",
        "temporary": r"^temporary memory allocations: (\d+)",
        "peak_heap": r"^peak heap memory consumption: (\S+)",
        "leaked_bytes": r"^total memory leaked: (\S+)",
    }
    for key, pattern in patterns.items():
        m = re.search(pattern, print_output, re.M)
        if not m:
            fail(f"heaptrack_print output has no {key} line")
        if key in ("peak_heap", "leaked_bytes"):
            s[key], s[key + "_rounding"] = parse_bytes(m.group(1))
        else:
            s[key] = int(m.group(1))
    # heaptrack_interpret's stats at the end of the run (pointer-based temporary count).
    stats = run_stderr.rsplit("heaptrack stats:", 1)
    if len(stats) == 2:
        for key, label in (("live_allocations", "allocations"), ("leaked_blocks", "leaked allocations"),
                           ("temporary_live", "temporary allocations")):
            m = re.search(rf"^\s*{label}:\s*(\d+)", stats[1], re.M)
            if m:
                s[key] = int(m.group(1))
    return s


def fmt(v):
    return "-" if v is None else f"{v:,}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profreport", required=True)
    ap.add_argument("--libprofmem", required=True)
    ap.add_argument("--heaptrack", default="heaptrack")
    ap.add_argument("--heaptrack-print", default="heaptrack_print")
    ap.add_argument("--stdin", help="file given to every run as standard input (default /dev/null)")
    ap.add_argument("--cwd", help="working directory of every run")
    ap.add_argument("--startup-diff", type=int, default=0,
                    help="allowed difference in allocation calls (default 0)")
    ap.add_argument("--keep", help="directory for the traces and outputs (default: a removed temp dir)")
    ap.add_argument("--no-plain", action="store_true", help="skip the plain reference run")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("no command given after --")
    libprofmem = os.path.abspath(args.libprofmem)
    if not os.path.exists(libprofmem):
        fail(f"{libprofmem} does not exist")

    work = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="compare_heaptrack.")
    os.makedirs(work, exist_ok=True)
    try:
        return compare(args, cmd, libprofmem, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def compare(args, cmd, libprofmem, work):
    base_env = dict(os.environ)
    for var in ("PROF_OUT", "DUMP_HEAPTRACK_OUTPUT"):
        base_env.pop(var, None)
    p = lambda name: os.path.join(work, name)

    plain_rc = None
    if not args.no_plain:
        plain_rc = run(cmd, args, base_env, p("plain.out"), p("plain.err"))

    # heaptrack: the script prints its own messages to stdout and the interpreter's stats to stderr.
    ht_base = p("heaptrack")
    for old in glob.glob(ht_base + ".*"):
        os.remove(old)
    ht_rc = run([args.heaptrack, "-o", ht_base] + cmd, args, base_env, p("heaptrack.out"),
                p("heaptrack.err"))
    ht_files = [f for f in glob.glob(ht_base + ".*") if re.search(r"\.(zst|gz)$", f)]
    if len(ht_files) != 1:
        fail(f"expected one heaptrack data file {ht_base}.*, found {ht_files} (exit status {ht_rc})")
    printed = subprocess.run([args.heaptrack_print, "-p", "0", "-a", "0", "-T", "0",
                              "--disable-builtin-suppressions", "--disable-embedded-suppressions",
                              ht_files[0]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if printed.returncode != 0:
        fail(f"heaptrack_print failed: {printed.stderr.strip()}")
    with open(p("heaptrack.err"), errors="replace") as f:
        ht = heaptrack_summary(printed.stdout, f.read())

    # libprofmem, loaded like heaptrack loads its own library: first in LD_PRELOAD.
    trace = p("libprof.trace")
    for old in glob.glob(trace) + glob.glob(trace + ".*"):  # a kept directory from an earlier run
        os.remove(old)
    env = dict(base_env)
    env["LD_PRELOAD"] = libprofmem + (":" + base_env["LD_PRELOAD"] if base_env.get("LD_PRELOAD") else "")
    env["PROF_OUT"] = trace
    lp_rc = run(cmd, args, env, p("libprof.out"), p("libprof.err"))
    if not os.path.exists(trace):
        fail(f"libprofmem wrote no trace {trace} (exit status {lp_rc})")
    rep = subprocess.run([args.profreport, "--memory", "--format", "json", trace],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if rep.returncode != 0:
        fail(f"profreport failed ({rep.returncode}): {rep.stderr.strip()}")
    try:
        lp = json.loads(rep.stdout)["summary"]
    except (ValueError, KeyError) as e:
        fail(f"cannot read profreport's JSON: {e}")
    children = sorted(os.path.basename(f) for f in glob.glob(trace + ".*"))

    # ---- table --------------------------------------------------------------------------------
    print(f"command: {' '.join(cmd)}")
    rows = [
        ("allocation calls", ht["allocations"], lp.get("allocations"), "count"),
        ("temporary", ht["temporary"], lp.get("temporary_allocations"), None),
        ("temporary (live)", ht.get("temporary_live"), lp.get("temporary_allocations"), None),
        ("peak heap", ht["peak_heap"], lp.get("peak_heap"), "peak_heap"),
        ("leaked bytes", ht["leaked_bytes"], lp.get("leaked_bytes"), "leaked_bytes"),
        ("leaked blocks", ht.get("leaked_blocks"), lp.get("leaked_blocks"), None),
    ]
    header = f"{'':18} {'heaptrack':>14} {'libprof':>14} {'difference':>12} {'ratio':>8}  check"
    print(header)
    print("-" * len(header))
    failed = []
    for name, h, l, check in rows:
        diff = None if h is None or l is None else l - h
        ratio = "-" if diff is None else ("1.0000" if h == l else (f"{l / h:.4f}" if h else "inf"))
        verdict = ""
        if check == "count":
            ok = diff is not None and abs(diff) <= args.startup_diff
            verdict = "ok" if ok else f"FAIL (allowed {args.startup_diff})"
        elif check:
            rounding = ht[check + "_rounding"]
            # distance from heaptrack's rounding interval, against 1% of heaptrack's figure
            off = max(0.0, abs(diff) - rounding)
            ok = off <= TOLERANCE * abs(h)
            verdict = "ok" if ok else "FAIL (> 1%)"
            if rounding:
                verdict += f"  (heaptrack rounded to +-{rounding:,.0f} B)"
        if verdict.startswith("FAIL"):
            failed.append(name)
        shown_h = fmt(h) if check not in ("peak_heap", "leaked_bytes") or not ht[check + "_rounding"] \
            else "~" + fmt(h)
        print(f"{name:18} {shown_h:>14} {fmt(l):>14} {fmt(diff):>12} {ratio:>8}  {verdict}")

    print()
    print(f"libprof: frees {fmt(lp.get('frees'))}, unknown frees {fmt(lp.get('unknown_frees'))}, "
          f"bytes allocated {fmt(lp.get('bytes_allocated'))}")
    if ht.get("live_allocations") is not None and ht["live_allocations"] != ht["allocations"]:
        print(f"heaptrack: its live stats counted {ht['live_allocations']} allocations")
    if children:
        print(f"libprof child traces (not compared; heaptrack does not trace children): "
              f"{', '.join(children)}")
    statuses = f"exit status: heaptrack run {ht_rc}, libprof run {lp_rc}"
    if plain_rc is not None:
        statuses += f", plain run {plain_rc}"
    print(statuses)
    if plain_rc is not None:
        if lp_rc != plain_rc:
            failed.append("exit status")
            print("FAIL: the exit status under libprofmem differs from the plain run")
        if digest(p("plain.out")) != digest(p("libprof.out")):
            failed.append("output")
            print("FAIL: standard output under libprofmem differs from the plain run")
    if args.keep:
        print(f"kept in {work}")
    if failed:
        print(f"differences: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
