// diff's pictures: the differential flame graph (SVG, widths of one side, colour by change:
// red slower, blue faster, neutral within the noise), the folded "stack base new" lines of
// Brendan Gregg's difffolded.pl, and the self-contained HTML page (an icicle coloured the
// same way, the per-function table of both sides with each change's uncertainty, and a
// function's callers and callees on both sides).
#pragma once

#include "render/model.hpp"
#include "render/render.hpp"

#include "analysis/model/diff_tree.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace prof::render {

// The fill of a frame: neutral within its uncertainty; otherwise red (slower) or blue (faster),
// deeper the larger its change against `largest` (the largest change beyond the noise).
std::string change_fill(const DiffTreeNode& n, double largest);
// The largest |change| among the frames (root excluded) whose change is beyond its noise.
double largest_change(const DiffTree& t);

// o.title, o.width, o.min_width and o.icicle as for write_flamegraph.
void write_diff_flamegraph(std::FILE* out, const DiffTree& t, FlameOptions o, bool base_widths);
// One line per call path with self time on either side: "a;b;c <base ns> <new ns>", means
// per run rounded to whole nanoseconds (flamegraph.pl reads it as difffolded.pl's output).
void write_diff_folded(std::FILE* out, const DiffTree& t);

struct DiffPageOptions {
    std::string title;
    std::vector<std::string> base_traces, new_traces; // file names, shown in the header
};
// `d` from diff_runs without a limit, `edges` from diff_edges of the same runs.
void write_diff_html(std::FILE* out, const DiffResult& d, const std::vector<DiffEdge>& edges,
                     const DiffTree& t, const DiffOptions& o, const DiffPageOptions& page);

} // namespace prof::render
