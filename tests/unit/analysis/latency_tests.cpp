// latency (views/latency.hpp): per-call durations, percentiles, slowest calls and the tail's
// callees, from a trace whose every time is known (1 tick = 1 ns).
#include "unit/analysis/analysis_support.hpp"

#include "analysis/model/latency.hpp"

using namespace prof;
using namespace prof::test;
using analysis::views::FunctionLatency;
using analysis::views::LatencyReport;

namespace {

// main 0..1440 calls h four times: 100, 100, 100 and 1000 ns. Each call of h calls c for 50 ns;
// the last also calls s for 800 ns.
std::string tail_trace() {
    TraceBuilder b;
    b.chunk(1, 0);
    define_functions(b, 4); // main h c s
    b.enter(0, 0);
    for (int i = 0; i < 3; ++i) b.enter(1, 10).enter(2, 20).exit(50).exit(30);
    b.enter(1, 10).enter(2, 20).exit(50).enter(3, 10).exit(800).exit(120);
    b.exit(100);
    b.chunk(0);
    name_functions(b, {"main", "h", "c", "s"}).end_record(2000);
    return save_trace(b, "latency_tail.trace");
}

LatencyReport report_of(const std::string& trace, size_t slowest = 3) {
    analysis::views::LatencyOptions o;
    o.slowest = slowest;
    o.open = [&](analysis::ActivationObserver& observer) {
        analysis::SessionOptions so;
        so.observer = &observer;
        auto s = std::make_unique<analysis::Session>(so);
        s->add_trace(trace);
        return s;
    };
    return analysis::views::latency(o);
}

const FunctionLatency& row(const LatencyReport& r, const std::string& name) {
    for (const FunctionLatency& f : r.functions)
        if (f.name == name) return f;
    FAIL("no row " << name);
    return r.functions.front();
}

} // namespace

TEST_CASE("latency: each call's duration, nearest-rank percentiles, slowest calls") {
    LatencyReport r = report_of(tail_trace(), 2);
    REQUIRE(r.functions.size() == 4);
    CHECK(r.calls == 1 + 4 + 4 + 1);
    const FunctionLatency& h = row(r, "h");
    CHECK(h.calls == 4);
    CHECK(h.total_ns == 1300);
    CHECK(h.mean_ns == approx(325));
    CHECK(h.p50 == 100);
    CHECK(h.p90 == 1000);
    CHECK(h.p99 == 1000);
    CHECK(h.max == 1000);
    CHECK(h.file == "app.cpp");
    CHECK(h.line == 20);
    // 100 ns lands in [64, 128), 1000 ns in [512, 1024).
    REQUIRE(h.histogram.size() == 10);
    CHECK(h.histogram[6] == 3);
    CHECK(h.histogram[9] == 1);
    REQUIRE(h.slowest.size() == 2);
    CHECK(h.slowest[0].duration_ns == 1000);
    CHECK(h.slowest[0].start_ns == 340);
    CHECK(h.slowest[0].path == std::vector<std::string>{"main", "h"});
    CHECK(h.slowest[1].duration_ns == 100);
    // Ordered by total time: main, h, s, c.
    CHECK(r.functions[0].name == "main");
    CHECK(r.functions[1].name == "h");
}

TEST_CASE("latency: the tail's callees, their share of slow calls against the others") {
    LatencyReport r = report_of(tail_trace());
    const FunctionLatency& h = row(r, "h");
    CHECK(h.tail_calls == 1);
    CHECK(h.tail_threshold_ns == 1000);
    REQUIRE(h.tail.size() == 2);
    // s held 800 of the slow call's 1000 ns and none of the others'; c 50 ns of each.
    CHECK(h.tail[0].name == "s");
    CHECK(h.tail[0].slow_share == approx(0.8));
    CHECK(h.tail[0].typical_share == 0);
    CHECK(h.tail[0].slow_mean_ns == approx(800));
    CHECK(h.tail[1].name == "c");
    CHECK(h.tail[1].slow_mean_ns == approx(50));
    CHECK(h.tail[1].typical_mean_ns == approx(50));
    CHECK(h.tail[1].typical_share == approx(0.5));
    CHECK(h.tail_self_share == approx(0.15));
    CHECK(h.typical_self_share == approx(0.5));
}

TEST_CASE("latency: the p99's interval, distribution-free, unbounded above for too few calls") {
    // h called 400 times, lasting 1, 2, ..., 400 ns: the p99 is 396 ns, and the count of
    // calls under the true p99 is Binomial(400, 0.99): the 95% interval runs from the 392nd to
    // the 400th duration.
    TraceBuilder b;
    b.chunk(1, 0);
    define_functions(b, 2);
    b.enter(0, 0);
    for (uint64_t i = 1; i <= 400; ++i) b.enter(1, 1).exit(i);
    b.exit(1);
    b.chunk(0);
    name_functions(b, {"main", "h"}).end_record(100000);
    LatencyReport r = report_of(save_trace(b, "latency_400.trace"));
    const FunctionLatency& h = row(r, "h");
    CHECK(h.calls == 400);
    CHECK(h.p99 == 396);
    CHECK(h.p99_low == 392);
    CHECK(h.p99_high == 400);
    // Four calls cannot bound a p99 from above (367 are needed).
    LatencyReport four = report_of(tail_trace());
    CHECK(row(four, "h").p99_high == UINT64_MAX);
    CHECK(row(four, "h").p99_low == 100);
}
