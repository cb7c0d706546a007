"""The marked-lines case of true_shares.py: snappy's CompressFragment with PROF_FUNCTION(), a
PROF_SCOPE around its scan loop and five PROF_LINEs (issue 31's case), built with GCC -O2 -g and
linked with libprof only (no -finstrument-functions); the same file with -DPROF_DISABLE is the
truth's build. Per rep: perf record --call-graph dwarf of the unmarked build, a plain run of it,
and profrun of the marked one read with profreport --lines --format json.

The truth: each perf sample goes to its first program frame (libc's memcpy to the code that
called it); `addr2line -i` of that address gives the function it is code of, outermost first,
and the line of that function it is at (the line a function inlined there was called from).
CompressFragment's time is its samples' share times the plain run's CPU time; a line's share is
its samples over CompressFragment's."""

import os
import subprocess
from collections import defaultdict

from . import perf
from .build import REPO, check, stale
from .sqlite import CFLAGS
from .table import med

FUNCTION = "CompressFragment"
FIND_MATCH = "FindMatchLength"  # the line the target names

# (text, replacement) pairs applied to snappy 1.1.7's snappy.cc, each found exactly once.
EDITS = [
    ('#include "snappy.h"\n', '#include "snappy.h"\n#include <prof/prof.hpp>\n'),
    ('                       const int table_size) {\n  // "ip" is the input pointer',
     '                       const int table_size) {\n  PROF_FUNCTION();\n  // "ip" is the input pointer'),
    ("      const char* candidate;\n      do {\n",
     '      const char* candidate;\n      {\n      PROF_SCOPE("scan for 4-byte match");\n      do {\n'),
    ("                                 UNALIGNED_LOAD32(candidate)));\n",
     "                                 UNALIGNED_LOAD32(candidate)));\n      }\n"),
    ("      op = EmitLiteral(op, next_emit, ip - next_emit, true);\n",
     "      PROF_LINE(op = EmitLiteral(op, next_emit, ip - next_emit, true));\n"),
    ("        std::pair<size_t, bool> p =\n            FindMatchLength(candidate + 4, ip + 4, ip_end);\n",
     "        PROF_LINE(std::pair<size_t, bool> p = FindMatchLength(candidate + 4, ip + 4, ip_end));\n"),
    ("        op = EmitCopy(op, offset, matched, p.second);\n",
     "        PROF_LINE(op = EmitCopy(op, offset, matched, p.second));\n"),
    ("        input_bytes = GetEightBytesAt(ip - 1);\n",
     "        PROF_LINE(input_bytes = GetEightBytesAt(ip - 1));\n"),
    ("        uint32 prev_hash = HashBytes(GetUint32AtOffset(input_bytes, 0), shift);\n",
     "        PROF_LINE(uint32 prev_hash = HashBytes(GetUint32AtOffset(input_bytes, 0), shift));\n"),
]


def marked_source(snappy_cc, out):
    """snappy.cc with the markers, written to `out` when it changed."""
    text = snappy_cc.read_text()
    for old, new in EDITS:
        if text.count(old) != 1:
            raise SystemExit(f"true_shares: snappy.cc is not the expected 1.1.7 ({old.strip()!r})")
        text = text.replace(old, new)
    if not out.exists() or out.read_text() != text:
        out.write_text(text)
    return out


def build(work, libprof, prog, log):
    """The marked build and the unmarked one (PROF_DISABLE) of the snappy Program: their paths,
    the marked source's lines by number and the last line of the scope's block."""
    d = work / "bin" / "snappy-lines"
    d.mkdir(parents=True, exist_ok=True)
    src = marked_source(prog.sources[0], d / "snappy_lines.cc")
    lib = libprof / "libprof"
    include = REPO / "libprof" / "include"
    headers = list((include / "prof").glob("*.h*")) + [lib / "libprof.so"]
    out = {}
    for kind, extra in (("marked", [f"-L{lib}", f"-Wl,-rpath,{lib}", "-lprof"]),
                        ("plain", ["-DPROF_DISABLE"])):
        binary = d / f"snappy_driver_{kind}"
        cmd = ["g++", *CFLAGS, f"-I{include}", *map(str, prog.flags), "-o", str(binary),
               str(src), *map(str, prog.sources[1:]), *extra]
        stamp = d / f"{kind}.command.txt"
        line = " ".join(cmd)
        if stale(binary, [src, *prog.sources[1:], *headers]) or not stamp.exists() or stamp.read_text() != line:
            log("step", msg=f"building {binary}")
            check(cmd, "true_shares", tail=4000)
            stamp.write_text(line)
        out[kind] = binary
    source = dict(enumerate(src.read_text().splitlines(), 1))
    scope_end = next(n for n, text in source.items() if "UNALIGNED_LOAD32(candidate)));" in text) + 1
    return out, source, scope_end


def truth(data, binary):
    """perf's CompressFragment share of the samples with a program frame, and each line's share
    of CompressFragment's samples ({line: percent}), from a perf record --call-graph dwarf."""
    script = data.with_suffix(".lines.txt")
    done = perf.script(data, script, "--no-inline")
    if done.returncode != 0:
        raise SystemExit(f"true_shares: perf script failed: {done.stderr[-2000:]}")
    exe = os.path.basename(binary)
    firsts = []
    for s in perf.read(script):
        for k, (address, _sym, dso) in enumerate(s.frames):
            if os.path.basename(dso) == exe:
                firsts.append((address if k == 0 else address - 1, s.period))
                break
    script.unlink()
    addresses = sorted({a for a, _ in firsts})
    out = subprocess.run(["addr2line", "-a", "-i", "-f", "-C", "-e", str(binary),
                          *map(hex, addresses)], capture_output=True, text=True).stdout.splitlines()
    outermost, at = {}, None
    i = 0
    while i < len(out):
        if out[i].startswith("0x"):
            at = int(out[i], 16)
            i += 1
            continue
        outermost[at] = (out[i], out[i + 1])  # the last pair printed is the outermost
        i += 2
    program, function, lines = 0.0, 0.0, defaultdict(float)
    for address, period in firsts:
        program += period
        name, position = outermost.get(address, ("?", "?:0"))
        if FUNCTION not in name:
            continue
        function += period
        number = position.rpartition(":")[2].split()[0]
        if number.isdigit():
            lines[int(number)] += period
    share = 100 * function / program if program else 0.0
    return share, {n: 100 * v / function for n, v in lines.items()} if function else {}


def ours(doc):
    """From profreport --lines --format json: CompressFragment's total (its PROF_FUNCTION row),
    and each marked row's {line: (kind, hits, percent of that total, text)}."""
    rows = [r for r in doc["lines"] if FUNCTION in r["function"]]
    total = next((r["time"] for r in rows if r["kind"] == "marked function"), 0.0)
    return total, {r["line"]: (r["kind"], r["hits"], 100 * r["time"] / total if total else 0.0)
                   for r in rows if r["kind"] != "marked function"}


def report(recs, reps, target_ratio=1.3, target_points=5.0):
    """(title, head, rows, notes) of the marked-lines case and its summary line: recs per rep
    {"perf_share", "perf_lines", "plain_cpu", "total", "lines"}."""
    truth_s = [r["perf_share"] / 100 * r["plain_cpu"] for r in recs]
    totals = [r["total"] for r in recs]
    ratio = med(totals) / med(truth_s) if med(truth_s) else float("inf")
    numbers = sorted(set().union(*(r["lines"].keys() for r in recs)))
    source = recs[0]["source"]
    head = ["line", "kind", "hits", "libprof %", "perf %", "diff", "libprof min-max", "perf min-max",
            "statement"]
    rows, find_match = [], None
    for n in numbers:
        kind, hits, _ = recs[0]["lines"][n]
        ours_ = [r["lines"].get(n, ("", 0, 0.0))[2] for r in recs]
        if kind == "scope":  # the scan loop: the lines from the scope's to the loop's end
            theirs = [sum(v for k, v in r["perf_lines"].items() if n <= k <= r["scope_end"])
                      for r in recs]
        else:
            theirs = [r["perf_lines"].get(n, 0.0) for r in recs]
        d = med(ours_) - med(theirs)
        text = source.get(n, "").strip()
        if FIND_MATCH in text:
            find_match = d
        rows.append([str(n), kind, f"{hits:,}", f"{med(ours_):.1f}", f"{med(theirs):.1f}",
                     f"{d:+.1f}", f"{min(ours_):.1f}-{max(ours_):.1f}",
                     f"{min(theirs):.1f}-{max(theirs):.1f}", text[:60]])
    notes = [
        f"CompressFragment: libprof {med(totals):.3f} s ({min(totals):.3f}-{max(totals):.3f}), "
        f"perf's share of the uninstrumented run's CPU time {med(truth_s):.3f} s "
        f"({min(truth_s):.3f}-{max(truth_s):.3f}): {ratio:.2f}x; target within {target_ratio}x "
        f"either way: " + ("met" if 1 / target_ratio <= ratio <= target_ratio else "NOT met"),
        f"the {FIND_MATCH} line: {find_match:+.1f} points; target within {target_points:.0f}: "
        + ("met" if find_match is not None and abs(find_match) <= target_points else "NOT met"),
        "shares: of CompressFragment's time (libprof: the row's time over the PROF_FUNCTION "
        "row's; perf: its samples at the line, by addr2line -i of the first program frame)",
    ]
    title = (f"marked lines: snappy's CompressFragment with PROF_FUNCTION, a PROF_SCOPE and five "
             f"PROF_LINEs, GCC -O2 -g linked with libprof (no -finstrument-functions), against "
             f"perf of the same file built with -DPROF_DISABLE; medians of {reps} "
             f"rep{'s' * (reps > 1)}")
    summary = [f"{ratio:.2f}x", f"{find_match:+.1f}" if find_match is not None else "-"]
    return (title, head, rows, notes), summary
