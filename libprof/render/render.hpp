// Renderings of the call tree: flame graph (SVG), collapsed stacks, callgrind, the terminal
// tree, and the self-contained HTML report. Every name comes from a trace and is escaped for
// the format it lands in.
#pragma once

#include "render/model.hpp"

#include "analysis/model/call_tree.hpp"
#include "analysis/model/latency.hpp"
#include "analysis/model/lines.hpp"
#include "analysis/model/memory.hpp"
#include "analysis/model/profile.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prof::render {

struct FlameOptions {
    std::string title; // default: "Flame Graph: <program>"
    int width = 1200;
    double min_width = 0.1; // px: narrower frames (and their children) are left out
    bool icicle = false;    // root at the top instead of the bottom
    // What the widths and a frame's count are: "ns" and "calls" for the call tree; "bytes" or
    // "allocations", and "allocations" or "blocks", for allocation flame graphs (drawn in
    // flamegraph.pl's "mem" palette).
    std::string unit = "ns";
    std::string count_label = "calls";
    std::string graph_name; // default "Flame Graph" ("Icicle Graph")
    // Per node of the tree, when given: its fill and a line added to its tooltip (the
    // differential flame graph colours by change and says it).
    std::vector<std::string> fills, notes;
};
// A self-contained SVG (inline script: hover details, click to zoom, search), frame widths
// from the exact inclusive nanoseconds of each call path.
void write_flamegraph(std::FILE* out, const CallTree& t, const FlameOptions& o);

// ---- allocation flame graphs (memory profiler traces) ----------------------------------------

// The allocation flame graph: memory_call_tree drawn like write_flamegraph (same script, same
// escaping), titled "Allocation Flame Graph (<weight>): <program>" unless o.title is set.
void write_memory_flamegraph(std::FILE* out, const MemoryReport& m, MemoryWeight w,
                             const std::vector<reader::TraceInfo>& traces, FlameOptions o);

// Brendan Gregg's folded format: `frame;frame;frame <self ns>` per call path with self time.
void write_collapsed(std::FILE* out, const CallTree& t);

// Callgrind format (KCachegrind, callgrind_annotate): event `ns`; self cost per function,
// inclusive cost and count per caller -> callee pair. Totals equal the call tree's total.
void write_callgrind(std::FILE* out, const CallTree& t);

struct TreeOptions {
    uint32_t max_depth = 0; // 0 = unlimited
    double min_percent = 0; // hide call paths under this share of the total
    bool csv = false;
};
// uftrace graph-like call tree in the terminal, or one CSV row per call path.
void print_tree(std::FILE* out, const CallTree& t, const TreeOptions& o);

struct HtmlOptions {
    std::string title;
    std::vector<std::string> source_dirs; // where to look for the sources of line tables
    // Allocations (when present): a memory section with the summary, the heap/RSS timeline as
    // inline SVG and the sortable table of the top sites with their stacks.
    const MemoryReport* memory = nullptr;
    // Per-call latencies (when present): a function's distribution, drawn when it is selected.
    const LatencyReport* latency = nullptr;
};
// One self-contained page (inline CSS and JS, no network): the sortable pstats table with
// callers/callees on click, an icicle of the call tree with zoom, the line tables, and the
// memory section when o.memory has data.
void write_html(std::FILE* out, const Profile& p, const CallTree& t,
                const std::vector<LineTable>& lines, const HtmlOptions& o);

// CSV of pstats' callers/callees (one row per edge of the matching functions), and of the
// line tables.
void print_callers_csv(std::FILE* out, const Profile& p, const std::string& filter, bool callees);
void print_lines_csv(std::FILE* out, const std::vector<LineTable>& tables);

} // namespace prof::render
