// The derived models (analysis/engine/derive.hpp): the profile and the call tree, from a trace
// read by a Session and from call paths built node by node.
#include "unit/analysis/analysis_support.hpp"
#include "unit/analysis/engine/engine_support.hpp"

#include "analysis/engine/derive.hpp"

#include <memory>

using namespace prof;
using namespace prof::test;

TEST_CASE("the call tree: no child is wider than its parent, though each total is rounded") {
    // A clock of 3 ticks per second: a and b take 2 ticks each, 666,666,666.7 ns, rounded up;
    // main, their caller with nothing of its own, 4 ticks, 1,333,333,333.3 ns, rounded down.
    TraceBuilder b;
    b.header().clock_kind = uint32_t(format::ClockKind::kTsc);
    b.chunk(1, 0);
    define_functions(b, 3);
    b.enter(0, 0).enter(1, 0).exit(2).enter(2, 0).exit(2).exit(0);
    b.chunk(0);
    name_functions(b, {"main", "a", "b"}).end_record(4, 3);
    analysis::Session s;
    s.add_trace(save_trace(b, "rounded.trace"));
    analysis::views::CallTree t = s.call_tree();
    REQUIRE(t.root().children.size() == 1);
    const analysis::views::CallTreeNode& main = t.nodes[t.root().children[0]];
    REQUIRE(main.children.size() == 2);
    for (size_t c : main.children) CHECK(t.nodes[c].total_ns == 666666667);
    CHECK(main.total_ns == 1333333334);
    CHECK(main.self_ns == 0);
    CHECK(t.root().total_ns == main.total_ns);
}

namespace {

// The replayed threads of one trace of main (0x1000), a (0x2000) and b (0x3000), as the
// derived models read them, 1 tick per ns.
struct Replay {
    std::vector<reader::TraceInfo> traces{named_trace_info({"main", "a", "b"})};
    std::vector<analysis::engine::TraceFunctions> functions{trace_functions(3)};
    std::vector<std::unique_ptr<analysis::engine::ThreadReplay>> threads;
    analysis::FunctionResolver resolver;

    analysis::engine::ThreadReplay& thread(uint32_t stream) {
        threads.push_back(std::make_unique<analysis::engine::ThreadReplay>());
        threads.back()->stream = stream;
        threads.back()->index = threads.size() - 1;
        traces[0].threads[stream].stream = stream;
        traces[0].threads[stream].tid = 100 + stream;
        return *threads.back();
    }
    analysis::engine::Replayed replayed() { return {traces, functions, threads, resolver}; }
    analysis::Profile profile(const analysis::ThreadFilter& filter = {}) {
        return analysis::engine::build_profile(replayed(), filter, true, {});
    }
    analysis::views::CallTree tree(const analysis::views::CallTreeOptions& o = {}) {
        return analysis::engine::build_tree(replayed(), o, {});
    }
};

constexpr uint32_t kMain = 0, kA = 1, kB = 2;

// main (1 call, 100 ticks) calls a 3 times (60 ticks), which calls itself twice (20 ticks),
// and b once (30 ticks).
void recursive_thread(Replay& r) {
    analysis::engine::ThreadReplay& t = r.thread(1);
    add_path(t, {kMain}, 1, 100);
    add_path(t, {kMain, kA}, 3, 60);
    add_path(t, {kMain, kA, kA}, 2, 20);
    add_path(t, {kMain, kB}, 1, 30);
}

} // namespace

TEST_CASE("derive: the profile of call paths, recursion counted once in cumtime") {
    Replay r;
    recursive_thread(r);
    analysis::Profile p = r.profile();
    REQUIRE(p.functions.size() == 3);
    check_stats(stats(p, "main"), 1, 1, 10, 100);
    check_stats(stats(p, "a"), 5, 3, 40 + 20, 60); // the inner calls are no primitive calls
    check_stats(stats(p, "b"), 1, 1, 30, 30);
    CHECK(p.edges.size() == 4);
    check_stats(edge(p, "", "main"), 1, 1, 10, 100);
    check_stats(edge(p, "main", "a"), 3, 3, 40, 60);
    check_stats(edge(p, "a", "a"), 2, 2, 20, 20);
    check_stats(edge(p, "main", "b"), 1, 1, 30, 30);
    CHECK(p.total_calls == 7);
    CHECK(p.primitive_calls == 5);
    CHECK(same_time(p.total_time, 100)); // the self times add up to the root's total
    CHECK(p.compensated);
    REQUIRE(p.threads.size() == 1);
    CHECK(p.threads[0].tid == 101);
    // No callee's cumtime is above its caller's.
    for (const analysis::Edge& e : p.edges)
        if (e.caller != analysis::kRoot)
            CHECK(p.functions[e.callee].stats.cumtime <= p.functions[e.caller].stats.cumtime);
}

TEST_CASE("derive: threads merge by function, a filter keeps one thread") {
    Replay r;
    recursive_thread(r);
    analysis::engine::ThreadReplay& two = r.thread(2);
    add_path(two, {kB}, 4, 12); // b called from the thread's root
    add_path(two, {kB, kMain}, 1, 5);
    two.unmatched_exits = 3;
    analysis::Profile p = r.profile();
    REQUIRE(p.functions.size() == 3);
    check_stats(stats(p, "main"), 2, 2, 15, 105);
    check_stats(stats(p, "b"), 5, 5, 37, 42);
    check_stats(edge(p, "", "b"), 4, 4, 7, 12);
    check_stats(edge(p, "b", "main"), 1, 1, 5, 5);
    CHECK(p.edges.size() == 6);
    CHECK(p.total_calls == 12);
    CHECK(same_time(p.total_time, 112));
    REQUIRE(p.threads.size() == 2);
    CHECK(p.threads[1].unmatched_exits == 3);

    analysis::Profile only = r.profile(analysis::ThreadFilter{0, 2});
    REQUIRE(only.functions.size() == 2); // a was not called there
    check_stats(stats(only, "b"), 4, 4, 7, 12);
    check_stats(stats(only, "main"), 1, 1, 5, 5);
    REQUIRE(only.threads.size() == 1);
    CHECK(only.threads[0].tid == 102);
}

TEST_CASE("derive: the call tree of call paths, each node within its parent") {
    Replay r;
    recursive_thread(r);
    analysis::engine::ThreadReplay& two = r.thread(2);
    add_path(two, {kMain}, 1, 50);
    add_path(two, {kMain, kB}, 2, 40);
    analysis::views::CallTree t = r.tree();
    size_t main = node_at(t, {"main"}), a = node_at(t, {"main", "a"});
    size_t aa = node_at(t, {"main", "a", "a"}), b = node_at(t, {"main", "b"});
    REQUIRE(aa != SIZE_MAX);
    REQUIRE(b != SIZE_MAX);
    // The threads' paths merge by function: main and main > b of both threads are one node.
    CHECK(t.nodes[main].calls == 2);
    CHECK(t.nodes[main].total_ns == 150);
    CHECK(t.nodes[main].self_ns == 10 + 10);
    CHECK(t.nodes[a].calls == 3);
    CHECK(t.nodes[a].total_ns == 60);
    CHECK(t.nodes[a].self_ns == 40);
    CHECK(t.nodes[aa].calls == 2);
    CHECK(t.nodes[aa].total_ns == 20);
    CHECK(t.nodes[b].calls == 3);
    CHECK(t.nodes[b].total_ns == 70);
    CHECK(t.root().total_ns == 150);
    CHECK(t.threads.size() == 2);
    for (size_t n = 1; n < t.nodes.size(); ++n)
        CHECK(t.nodes[n].total_ns <= t.nodes[t.nodes[n].parent].total_ns);

    // Split by thread: a node per thread under the root, labelled by its tid.
    analysis::views::CallTree split = r.tree({true, {}});
    size_t first = node_at(split, {"thread 101", "main", "b"});
    size_t second = node_at(split, {"thread 102", "main", "b"});
    REQUIRE(first != SIZE_MAX);
    REQUIRE(second != SIZE_MAX);
    CHECK(split.nodes[first].total_ns == 30);
    CHECK(split.nodes[second].total_ns == 40);
    CHECK(split.nodes[node_at(split, {"thread 101"})].total_ns == 100);
    CHECK(split.nodes[node_at(split, {"thread 102"})].total_ns == 50);
    CHECK(split.root().total_ns == 150);
}
