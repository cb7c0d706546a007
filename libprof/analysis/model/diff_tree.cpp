#include "analysis/model/diff_tree.hpp"

#include "analysis/model/noise.hpp"

#include <map>
#include <stdexcept>
#include <utility>

namespace prof::analysis::views {

int DiffTreeNode::direction() const {
    double c = change();
    if (c > uncertainty && c > 0) return 1;
    if (-c > uncertainty && c < 0) return -1;
    return 0;
}

std::string DiffTree::path_text(size_t node, const char* separator) const {
    std::vector<size_t> chain;
    for (size_t n = node; n != 0 && n < nodes.size(); n = nodes[n].parent) chain.push_back(n);
    std::string s;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it)
        s += (it == chain.rbegin() ? "" : separator) + nodes[*it].name;
    return s;
}

DiffTree diff_call_trees(const std::vector<CallTree>& base, const std::vector<Profile>& base_runs,
                         const std::vector<CallTree>& next, const std::vector<Profile>& new_runs) {
    if (base.size() != base_runs.size() || next.size() != new_runs.size())
        throw std::invalid_argument("diff_call_trees: one profile per call tree");
    DiffTree d;
    d.base_runs = std::max<size_t>(base.size(), 1);
    d.new_runs = std::max<size_t>(next.size(), 1);
    const noise::Side base_side{d.base_runs, true}, new_side{d.new_runs, true};
    d.spread_known = base_side.per_run() || new_side.per_run();
    d.nodes.push_back({});
    d.nodes[0].name = "all";
    // Each node's inclusive time on each side, run by run.
    struct Totals {
        noise::Measure base, next;
    };
    std::vector<Totals> totals(1);
    std::map<std::pair<size_t, std::string>, size_t> index; // (parent, name) -> node
    auto add = [&](const std::vector<CallTree>& trees, const std::vector<Profile>& runs,
                   const noise::Side& side, bool is_new) {
        const double per_run = 1.0 / double(side.runs);
        for (size_t run = 0; run < trees.size(); ++run) {
            const CallTree& t = trees[run];
            // ns per sample, for the sampling error of times from samples.
            const double period = 1e9 * noise::sample_period(runs[run].time);
            std::vector<size_t> merged(t.nodes.size(), 0);
            for (size_t i = 0; i < t.nodes.size(); ++i) { // parents precede children
                const CallTreeNode& n = t.nodes[i];
                size_t m = 0;
                if (i != 0) {
                    size_t parent = merged[n.parent];
                    const std::string& name = t.name(n);
                    auto [it, fresh] = index.try_emplace({parent, name}, d.nodes.size());
                    m = it->second;
                    if (fresh) {
                        DiffTreeNode node;
                        node.parent = parent;
                        node.name = name;
                        node.kind =
                            n.function == kNoFunction ? "thread" : t.functions[n.function].kind;
                        node.depth = d.nodes[parent].depth + 1;
                        d.nodes.push_back(std::move(node));
                        d.nodes[parent].children.push_back(m);
                        totals.emplace_back();
                    }
                }
                merged[i] = m;
                DiffTreeNode& node = d.nodes[m];
                (is_new ? node.new_total : node.base_total) += double(n.total_ns) * per_run;
                (is_new ? node.new_self : node.base_self) += double(n.self_ns) * per_run;
                (is_new ? node.new_calls : node.base_calls) += double(n.calls) * per_run;
                noise::Measure& measure = is_new ? totals[m].next : totals[m].base;
                measure.fit(side);
                measure.add(run, double(n.total_ns), period, period > 0);
            }
        }
    };
    add(base, base_runs, base_side, false);
    add(next, new_runs, new_side, true);
    for (size_t i = 0; i < d.nodes.size(); ++i)
        d.nodes[i].uncertainty =
            noise::uncertainty(totals[i].base, totals[i].next, base_side, new_side);
    return d;
}

} // namespace prof::analysis::views
