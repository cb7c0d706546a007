// The calling context tree (CCT): one node per distinct call path (parent node, function), per
// thread, with exact nanosecond totals (built by analysis::Session::call_tree). It feeds the flame graph, collapsed stacks, callgrind,
// the terminal tree and the HTML report's icicle. Memory grows with distinct call paths, never
// with the number of events.
#pragma once

#include "analysis/model/profile.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace prof::analysis::views {

inline constexpr size_t kNoFunction = SIZE_MAX;

struct CallTreeNode {
    size_t parent = SIZE_MAX;      // SIZE_MAX for the root
    size_t function = kNoFunction; // index into CallTree::functions; kNoFunction for the
                                   // root and for thread nodes
    std::string label;             // the root's and thread nodes' name
    uint64_t calls = 0;            // activations of this path
    uint64_t total_ns = 0;         // inclusive
    uint64_t self_ns = 0;          // total minus the children's totals
    uint64_t samples = 0;          // CPU samples taken with this path innermost (sampled times)
    bool inlined = false;          // its function was inlined into its parent's (sampled frames)
    std::vector<size_t> children;
    uint32_t depth = 0; // the root is 0
};

struct CallTree {
    std::vector<Function> functions; // named as in Profile; stats are not filled
    std::vector<CallTreeNode> nodes; // nodes[0] is the root ("all")
    std::vector<ThreadSummary> threads;
    std::vector<reader::TraceInfo> traces;
    TimeBasis time;
    const CallTreeNode& root() const { return nodes.front(); }
    // Display name of a node: the function's name, or the root's/thread's label.
    const std::string& name(const CallTreeNode& n) const {
        return n.function == kNoFunction ? n.label : functions[n.function].name;
    }
    // Frames from the root's child down to `node` (thread node included when split).
    std::vector<size_t> path(size_t node) const;
};

struct CallTreeOptions {
    bool split_threads = false; // a node per thread under the root
    ThreadFilter thread;        // one thread only
};

} // namespace prof::analysis::views
