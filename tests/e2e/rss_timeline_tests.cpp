// End to end for memory over time: the runtime's RSS timer under profrun --mem, read back from
// profreport --memory --format json's `timeline`. rss_climb allocates one 64 MiB buffer and
// then writes its pages with no allocator call: only the timer reads the RSS meanwhile.
#include "support/json.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace prof;
using prof::test::Json;
using prof::test::parse_json;
using prof::test::run;
using prof::test::temp_path;

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBuffer = 64 * kMiB; // rss_climb's one block, all of its pages written

struct Point {
    double t;
    uint64_t heap, rss;
};

Json memory_json(const std::string& trace) {
    auto r = run({PROFREPORT, "--memory", "--format", "json", trace});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return parse_json(r.out);
}

std::vector<Point> timeline_of(const std::string& trace) {
    std::vector<Point> out;
    Json m = memory_json(trace);
    for (const Json& p : m["timeline"].items)
        out.push_back(Point{p["t"].number, p["heap"].integer(), p["rss"].integer()});
    return out;
}

// The points while the buffer is live: the program's only block then, so the heap is exactly
// its size (a C program that has printed nothing yet: stdio has no buffer).
std::vector<Point> stretch_of(const std::vector<Point>& timeline) {
    std::vector<Point> out;
    for (const Point& p : timeline)
        if (p.heap >= kBuffer) out.push_back(p);
    return out;
}

// What the timer must show of the stretch in which rss_climb writes its buffer.
void check_climb(const std::vector<Point>& timeline) {
    for (size_t i = 1; i < timeline.size(); ++i) CHECK(timeline[i].t >= timeline[i - 1].t);
    std::vector<Point> stretch = stretch_of(timeline);
    // The writes take 64 pauses of 10 ms, between pauses of 150 ms: dozens of readings, of
    // which 5 are asked for.
    REQUIRE(stretch.size() >= 5);
    for (size_t i = 0; i < stretch.size(); ++i) {
        CAPTURE(i);
        CHECK(stretch[i].heap == kBuffer);
        if (!i) continue;
        CHECK(stretch[i].t > stretch[i - 1].t);
        // Nothing in the process releases memory in the stretch; the kernel may take back
        // clean file pages meanwhile (a few pages of the program's libraries): 1 MiB allowed.
        CHECK(stretch[i].rss + kMiB >= stretch[i - 1].rss);
    }
    // The pauses around the writes put readings before the first page is written and after
    // the last: the rise is the 16,384 written pages, fresh anonymous pages resident from their
    // first write to the free, less what the kernel may reclaim of the process's file pages
    // meanwhile (at most 4 MiB allowed), and more by at most the same margin (the runtime's
    // own pages, the trace's chunk pages written by the timer).
    uint64_t first = stretch.front().rss, last = stretch.back().rss;
    CHECK(last >= first + kBuffer - 4 * kMiB);
    CHECK(last <= first + kBuffer + 4 * kMiB);
}

} // namespace

// libprofmem.so cannot run in a sanitizer build (see memory_tests.cpp).
#ifdef PROF_SANITIZER_BUILD
TEST_SUITE_BEGIN("memory over time" * doctest::skip(true));
#endif

TEST_CASE("memory over time: the RSS timer reads where the program makes no allocator call") {
    std::string trace = temp_path("rss-climb.trace");
    auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_RSS_CLIMB});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out == "climbed 64 MiB\n");
    std::vector<Point> timeline = timeline_of(trace);
    check_climb(timeline);
    // The readings change no other figure: the one buffer and stdout's.
    Json summary = memory_json(trace)["summary"];
    CHECK(summary["peak_heap"].integer() == kBuffer);
    CHECK(summary["frees"].integer() == 1);
    CHECK(summary["peak_rss"].integer() >= stretch_of(timeline).back().rss);
}

TEST_CASE("memory over time: a fork child's timeline is its own") {
    std::string trace = temp_path("rss-climb-fork.trace");
    auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_RSS_CLIMB, "fork"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out == "child ok\n");
    std::string child = test::child_trace(trace);
    REQUIRE(!child.empty());
    std::vector<Point> in_child = timeline_of(child);
    check_climb(in_child);
    // The parent waits with no allocator call while the child writes its pages: its timer
    // reads its own resident set, which never holds the child's buffer.
    std::vector<Point> in_parent = timeline_of(trace);
    CHECK(stretch_of(in_parent).empty());
    REQUIRE(in_parent.size() >= 5);
    uint64_t parent_top = 0;
    for (const Point& p : in_parent) parent_top = std::max(parent_top, p.rss);
    CHECK(parent_top + kBuffer / 2 < stretch_of(in_child).back().rss);
}

TEST_CASE("memory over time: PROF_MEM_RSS_INTERVAL=0 reads no RSS, on a timer or otherwise") {
    std::string trace = temp_path("rss-climb-off.trace");
    auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_RSS_CLIMB},
                 {{"PROF_MEM_RSS_INTERVAL", "0"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    Json m = memory_json(trace);
    CHECK(m["timeline"].size() == 0);
    CHECK(m["summary"]["peak_heap"].integer() == kBuffer);
    CHECK(m["summary"]["peak_rss"].integer() >= kBuffer); // the process's own, from its exit
}

// The timer's thread is the runtime's: an instrumented program's threads, their calls and the
// memory figures read the same with it and without it.
TEST_CASE("memory over time: the timer is no thread of the program in any view") {
    auto report = [](const char* interval) {
        std::string trace = temp_path(std::string("rss-threads-") + interval + ".trace");
        auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_SAMPLE_THREADS},
                     {{"PROF_MEM_RSS_INTERVAL", interval}});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        auto t = run({PROFREPORT, "--threads", "--format", "json", trace});
        REQUIRE_MESSAGE(t.exit_code == 0, t.err);
        // Per thread: its calls of each function of the sample (threads sorted: their streams
        // are numbered in the order they first record, which varies from run to run).
        std::vector<std::map<std::string, uint64_t>> calls;
        Json doc = parse_json(t.out);
        for (const Json& th : doc["threads"].items) {
            std::map<std::string, uint64_t> c;
            for (const Json& f : th["functions"].items) c[f["name"].text] = f["ncalls"].integer();
            calls.push_back(c);
        }
        std::sort(calls.begin(), calls.end());
        // The peak heap depends on how the workers' allocations interleave: not compared.
        Json m = memory_json(trace)["summary"];
        return std::make_tuple(calls, m["allocations"].integer(), m["frees"].integer(),
                               m["bytes_allocated"].integer());
    };
    auto with_timer = report("10");
    auto without = report("0");
    CHECK(std::get<0>(with_timer).size() == 5); // main and its 4 workers
    CHECK(std::get<0>(with_timer) == std::get<0>(without));
    CHECK(std::get<1>(with_timer) == std::get<1>(without));
    CHECK(std::get<2>(with_timer) == std::get<2>(without));
    CHECK(std::get<3>(with_timer) == std::get<3>(without));
}

#ifdef PROF_SANITIZER_BUILD
TEST_SUITE_END();
#endif

// The timer alone, in every build (the sanitizer builds too, where the interposers cannot run):
// a program linked with libprof.so that starts the memory profiler's side itself, with threads
// recording regions meanwhile, and a fork child. No heap (nothing interposed): the points are
// the timer's readings.
TEST_CASE("memory over time: the RSS timer beside recording threads, and in a fork child") {
    auto timer_points = [](const std::string& trace) {
        std::vector<Point> points = timeline_of(trace);
        REQUIRE(points.size() >= 5);
        uint64_t low = UINT64_MAX, high = 0;
        for (size_t i = 0; i < points.size(); ++i) {
            CHECK(points[i].heap == 0);
            if (i) CHECK(points[i].t > points[i - 1].t);
            low = std::min(low, points[i].rss);
            high = std::max(high, points[i].rss);
        }
        return std::make_pair(low, high);
    };
    std::string trace = temp_path("rss-timer-only.trace");
    auto r = run({PROF_TEST_RSS_TIMER_ONLY}, {{"PROF_OUT", trace}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out == "climbed 64 MiB\n");
    auto [low, high] = timer_points(trace);
    CHECK(high >= low + kBuffer - 4 * kMiB); // every written page, as in check_climb
    auto t = run({PROFREPORT, "--threads", "--format", "json", trace});
    REQUIRE_MESSAGE(t.exit_code == 0, t.err);
    CHECK(parse_json(t.out)["threads"].size() == 2); // the two region threads, not the timer

    // ThreadSanitizer refuses, by default, a thread started after the fork of a process that has
    // several (the timer's in the child, and the child's region threads): allowed here. It
    // changes nothing in other builds.
    std::string forked = temp_path("rss-timer-only-fork.trace");
    r = run({PROF_TEST_RSS_TIMER_ONLY, "fork"},
            {{"PROF_OUT", forked}, {"TSAN_OPTIONS", "die_after_fork=0"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out == "child ok\n");
    std::string child = test::child_trace(forked);
    REQUIRE(!child.empty());
    auto [child_low, child_high] = timer_points(child);
    CHECK(child_high >= child_low + kBuffer - 4 * kMiB);
    auto [parent_low, parent_high] = timer_points(forked);
    CHECK(parent_high + kBuffer / 2 < child_high);
}
