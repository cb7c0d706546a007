// One trace, one answer: every view's total time comes from the one replay engine, so the
// pstats table's total, the call tree's, callgrind's (and callgrind_annotate's), the flame
// graph's root, the HTML report's tree root, speedscope's outermost activations and the
// collapsed stacks' sum agree, with the profiler's cost subtracted and without.
//
// They agree to rounding only: the tree keeps each node's total in whole nanoseconds, rounded
// once per thread and path (at most 0.5 ns each), so the sums of self times (collapsed,
// callgrind, --tree) and the roots (flame graph, HTML) can differ by up to about 1 ns per node;
// speedscope truncates each open and close to a nanosecond (under 1 ns per activation); the
// table's total_time is printed with 9 decimals (0.5 ns). The tolerance is therefore
// 2 ns per tree node and per outermost activation, plus 2 ns: a few ns per node at most.
#include "support/browser.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using prof::test::json_number;
using prof::test::run;
using prof::test::slurp;
using prof::test::temp_path;
using prof::test::trace_of;
using prof::test::which;

namespace {

// profreport with `args` on `trace`, with --no-compensation unless `compensate`.
std::string report(const std::vector<std::string>& args, const std::string& trace,
                   bool compensate) {
    std::vector<std::string> argv{PROFREPORT};
    argv.insert(argv.end(), args.begin(), args.end());
    if (!compensate) argv.push_back("--no-compensation");
    argv.push_back(trace);
    auto r = run(argv);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return r.out;
}

// The checker's one-line summary of an export (tests/views/check_views.py).
std::string check(const std::string& kind, const std::string& file) {
    auto r = run({which("python3"), PROF_VIEW_CHECKER, kind, file});
    REQUIRE_MESSAGE(r.exit_code == 0, kind << ": " << r.err);
    return r.out;
}

uint64_t digits(std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ','), s.end());
    return std::stoull(s);
}

struct Totals {
    double table = 0;        // profreport --format json: total_time, in ns
    double html_table = 0;   // the HTML report's total_time, in ns
    uint64_t tree_self = 0;  // --tree --format csv: the sum of self_ns
    uint64_t tree_nodes = 0; // its rows
    uint64_t callgrind = 0;  // the summary line
    int64_t annotate = -1;   // callgrind_annotate's PROGRAM TOTALS; -1 when not installed
    uint64_t flame = 0;      // the flame graph's root width
    uint64_t html = 0;       // the HTML report's tree root
    uint64_t speedscope = 0; // the outermost activations' durations
    uint64_t roots = 0;      // how many there are
    uint64_t collapsed = 0;  // the sum of the folded stacks' weights
};

Totals totals(const std::string& trace, bool compensate) {
    Totals t;
    std::string dir = trace + (compensate ? ".on" : ".off");
    t.table = json_number(report({"--format", "json"}, trace, compensate), "total_time") * 1e9;

    std::istringstream tree(report({"--tree", "--format", "csv"}, trace, compensate));
    std::string line;
    std::getline(tree, line);
    REQUIRE(line.rfind("id,parent,depth,calls,total_ns,self_ns,", 0) == 0);
    std::regex row(R"(\d+,\d+,\d+,\d+,\d+,(\d+),.*)");
    while (std::getline(tree, line)) {
        std::smatch m;
        REQUIRE_MESSAGE(std::regex_match(line, m, row), line);
        t.tree_self += std::stoull(m[1]);
        ++t.tree_nodes;
    }

    std::string cg = dir + ".callgrind";
    report({"--export", "callgrind", "-o", cg}, trace, compensate);
    std::smatch m;
    std::string text = slurp(cg);
    REQUIRE(std::regex_search(text, m, std::regex(R"(\nsummary: (\d+)\n)")));
    t.callgrind = std::stoull(m[1]);
    if (!which("callgrind_annotate").empty()) {
        auto a = run({which("callgrind_annotate"), "--threshold=100", cg});
        REQUIRE_MESSAGE(a.exit_code == 0, a.err);
        REQUIRE_MESSAGE(
            std::regex_search(a.out, m, std::regex(R"(([0-9,]+) \([ 0-9.]+%\)\s+PROGRAM TOTALS)")),
            a.out);
        t.annotate = int64_t(digits(m[1]));
    }

    std::string svg = dir + ".svg";
    report({"--flamegraph", svg, "--min-width", "0"}, trace, compensate);
    t.flame = uint64_t(json_number(check("svg", svg), "total"));

    std::string html = dir + ".html";
    report({"--html", html}, trace, compensate);
    std::string h = check("html", html);
    t.html = uint64_t(json_number(h, "total"));
    t.html_table = json_number(h, "total_time") * 1e9;

    std::string ss = dir + ".speedscope.json";
    report({"--export", "speedscope", "-o", ss}, trace, compensate);
    std::string s = check("speedscope", ss);
    t.speedscope = uint64_t(json_number(s, "total"));
    t.roots = uint64_t(json_number(s, "roots"));

    std::string folded = dir + ".folded";
    report({"--export", "collapsed", "-o", folded}, trace, compensate);
    t.collapsed = uint64_t(json_number(check("collapsed", folded), "total"));
    return t;
}

void check_agree(const std::string& trace, bool compensate) {
    Totals t = totals(trace, compensate);
    const double tolerance = 2.0 * double(t.tree_nodes + t.roots) + 2;
    const std::string mode = compensate ? "compensated" : "--no-compensation";
    INFO("trace " << trace << " (" << mode << ")");
    INFO("tolerance " << tolerance << " ns: " << t.tree_nodes << " nodes, " << t.roots
                      << " outermost activations");
    INFO("table " << uint64_t(std::llround(t.table)) << ", html table "
                  << uint64_t(std::llround(t.html_table)) << ", tree " << t.tree_self
                  << ", callgrind " << t.callgrind << ", annotate " << t.annotate << ", flame "
                  << t.flame << ", html " << t.html << ", speedscope " << t.speedscope
                  << ", collapsed " << t.collapsed);
    REQUIRE(t.table > 0);
    auto near = [&](double v) { return std::fabs(v - t.table) <= tolerance; };
    CHECK(near(t.html_table));
    CHECK(near(double(t.tree_self)));
    CHECK(near(double(t.callgrind)));
    if (t.annotate >= 0) CHECK(near(double(t.annotate)));
    CHECK(near(double(t.flame)));
    CHECK(near(double(t.html)));
    CHECK(near(double(t.speedscope)));
    CHECK(near(double(t.collapsed)));
    // Those built from the same numbers agree exactly.
    CHECK(t.callgrind == t.tree_self);
    CHECK(t.collapsed == t.tree_self);
    if (t.annotate >= 0) CHECK(uint64_t(t.annotate) == t.tree_self);
    CHECK(t.flame == t.html);
}

} // namespace

TEST_CASE("one total in every view: recursion (fib)") {
    std::string trace = trace_of("consistency-fib.trace", {PROF_SAMPLE_FIB, "20"});
    check_agree(trace, true);
    check_agree(trace, false);
}

TEST_CASE("one total in every view: threads") {
    std::string trace = trace_of("consistency-threads.trace", {PROF_SAMPLE_THREADS});
    check_agree(trace, true);
    check_agree(trace, false);
}

// Times from samples, speedscope as sampled profiles: the counting mode (PROF_TIME=sampled),
// where every trace is timed by its samples. Under a sanitizer the sampler is off (its
// interposers are not reached) and the trace would be timed by the hooks.
#ifndef PROF_SANITIZER_BUILD
TEST_CASE("one total in every view: times from samples (PROF_TIME=sampled)") {
    std::string trace = temp_path("consistency-counting.trace");
    auto r = run({PROF_TEST_TRUE_TIME, "0.5"}, {{"PROF_OUT", trace}, {"PROF_TIME", "sampled"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::string ss = temp_path("consistency-counting.speedscope.json");
    report({"--export", "speedscope", "-o", ss}, trace, true);
    REQUIRE(slurp(ss).find("\"type\":\"sampled\"") != std::string::npos);
    check_agree(trace, true);
}

// The default (PROF_TIME=auto) on a run long enough to switch: each call's time up to the 10th
// sample, then calls counted in a call tree, timed by the samples.
TEST_CASE("one total in every view: traced, then counted (PROF_TIME=auto)") {
    std::string trace = temp_path("consistency-auto.trace");
    auto r = run({PROF_TEST_TRUE_TIME, "0.5"}, {{"PROF_OUT", trace}, {"PROF_COUNT_AFTER", "10"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto info = run({PROFREPORT, "--info", trace});
    REQUIRE(info.exit_code == 0);
    REQUIRE(info.out.find("(calls counted in its call tree)") != std::string::npos);
    check_agree(trace, true);
    check_agree(trace, false);
}
#endif

TEST_CASE("one total in every view: scope runs, exceptions and a fork (scope_runs)") {
    std::string trace = trace_of("consistency-scopes.trace", {PROF_TEST_SCOPE_RUNS});
    check_agree(trace, true);
    check_agree(trace, false);
}
