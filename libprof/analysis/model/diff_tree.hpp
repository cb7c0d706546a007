// Two sets of runs' call trees laid over each other: one node per call path (function names
// from the root down, matched by name as the per-function diff matches them), with each side's
// inclusive and self time and calls, mean per run, and the uncertainty of the change (95%, as
// analysis/model/noise.hpp computes it). It feeds the differential flame graph, the HTML
// diff's icicle and the folded "stack base new" lines.
#pragma once

#include "analysis/model/call_tree.hpp"
#include "analysis/model/profile.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace prof::analysis::views {

struct DiffTreeNode {
    size_t parent = SIZE_MAX; // SIZE_MAX for the root
    std::string name;         // the function's; the root's "all"
    std::string kind;         // "function", "scope", ...; empty for the root
    uint32_t depth = 0;
    double base_total = 0, new_total = 0; // ns, inclusive, mean per run
    double base_self = 0, new_self = 0;   // ns
    double base_calls = 0, new_calls = 0; // mean per run
    double uncertainty = 0;               // of new_total - base_total, ns (95%); 0: exact
    std::vector<size_t> children;
    double change() const { return new_total - base_total; }
    // Beyond its uncertainty: slower (> 0), faster (< 0), or within the noise (0).
    int direction() const;
};

struct DiffTree {
    size_t base_runs = 1, new_runs = 1;
    bool spread_known = false;       // two runs or more a side
    std::vector<DiffTreeNode> nodes; // nodes[0] is the root; parents precede children
    const DiffTreeNode& root() const { return nodes.front(); }
    std::string path_text(size_t node, const char* separator = ";") const; // root excluded
};

// One call tree and one profile per run (the profile gives the run's sample period), the
// trees built with their threads merged.
DiffTree diff_call_trees(const std::vector<CallTree>& base, const std::vector<Profile>& base_runs,
                         const std::vector<CallTree>& next, const std::vector<Profile>& new_runs);

} // namespace prof::analysis::views
