// The derived models (analysis/engine/derive.hpp): the profile and the call tree a replay gives.
#include "unit/analysis/analysis_support.hpp"

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
