// render/timeline: Chrome Trace Event JSON and speedscope, written while the trace streams by,
// for a trace whose every activation is known (render_support.hpp).
#include "unit/render/render_support.hpp"

#include "render/timeline.hpp"

#include <map>

using namespace prof;
using namespace prof::test;
using namespace prof::render;

TEST_CASE("chrome trace: one complete event per activation, nested, durations exact") {
    std::string out;
    TimelineResult r;
    out = capture([&](std::FILE* f) { r = write_chrome_trace(f, {render_trace()}, {}); });
    CHECK(r.events == 8);
    CHECK(r.threads == 2);
    CHECK(r.bytes == out.size());
    Json j = parse_json(out);
    CHECK(j["displayTimeUnit"].text == "ns");
    std::map<std::string, double> dur; // by thread and name, in us
    size_t complete = 0, metadata = 0;
    std::map<uint64_t, std::vector<std::pair<double, double>>> spans; // per tid
    for (const Json& e : j["traceEvents"].items) {
        if (e["ph"].text == "M") {
            ++metadata;
            continue;
        }
        REQUIRE(e["ph"].text == "X");
        ++complete;
        CHECK(e["pid"].integer() == 42);
        dur[e["tid"].text + " " + e["name"].text] += e["dur"].number;
        spans[e["tid"].integer()].push_back({e["ts"].number, e["ts"].number + e["dur"].number});
    }
    CHECK(complete == 8);
    CHECK(metadata == 3); // the process's name and each thread's
    CHECK(dur["1001 main"] == 100000);
    CHECK(dur["1001 a"] == 30000);
    CHECK(dur["1001 " + kB] == 40000);
    CHECK(dur["1001 " + kC] == 30000);
    CHECK(dur["1002 main"] == 50000);
    CHECK(dur["1002 a"] == 20000);
    // Balanced: any two activations of a thread are nested or apart, never overlapping.
    for (const auto& [tid, s] : spans)
        for (const auto& a : s)
            for (const auto& b : s) {
                bool apart = a.second <= b.first || b.second <= a.first;
                bool nested = (a.first <= b.first && b.second <= a.second) ||
                              (b.first <= a.first && a.second <= b.second);
                CHECK((apart || nested));
            }
}

TEST_CASE("chrome trace: a time window and a minimum duration keep what they say") {
    TimelineOptions o;
    o.min_duration_ns = 30 * kMs; // main (twice), a on thread 1, b
    Json j = parse_json(capture([&](std::FILE* f) { write_chrome_trace(f, {render_trace()}, o); }));
    size_t complete = 0;
    for (const Json& e : j["traceEvents"].items) complete += e["ph"].text == "X";
    CHECK(complete == 4);
    o = {};
    o.tid = 1002;
    TimelineResult r;
    j = parse_json(capture([&](std::FILE* f) { r = write_chrome_trace(f, {render_trace()}, o); }));
    CHECK(r.events == 2);
}

TEST_CASE("speedscope: evented profiles, every open closed in order, frames shared") {
    TimelineResult r;
    std::string out = capture([&](std::FILE* f) { r = write_speedscope(f, {render_trace()}, {}); });
    CHECK(r.events == 8);
    Json j = parse_json(out);
    CHECK(j["name"].text == "app");
    const Json& frames = j["shared"]["frames"];
    REQUIRE(frames.size() == 4);
    std::vector<std::string> names;
    for (const Json& f : frames.items) names.push_back(f["name"].text);
    CHECK(names == std::vector<std::string>{"main", "a", kC, kB});
    const Json& profiles = j["profiles"];
    REQUIRE(profiles.size() == 2);
    const uint64_t ends[] = {100 * kMs, 50 * kMs};
    const size_t opens[] = {6, 2};
    for (size_t p = 0; p < 2; ++p) {
        CAPTURE(p);
        CHECK(profiles[p]["type"].text == "evented");
        CHECK(profiles[p]["unit"].text == "nanoseconds");
        CHECK(profiles[p]["endValue"].integer() == ends[p]);
        std::vector<unsigned long long> stack;
        uint64_t last = 0;
        size_t opened = 0;
        std::map<std::string, uint64_t> inclusive;
        std::vector<uint64_t> at;
        for (const Json& e : profiles[p]["events"].items) {
            uint64_t t = e["at"].integer();
            CHECK(t >= last);
            last = t;
            if (e["type"].text == "O") {
                stack.push_back(e["frame"].integer());
                at.push_back(t);
                ++opened;
            } else {
                REQUIRE(e["type"].text == "C");
                REQUIRE_FALSE(stack.empty());
                CHECK(stack.back() == e["frame"].integer());
                inclusive[names[stack.back()]] += t - at.back();
                stack.pop_back();
                at.pop_back();
            }
        }
        CHECK(stack.empty());
        CHECK(opened == opens[p]);
        CHECK(inclusive["main"] == ends[p]);
    }
}
