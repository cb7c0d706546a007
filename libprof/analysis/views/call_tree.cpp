// CallTreeBuilder: a Replay that keeps, per thread, one node per (parent node, function) with
// call counts and inclusive nanoseconds; build() names the functions (as ProfileBuilder does)
// and merges threads and traces path by path.
#include "analysis/views/call_tree.hpp"

#include "analysis/views/replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace prof::analysis::views {
namespace {

// A function is its address, and the object it ran in when several objects occupied that
// address in turn (ReplayFrame::module).
struct LocalNode {
    uint32_t parent;
    uint64_t address;
    size_t module = reader::kNoModule;
    uint64_t calls = 0, total_ns = 0;
    uint64_t last_child_address = 0; // cache: loops call the same child again and again
    size_t last_child_module = reader::kNoModule;
    uint32_t last_child = 0;
};

struct PathKey {
    uint32_t parent;
    uint64_t address;
    size_t module;
    bool operator==(const PathKey&) const = default;
};
struct PathHash {
    size_t operator()(const PathKey& k) const {
        return std::hash<uint64_t>()(k.address * 0x9e3779b97f4a7c15ULL ^ k.parent ^
                                     (uint64_t(k.module) << 32));
    }
};

struct ThreadTree {
    std::vector<LocalNode> nodes{LocalNode{UINT32_MAX, 0}}; // [0]: the thread's root
    std::unordered_map<PathKey, uint32_t, PathHash> index;
};

} // namespace

struct CallTreeBuilder::Impl : Replay {
    std::vector<std::unique_ptr<ThreadTree>> trees; // by ReplayThread::index

    void thread_created(ReplayThread& t) override {
        if (trees.size() <= t.index) trees.resize(t.index + 1);
        trees[t.index] = std::make_unique<ThreadTree>();
    }

    void opened(ReplayThread& t) override {
        ThreadTree& tree = *trees[t.index];
        uint32_t parent = t.stack.size() > 1 ? uint32_t(t.stack[t.stack.size() - 2].user) : 0;
        ReplayFrame& f = t.stack.back();
        LocalNode& p = tree.nodes[parent];
        uint32_t node;
        if (p.last_child && p.last_child_address == f.address && p.last_child_module == f.module) {
            node = p.last_child;
        } else {
            auto [it, fresh] = tree.index.try_emplace(PathKey{parent, f.address, f.module},
                                                      uint32_t(tree.nodes.size()));
            if (fresh) tree.nodes.push_back(LocalNode{parent, f.address, f.module});
            node = it->second;
            LocalNode& q = tree.nodes[parent]; // push_back may have moved it
            q.last_child = node;
            q.last_child_address = f.address;
            q.last_child_module = f.module;
        }
        tree.nodes[node].calls += f.count;
        f.user = node;
    }

    void closed(ReplayThread& t, const ReplayFrame& f, uint64_t exit_ns) override {
        trees[t.index]->nodes[f.user].total_ns += exit_ns - f.enter_ns;
    }
};

CallTreeBuilder::CallTreeBuilder() : impl_(std::make_unique<Impl>()) {}
CallTreeBuilder::~CallTreeBuilder() = default;

void CallTreeBuilder::add_trace(const std::string& path) {
    impl_->add_trace(path);
}
void CallTreeBuilder::show_progress(bool on) {
    impl_->show_progress(on);
}

std::vector<ThreadFilter> CallTreeBuilder::thread_list() const {
    std::vector<ThreadFilter> out;
    for (const auto& t : impl_->threads()) out.push_back(ThreadFilter{t->trace, t->stream});
    return out;
}

std::vector<size_t> CallTree::path(size_t node) const {
    std::vector<size_t> out;
    for (size_t n = node; n != 0 && n < nodes.size(); n = nodes[n].parent) out.push_back(n);
    std::reverse(out.begin(), out.end());
    return out;
}

CallTree CallTreeBuilder::build(const CallTreeOptions& o) const {
    CallTree tree;
    tree.nodes.push_back(CallTreeNode{});
    tree.nodes[0].label = "all";
    for (const auto& ti : impl_->traces()) tree.traces.push_back(*ti);
    FunctionResolver resolver;
    // Functions merge as in ProfileBuilder::build: by address within a trace, by what names
    // them across traces.
    std::map<std::tuple<std::string, std::string, std::string, uint32_t>, size_t> by_label;
    std::vector<std::map<std::pair<uint64_t, size_t>, size_t>> by_address(impl_->traces().size());
    auto function_index = [&](size_t trace, uint64_t address, size_t module) {
        auto [it, fresh] = by_address[trace].try_emplace({address, module}, 0);
        if (!fresh) return it->second;
        Function f = resolver.describe(*impl_->traces()[trace], address, module);
        auto key = std::make_tuple(f.module, f.symbol.empty() ? f.name : f.symbol, f.file, f.line);
        auto [lt, lfresh] = by_label.try_emplace(key, tree.functions.size());
        if (lfresh) tree.functions.push_back(std::move(f));
        return it->second = lt->second;
    };
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

    for (const auto& tp : impl_->threads()) {
        const ReplayThread& t = *tp;
        if (!o.thread.all() && (t.trace != o.thread.trace || t.stream != o.thread.stream)) continue;
        const reader::TraceInfo& info = *impl_->traces()[t.trace];
        ThreadSummary ts = summarize_thread(info, t.trace, t.stream);
        // The replay's own span (frames closed at the end of the trace included).
        ts.seconds = t.last_ns >= t.first_ns && t.first_ns != UINT64_MAX
                         ? double(t.last_ns - t.first_ns) / 1e9
                         : 0;
        ts.unmatched_exits = t.unmatched_exits;
        tree.threads.push_back(ts);

        const ThreadTree& local = *impl_->trees[t.index];
        if (local.nodes.size() <= 1) continue;
        std::vector<size_t> global(local.nodes.size(), 0);
        global[0] = o.split_threads
                        ? child(0, kNoFunction,
                                fmt::format("thread {}{}{}{}", ts.tid, ts.name.empty() ? "" : " (",
                                            ts.name, ts.name.empty() ? "" : ")"))
                        : 0;
        // Parents always precede their children in `local.nodes`.
        for (size_t i = 1; i < local.nodes.size(); ++i) {
            const LocalNode& ln = local.nodes[i];
            size_t g = child(global[ln.parent], function_index(t.trace, ln.address, ln.module), {});
            global[i] = g;
            tree.nodes[g].calls += ln.calls;
            tree.nodes[g].total_ns += ln.total_ns;
        }
    }
    // Totals of the root and thread nodes, then self times, children before parents.
    for (size_t i = tree.nodes.size(); i-- > 0;) {
        CallTreeNode& n = tree.nodes[i];
        uint64_t children = 0;
        for (size_t c : n.children) children += tree.nodes[c].total_ns;
        if (n.function == kNoFunction) n.total_ns = children;
        n.self_ns = n.total_ns > children ? n.total_ns - children : 0;
    }
    return tree;
}

} // namespace prof::analysis::views
