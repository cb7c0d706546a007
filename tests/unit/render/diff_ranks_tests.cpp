// render/diff and render/ranks: a profile against itself doubled, and two ranks of which one
// ran twice the work, as JSON and CSV (render_support.hpp's trace).
#include "unit/render/render_support.hpp"

#include "analysis/model/diff.hpp"
#include "analysis/model/ranks.hpp"
#include "render/diff.hpp"
#include "render/ranks.hpp"
#include "render/report.hpp"

using namespace prof;
using namespace prof::test;

namespace {

analysis::Profile doubled_profile() {
    analysis::Session s;
    s.add_trace(render_trace());
    s.add_trace(render_trace());
    return s.profile();
}

} // namespace

TEST_CASE("diff JSON: every function twice as long and called twice as often") {
    analysis::views::DiffOptions o;
    o.fail_above = 50;
    auto d = analysis::views::diff_profiles(render_profile(), 1, doubled_profile(), 1, o);
    Json j = parse_json(capture([&](std::FILE* f) { render::print_diff(f, d, o, "json"); }));
    CHECK(j["metric"].text == "cumtime");
    CHECK(j["fail_above"].text == "50");
    CHECK(j["total"]["base_time"].text == "0.150000000");
    CHECK(j["total"]["new_time"].text == "0.300000000");
    CHECK(j["total"]["base_calls"].integer() == 8);
    CHECK(j["total"]["new_calls"].integer() == 16);
    CHECK(j["total"]["change_percent"].number == doctest::Approx(100));
    CHECK(j["failed"].boolean);
    const Json& fns = j["functions"];
    REQUIRE(fns.size() == 4);
    // Ordered by the change of cumtime, largest first.
    CHECK(fns[0]["name"].text == "main");
    CHECK(fns[0]["cumtime"][0].text == "0.150000000");
    CHECK(fns[0]["cumtime"][1].text == "0.300000000");
    CHECK(fns[1]["name"].text == "a");
    CHECK(fns[2]["name"].text == kB);
    CHECK(fns[3]["name"].text == kC);
    CHECK(fns[3]["ncalls"][0].integer() == 3);
    CHECK(fns[3]["ncalls"][1].integer() == 6);
    for (const Json& f : fns.items) {
        CHECK(f["in_base"].boolean);
        CHECK(f["in_new"].boolean);
        CHECK(f["change_percent"].number == doctest::Approx(100));
        CHECK(f["regression"].boolean);
    }
}

TEST_CASE("diff CSV: a row per function, names quoted") {
    analysis::views::DiffOptions o;
    auto d = analysis::views::diff_profiles(render_profile(), 1, render_profile(), 1, o);
    std::string out = capture([&](std::FILE* f) { render::print_diff(f, d, o, "csv"); });
    std::vector<std::string> l = lines_of(out);
    REQUIRE(l.size() == 5);
    CHECK(count_of(out, "\"b<int>(x, y)\",app.cpp,30,") == 1);
    CHECK(count_of(out, "\"c;\"\"q\"\"\",app.cpp,40,") == 1);
}

TEST_CASE("ranks JSON: the spread of each function over the ranks") {
    std::vector<analysis::RankProfile> ranks(2);
    ranks[0].rank = 0, ranks[0].pids = {42}, ranks[0].host = "h<0>";
    ranks[0].profile = render_profile();
    ranks[1].rank = 1, ranks[1].pids = {43, 44}, ranks[1].host = "h1";
    ranks[1].profile = doubled_profile();
    analysis::RankComparison c = analysis::compare_ranks(std::move(ranks));
    Json j = parse_json(capture([&](std::FILE* f) { render::print_ranks(f, c, {}, "json"); }));
    REQUIRE(j["ranks"].size() == 2);
    CHECK(j["ranks"][0]["host"].text == "h<0>");
    CHECK(j["ranks"][0]["total_calls"].integer() == 8);
    CHECK(j["ranks"][1]["total_calls"].integer() == 16);
    CHECK(j["ranks"][1]["pids"].size() == 2);
    CHECK(j["ranks"][1]["total_time"].text == "0.300000000");
    const Json& fns = j["functions"];
    REQUIRE(fns.size() == 4);
    CHECK(fns[0]["name"].text == "main");
    CHECK(fns[0]["ranks"].integer() == 2);
    CHECK(fns[0]["cumtime"]["min"].number == doctest::Approx(0.15));
    CHECK(fns[0]["cumtime"]["max"].number == doctest::Approx(0.3));
    CHECK(fns[0]["cumtime"]["max_rank"].integer() == 1);
    CHECK(fns[0]["cumtime"]["imbalance_percent"].text == "33.333");
    CHECK(fns[0]["ncalls"]["mean"].number == doctest::Approx(3));
}
