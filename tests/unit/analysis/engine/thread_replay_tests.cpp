// A thread's replay state (analysis/engine/thread_replay.hpp): call paths, the trace's
// functions and the stack the heap replay reads, built and checked directly.
#include "unit/analysis/engine/engine_support.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace prof;
using namespace prof::test;
using analysis::engine::PathIndex;
using analysis::engine::ThreadReplay;
using analysis::engine::TraceFunctions;

TEST_CASE("thread replay: a call path is one node per (parent, function), made once") {
    ThreadReplay t;
    REQUIRE(t.nodes.size() == 1); // the root
    uint32_t main = t.child(0, 7);
    uint32_t a = t.child(main, 3);
    uint32_t b = t.child(main, 4);
    uint32_t a_again = t.child(main, 3);
    uint32_t a_in_a = t.child(a, 3);
    uint32_t a_at_root = t.child(0, 3);
    CHECK(main == 1);
    CHECK(a == 2);
    CHECK(b == 3);
    CHECK(a_again == a);
    CHECK(a_in_a == 4);
    CHECK(a_at_root == 5);
    REQUIRE(t.nodes.size() == 6);
    CHECK(t.nodes[a].parent == main);
    CHECK(t.nodes[a].function == 3);
    CHECK(t.nodes[a_in_a].parent == a);
    CHECK(t.nodes[a_at_root].parent == 0);
    CHECK(t.nodes[a].calls == 0);
    CHECK(t.nodes[a].total == 0);
}

TEST_CASE("thread replay: the path index keeps every key across its growth") {
    PathIndex index;
    // Far more keys than its first 1024 slots, with parents and functions both varying.
    const uint32_t n = 5000;
    uint32_t added = 0, found = 0;
    for (uint32_t i = 0; i < n; ++i)
        added += index.find_or_add(uint64_t(i / 7) << 32 | (i % 7), i) == i;
    for (uint32_t i = 0; i < n; ++i)
        found += index.find_or_add(uint64_t(i / 7) << 32 | (i % 7), n + i) == i;
    CHECK(added == n);
    CHECK(found == n);
    CHECK(index.find_or_add(uint64_t(n) << 32, n) == n); // a new key still new
}

TEST_CASE("thread replay: a trace's functions by (address, object), in order of first call") {
    TraceFunctions fns;
    CHECK(fns.of(0x2000, reader::kNoModule, 10) == 0);
    CHECK(fns.of(0x1000, reader::kNoModule, 11) == 1);
    CHECK(fns.of(0x2000, reader::kNoModule, 12) == 0); // met again: the first one's order
    CHECK(fns.of(0x2000, 3, 13) == 2); // the same address in another object: another function
    CHECK(fns.address == std::vector<uint64_t>{0x2000, 0x1000, 0x2000});
    CHECK(fns.module == std::vector<size_t>{reader::kNoModule, reader::kNoModule, 3});
    CHECK(fns.seen == std::vector<uint64_t>{10, 11, 13});
    CHECK(fns.inlined == std::vector<bool>{false, false, false});
}

TEST_CASE("thread replay: the stack the heap replay reads, innermost first") {
    TraceFunctions fns = trace_functions(3); // 0x1000, 0x2000, 0x3000
    ThreadReplay t;
    CHECK(analysis::engine::stack_addresses(t, fns).empty());
    CHECK(analysis::engine::top(t) == 0);
    uint32_t main = t.child(0, 0), a = t.child(main, 1), c = t.child(a, 2);
    t.stack = {{main, 0}, {a, 5}, {c, 9}};
    CHECK(analysis::engine::top(t) == c);
    CHECK(analysis::engine::stack_addresses(t, fns) ==
          std::vector<uint64_t>{0x3000, 0x2000, 0x1000});
    // A counting thread (format 1.9) is where its Position says, whatever frames it had open.
    t.counting = true;
    t.position = a;
    CHECK(analysis::engine::stack_addresses(t, fns) == std::vector<uint64_t>{0x2000, 0x1000});
    t.position = 0;
    CHECK(analysis::engine::stack_addresses(t, fns).empty());
    // Its call tree's nodes name path nodes; one it never defined (a damaged trace) is none.
    t.tree = {0, main, c};
    CHECK(analysis::engine::tree_node(t, 2) == c);
    CHECK(analysis::engine::tree_node(t, 3) == 0);
}
