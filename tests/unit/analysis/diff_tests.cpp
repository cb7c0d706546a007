// diff_profiles, diff_failures and diff_edges (views/diff.hpp), and diff_call_trees
// (views/diff_tree.hpp): two sets of runs from built traces, or made by hand.
#include "unit/analysis/analysis_support.hpp"

#include "analysis/model/diff.hpp"
#include "analysis/model/diff_tree.hpp"

#include <cmath>

using namespace prof;
using namespace prof::test;
using analysis::views::DiffOptions;
using analysis::views::DiffResult;
using analysis::views::DiffRow;

namespace {

// Base: main 0..1000 calls work 100..600 and tiny 700..705.
std::string base_trace() {
    TraceBuilder b;
    b.chunk(1, 0);
    define_functions(b, 3);
    b.enter(0, 0).enter(1, 100).exit(500).enter(2, 100).exit(5).exit(295);
    b.chunk(0);
    name_functions(b, {"main", "work", "tiny"}).end_record(1000);
    return save_trace(b, "diff_base.trace");
}

// New: main 0..1400 calls work 100..900, tiny 1000..1010 and a new extra 1100..1300.
std::string new_trace(const std::string& name = "diff_new.trace") {
    TraceBuilder b;
    b.chunk(1, 0);
    define_functions(b, 4);
    b.enter(0, 0).enter(1, 100).exit(800).enter(2, 100).exit(10).enter(3, 90).exit(200).exit(100);
    b.chunk(0);
    name_functions(b, {"main", "work", "tiny", "extra"}).end_record(1400);
    return save_trace(b, name);
}

const DiffRow& row(const DiffResult& d, const std::string& name) {
    for (const DiffRow& r : d.rows)
        if (r.name == name) return r;
    FAIL("no row " << name);
    return d.rows.front();
}

} // namespace

TEST_CASE("diff: per-function deltas and ratios, ordered by the largest change") {
    analysis::Profile base = profile_of(base_trace()), next = profile_of(new_trace());
    DiffOptions o;
    DiffResult d = analysis::views::diff_profiles(base, 1, next, 1, o);
    REQUIRE(d.rows.size() == 4);
    CHECK(d.rows[0].name == "main");
    CHECK(d.rows[1].name == "work");
    CHECK(d.rows[2].name == "extra");
    CHECK(d.rows[3].name == "tiny");
    const DiffRow& work = row(d, "work");
    CHECK(work.in_base);
    CHECK(work.in_new);
    CHECK(work.file == "app.cpp");
    CHECK(work.line == 20);
    CHECK(work.base.cumtime == approx(500e-9));
    CHECK(work.next.cumtime == approx(800e-9));
    CHECK(work.change == approx(300e-9));
    CHECK(work.percent == approx(60));
    const DiffRow& main = row(d, "main");
    CHECK(main.base.tottime == approx(495e-9));
    CHECK(main.next.tottime == approx(390e-9));
    CHECK(main.percent == approx(40));
    const DiffRow& extra = row(d, "extra");
    CHECK_FALSE(extra.in_base);
    CHECK(std::isinf(extra.percent));
    CHECK(row(d, "tiny").percent == approx(100));
    CHECK(d.base_total.tottime == approx(1000e-9));
    CHECK(d.new_total.tottime == approx(1400e-9));
    CHECK(d.base_total.ncalls == 3);
    CHECK(d.new_total.ncalls == 4);
    CHECK(d.total_percent == approx(40));
    // No gate: nothing fails.
    CHECK_FALSE(d.failed());
    CHECK(analysis::views::diff_failures(d, o).empty());
}

TEST_CASE("diff: fail_above fails on a regression or a new function above the minimum share") {
    analysis::Profile base = profile_of(base_trace()), next = profile_of(new_trace());
    DiffOptions o;
    o.fail_above = 50;
    DiffResult d = analysis::views::diff_profiles(base, 1, next, 1, o);
    CHECK(d.failed());
    CHECK_FALSE(d.total_regression); // +40%
    CHECK(row(d, "work").regression);
    CHECK_FALSE(row(d, "main").regression);
    CHECK(row(d, "extra").regression);
    CHECK_FALSE(row(d, "tiny").regression); // +100%, but under 1% of the total in both
    std::vector<std::string> expected = {
        "cumtime of app.cpp:20(work) regressed by 60.0% (limit 50%)",
        "cumtime of app.cpp:40(extra) is new"};
    CHECK(analysis::views::diff_failures(d, o) == expected);

    o.fail_above = 30; // the total fails too
    d = analysis::views::diff_profiles(base, 1, next, 1, o);
    CHECK(d.total_regression);
    CHECK(analysis::views::diff_failures(d, o).front() ==
          "total time regressed by 40.0% (limit 30%)");

    o.fail_above = 50;
    o.min_share = 0.5; // tiny is 0.5% of the base: it counts now
    d = analysis::views::diff_profiles(base, 1, next, 1, o);
    CHECK(row(d, "tiny").regression);

    o = DiffOptions{};
    o.metric = analysis::views::DiffMetric::kTottime;
    o.fail_above = 10;
    d = analysis::views::diff_profiles(base, 1, next, 1, o);
    CHECK(row(d, "main").change == approx(-105e-9));
    CHECK_FALSE(row(d, "main").regression);
    CHECK(row(d, "work").regression);
}

TEST_CASE("diff: sets of runs compared per run") {
    analysis::Profile base = profile_of(base_trace());
    analysis::Session twice;
    twice.add_trace(new_trace("diff_new_1.trace"));
    twice.add_trace(new_trace("diff_new_2.trace"));
    analysis::Profile next = twice.profile();
    CHECK(stats(next, "work").ncalls == 2);
    DiffResult d = analysis::views::diff_profiles(base, 1, next, 2, DiffOptions{});
    CHECK(d.new_runs == 2);
    CHECK(row(d, "work").next.ncalls == 1);
    CHECK(row(d, "work").next.cumtime == approx(800e-9));
    CHECK(row(d, "work").percent == approx(60));
    CHECK(d.new_total.tottime == approx(1400e-9));
    CHECK(d.new_total.ncalls == 4);
}

namespace {

// A profile of one run: `work` and `rest` with these cumtimes (seconds), timed by `samples`
// CPU samples of `period` seconds (0: by the clock per call).
analysis::Profile run_of(double work, double rest, uint64_t samples = 0, double period = 0) {
    analysis::Profile p;
    for (auto [name, t] : {std::pair{"work", work}, std::pair{"rest", rest}}) {
        analysis::Function f;
        f.name = name;
        f.file = "app.cpp";
        f.stats.ncalls = 10;
        f.stats.pcalls = 10;
        f.stats.tottime = f.stats.cumtime = t;
        p.functions.push_back(f);
    }
    p.total_calls = p.primitive_calls = 20;
    p.total_time = work + rest;
    p.time.samples = samples;
    p.time.cpu_seconds = double(samples) * period;
    return p;
}

} // namespace

TEST_CASE("diff: a change fails the gate only beyond the limit and beyond the runs' noise") {
    DiffOptions o;
    o.fail_above = 10;
    // Three runs a side that vary by a few percent: no change beyond the limit.
    std::vector<analysis::Profile> base{run_of(1.00, 1.0), run_of(1.04, 1.0), run_of(0.96, 1.0)};
    std::vector<analysis::Profile> same{run_of(1.02, 1.0), run_of(0.97, 1.0), run_of(1.01, 1.0)};
    DiffResult d = analysis::views::diff_runs(base, same, o);
    CHECK(d.spread_known);
    CHECK_FALSE(d.failed());
    CHECK_FALSE(d.undecided());
    // Work 40% slower in every run: a regression, with its uncertainty from the spread. The
    // sample standard deviations are 0.04 on each side, so the standard error of the
    // difference is sqrt(2 * 0.04^2 / 3) = 0.0327 s; Welch's degrees of freedom are 4, and
    // Student's t(4) at 97.5% is 2.78: +-0.0907 s, 9.07% of the base's 1.00 s.
    std::vector<analysis::Profile> slower{run_of(1.40, 1.0), run_of(1.44, 1.0), run_of(1.36, 1.0)};
    d = analysis::views::diff_runs(base, slower, o);
    const DiffRow& work = row(d, "work");
    CHECK(work.percent == approx(40));
    CHECK(work.uncertainty == approx(2.78 * std::sqrt(2 * 0.04 * 0.04 / 3)));
    CHECK(work.percent_uncertainty == approx(100 * work.uncertainty / 1.00));
    CHECK(work.regression);
    CHECK_FALSE(row(d, "rest").regression);
    CHECK(d.failed());
    std::vector<std::string> failures = analysis::views::diff_failures(d, o);
    // The total (2.00 s a run) gained the same 0.40 s, with the same uncertainty.
    std::vector<std::string> expected{"total time regressed by 20.0% +-4.5 (limit 10%)",
                                      "cumtime of app.cpp:0(work) regressed by 40.0% +-9.1 "
                                      "(limit 10%)"};
    CHECK(failures == expected);

    // The same mean change where the new runs scatter: above the limit, within the noise.
    std::vector<analysis::Profile> scattered{run_of(0.80, 1.0), run_of(2.00, 1.0),
                                             run_of(1.40, 1.0)};
    d = analysis::views::diff_runs(base, scattered, o);
    CHECK(row(d, "work").percent == approx(40));
    CHECK_FALSE(row(d, "work").regression);
    CHECK(row(d, "work").undecided);
    CHECK_FALSE(d.failed());
    std::vector<std::string> undecided = analysis::views::diff_undecided(d, o);
    REQUIRE_FALSE(undecided.empty());
    CHECK(undecided.back().find("cumtime of app.cpp:0(work) changed by +40.0% +-") == 0);
    CHECK(undecided.back().find("more runs per side would narrow it") != std::string::npos);
}

TEST_CASE("diff: one run a side knows the sampling error of sampled times, and counts exactly") {
    DiffOptions o;
    o.fail_above = 10;
    // 1000 samples of 1 ms: work's 0.2 s is 200 samples, +-sqrt(200) ms on each side.
    analysis::Profile base = run_of(0.2, 0.8, 1000, 0.001);
    analysis::Profile next = run_of(0.23, 0.8, 1030, 0.001);
    DiffResult d = analysis::views::diff_runs({base}, {next}, o);
    CHECK_FALSE(d.spread_known);
    const DiffRow& work = row(d, "work");
    CHECK(work.percent == approx(15));
    CHECK(work.uncertainty == approx(1.96 * std::sqrt(0.2 * 0.001 + 0.23 * 0.001)));
    CHECK_FALSE(work.regression); // +15% +-20.3: within the sampling error
    CHECK(work.undecided);
    std::vector<std::string> undecided = analysis::views::diff_undecided(d, o);
    REQUIRE_FALSE(undecided.empty());
    CHECK(undecided.back().find("give 3 or more runs per side") != std::string::npos);

    // Twice the samples' worth of change is beyond it.
    d = analysis::views::diff_runs({base}, {run_of(0.4, 0.8, 1200, 0.001)}, o);
    CHECK(row(d, "work").regression);

    // A profile timed by the clock per call has no sampling error: compared exactly.
    d = analysis::views::diff_runs({run_of(0.2, 0.8)}, {run_of(0.23, 0.8)}, o);
    CHECK(row(d, "work").uncertainty == 0);
    CHECK(row(d, "work").regression);

    // Counts are exact, sampled or not.
    o.metric = analysis::views::DiffMetric::kNcalls;
    analysis::Profile more = run_of(0.2, 0.8, 1000, 0.001);
    more.functions[0].stats.ncalls = 12;
    more.total_calls = 22;
    d = analysis::views::diff_runs({base}, {more}, o);
    CHECK(row(d, "work").percent == approx(20));
    CHECK(row(d, "work").uncertainty == 0);
    CHECK(row(d, "work").regression);
    CHECK(analysis::views::diff_failures(d, o).back() ==
          "ncalls of app.cpp:0(work) regressed by 20.0% (limit 10%)");
}

TEST_CASE("diff: several runs on one side against one on the other: that one varies like them") {
    DiffOptions o;
    o.fail_above = 10;
    std::vector<analysis::Profile> base{run_of(1.00, 1.0), run_of(1.04, 1.0), run_of(0.96, 1.0)};
    // One new run 12% slower: as far from the base's mean as its runs go from each other, three
    // times over. Its own spread is unknown: taken as the base's (sd 0.04), at the base's 2
    // degrees of freedom (t 4.30): +-4.30 * sqrt(0.04^2 / 3 + 0.04^2) = 0.199 s.
    DiffResult d = analysis::views::diff_runs(base, {run_of(1.12, 1.0)}, o);
    CHECK(d.spread_known);
    const DiffRow& work = row(d, "work");
    CHECK(work.uncertainty == approx(4.30 * std::sqrt(0.04 * 0.04 / 3 + 0.04 * 0.04)));
    CHECK(work.undecided);
    CHECK_FALSE(d.failed());
    // 60% slower is beyond it.
    d = analysis::views::diff_runs(base, {run_of(1.60, 1.0)}, o);
    CHECK(row(d, "work").regression);
}

// ---- call trees and edges ----------------------------------------------------------------

namespace {

using analysis::views::CallTree;
using analysis::views::DiffTree;
using analysis::views::DiffTreeNode;

struct Run {
    analysis::Profile profile;
    CallTree tree;
};
Run run_of(const std::string& trace) {
    analysis::Session s(analysis::SessionOptions{true, true, {}, nullptr});
    s.add_trace(trace);
    return {s.profile(), s.call_tree()};
}

const DiffTreeNode& node(const DiffTree& t, const std::string& path) {
    for (size_t i = 1; i < t.nodes.size(); ++i)
        if (t.path_text(i) == path) return t.nodes[i];
    FAIL("no node " << path);
    return t.nodes.front();
}

// A call tree of one run: main calling each of `names` once, each taking its `ns`.
CallTree tree_of(const std::vector<std::string>& names, const std::vector<uint64_t>& ns) {
    CallTree t;
    t.nodes.resize(2);
    t.nodes[0].label = "all";
    analysis::Function m;
    m.name = "main";
    t.functions.push_back(m);
    t.nodes[1].parent = 0;
    t.nodes[1].function = 0;
    t.nodes[1].depth = 1;
    t.nodes[1].calls = 1;
    t.nodes[0].children = {1};
    for (size_t i = 0; i < names.size(); ++i) {
        analysis::Function f;
        f.name = names[i];
        t.functions.push_back(f);
        analysis::views::CallTreeNode n;
        n.parent = 1;
        n.function = i + 1;
        n.depth = 2;
        n.calls = 1;
        n.total_ns = n.self_ns = ns[i];
        t.nodes[1].children.push_back(t.nodes.size());
        t.nodes[1].total_ns += ns[i];
        t.nodes.push_back(n);
    }
    t.nodes[0].total_ns = t.nodes[1].total_ns;
    return t;
}

} // namespace

TEST_CASE("diff tree: call paths of both sides laid over each other, means per run, exact") {
    Run base = run_of(base_trace()), next = run_of(new_trace("diff_tree_new.trace"));
    // The new side twice: means per run, and no spread between identical runs.
    DiffTree t = analysis::views::diff_call_trees(
        {base.tree}, {base.profile}, {next.tree, next.tree}, {next.profile, next.profile});
    CHECK(t.base_runs == 1);
    CHECK(t.new_runs == 2);
    CHECK(t.spread_known);
    CHECK(t.root().base_total == 1000);
    CHECK(t.root().new_total == 1400);
    const DiffTreeNode& work = node(t, "main;work");
    CHECK(work.base_total == 500);
    CHECK(work.new_total == 800);
    CHECK(work.new_calls == 1);
    CHECK(work.uncertainty == 0); // timed per call, identical runs: exact
    CHECK(work.direction() == 1);
    const DiffTreeNode& extra = node(t, "main;extra");
    CHECK(extra.base_total == 0);
    CHECK(extra.new_total == 200);
    CHECK(extra.base_calls == 0);
    const DiffTreeNode& main = node(t, "main");
    CHECK(main.base_self == 495);
    CHECK(main.new_self == 390);
    CHECK(t.nodes.size() == 5); // all, main, work, tiny, extra
    // Parents precede their children.
    for (size_t i = 1; i < t.nodes.size(); ++i) CHECK(t.nodes[i].parent < i);

    // Edges of the same runs, on the rows of the per-function diff.
    analysis::views::DiffOptions o;
    analysis::views::DiffResult d =
        analysis::views::diff_runs({base.profile}, {next.profile, next.profile}, o);
    auto edges = analysis::views::diff_edges(d, {base.profile}, {next.profile, next.profile});
    bool saw_work = false, saw_extra = false, saw_start = false;
    for (const analysis::views::DiffEdge& e : edges) {
        const std::string& callee = d.rows[e.callee].name;
        std::string caller = e.caller == SIZE_MAX ? "" : d.rows[e.caller].name;
        if (caller == "main" && callee == "work") {
            saw_work = true;
            CHECK(e.base.cumtime == approx(500e-9));
            CHECK(e.next.cumtime == approx(800e-9));
            CHECK(e.next.ncalls == 1);
        }
        if (caller == "main" && callee == "extra") {
            saw_extra = true;
            CHECK(e.base.ncalls == 0);
            CHECK(e.next.cumtime == approx(200e-9));
        }
        if (caller.empty() && callee == "main") saw_start = true;
    }
    CHECK(saw_work);
    CHECK(saw_extra);
    CHECK(saw_start);
    CHECK(edges.size() == 4);
}

TEST_CASE("diff tree: three runs a side, a change beyond the runs' spread is one, within it none") {
    // work: 100, 110, 90 ns against 150, 160, 140; same: 100, 110, 90 against 105, 115, 95.
    // Each side's sample variance is 100, the variance of the difference 200/3, Welch's degrees
    // of freedom 4: t = 2.78, uncertainty 2.78 * sqrt(200/3) = 22.70 ns.
    std::vector<CallTree> base, next;
    std::vector<analysis::Profile> profiles(3);
    for (int d : {0, 10, -10}) {
        base.push_back(tree_of({"work", "same"}, {uint64_t(100 + d), uint64_t(100 + d)}));
        next.push_back(tree_of({"work", "same"}, {uint64_t(150 + d), uint64_t(105 + d)}));
    }
    DiffTree t = analysis::views::diff_call_trees(base, profiles, next, profiles);
    const DiffTreeNode& work = node(t, "main;work");
    const DiffTreeNode& same = node(t, "main;same");
    CHECK(work.base_total == approx(100));
    CHECK(work.new_total == approx(150));
    CHECK(work.uncertainty == approx(2.78 * std::sqrt(200.0 / 3)));
    CHECK(same.uncertainty == approx(2.78 * std::sqrt(200.0 / 3)));
    CHECK(work.direction() == 1);
    CHECK(same.direction() == 0);
    // A path one run lacks counts as 0 in that run: only one of three new runs calls `rare`.
    next[0] = tree_of({"work", "same", "rare"}, {150, 105, 30});
    t = analysis::views::diff_call_trees(base, profiles, next, profiles);
    const DiffTreeNode& rare = node(t, "main;rare");
    CHECK(rare.new_total == approx(10));
    CHECK(rare.base_total == 0);
    // New: variance of {30, 0, 0} = 300, of the mean 100; base none: t at 2 degrees, 4.30.
    CHECK(rare.uncertainty == approx(4.30 * std::sqrt(100.0)));
    CHECK(rare.direction() == 0);
    CHECK_THROWS_AS(analysis::views::diff_call_trees(base, {}, next, profiles),
                    std::invalid_argument);
}

// ---- tails (--metric p99) ------------------------------------------------------------------

namespace {

// One run's latency report: `slow` with this p99 (ns) and interval, `tiny` with a p99 under a
// microsecond.
analysis::views::LatencyReport tails_of(uint64_t p99, uint64_t low, uint64_t high,
                                        uint64_t tiny_p99 = 500) {
    analysis::views::LatencyReport r;
    analysis::views::FunctionLatency f;
    f.name = "slow";
    f.file = "app.cpp";
    f.calls = 1000;
    f.p50 = 100000;
    f.p99 = p99;
    f.p99_low = low;
    f.p99_high = high;
    r.functions.push_back(f);
    f.name = "tiny";
    f.p50 = 100;
    f.p99 = f.p99_low = f.p99_high = tiny_p99;
    r.functions.push_back(f);
    r.calls = 2000;
    return r;
}

} // namespace

TEST_CASE("diff of tails: each p99 uncertain by its own interval, and by the runs' spread") {
    DiffOptions o;
    o.metric = analysis::views::DiffMetric::kP99;
    o.fail_above = 10;
    // One run a side: the p99 of 2 ms -> 3 ms, each within +-0.1 ms (95%): sd 0.2/3.92 ms a
    // side, the difference's 1.96 sqrt(2) times that.
    DiffResult d = analysis::views::diff_tails({tails_of(2000000, 1900000, 2100000)},
                                               {tails_of(3000000, 2900000, 3100000)}, o);
    const DiffRow& slow = row(d, "slow");
    CHECK(slow.base.cumtime == approx(2e-3));
    CHECK(slow.next.cumtime == approx(3e-3));
    CHECK(slow.base.tottime == approx(1e-4)); // the p50 beside it
    CHECK(slow.percent == approx(50));
    double sd = 0.2e-3 / (2 * 1.96);
    CHECK(slow.uncertainty == approx(1.96 * std::sqrt(2 * sd * sd)));
    CHECK(slow.regression);
    // A p99 under a microsecond is never gated, whatever its change.
    DiffResult t = analysis::views::diff_tails({tails_of(2000000, 1900000, 2100000, 500)},
                                               {tails_of(2000000, 1900000, 2100000, 900)}, o);
    CHECK(row(t, "tiny").percent == approx(80));
    CHECK_FALSE(row(t, "tiny").regression);
    CHECK_FALSE(row(t, "tiny").undecided);
    CHECK_FALSE(row(t, "slow").regression);
    // An interval that spans the change: undecided, not failed.
    DiffResult wide = analysis::views::diff_tails({tails_of(2000000, 200000, 5000000)},
                                                  {tails_of(3000000, 200000, 6000000)}, o);
    CHECK(row(wide, "slow").undecided);
    CHECK_FALSE(wide.failed());
    // Too few calls to bound a p99 from above: never a regression, said as undecided.
    DiffResult few = analysis::views::diff_tails({tails_of(2000000, 1900000, 2100000)},
                                                 {tails_of(3000000, 2900000, UINT64_MAX)}, o);
    CHECK(std::isinf(row(few, "slow").uncertainty));
    CHECK(row(few, "slow").undecided);
    CHECK_FALSE(few.failed());
    // A function some runs of a side did not call: its mean over those that did, undecided.
    analysis::views::LatencyReport without = tails_of(2000000, 1900000, 2100000);
    without.functions.erase(without.functions.begin());
    DiffResult some = analysis::views::diff_tails(
        {tails_of(2000000, 1990000, 2010000), without},
        {tails_of(3000000, 2990000, 3010000), tails_of(3000000, 2990000, 3010000)}, o);
    CHECK(row(some, "slow").base.cumtime == approx(2e-3));
    CHECK(row(some, "slow").undecided);
    // Two runs a side that disagree: their spread widens it beyond the intervals.
    DiffResult spread = analysis::views::diff_tails(
        {tails_of(2000000, 1990000, 2010000), tails_of(2600000, 2590000, 2610000)},
        {tails_of(3000000, 2990000, 3010000), tails_of(2400000, 2390000, 2410000)}, o);
    CHECK(spread.spread_known);
    CHECK(row(spread, "slow").percent == approx(100.0 * (2.7 - 2.3) / 2.3));
    CHECK(row(spread, "slow").uncertainty > 0.4e-3);
    CHECK(row(spread, "slow").undecided);
}
