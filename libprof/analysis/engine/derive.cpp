// The derived models (derive.hpp): the profile and the call tree, from the replayed threads.
#include "analysis/engine/derive.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace prof::analysis::engine {
namespace {

// Functions merge across threads by (trace, function) and across traces by what names
// them (module, symbol, file, line); distinct symbols stay distinct even when they
// demangle alike (a deleting and a complete destructor).
struct Naming {
    const Replayed& r;
    std::vector<Function>& out;
    std::map<std::tuple<std::string, std::string, std::string, uint32_t>, size_t> by_label;
    std::vector<std::vector<size_t>> by_function; // [trace][function] -> index in `out`
    size_t operator()(size_t trace, uint32_t function) {
        if (by_function.size() <= trace) by_function.resize(trace + 1);
        std::vector<size_t>& v = by_function[trace];
        if (v.size() <= function) v.resize(r.functions[trace].address.size(), SIZE_MAX);
        if (v[function] != SIZE_MAX) return v[function];
        const TraceFunctions& tf = r.functions[trace];
        Function f =
            r.resolver.describe(r.traces[trace], tf.address[function], tf.module[function]);
        auto key = std::make_tuple(f.module, f.symbol.empty() ? f.name : f.symbol, f.file, f.line);
        auto [it, fresh] = by_label.try_emplace(key, out.size());
        if (fresh) out.push_back(std::move(f));
        return v[function] = it->second;
    }
};

// Children of every node, in creation order (parents precede their children).
void children_of(const ThreadReplay& t, std::vector<uint32_t>& first, std::vector<uint32_t>& list) {
    size_t n = t.nodes.size();
    first.assign(n + 1, 0);
    for (size_t i = 1; i < n; ++i) ++first[t.nodes[i].parent + 1];
    for (size_t i = 0; i < n; ++i) first[i + 1] += first[i];
    list.resize(n ? n - 1 : 0);
    std::vector<uint32_t> fill(first.begin(), first.end() - 1);
    for (size_t i = 1; i < n; ++i) list[fill[t.nodes[i].parent]++] = uint32_t(i);
}

} // namespace

Profile build_profile(const Replayed& r, const ThreadFilter& filter, bool compensated,
                      const TimeBasis& time) {
    Profile p;
    p.traces = r.traces;
    p.compensated = compensated;
    p.time = time;
    Naming name{r, p.functions, {}, {}};
    std::map<std::pair<size_t, size_t>, size_t> edge_at;
    std::vector<uint32_t> first, list;
    for (const auto& tp : r.threads) {
        const ThreadReplay& t = *tp;
        if (!filter.all() && (t.trace != filter.trace || t.stream != filter.stream)) continue;
        const reader::TraceInfo& info = r.traces[t.trace];
        double tps = info.ticks_per_second > 0 ? info.ticks_per_second : 1e9;
        size_t nf = r.functions[t.trace].address.size();
        // Per trace function and per (caller, callee) pair of this thread, in ticks.
        struct Sums {
            uint64_t ncalls = 0, pcalls = 0;
            double tot = 0, cum = 0;
            bool present = false; // on a call path of the thread (sampled stacks count none)
        };
        std::vector<Sums> fsum(nf);
        std::vector<uint32_t> active(nf, 0);
        std::map<std::pair<uint32_t, uint32_t>, uint32_t> edge_ids;
        std::vector<Sums> esum;
        std::vector<uint32_t> eactive;
        std::vector<uint32_t> edge_of(t.nodes.size(), 0);
        children_of(t, first, list);
        // Depth first: a node is a primitive call of its function when no ancestor is the
        // same function, and its time counts in cumtime only then (cProfile's rule, which
        // counts recursion once); the same for caller -> callee pairs.
        std::vector<std::pair<uint32_t, uint32_t>> dfs; // (node, next child position)
        dfs.emplace_back(0, first[0]);
        while (!dfs.empty()) {
            auto& [node, next] = dfs.back();
            if (next < first[node + 1]) {
                uint32_t c = list[next++];
                const PathNode& n = t.nodes[c];
                uint32_t caller = node == 0 ? kNoCaller : t.nodes[node].function;
                auto [et, efresh] =
                    edge_ids.try_emplace({caller, n.function}, uint32_t(esum.size()));
                if (efresh) {
                    esum.emplace_back();
                    eactive.push_back(0);
                }
                uint32_t e = et->second;
                edge_of[c] = e;
                int64_t children = 0;
                for (uint32_t k = first[c]; k < first[c + 1]; ++k)
                    children += t.nodes[list[k]].total;
                double self = double(std::max<int64_t>(0, n.total - children)) * kClockUnit;
                Sums& fs = fsum[n.function];
                Sums& es = esum[e];
                fs.ncalls += n.calls;
                fs.present = true;
                fs.tot += self;
                es.ncalls += n.calls;
                es.tot += self;
                if (active[n.function]++ == 0) {
                    fs.pcalls += n.calls;
                    fs.cum += n.ticks();
                }
                if (eactive[e]++ == 0) {
                    es.pcalls += n.calls;
                    es.cum += n.ticks();
                }
                dfs.emplace_back(c, first[c]);
            } else {
                if (node != 0) {
                    --active[t.nodes[node].function];
                    --eactive[edge_of[node]];
                }
                dfs.pop_back();
            }
        }
        std::vector<size_t> global(nf, SIZE_MAX);
        for (size_t i = 0; i < nf; ++i) {
            if (!fsum[i].present) continue;
            global[i] = name(t.trace, uint32_t(i));
            p.functions[global[i]].stats.add(
                Stats{fsum[i].ncalls, fsum[i].pcalls, fsum[i].tot / tps, fsum[i].cum / tps});
        }
        for (uint32_t node : t.inherited_nodes)
            if (size_t g = global[t.nodes[node].function]; g != SIZE_MAX)
                ++p.functions[g].inherited;
        for (const auto& [key, e] : edge_ids) {
            size_t caller = key.first == kNoCaller ? kRoot : global[key.first];
            size_t callee = global[key.second];
            auto [it, fresh] = edge_at.try_emplace({caller, callee}, p.edges.size());
            if (fresh) p.edges.push_back(Edge{caller, callee, {}});
            const Sums& s = esum[e];
            p.edges[it->second].stats.add(Stats{s.ncalls, s.pcalls, s.tot / tps, s.cum / tps});
        }
        ThreadSummary ts = summarize_thread(info, t.trace, t.stream);
        ts.unmatched_exits = t.unmatched_exits;
        p.threads.push_back(ts);
    }
    p.recount();
    return p;
}

views::CallTree build_tree(const Replayed& r, const views::CallTreeOptions& o,
                           const TimeBasis& time) {
    using views::CallTreeNode;
    using views::kNoFunction;
    views::CallTree tree;
    tree.nodes.push_back(CallTreeNode{});
    tree.nodes[0].label = "all";
    tree.traces = r.traces;
    tree.time = time;
    Naming name{r, tree.functions, {}, {}};
    std::map<std::pair<size_t, size_t>, size_t> child_of; // (parent, function) -> node
    auto child = [&](size_t parent, size_t function, const std::string& label) {
        auto key = std::make_pair(parent, function == kNoFunction ? SIZE_MAX - 1 - tree.nodes.size()
                                                                  : function);
        auto [it, fresh] = child_of.try_emplace(key, tree.nodes.size());
        if (fresh) {
            CallTreeNode n;
            n.parent = parent;
            n.function = function;
            n.label = label;
            n.depth = tree.nodes[parent].depth + 1;
            tree.nodes.push_back(std::move(n));
            tree.nodes[parent].children.push_back(it->second);
        }
        return it->second;
    };
    for (const auto& tp : r.threads) {
        const ThreadReplay& t = *tp;
        if (!o.thread.all() && (t.trace != o.thread.trace || t.stream != o.thread.stream)) continue;
        const reader::TraceInfo& info = r.traces[t.trace];
        double tps = info.ticks_per_second > 0 ? info.ticks_per_second : 1e9;
        ThreadSummary ts = summarize_thread(info, t.trace, t.stream);
        ts.unmatched_exits = t.unmatched_exits;
        tree.threads.push_back(ts);
        if (t.nodes.size() <= 1) continue;
        std::vector<size_t> global(t.nodes.size(), 0);
        global[0] = o.split_threads
                        ? child(0, kNoFunction,
                                fmt::format("thread {}{}{}{}", ts.tid, ts.name.empty() ? "" : " (",
                                            ts.name, ts.name.empty() ? "" : ")"))
                        : 0;
        // Parents precede their children in `nodes`.
        for (size_t i = 1; i < t.nodes.size(); ++i) {
            const PathNode& n = t.nodes[i];
            size_t g = child(global[n.parent], name(t.trace, n.function), {});
            global[i] = g;
            tree.nodes[g].calls += n.calls;
            tree.nodes[g].total_ns += uint64_t(std::llround(n.ticks() * 1e9 / tps));
            if (i < t.node_samples.size()) tree.nodes[g].samples += t.node_samples[i];
            const std::vector<bool>& inlined = r.functions[t.trace].inlined;
            if (n.function < inlined.size() && inlined[n.function]) tree.nodes[g].inlined = true;
        }
    }
    // Totals of the root and thread nodes, then self times, children before parents. Each
    // node's total is rounded on its own, so its children's can add up to a few ns more
    // (a parent whose samples all fell in its children): the parent then takes their sum,
    // so that no child is wider than its parent in the flame graph.
    for (size_t i = tree.nodes.size(); i-- > 0;) {
        CallTreeNode& n = tree.nodes[i];
        uint64_t children = 0;
        for (size_t c : n.children) children += tree.nodes[c].total_ns;
        if (n.function == kNoFunction || children > n.total_ns) n.total_ns = children;
        n.self_ns = n.total_ns - children;
    }
    return tree;
}

} // namespace prof::analysis::engine
