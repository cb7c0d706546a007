// The calling context tree (views/call_tree.hpp) from the replay engine: one node per call
// path, exact calls and nanosecond totals, split by thread or of one thread.
#include "unit/analysis/analysis_support.hpp"

using namespace prof;
using namespace prof::test;
using analysis::views::CallTree;
using analysis::views::CallTreeOptions;

namespace {

// Thread 1: main 0..100 calls a 10..40 (which calls c 20..30) and b 50..90 (which calls c
// 60..70 and 75..85). Thread 2: main 0..50 calls a 10..30.
std::string tree_trace() {
    TraceBuilder b;
    b.chunk(1, 0);
    define_functions(b, 4); // main a b c
    b.enter(0, 0).enter(1, 10).enter(3, 10).exit(10).exit(10);
    b.enter(2, 10).enter(3, 10).exit(10).enter(3, 5).exit(10).exit(5).exit(10);
    b.chunk(2, 0);
    define_functions(b, 2);
    b.enter(0, 0).enter(1, 10).exit(20).exit(20);
    b.chunk(0);
    name_functions(b, {"main", "a", "b", "c"}).end_record(100);
    return save_trace(b, "tree.trace");
}

void check_node(const CallTree& t, const std::vector<std::string>& path, uint64_t calls,
                uint64_t total_ns, uint64_t self_ns) {
    size_t n = node_at(t, path);
    REQUIRE(n != SIZE_MAX);
    CHECK(t.nodes[n].calls == calls);
    CHECK(t.nodes[n].total_ns == total_ns);
    CHECK(t.nodes[n].self_ns == self_ns);
    CHECK(t.nodes[n].depth == path.size());
}

} // namespace

TEST_CASE("call tree: a node per call path, threads merged by path") {
    analysis::Session s;
    s.add_trace(tree_trace());
    CallTree t = s.call_tree();
    CHECK(t.threads.size() == 2);
    CHECK(t.root().total_ns == 150);
    CHECK(t.root().self_ns == 0);
    CHECK(t.name(t.root()) == "all");
    REQUIRE(t.root().children.size() == 1);
    check_node(t, {"main"}, 2, 150, 60);
    check_node(t, {"main", "a"}, 2, 30 + 20, 40);
    check_node(t, {"main", "a", "c"}, 1, 10, 10);
    check_node(t, {"main", "b"}, 1, 40, 20);
    check_node(t, {"main", "b", "c"}, 2, 20, 20);
    // c has two nodes, one per path; a root, main, a, b, and c twice.
    CHECK(t.nodes.size() == 6);
    size_t selfs = 0;
    for (const auto& n : t.nodes) selfs += n.self_ns;
    CHECK(selfs == t.root().total_ns);
}

TEST_CASE("call tree: path() lists the frames from the root's child down") {
    analysis::Session s;
    s.add_trace(tree_trace());
    CallTree t = s.call_tree();
    size_t c = node_at(t, {"main", "b", "c"});
    REQUIRE(c != SIZE_MAX);
    std::vector<size_t> path = t.path(c);
    REQUIRE(path.size() == 3);
    CHECK(t.name(t.nodes[path[0]]) == "main");
    CHECK(t.name(t.nodes[path[1]]) == "b");
    CHECK(path[2] == c);
    CHECK(t.path(0).empty());
}

TEST_CASE("call tree split by thread: a node per thread under the root") {
    analysis::Session s;
    s.add_trace(tree_trace());
    CallTreeOptions o;
    o.split_threads = true;
    CallTree t = s.call_tree(o);
    REQUIRE(t.root().children.size() == 2);
    const auto& t1 = t.nodes[t.root().children[0]];
    const auto& t2 = t.nodes[t.root().children[1]];
    CHECK(t1.function == analysis::views::kNoFunction);
    CHECK(t.name(t1).rfind("thread ", 0) == 0);
    CHECK(t1.total_ns == 100);
    CHECK(t2.total_ns == 50);
    CHECK(t.root().total_ns == 150);
    std::string n1 = t.name(t1), n2 = t.name(t2);
    CHECK(n1 != n2);
    check_node(t, {n1, "main"}, 1, 100, 30);
    check_node(t, {n1, "main", "a"}, 1, 30, 20);
    check_node(t, {n1, "main", "b", "c"}, 2, 20, 20);
    check_node(t, {n2, "main"}, 1, 50, 30);
    check_node(t, {n2, "main", "a"}, 1, 20, 20);
    CHECK(node_at(t, {n2, "main", "b"}) == SIZE_MAX);
    // path() includes the thread node.
    CHECK(t.path(node_at(t, {n2, "main", "a"})).size() == 3);
}

TEST_CASE("call tree of one thread") {
    analysis::Session s;
    s.add_trace(tree_trace());
    CallTreeOptions o;
    o.thread = s.thread_list().at(1);
    CallTree t = s.call_tree(o);
    REQUIRE(t.threads.size() == 1);
    CHECK(t.threads[0].stream == 2);
    CHECK(t.root().total_ns == 50);
    check_node(t, {"main"}, 1, 50, 30);
    check_node(t, {"main", "a"}, 1, 20, 20);
    CHECK(t.nodes.size() == 3);
}

TEST_CASE("call tree and profile agree: the root is the profile's total time") {
    analysis::Session s;
    s.add_trace(tree_trace());
    CallTree t = s.call_tree();
    analysis::Profile p = s.profile();
    CHECK(double(t.root().total_ns) * 1e-9 == approx(p.total_time));
    // A function's tottime is the sum of its nodes' self times.
    for (const std::string name : {"main", "a", "b", "c"}) {
        uint64_t self = 0;
        for (const auto& n : t.nodes)
            if (n.function != analysis::views::kNoFunction && t.functions[n.function].name == name)
                self += n.self_ns;
        CHECK(double(self) * 1e-9 == approx(stats(p, name).tottime));
    }
}
