#!/usr/bin/env python3
"""Checks profreport's exports against their formats, for tests/e2e/view_tests.cpp.

usage: check_views.py KIND FILE [--count NAME=N]... [--name NAME]... [--total NS]
                        [--within FROM_NS TO_NS]

KIND is chrome, speedscope, svg, collapsed or html. Each kind is parsed with a strict parser (json,
xml.etree) and its structure checked: Chrome complete events nest per thread and every
thread with events is named; speedscope open/close events are balanced per profile, in time
order, within [startValue, endValue]; SVG frames lie inside their parents; folded lines are
`frames <integer>`. --count checks how many events (chrome, speedscope), frames' calls (svg)
or stacks ending in NAME (collapsed) there are; --name that a name appears exactly as given;
--total the sum of the weights (collapsed), the root's width in ns (svg), the sum over profiles
of the outermost activations' durations (speedscope) or the call tree's root (html: the data
the page embeds, with its pstats total_time); --within that every event lies in
[FROM_NS, TO_NS] (chrome, speedscope).
Prints a one-line summary on success; on failure, the reason on stderr and exit status 1.
"""
import argparse
import collections
import json
import re
import sys
import xml.etree.ElementTree as ET


def fail(msg):
    print(f"check_views: {msg}", file=sys.stderr)
    sys.exit(1)


def ns(us):
    # ts and dur are microseconds with three decimals: exact nanoseconds.
    return round(us * 1000)


WITHIN = None


def check_window(start, end, what):
    if WITHIN and (start < WITHIN[0] or end > WITHIN[1]):
        fail(f"{what} [{start}, {end}] lies outside [{WITHIN[0]}, {WITHIN[1]}]")


def check_chrome(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("no traceEvents array")
    counts = collections.Counter()
    by_thread = collections.defaultdict(list)
    named_threads, named_processes = set(), set()
    for e in doc["traceEvents"]:
        for key in ("ph", "name", "pid", "tid"):
            if key not in e:
                fail(f"event without {key}: {e}")
        if e["ph"] == "M":
            if e["name"] == "thread_name":
                named_threads.add((e["pid"], e["tid"]))
            elif e["name"] == "process_name":
                named_processes.add(e["pid"])
            if not isinstance(e.get("args", {}).get("name"), str):
                fail(f"metadata without args.name: {e}")
            continue
        if e["ph"] == "C":  # memory counters (heap, RSS): a time and numeric values
            if not isinstance(e.get("ts"), (int, float)) or not e.get("args") or not all(
                    isinstance(v, (int, float)) for v in e["args"].values()):
                fail(f"malformed counter event: {e}")
            continue
        if e["ph"] != "X":
            fail(f"unexpected phase {e['ph']}")
        for key in ("ts", "dur", "cat"):
            if key not in e:
                fail(f"complete event without {key}: {e}")
        if e["dur"] < 0:
            fail(f"negative duration: {e}")
        counts[e["name"]] += 1
        check_window(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"])
        by_thread[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"]))
    max_depth = 0
    for thread, events in by_thread.items():
        if thread not in named_threads:
            fail(f"thread {thread} has events but no thread_name")
        if thread[0] not in named_processes:
            fail(f"process {thread[0]} has events but no process_name")
        # Sorted by start, longest first: each event must lie inside the innermost open one.
        events.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for start, end, name in events:
            while stack and stack[-1][1] <= start and not (stack[-1][0] == start == end):
                stack.pop()
            if stack and end > stack[-1][1]:
                fail(f"{name} [{start}, {end}] overlaps {stack[-1][2]} [{stack[-1][0]}, {stack[-1][1]}] "
                     f"on thread {thread}")
            # An activation shorter than the profiler's own cost of a call lasts 0 ns on the
            # thread's clock: it lies inside the innermost open one, but at an instant shared
            # with its siblings, so it adds no depth.
            if start == end and stack:
                continue
            stack.append((start, end, name))
            max_depth = max(max_depth, len(stack))
    return counts, {"threads": len(by_thread), "max_depth": max_depth,
                    "events": sum(counts.values())}, None


def check_speedscope(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("$schema") != "https://www.speedscope.app/file-format-schema.json":
        fail("missing $schema")
    frames = doc.get("shared", {}).get("frames")
    if not isinstance(frames, list) or not all(isinstance(fr.get("name"), str) for fr in frames):
        fail("shared.frames is not a list of named frames")
    profiles = doc.get("profiles")
    if not isinstance(profiles, list) or not profiles:
        fail("no profiles")
    counts = collections.Counter()
    total, roots = 0, 0  # the outermost activations: their summed durations, their number
    for p in profiles:
        if p.get("type") == "sampled" and p.get("unit") == "nanoseconds":
            # Sample-timed traces: each call path once, weighted by its own time; the total is
            # the weights' sum, and each path counts as an outermost activation (rounding).
            samples, weights = p.get("samples"), p.get("weights")
            if not isinstance(samples, list) or not isinstance(weights, list) or \
                    len(samples) != len(weights) or not samples:
                fail(f"sampled profile {p.get('name')}: samples and weights do not pair up")
            for stack, w in zip(samples, weights):
                if not stack or not all(isinstance(i, int) and 0 <= i < len(frames) for i in stack):
                    fail(f"sampled profile {p.get('name')}: bad stack {stack}")
                if not isinstance(w, int) or w <= 0:
                    fail(f"sampled profile {p.get('name')}: bad weight {w}")
                counts[frames[stack[-1]]["name"]] += 1
            if p.get("startValue") != 0 or p.get("endValue") != sum(weights):
                fail(f"sampled profile {p.get('name')}: endValue is not the weights' sum")
            total += sum(weights)
            roots += len(samples)
            continue
        if p.get("type") != "evented" or p.get("unit") != "nanoseconds":
            fail(f"profile {p.get('name')} is neither evented nor sampled in nanoseconds")
        for key in ("name", "startValue", "endValue", "events"):
            if key not in p:
                fail(f"profile without {key}")
        stack, last = [], p["startValue"]
        for ev in p["events"]:
            if ev["type"] not in ("O", "C") or not 0 <= ev["frame"] < len(frames):
                fail(f"bad event {ev}")
            if ev["at"] < last or ev["at"] > p["endValue"]:
                fail(f"event {ev} out of order or outside [{p['startValue']}, {p['endValue']}]")
            last = ev["at"]
            check_window(ev["at"], ev["at"], f"event {ev}")
            if ev["type"] == "O":
                if not stack:
                    opened_at = ev["at"]
                    roots += 1
                stack.append(ev["frame"])
                counts[frames[ev["frame"]]["name"]] += 1
            else:
                if not stack or stack[-1] != ev["frame"]:
                    fail(f"close of frame {ev['frame']} does not match the open {stack[-1:]} in {p['name']}")
                stack.pop()
                if not stack:
                    total += ev["at"] - opened_at
        if stack:
            fail(f"profile {p['name']} ends with {len(stack)} open frames")
    return counts, {"profiles": len(profiles), "events": sum(counts.values()), "roots": roots}, total


def check_html(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r'<script id="profile-data" type="application/json">(.*?)</script>', text, re.S)
    if not m:
        fail("no profile-data script")
    doc = json.loads(m.group(1))
    nodes = doc["tree"]["nodes"]
    if not nodes or nodes[0]["p"] != -1:
        fail("the tree's first node is not the root")
    counts = collections.Counter()
    for n in nodes[1:]:
        if not 0 <= n["p"] < len(nodes) or n["s"] > n["t"]:
            fail(f"bad tree node {n}")
        if n["f"] >= 0:
            counts[doc["tree"]["names"][n["f"]]] += n["c"]
    children = sum(n["t"] for n in nodes[1:] if n["p"] == 0)
    if children > nodes[0]["t"]:
        fail(f"the root's children add up to {children}, above the root's {nodes[0]['t']}")
    return counts, {"nodes": len(nodes), "total_time": doc["total_time"]}, nodes[0]["t"]


def check_svg(path):
    tree = ET.parse(path)  # raises on malformed XML
    svg = tree.getroot()
    ns_svg = "{http://www.w3.org/2000/svg}"
    frames_group = svg.find(f".//{ns_svg}g[@id='frames']")
    if frames_group is None:
        fail("no frames group")
    counts = collections.Counter()
    placed = []
    for g in frames_group.findall(f"{ns_svg}g"):
        title = g.find(f"{ns_svg}title")
        rect = g.find(f"{ns_svg}rect")
        if title is None or rect is None or g.find(f"{ns_svg}text") is None:
            fail("frame without title, rect or text")
        name = title.text.split("\n")[0]
        o, n, d, c = (int(g.get(k)) for k in ("data-o", "data-n", "data-d", "data-c"))
        counts[name] += c
        placed.append((d, o, n, name))
    if not placed or placed[0][0] != 0:
        fail("the first frame is not the root")
    # Every frame lies inside a frame one level up.
    by_depth = collections.defaultdict(list)
    for d, o, n, name in placed:
        by_depth[d].append((o, n))
    for d, o, n, name in placed[1:]:
        if not any(po <= o and o + n <= po + pn for po, pn in by_depth[d - 1]):
            fail(f"frame {name} at depth {d} [{o}, {o + n}] has no parent")
    if svg.find(f".//{ns_svg}script") is None:
        fail("no script")
    return counts, {"frames": len(placed)}, placed[0][2]


def check_collapsed(path):
    counts = collections.Counter()
    total = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.fullmatch(r"(.+) (\d+)\n", line)
            if not m:
                fail(f"bad folded line: {line!r}")
            total += int(m.group(2))
            counts[m.group(1).split(";")[-1]] += 1
    return counts, {"stacks": sum(counts.values())}, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["chrome", "speedscope", "svg", "collapsed", "html"])
    ap.add_argument("file")
    ap.add_argument("--count", action="append", default=[])
    ap.add_argument("--name", action="append", default=[])
    ap.add_argument("--total", type=int)
    ap.add_argument("--within", type=int, nargs=2)
    a = ap.parse_args()
    global WITHIN
    WITHIN = a.within
    counts, summary, total = {"chrome": check_chrome, "speedscope": check_speedscope,
                              "svg": check_svg, "collapsed": check_collapsed,
                              "html": check_html}[a.kind](a.file)
    for spec in a.count:
        name, _, n = spec.rpartition("=")
        if counts.get(name, 0) != int(n):
            fail(f"{name}: {counts.get(name, 0)} where {n} were expected")
    for name in a.name:
        if name not in counts:
            fail(f"no {name!r} among {sorted(counts)[:20]}")
    if a.total is not None and total != a.total:
        fail(f"total {total} where {a.total} was expected")
    summary["total"] = total
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
