// diff_profiles and diff_failures (views/diff.hpp) over two profiles from built traces.
#include "unit/analysis/analysis_support.hpp"

#include "analysis/model/diff.hpp"

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
