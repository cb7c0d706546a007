// End to end: tail recursion and mutual tail calls built at -O2 through prof::instrument are
// counted as the source calls them (tests/programs/tail_calls.cpp and .c), read from
// profreport --format json. The packaging test builds the same programs with Clang as well.
#include "support/json.hpp"
#include "support/run.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using prof::test::Json;
using prof::test::run;
using prof::test::trace_of;

namespace {

using Counts = std::pair<unsigned long long, unsigned long long>; // ncalls, primitive_calls

// The counts of each function in `profreport --format json TRACE`, by name.
std::map<std::string, Counts> counts(const std::string& trace) {
    auto r = run({PROFREPORT, "--format", "json", trace});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    Json report = prof::test::parse_json(r.out);
    std::map<std::string, Counts> by_name;
    for (const Json& f : report["functions"].items)
        by_name[f["name"].text] = {f["ncalls"].integer(), f["primitive_calls"].integer()};
    return by_name;
}

} // namespace

TEST_CASE("tail recursion and mutual tail calls are counted as the source calls them (C++)") {
    // Depth 100: count_down(100) .. count_down(0) is 101 calls; is_even(100) .. is_even(0) 51,
    // is_odd(99) .. is_odd(1) 50. One primitive call each, from main.
    std::string trace = trace_of("tail-calls.trace", {PROF_TEST_TAIL_CALLS, "100"});
    auto c = counts(trace);
    CHECK(c.size() == 4);
    CHECK(c["main"] == Counts{1, 1});
    CHECK(c["count_down(long, long)"] == Counts{101, 1});
    CHECK(c["is_even(long)"] == Counts{51, 1});
    CHECK(c["is_odd(long)"] == Counts{50, 1});

    // Depth 7, odd: is_even(7) .. is_even(1) is 4 calls, is_odd(6) .. is_odd(0) 4.
    auto odd = counts(trace_of("tail-calls-7.trace", {PROF_TEST_TAIL_CALLS, "7"}));
    CHECK(odd["count_down(long, long)"] == Counts{8, 1});
    CHECK(odd["is_even(long)"] == Counts{4, 1});
    CHECK(odd["is_odd(long)"] == Counts{4, 1});
}

TEST_CASE("tail recursion and mutual tail calls are counted as the source calls them (C)") {
    auto c = counts(trace_of("tail-calls-c.trace", {PROF_TEST_TAIL_CALLS_C, "100"}));
    CHECK(c.size() == 4);
    CHECK(c["main"] == Counts{1, 1});
    CHECK(c["c_count_down"] == Counts{101, 1});
    CHECK(c["c_is_even"] == Counts{51, 1});
    CHECK(c["c_is_odd"] == Counts{50, 1});
}
