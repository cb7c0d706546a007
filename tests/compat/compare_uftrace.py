# Checks that libprof (LD_PRELOAD) and uftrace count exactly the same calls per function.
"""Usage: compare_uftrace.py --profreport PATH --libprof PATH/libprof.so --binary BIN
                             [--stdin FILE] [--key symbol|name] [--keep DIR] -- ARGS...

Runs BIN twice with the same arguments and standard input: under `uftrace record` (which preloads
its own cyg hooks) and under LD_PRELOAD=libprof.so. Functions are matched by mangled symbol
(default; ctor/dtor aliases such as C1/C2 that share an address are folded via `nm`) or by
demangled name (--key name). Entries with the same key are summed on both sides, as uftrace
itself merges same-named functions (e.g. static functions of different files). libprof merges
rows with equal name and file:line (e.g. a D0 deleting and a D1 complete destructor), which
--key symbol reports as a difference and --key name does not.
Exit status: 0 all equal, 1 some count differs or is missing on one side, 2 a tool failed."""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

# Count exactly the compiler-inserted hook calls: no PLT library calls, no sched/kernel events,
# and no depth cut-off (the default --max-stack of 1024 would drop deeper frames).
UFTRACE_RECORD = ["uftrace", "record", "--no-libcall", "--no-event", "--max-stack=65535"]


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def run(cmd, stdin_path, env=None):
    with open(stdin_path or os.devnull, "rb") as stdin:
        proc = subprocess.run(cmd, stdin=stdin, stdout=subprocess.PIPE, env=env)
    if proc.returncode != 0:
        fail(f"{' '.join(cmd)} exited with {proc.returncode}")
    return proc.stdout


def alias_map(binary):
    """Map each function symbol to one canonical name among all symbols at its address."""
    try:
        out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    by_addr = collections.defaultdict(set)
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwWiI":
            by_addr[parts[0]].add(parts[2])
    return {name: min(names) for names in by_addr.values() for name in names}


def fold(counts, canon):
    folded = collections.Counter()
    for name, n in counts.items():
        folded[canon.get(name, name)] += n
    return folded


def uftrace_counts(opts, workdir, clean_env):
    data = os.path.join(workdir, "uftrace.data")
    out = run(UFTRACE_RECORD + ["-d", data, opts.binary] + opts.args, opts.stdin, clean_env)
    demangle = "no" if opts.key == "symbol" else "full"
    report = subprocess.run(["uftrace", "report", "-d", data, "-f", "call", "--no-pager",
                             f"--demangle={demangle}"], capture_output=True, text=True, check=True)
    counts = collections.Counter()
    for line in report.stdout.splitlines():
        m = re.match(r"\s*(\d+)\s+(\S.*)$", line)  # "   <calls>  <function>"; headers don't match
        if m:
            counts[m.group(2)] += int(m.group(1))
    return counts, out


def libprof_counts(opts, workdir, clean_env):
    trace = os.path.join(workdir, "libprof.trace")
    env = dict(clean_env, LD_PRELOAD=os.path.abspath(opts.libprof), PROF_OUT=trace)
    out = run([opts.binary] + opts.args, opts.stdin, env)
    report = subprocess.run([opts.profreport, "--format", "json", trace], capture_output=True,
                            text=True, check=True)
    counts = collections.Counter()
    for fn in json.loads(report.stdout)["functions"]:
        key = (fn.get("symbol") or fn["name"]) if opts.key == "symbol" else fn["name"]
        counts[key] += int(fn["ncalls"])
    return counts, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--profreport", required=True)
    ap.add_argument("--libprof", required=True, help="path of libprof.so")
    ap.add_argument("--binary", required=True)
    ap.add_argument("--stdin", help="file to feed as standard input to both runs")
    ap.add_argument("--key", choices=["symbol", "name"], default="symbol")
    ap.add_argument("--keep", help="keep traces in this directory instead of a temp dir")
    ap.add_argument("--limit", type=int, default=50, help="max rows in the difference table")
    ap.add_argument("args", nargs="*", help="arguments of the binary (after --)")
    opts = ap.parse_args()

    clean_env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PROF_OUT")}
    with tempfile.TemporaryDirectory(prefix="compare_uftrace.") as tmp:
        workdir = opts.keep or tmp
        os.makedirs(workdir, exist_ok=True)
        try:
            ut, ut_out = uftrace_counts(opts, workdir, clean_env)
            lp, lp_out = libprof_counts(opts, workdir, clean_env)
        except subprocess.CalledProcessError as e:
            sys.stderr.write(e.stderr or "")
            fail(f"{' '.join(e.cmd)} exited with {e.returncode}")
    if ut_out != lp_out:
        print("warning: the program's output differs between the two runs (non-deterministic?)")

    if opts.key == "symbol":  # fold aliases (C1/C2, D1/D2 at one address) to one name per side
        canon = alias_map(opts.binary)
        ut, lp = fold(ut, canon), fold(lp, canon)

    keys = sorted(set(ut) | set(lp))
    diffs = [k for k in keys if k not in ut or k not in lp or ut[k] != lp[k]]
    diffs.sort(key=lambda k: (-abs(lp.get(k, 0) - ut.get(k, 0)), k))
    if diffs:
        print(f"{'uftrace':>12} {'libprof':>12} {'diff':>10}  function")
        for k in diffs[:opts.limit]:
            u = ut[k] if k in ut else "-"
            p = lp[k] if k in lp else "-"
            print(f"{u:>12} {p:>12} {lp.get(k, 0) - ut.get(k, 0):>+10}  {k}")
        if len(diffs) > opts.limit:
            print(f"... {len(diffs) - opts.limit} more")
    only_ut = sum(k not in lp for k in keys)
    only_lp = sum(k not in ut for k in keys)
    print(f"total calls: uftrace {sum(ut.values())}, libprof {sum(lp.values())}; "
          f"only in uftrace: {only_ut}, only in libprof: {only_lp}")
    print(f"compared {len(keys)} functions: {len(keys) - len(diffs)} equal, {len(diffs)} differ")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
