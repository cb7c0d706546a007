// The call replay (analysis/engine/session.cpp) through the public Session: call-stack semantics,
// the hooks' time model and the activation observer, on traces built record by record (1 ns clock).
#include "unit/analysis/analysis_support.hpp"

#include <utility>

using namespace prof;
using namespace prof::test;

namespace {

// Everything the engine tells an observer, as text: "open F@T xN", "close @T".
struct Recorder : analysis::ActivationObserver {
    std::vector<std::string> events;
    size_t threads = 0, traces_done = 0;
    analysis::Session* session = nullptr;
    void thread_started(size_t, const analysis::ThreadFilter&) override { ++threads; }
    void opened(size_t thread, uint32_t function, uint64_t enter_ns, uint64_t count) override {
        uint64_t address = session->function_address(session->current_trace(), function);
        events.push_back("t" + std::to_string(thread) + " open 0x" + to_hex(address) + "@" +
                         std::to_string(enter_ns) + " x" + std::to_string(count));
    }
    void closed(size_t thread, uint64_t exit_ns) override {
        events.push_back("t" + std::to_string(thread) + " close @" + std::to_string(exit_ns));
    }
    void trace_done(size_t) override { ++traces_done; }
    static std::string to_hex(uint64_t v) {
        char s[32];
        std::snprintf(s, sizeof s, "%llx", static_cast<unsigned long long>(v));
        return s;
    }
};

void pause(TraceBuilder& b, uint64_t ticks) {
    REQUIRE(ticks < 128);
    b.tag(format::Tag::kPause).uleb(1).uleb(ticks);
}

// a 0..42 calls b 3..40, which calls c 8..30; the hooks cost 10 ticks in the callee and 5 in
// the caller per call.
std::string costed_trace() {
    TraceBuilder b;
    b.chunk(0);
    overheads(b, "10.00", "5.00");
    b.chunk(1, 0);
    define_functions(b, 3);
    b.enter(0, 0).enter(1, 3).enter(2, 5).exit(22).exit(10).exit(2);
    b.chunk(0);
    name_functions(b, {"a", "b", "c"}).end_record(42);
    return save_trace(b, "costed.trace");
}

// The profile of the trace at `path` with overhead compensation, and without.
std::pair<analysis::Profile, analysis::Profile> compensated_and_raw(const std::string& path) {
    return {profile_of(path, true), profile_of(path, false)};
}

// The stats of the first function whose label matches `regex`.
analysis::Stats matched(const analysis::Profile& p, const char* regex) {
    return p.functions[p.match(regex)[0]].stats;
}

} // namespace

TEST_CASE("an exit with no open frame is counted and otherwise ignored") {
    TraceBuilder b;
    b.chunk(1, 0).function(0x1000);
    // exit at 5 (unmatched), main 10..30, exit at 40 (unmatched), main 50..60.
    b.exit(5).enter(0, 5).exit(20).exit(10).enter(0, 10).exit(10);
    b.chunk(0);
    name_functions(b, {"main"}).end_record(100);
    analysis::Session s;
    s.add_trace(save_trace(b, "unmatched.trace"));
    analysis::Profile p = s.profile();
    check_stats(stats(p, "main"), 2, 2, 30, 30);
    REQUIRE(p.threads.size() == 1);
    CHECK(p.threads[0].unmatched_exits == 2);
    CHECK(s.thread(0).unmatched_exits == 2);
    CHECK(s.call_tree().threads.at(0).unmatched_exits == 2);
}

TEST_CASE("Abandon closes that many frames at its time, the next call's caller is what is left") {
    TraceBuilder b;
    b.chunk(1, 0);
    define_functions(b, 4); // main a b c
    // main 0..100; a 10, b 20, both abandoned at 35; main calls c 45..55.
    b.enter(0, 0).enter(1, 10).enter(2, 10);
    b.tag(format::Tag::kAbandon).uleb(2).uleb(15);
    b.enter(3, 10).exit(10).exit(45);
    b.chunk(0);
    name_functions(b, {"main", "a", "b", "c"}).end_record(100);
    analysis::Session s;
    s.add_trace(save_trace(b, "abandon2.trace"));
    analysis::Profile p = s.profile();
    check_stats(stats(p, "b"), 1, 1, 15, 15);
    check_stats(stats(p, "a"), 1, 1, 10, 25);
    check_stats(stats(p, "c"), 1, 1, 10, 10);
    check_stats(stats(p, "main"), 1, 1, 65, 100);
    check_stats(edge(p, "main", "c"), 1, 1, 10, 10);
    CHECK(p.edges.size() == 4); // root -> main, main -> a, a -> b, main -> c
    CHECK(p.threads.at(0).abandoned == 2);
    CHECK(p.threads.at(0).unmatched_exits == 0);
    analysis::views::CallTree t = s.call_tree();
    CHECK(node_at(t, {"main", "c"}) != SIZE_MAX);
    CHECK(node_at(t, {"main", "a", "b", "c"}) == SIZE_MAX);
}

TEST_CASE("ThreadEnd closes the thread's frames, frames open at the trace's end close then") {
    TraceBuilder b;
    b.chunk(1, 0);
    define_functions(b, 2);
    b.enter(0, 0).enter(1, 10).tag(format::Tag::kThreadEnd).uleb(40); // ends at 50
    b.chunk(2, 0).function(0x3000).enter(0, 100);                     // open from 100
    b.chunk(0);
    name_functions(b, {"main", "a", "x"}).end_record(1000);
    analysis::Session s;
    s.add_trace(save_trace(b, "thread_end.trace"));
    analysis::Profile p = s.profile();
    check_stats(stats(p, "a"), 1, 1, 40, 40);
    check_stats(stats(p, "main"), 1, 1, 10, 50);
    check_stats(stats(p, "x"), 1, 1, 900, 900);
    CHECK(p.threads.at(0).unmatched_exits == 0);
    CHECK(s.call_tree().root().total_ns == 950);
}

TEST_CASE("within a thread time never goes back: an older event is taken at the previous time") {
    TraceBuilder b;
    // main at 1000, a at 1100; the next chunk of the stream starts at 500: a's exit (dt 0)
    // is at 500, taken at 1100; main's exit 900 later, at 1400.
    b.chunk(1, 1000);
    define_functions(b, 2);
    b.enter(0, 0).enter(1, 100);
    b.chunk(1, 500).exit(0).exit(900);
    b.chunk(0);
    name_functions(b, {"main", "a"}).end_record(2000);
    analysis::Session s;
    s.add_trace(save_trace(b, "backwards.trace"));
    analysis::Profile p = s.profile();
    check_stats(stats(p, "a"), 1, 1, 0, 0);
    check_stats(stats(p, "main"), 1, 1, 400, 400);
    analysis::views::CallTree t = s.call_tree();
    CHECK(t.root().total_ns == 400);
    CHECK(t.nodes[node_at(t, {"main", "a"})].total_ns == 0);
}

TEST_CASE("a scope run is its count of activations, one after the other") {
    TraceBuilder b;
    b.chunk(1, 0);
    define_functions(b, 2);
    // main 0..100; four activations of the scope from 20, 40 ticks together; main's exit dt
    // counts from the run's start.
    std::vector<uint8_t> run = {20, 1};
    for (uint64_t v : {uint64_t(4), uint64_t(40)})
        for (int i = 0; i < 8; ++i) run.push_back(uint8_t(v >> (8 * i)));
    b.enter(0, 0).sized(format::Tag::kScopeRun, run).exit(80);
    b.chunk(0);
    name_functions(b, {"main", "scope"}).end_record(100);
    std::string path = save_trace(b, "scope_run.trace");

    Recorder r;
    analysis::SessionOptions o;
    o.observer = &r;
    analysis::Session observed(o);
    r.session = &observed;
    observed.add_trace(path);
    CHECK(observed.events() == 2 + 2 * 4);
    analysis::Profile p = observed.profile();
    check_stats(stats(p, "scope"), 4, 4, 40, 40);
    check_stats(stats(p, "main"), 1, 1, 60, 100);
    check_stats(edge(p, "main", "scope"), 4, 4, 40, 40);
    analysis::views::CallTree t = observed.call_tree();
    size_t n = node_at(t, {"main", "scope"});
    REQUIRE(n != SIZE_MAX);
    CHECK(t.nodes[n].calls == 4);
    CHECK(t.nodes[n].total_ns == 40);
    // The run opens once for all its activations and closes after their summed time.
    std::vector<std::string> expected = {"t0 open 0x1000@0 x1", "t0 open 0x2000@20 x4",
                                         "t0 close @60", "t0 close @100"};
    CHECK(r.events == expected);
}

TEST_CASE("Pause records: deducted from the frame they happened in, with compensation only") {
    TraceBuilder b;
    b.chunk(1, 0);
    define_functions(b, 2);
    // main 0..120 calls a 10..110; the runtime paused 25 ticks in a, 7 in main after a.
    b.enter(0, 0).enter(1, 10);
    pause(b, 25);
    b.exit(100);
    pause(b, 7);
    b.exit(10);
    b.chunk(0);
    name_functions(b, {"main", "a"}).end_record(120);
    std::string path = save_trace(b, "pause2.trace");

    analysis::Profile on = profile_of(path, true), off = profile_of(path, false);
    check_stats(stats(on, "a"), 1, 1, 75, 75);
    check_stats(stats(on, "main"), 1, 1, 10 + 3, 88);
    CHECK(on.total_time == approx(88e-9));
    CHECK(on.compensated);
    check_stats(stats(off, "a"), 1, 1, 100, 100);
    check_stats(stats(off, "main"), 1, 1, 20, 120);
    CHECK(off.total_time == approx(120e-9));
    CHECK_FALSE(off.compensated);
}

TEST_CASE("time model: each interval less the hooks' cost in it, never below zero") {
    std::string path = costed_trace();
    // Compensated, interval by interval: [0,3] a: 3 - 10 -> 0; [3,8] b: 5 - 10 -> 0;
    // [8,30] c: 22 - 10 = 12; [30,40] b: 10 - 5 = 5; [40,42] a: 2 - 5 -> 0.
    analysis::Profile p = profile_of(path, true);
    check_stats(stats(p, "c"), 1, 1, 12, 12);
    check_stats(stats(p, "b"), 1, 1, 5, 17);
    check_stats(stats(p, "a"), 1, 1, 0, 17);
    CHECK(p.total_time == approx(17e-9));
    // Raw ticks: a 3 + 2, b 5 + 10, c 22.
    analysis::Profile raw = profile_of(path, false);
    check_stats(stats(raw, "c"), 1, 1, 22, 22);
    check_stats(stats(raw, "b"), 1, 1, 15, 37);
    check_stats(stats(raw, "a"), 1, 1, 5, 42);
    CHECK(raw.total_time == approx(42e-9));

    for (bool compensate : {true, false}) {
        analysis::Session s(analysis::SessionOptions{compensate, true, {}, nullptr});
        s.add_trace(path);
        analysis::views::CallTree t = s.call_tree();
        CHECK(t.root().total_ns == (compensate ? 17 : 42));
        CHECK(t.nodes[node_at(t, {"a"})].self_ns == (compensate ? 0 : 5));
        CHECK(t.nodes[node_at(t, {"a", "b"})].self_ns == (compensate ? 5 : 15));
        CHECK(t.nodes[node_at(t, {"a", "b", "c"})].total_ns == (compensate ? 12 : 22));
    }
}

TEST_CASE("time model: the costs of a scope run's activations and of the calls around it") {
    // main 0..380 calls work three times for 100 ticks each, 20 ticks apart, then as one run
    // of three activations of 300 ticks together; in: 10, out: 5, a run's activation: 7.
    TraceBuilder b;
    b.chunk(0);
    overheads(b, "10.00", "5.00", "7.00");
    b.chunk(1, 0);
    define_functions(b, 3);
    b.enter(0, 0).enter(1, 20).exit(100).enter(1, 20).exit(100).enter(1, 20).exit(100);
    std::vector<uint8_t> run = {20, 2};
    for (uint64_t v : {uint64_t(3), uint64_t(300)})
        for (int i = 0; i < 8; ++i) run.push_back(uint8_t(v >> (8 * i)));
    b.sized(format::Tag::kScopeRun, run).exit(320);
    b.chunk(0);
    name_functions(b, {"main", "work", "scope"}).end_record(700);
    analysis::Profile p = profile_of(save_trace(b, "costed_run.trace"), true);
    // work: 3 x (100 - 10); the run: 300 - 3 x 7; main's five intervals of 20: less 10 after
    // its enter, 5 after each of work's exits and 3 x 5 after the run's activations.
    check_stats(stats(p, "work"), 3, 3, 270, 270);
    check_stats(stats(p, "scope"), 3, 3, 279, 279);
    check_stats(stats(p, "main"), 1, 1, 100 - 10 - 15 - 15, 60 + 270 + 279);
}

TEST_CASE("observer: every activation opened and closed in order, on the thread's clock") {
    std::string path = costed_trace();
    for (bool compensate : {true, false}) {
        Recorder r;
        analysis::SessionOptions o;
        o.compensate = compensate;
        o.observer = &r;
        analysis::Session s(o);
        r.session = &s;
        s.add_trace(path);
        CHECK(r.threads == 1);
        CHECK(r.traces_done == 1);
        // Compensated: everything before c's interval costs less than the hooks (0 ns).
        std::vector<std::string> compensated = {"t0 open 0x1000@0 x1", "t0 open 0x2000@0 x1",
                                                "t0 open 0x3000@0 x1", "t0 close @12",
                                                "t0 close @17",        "t0 close @17"};
        std::vector<std::string> raw = {"t0 open 0x1000@0 x1", "t0 open 0x2000@3 x1",
                                        "t0 open 0x3000@8 x1", "t0 close @30",
                                        "t0 close @40",        "t0 close @42"};
        std::vector<std::string> expected = compensate ? compensated : raw;
        CHECK(r.events == expected);
    }
}

TEST_CASE("observer: threads in order of appearance, frames open at the end closed at it") {
    TraceBuilder b;
    b.chunk(1, 1000).function(0x1000).enter(0, 0);
    b.chunk(2, 1500).function(0x2000).enter(0, 0).exit(100);
    b.chunk(0).end_record(2000);
    Recorder r;
    analysis::SessionOptions o;
    o.observer = &r;
    analysis::Session s(o);
    r.session = &s;
    s.add_trace(save_trace(b, "observer_threads.trace"));
    CHECK(r.threads == 2);
    std::vector<std::string> expected = {"t0 open 0x1000@1000 x1", "t1 open 0x2000@1500 x1",
                                         "t1 close @1600", "t0 close @2000"};
    CHECK(r.events == expected);
}

TEST_CASE("abandoned frames close at the abandon time and the tree stays balanced") {
    TraceBuilder b;
    b.chunk(1, 0).function(0xa).function(0xb).function(0xc);
    // a enters, b enters, longjmp back into a: b abandoned at t=30, then a calls c.
    b.enter(0, 0).enter(1, 10).tag(format::Tag::kAbandon).uleb(1).uleb(20);
    b.enter(2, 10).exit(10).exit(10);
    b.chunk(0).end_record(100);
    std::string path = temp_path("abandon.trace");
    b.save(path);
    analysis::Session pb;
    pb.add_trace(path);
    analysis::Profile p = pb.profile();
    const auto& fb = p.functions[p.match("0xb")[0]];
    const auto& fc = p.functions[p.match("0xc")[0]];
    CHECK(fb.stats.cumtime == approx(20e-9));
    CHECK(fc.stats.cumtime == approx(10e-9));
    // c's caller is a, not the abandoned b.
    size_t a = p.match("0xa")[0], c = p.match("0xc")[0];
    bool a_calls_c = false;
    for (const auto& e : p.edges) a_calls_c |= e.caller == a && e.callee == c;
    CHECK(a_calls_c);
    CHECK(p.threads.at(0).abandoned == 1);
}

TEST_CASE("frames still open at the end are closed at the end time") {
    TraceBuilder b;
    b.chunk(1, 0).function(0x1).enter(0, 5);
    b.chunk(0).end_record(105);
    std::string path = temp_path("open.trace");
    b.save(path);
    analysis::Session pb;
    pb.add_trace(path);
    CHECK(pb.profile().functions.at(0).stats.cumtime == approx(100e-9));
}

TEST_CASE("overhead compensation: exact arithmetic on a synthetic trace") {
    // main calls work 3 times; c_in = 10 ticks per call, c_out = 5 per call made.
    TraceBuilder b;
    b.chunk(0).tag(format::Tag::kMeta).str("overhead_in_ticks").str("10.00");
    b.tag(format::Tag::kMeta).str("overhead_out_ticks").str("5.00");
    b.tag(format::Tag::kMeta).str("line_overhead_ticks").str("2.00");
    b.chunk(1, 0).function(0x1000).function(0x2000);
    // main enters at 0; each work call lasts 100 ticks with 20 ticks between them.
    b.enter(0, 0).enter(1, 20).exit(100).enter(1, 20).exit(100).enter(1, 20).exit(100).exit(20);
    b.chunk(0).end_record(380);
    std::string path = temp_path("compensation.trace");
    b.save(path);

    auto [p, raw] = compensated_and_raw(path);
    // Raw: work 3 x 100; main 380 total, 80 own.
    CHECK(matched(raw, "0x2000").tottime == approx(300e-9));
    CHECK(matched(raw, "0x1000").tottime == approx(80e-9));
    // Compensated: work 3 x (100 - 10); main own 80 - 10 - 3 x 5; main total 380 - 10 - 3 x 15.
    CHECK(matched(p, "0x2000").tottime == approx(270e-9));
    CHECK(matched(p, "0x2000").cumtime == approx(270e-9));
    CHECK(matched(p, "0x1000").tottime == approx(55e-9));
    CHECK(matched(p, "0x1000").cumtime == approx(325e-9));
    CHECK(p.total_time == approx(325e-9)); // the sum of tottime equals main's cumtime
}

// A CPU sample read between two events (time from the samples asked for, or left to their
// number) moves the clock to it; the profiler's cost still due then must stay due, or the
// times differ from the same trace read without its samples, as a timeline reads it. Here
// one sample 3 ticks after an enter (its cost: 10) and one 2 ticks after an exit (5).
TEST_CASE("a sample between two events leaves the compensated times as they are without it") {
    TraceBuilder b;
    b.chunk(0).meta("overhead_in_ticks", "10.00").meta("overhead_out_ticks", "5.00");
    b.meta("sample_hz", "1000");
    b.chunk(1, 0).function(0x1000).function(0x2000);
    b.enter(0, 0).sample(0, 0, 0, 0, 0); // the timer armed
    b.enter(1, 20).sample(3, 1000, 0, 0, 1).exit(97);
    b.sample(2, 1500, 0, 0, 1).enter(1, 18).exit(100).enter(1, 20).exit(100).exit(20);
    b.chunk(0).end_record(380);
    std::string path = save_trace(b, "sample-between.trace");
    for (analysis::TimeSource t : {analysis::TimeSource::kTraced, analysis::TimeSource::kAuto}) {
        CAPTURE(int(t));
        analysis::SessionOptions o;
        o.time = t;
        analysis::Session s(o);
        s.add_trace(path);
        analysis::Profile p = s.profile();
        CHECK(p.time.sampled_traces == 0); // two samples are too few
        // As the same calls without samples ("overhead compensation" above).
        CHECK(matched(p, "0x2000").tottime == approx(270e-9));
        CHECK(matched(p, "0x1000").tottime == approx(55e-9));
        CHECK(matched(p, "0x1000").cumtime == approx(325e-9));
        CHECK(p.total_time == approx(325e-9));
    }
}

// main calls a leaf four times: each enter `gap` ticks after the event before it, each leaf
// 11 ticks long, main's exit 15 after the last; the hooks' cost measured at 10 ticks a call
// inside the callee and 5 outside. The cost subtracted: main's and four leaves' 10, four
// leaves' 5 after their exit: 70 ticks of 5 calls, whatever the gap.
static std::string tiny_calls_trace(uint64_t gap) {
    TraceBuilder b;
    b.chunk(0).meta("overhead_in_ticks", "10.00").meta("overhead_out_ticks", "5.00");
    b.chunk(1, 0).function(0x1000).function(0x2000);
    b.enter(0, 0);
    for (int i = 0; i < 4; ++i) b.enter(1, gap).exit(11);
    b.exit(15);
    b.chunk(0).end_record(4 * (gap + 11) + 15);
    return save_trace(b, "tiny-calls-" + std::to_string(gap) + ".trace");
}

TEST_CASE("a traced time that is mostly the subtracted hooks' cost is named uncertain") {
    // 15-tick gaps: 119 ticks read, 70 of them the cost (59%): named, with 14 ns per call.
    analysis::Profile p = profile_of(tiny_calls_trace(15));
    CHECK(p.time.traced_traces == 1);
    CHECK(p.time.traced_calls == 5);
    CHECK(p.time.traced_raw_seconds == approx(119e-9));
    CHECK(p.time.traced_removed_seconds == approx(70e-9));
    CHECK(p.total_time == approx(49e-9));
    analysis::UncertainTimes u = analysis::uncertain_times(p);
    CHECK(u.traced_cost_share == approx(70.0 / 119.0));
    CHECK(u.traced_cost_per_call == approx(14e-9));
    CHECK_FALSE(u.empty());
    // 20-tick gaps: 139 read, the same 70 subtracted (50.4%); 24-tick gaps: 155, 45%: not named.
    CHECK(analysis::uncertain_times(profile_of(tiny_calls_trace(20))).traced_cost_share ==
          approx(70.0 / 139.0));
    analysis::Profile under = profile_of(tiny_calls_trace(24));
    CHECK(under.time.traced_removed_seconds == approx(70e-9));
    CHECK(analysis::uncertain_times(under).traced_cost_share == 0);
    CHECK(analysis::uncertain_times(under).empty());
    // Read without compensation nothing was subtracted, and nothing is uncertain for it.
    analysis::Profile raw = profile_of(tiny_calls_trace(15), false);
    CHECK(raw.time.traced_removed_seconds < 1e-15);
    CHECK(analysis::uncertain_times(raw).traced_cost_share == 0);
}

TEST_CASE("Pause records: the runtime's chunk opening leaves the frame it happened in") {
    // main (0..400) calls work (100..300); the runtime opened a chunk for 50 ticks in work
    // (before its exit) and 30 ticks in main (before the enter of work).
    TraceBuilder b;
    b.chunk(1, 0).function(0x1000).function(0x2000);
    b.enter(0, 0);
    b.tag(format::Tag::kPause).uleb(1).uleb(30);
    b.enter(1, 100);
    b.tag(format::Tag::kPause).uleb(1).uleb(50);
    b.exit(200).exit(100);
    b.chunk(0).end_record(400);
    std::string path = temp_path("pause.trace");
    b.save(path);

    auto [p, raw] = compensated_and_raw(path);
    CHECK(matched(raw, "0x2000").tottime == approx(200e-9));
    CHECK(matched(raw, "0x1000").tottime == approx(200e-9));
    CHECK(matched(p, "0x2000").tottime == approx(150e-9));
    CHECK(matched(p, "0x1000").tottime == approx(170e-9));
    CHECK(matched(p, "0x1000").cumtime == approx(320e-9));
    // Without compensation the times are the raw intervals.
    CHECK(raw.total_time == approx(400e-9));
}

// Two threads whose streams stop at different times (1: at 100 ns, 2: at 400 ns) with frames
// open, the process's End record at 10000 ns, and a last chunk of thread 1 that `cut` leaves
// cut short (a copy interrupted there): the frames open at the cut close at their own
// thread's last timestamp, never at the End record's time. Whole but unfinished (a killed
// process), they close at the latest event of the process, as before.
TEST_CASE("a trace cut short: each thread's frames close at its own last timestamp") {
    auto build = [](bool finished) {
        TraceBuilder b;
        if (!finished) b.header().flags = 0;
        b.chunk(0);
        name_functions(b, {"f", "g"});
        if (finished) b.end_record(10000);
        b.chunk(1, 0);
        define_functions(b, 2).enter(0, 5).enter(1, 95); // f at 5, g at 100
        b.chunk(2, 0);
        define_functions(b, 2).enter(0, 10).enter(1, 390); // f at 10, g at 400
        b.chunk(1, 100).exit(1000).exit(1000);             // thread 1 returns later
        return b.bytes();
    };
    std::vector<uint8_t> whole = build(true);
    std::string path = temp_path("cut-threads.trace");
    // Cut inside the last chunk's records: its header, its first exit (3 bytes) and a byte of
    // the second are there.
    const size_t last_chunk = format::kHeaderSize + 3 * format::kMinChunkSize;
    TraceBuilder::save(
        path, std::vector<uint8_t>(whole.begin(), whole.begin() + long(last_chunk + 64 + 4)));
    analysis::Session s;
    s.add_trace(path);
    const reader::TraceInfo& info = s.traces().at(0);
    CHECK(info.finished); // its End record was read: the process finished, the copy did not
    CHECK(info.incomplete);
    CHECK(info.partial);
    CHECK(info.end_ticks == 1100); // the latest timestamp read: thread 1's first exit
    // Its chunks carry no clock: it holds the run up to the latest timestamp read.
    CHECK(info.read_up_to_ticks == 1100);
    CHECK(info.read_up_to_seconds() == approx(1100e-9));
    analysis::Profile p = s.profile();
    // f: thread 1 from 5 to 1100 (its exit read, g closed by it), thread 2 from 10 to 400.
    CHECK(same_time(stats(p, "f").cumtime, (1100 - 5) + (400 - 10)));
    CHECK(same_time(stats(p, "g").cumtime, (1100 - 100) + 0));
    CHECK(stats(p, "f").ncalls == 2);

    // The whole file: thread 1 returns from both at 2100, thread 2's close at the End record.
    std::string whole_path = temp_path("whole-threads.trace");
    TraceBuilder::save(whole_path, whole);
    analysis::Session w;
    w.add_trace(whole_path);
    CHECK_FALSE(w.traces().at(0).incomplete);
    CHECK_FALSE(w.traces().at(0).partial);
    analysis::Profile wp = w.profile();
    CHECK(same_time(stats(wp, "f").cumtime, (2100 - 5) + (10000 - 10)));
    CHECK(stats(p, "f").cumtime <= stats(wp, "f").cumtime);
    CHECK(stats(p, "g").cumtime <= stats(wp, "g").cumtime);

    // A killed process's whole file (unfinished, no End record) is no partial trace: its
    // frames close at the latest event of the process, as they always did.
    std::string killed = temp_path("killed-threads.trace");
    TraceBuilder::save(killed, build(false));
    analysis::Session k;
    k.add_trace(killed);
    CHECK(k.traces().at(0).incomplete);
    CHECK_FALSE(k.traces().at(0).partial);
    CHECK(k.traces().at(0).end_ticks == 2100);
    analysis::Profile kp = k.profile();
    CHECK(same_time(stats(kp, "f").cumtime, (2100 - 5) + (2100 - 10)));
}

// A finished header whose file lost whole chunks (chunk_count larger than the chunks present),
// and one whose End record is missing, are partial too; a trace read on several cores says the
// same as one reader. The run is all there up to the opening of its last chunk read (8 ns):
// the chunk cut off was opened no earlier.
TEST_CASE("a trace cut short at a chunk's end, or before its End record, is partial") {
    TraceBuilder b;
    b.header().chunk_count = 3;
    b.chunk(1, 0, 2);
    define_functions(b, 1).enter(0, 5);
    b.chunk(2, 0, 8);
    define_functions(b, 1).enter(0, 10).exit(290);
    b.chunk(0, 0, 400).end_record(10000);
    std::vector<uint8_t> whole = b.bytes();
    std::string path = temp_path("cut-chunks.trace");
    TraceBuilder::save(
        path, std::vector<uint8_t>(whole.begin(), whole.begin() + long(format::kHeaderSize +
                                                                       2 * format::kMinChunkSize)));
    for (unsigned jobs : {1u, 2u}) {
        CAPTURE(jobs);
        analysis::Session s;
        s.add_traces({path}, jobs);
        const reader::TraceInfo& info = s.traces().at(0);
        CHECK(info.partial);
        CHECK_FALSE(info.finished);
        CHECK(info.end_ticks == 300);
        CHECK(info.read_up_to_ticks == 8);
        // Thread 1's frame closes at its own last event (5 ns), not at thread 2's (300 ns).
        CHECK(same_time(s.profile().functions.at(0).stats.cumtime, 0 + 290));
    }
    // No chunk count, no End record, but the header says the writer finished.
    b.header().chunk_count = 0;
    whole = b.bytes();
    TraceBuilder::save(
        path, std::vector<uint8_t>(whole.begin(), whole.begin() + long(format::kHeaderSize +
                                                                       2 * format::kMinChunkSize)));
    analysis::Session s;
    s.add_trace(path);
    CHECK(s.traces().at(0).partial);
    CHECK(s.traces().at(0).incomplete_reason ==
          "the end record is missing (the file was cut short)");
}

// A finished trace whose header says its hooks stopped reading the clock 2.5 s into the run
// (FileHeader::counting_ticks, PROF_TIME=auto) is refused by what needs every call's time
// (a timeline, traced times) from its header: this one holds no Counting record at all, so
// the refusal cannot come from reading it. The table reads it, and so does a reader of an
// unfinished file (whose header was never rewritten: the stream says when counting began).
TEST_CASE("a header that says counting began refuses a timeline and traced times, unread") {
    auto build = [](uint32_t flags) {
        TraceBuilder b;
        b.header().counting_ticks = 2500000000;
        b.header().flags = flags;
        b.chunk(1, 0);
        define_functions(b, 1).enter(0, 0).exit(30);
        b.chunk(0);
        name_functions(b, {"main"}).end_record(3000000000);
        return b;
    };
    std::string path = save_trace(build(format::kFileFinished), "counting-header.trace");
    const std::string said =
        "the hooks stopped reading the clock per call at 2.500 s, once the run "
        "had samples enough to time it (PROF_TIME=auto)";
    Recorder r;
    analysis::SessionOptions timeline;
    timeline.observer = &r;
    analysis::SessionOptions traced;
    traced.time = analysis::TimeSource::kTraced;
    for (const analysis::SessionOptions& o : {timeline, traced})
        for (unsigned jobs : {1u, 2u}) {
            analysis::Session s(o);
            r.session = &s;
            std::string error;
            try {
                s.add_traces({path}, jobs);
            } catch (const reader::TraceError& e) {
                error = e.what();
            }
            CHECK_MESSAGE(error.find(said) != std::string::npos, error);
            CHECK(r.events.empty()); // refused before a record was read
        }
    analysis::Session table;
    table.add_trace(path);
    CHECK(table.profile().functions.at(0).stats.ncalls == 1);

    std::string unfinished = save_trace(build(0), "counting-header-unfinished.trace");
    analysis::Session s(timeline);
    r.session = &s;
    s.add_trace(unfinished);
    CHECK(r.events.size() == 2); // its one call, opened and closed
}

// A thread stream numbered 2^32 - 1 (a damaged trace: the fuzzer's find) is a stream like any
// other, not the replay's "no stream yet".
TEST_CASE("a thread stream numbered UINT32_MAX is replayed, not taken for none") {
    TraceBuilder b;
    b.chunk(UINT32_MAX, 0);
    define_functions(b, 1).enter(0, 0).exit(30);
    b.chunk(0);
    name_functions(b, {"main"}).end_record(100);
    analysis::Session s;
    s.add_trace(save_trace(b, "stream-max.trace"));
    analysis::Profile p = s.profile();
    REQUIRE(p.functions.size() == 1);
    CHECK(p.functions[0].stats.ncalls == 1);
    CHECK(same_time(p.functions[0].stats.cumtime, 30));
}
