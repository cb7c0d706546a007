// Renderings of the call tree: flame graph (SVG), collapsed stacks, callgrind, the terminal
// tree, and the self-contained HTML report. Every name comes from a trace and is escaped for
// the format it lands in.
#pragma once

#include "analysis/lines.hpp"
#include "analysis/profile.hpp"
#include "analysis/views/call_tree.hpp"

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace prof::analysis::views {

// &, <, >, " and ' as entities; control characters (not allowed in XML 1.0) as U+FFFD.
std::string xml_escape(std::string_view s);

struct FlameOptions {
    std::string title; // default: "Flame Graph: <program>"
    int width = 1200;
    double min_width = 0.1; // px: narrower frames (and their children) are left out
    bool icicle = false;    // root at the top instead of the bottom
};
// A self-contained SVG (inline script: hover details, click to zoom, search), frame widths
// from the exact inclusive nanoseconds of each call path.
void write_flamegraph(std::FILE* out, const CallTree& t, const FlameOptions& o);

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
};
// One self-contained page (inline CSS and JS, no network): the sortable pstats table with
// callers/callees on click, an icicle of the call tree with zoom, and the line tables.
void write_html(std::FILE* out, const Profile& p, const CallTree& t,
                const std::vector<LineTable>& lines, const HtmlOptions& o);

// CSV of pstats' callers/callees (one row per edge of the matching functions), and of the
// line tables.
void print_callers_csv(std::FILE* out, const Profile& p, const std::string& filter, bool callees);
void print_lines_csv(std::FILE* out, const std::vector<LineTable>& tables);

} // namespace prof::analysis::views
