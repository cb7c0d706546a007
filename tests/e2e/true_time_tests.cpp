// Sampled time against known truth (tests/programs/true_time.cpp): CPU shares the program
// measured itself, the cost of a tiny function measured on a build without instrumentation,
// and sleeps that must keep their wall time. Counts stay exact. Tolerances are statistical:
// about 4 standard deviations of the sample counts a run of this length gets.
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include "analysis/engine/session.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <sstream>

using namespace prof;
using namespace prof::test;

namespace {

std::map<std::string, double> figures(const std::string& out) {
    std::map<std::string, double> f;
    std::istringstream in(out);
    std::string name;
    double value;
    while (in >> name >> value) f[name] = value;
    return f;
}

const analysis::Stats& stats_of(const analysis::Profile& p, const std::string& name) {
    std::vector<size_t> m = p.match("\\(" + name + "\\(");
    REQUIRE_MESSAGE(m.size() == 1, name);
    return p.functions[m[0]].stats;
}

} // namespace

// Under a sanitizer, whose runtime interposes sigaction itself, libprof.so's interposer is not
// reached and the sampler stays off (by design): these tests need it.
#ifndef PROF_SANITIZER_BUILD
TEST_CASE("sampled time: CPU shares, a tiny function's true cost and sleeps, counts exact") {
    auto plain = run({PROF_TEST_TRUE_TIME_PLAIN, "0.2"});
    REQUIRE(plain.exit_code == 0);
    double tiny_true_ns = figures(plain.out).at("tiny");

    std::string trace = temp_path("true-time.trace");
    auto r = run({PROF_TEST_TRUE_TIME, "2"}, {{"PROF_OUT", trace}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::map<std::string, double> truth = figures(r.out);

    analysis::Session session;
    session.add_trace(trace);
    analysis::Profile p = session.profile();
    INFO(r.out);
    REQUIRE(p.time.sampled_traces == 1);
    CHECK(p.time.samples > 300);

    // Shares of the three burners, by cumtime, against the CPU time each measured.
    double measured = truth.at("share_60") + truth.at("share_30") + truth.at("share_10");
    double profiled = 0;
    for (const char* f : {"share_60", "share_30", "share_10"}) profiled += stats_of(p, f).cumtime;
    double sigma = 100 * std::sqrt(0.6 * 0.4 / double(p.time.samples));
    for (const char* f : {"share_60", "share_30", "share_10"}) {
        double want = 100 * truth.at(f) / measured, got = 100 * stats_of(p, f).cumtime / profiled;
        CAPTURE(f);
        CHECK(std::abs(got - want) < std::max(3.0, 4 * sigma));
    }

    // tiny(): exact count, and the CPU time the plain build measured (stretched by the wall
    // time the busy machine added in this run), not the hooks' inflation.
    const analysis::Stats& tiny = stats_of(p, "tiny");
    CHECK(tiny.ncalls == 10000000);
    double tiny_ns = tiny.tottime * 1e9 / double(tiny.ncalls);
    tiny_true_ns *= std::max(1.0, truth.at("tiny_stretch"));
    CAPTURE(tiny_true_ns);
    CAPTURE(tiny_ns);
    // Its time is its share of the samples: relative error sqrt((1 - p) / (n p)) for share p of
    // n samples, which a loaded machine (fewer samples delivered) widens.
    double share = tiny.tottime / p.total_time;
    double tolerance =
        std::max(0.3, 3 * std::sqrt((1 - share) / (double(p.time.samples) * share)));
    CAPTURE(tolerance);
    CHECK(tiny_ns > (1 - tolerance) * tiny_true_ns);
    CHECK(tiny_ns < (1 + tolerance) * tiny_true_ns);

    // nap(): off CPU, its wall time stays (the program's own measure bounds it).
    const analysis::Stats& nap = stats_of(p, "nap");
    CHECK(nap.ncalls == 4);
    double napped = truth.at("nap") * 1e-9;
    CHECK(nap.cumtime <= napped * 1.02);
    CHECK(nap.cumtime >= napped * 0.9);
    for (const char* f : {"share_60", "share_30", "share_10"}) CHECK(stats_of(p, f).ncalls > 100);
}
#endif // PROF_SANITIZER_BUILD
