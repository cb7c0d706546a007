// The pstats model (analysis/model/profile.hpp) from the replay engine: cProfile's numbers per
// function and per caller -> callee edge, recursion counted once, threads and traces merged.
#include "unit/analysis/analysis_support.hpp"

using namespace prof;
using namespace prof::test;

namespace {

// main -> f -> f -> f -> g, on a 1 ns clock:
//   main 0..100, f 10..80, f 20..60, f 30..50, g 35..45.
std::string direct_recursion() {
    TraceBuilder b;
    b.chunk(1, 0);
    define_functions(b, 3);
    b.enter(0, 0).enter(1, 10).enter(1, 10).enter(1, 10).enter(2, 5);
    b.exit(10).exit(5).exit(10).exit(20).exit(20);
    b.chunk(0);
    name_functions(b, {"main", "f", "g"}).end_record(100);
    return save_trace(b, "direct_recursion.trace");
}

// a -> b -> a -> b: a 0..100, b 10..60, a 20..50, b 30..40.
std::string mutual_recursion() {
    TraceBuilder b;
    b.chunk(1, 0);
    define_functions(b, 2);
    b.enter(0, 0).enter(1, 10).enter(0, 10).enter(1, 10).exit(10).exit(10).exit(10).exit(40);
    b.chunk(0);
    name_functions(b, {"a", "b"}).end_record(100);
    return save_trace(b, "mutual_recursion.trace");
}

// Thread 1: main 0..100 calls work 10..40 and 50..60. Thread 2: main 0..50 calls work
// 20..45. Thread 2 has a ThreadBegin naming it (tid 777).
std::string two_threads(const std::string& name, uint64_t main_address = 0x1000) {
    TraceBuilder b;
    b.chunk(1, 0).function(main_address).function(0x2000);
    b.enter(0, 0).enter(1, 10).exit(30).enter(1, 10).exit(10).exit(40);
    b.chunk(2, 0);
    b.tag(format::Tag::kThreadBegin).uleb(0).u32(777).str("worker");
    b.function(main_address).function(0x2000);
    b.enter(0, 0).enter(1, 20).exit(25).exit(5);
    b.chunk(0);
    b.symbol(main_address, "main", "/src/app.cpp", 3).symbol(0x2000, "work", "/src/app.cpp", 9);
    b.end_record(100);
    return save_trace(b, name);
}

} // namespace

TEST_CASE("direct recursion: ncalls 3/1, cumtime of the outermost activation, tottime summed") {
    analysis::Profile p = profile_of(direct_recursion());
    REQUIRE(p.functions.size() == 3);
    check_stats(stats(p, "f"), 3, 1, 30 + 20 + 10, 70);
    check_stats(stats(p, "g"), 1, 1, 10, 10);
    check_stats(stats(p, "main"), 1, 1, 30, 100);
    CHECK(p.total_calls == 5);
    CHECK(p.primitive_calls == 3);
    CHECK(p.total_time == approx(100e-9));
}

TEST_CASE("direct recursion: the recursive edge counts its outermost activation once") {
    analysis::Profile p = profile_of(direct_recursion());
    REQUIRE(p.edges.size() == 4);
    check_stats(edge(p, "", "main"), 1, 1, 30, 100);
    check_stats(edge(p, "main", "f"), 1, 1, 30, 70);
    // f -> f twice; the inner one is within the outer one: pcalls 1, cumtime the outer's.
    check_stats(edge(p, "f", "f"), 2, 1, 20 + 10, 40);
    check_stats(edge(p, "f", "g"), 1, 1, 10, 10);
}

TEST_CASE("mutual recursion a -> b -> a -> b: each function and edge counted once in cumtime") {
    analysis::Profile p = profile_of(mutual_recursion());
    check_stats(stats(p, "a"), 2, 1, 50 + 20, 100);
    check_stats(stats(p, "b"), 2, 1, 20 + 10, 50);
    REQUIRE(p.edges.size() == 3);
    check_stats(edge(p, "", "a"), 1, 1, 50, 100);
    check_stats(edge(p, "a", "b"), 2, 1, 20 + 10, 50);
    check_stats(edge(p, "b", "a"), 1, 1, 20, 30);
    CHECK(p.total_time == approx(100e-9));
}

TEST_CASE("edges add up to their callee: ncalls, tottime, every caller listed") {
    analysis::Profile p = profile_of(direct_recursion());
    for (size_t f = 0; f < p.functions.size(); ++f) {
        uint64_t ncalls = 0;
        double tottime = 0;
        for (const analysis::Edge& e : p.edges)
            if (e.callee == f) ncalls += e.stats.ncalls, tottime += e.stats.tottime;
        CHECK(ncalls == p.functions[f].stats.ncalls);
        CHECK(tottime == approx(p.functions[f].stats.tottime));
    }
}

TEST_CASE("per-thread profiles and the merged one") {
    analysis::Session s;
    s.add_trace(two_threads("threads.trace"));
    std::vector<analysis::ThreadFilter> threads = s.thread_list();
    REQUIRE(threads.size() == 2);
    CHECK(threads[0].stream == 1);
    CHECK(threads[1].stream == 2);

    analysis::Profile t1 = s.profile(threads[0]);
    REQUIRE(t1.threads.size() == 1);
    check_stats(stats(t1, "work"), 2, 2, 40, 40);
    check_stats(stats(t1, "main"), 1, 1, 60, 100);
    CHECK(t1.total_time == approx(100e-9));

    analysis::Profile t2 = s.profile(threads[1]);
    REQUIRE(t2.threads.size() == 1);
    CHECK(t2.threads[0].tid == 777);
    CHECK(t2.threads[0].name == "worker");
    check_stats(stats(t2, "work"), 1, 1, 25, 25);
    check_stats(stats(t2, "main"), 1, 1, 25, 50);

    analysis::Profile all = s.profile();
    CHECK(all.threads.size() == 2);
    REQUIRE(all.functions.size() == 2);
    check_stats(stats(all, "work"), 3, 3, 65, 65);
    check_stats(stats(all, "main"), 2, 2, 85, 150);
    check_stats(edge(all, "main", "work"), 3, 3, 65, 65);
    CHECK(all.total_calls == 5);
    CHECK(all.total_time == approx(150e-9));

    std::optional<analysis::ThreadFilter> found = s.find_thread(777);
    REQUIRE(found);
    CHECK(found->stream == 2);
    CHECK(s.profile(*found).functions.size() == 2);
    CHECK_FALSE(s.find_thread(778));
}

TEST_CASE("two traces merge like Stats.add: functions by name, whatever their addresses") {
    analysis::Session s;
    s.add_trace(two_threads("merge-a.trace"));
    s.add_trace(two_threads("merge-b.trace", 0x7000)); // main elsewhere in the second run
    CHECK(s.traces().size() == 2);
    CHECK(s.thread_list().size() == 4);
    analysis::Profile p = s.profile();
    CHECK(p.traces.size() == 2);
    CHECK(p.threads.size() == 4);
    REQUIRE(p.functions.size() == 2);
    check_stats(stats(p, "work"), 6, 6, 130, 130);
    check_stats(stats(p, "main"), 4, 4, 170, 300);
    check_stats(edge(p, "", "main"), 4, 4, 170, 300);
    check_stats(edge(p, "main", "work"), 6, 6, 130, 130);
    CHECK(p.total_calls == 10);
    CHECK(p.total_time == approx(300e-9));

    // One thread of the second trace alone.
    analysis::Profile one = s.profile(analysis::ThreadFilter{1, 2});
    check_stats(stats(one, "work"), 1, 1, 25, 25);
}

TEST_CASE("recursion: ncalls total/primitive, cumtime counted once") {
    TraceBuilder b;
    b.chunk(1, 0).function(0x10);
    // f -> f -> f, each level adds 10 ticks of its own.
    b.enter(0, 0).enter(0, 10).enter(0, 10).exit(10).exit(10).exit(10);
    b.chunk(0).end_record(100);
    std::string path = temp_path("rec.trace");
    b.save(path);
    analysis::Session pb;
    pb.add_trace(path);
    analysis::Profile p = pb.profile();
    REQUIRE(p.functions.size() == 1);
    const analysis::Stats& s = p.functions[0].stats;
    CHECK(s.ncalls == 3);
    CHECK(s.pcalls == 1);
    CHECK(s.cumtime == approx(50e-9));
    CHECK(s.tottime == approx(50e-9));
}

// A profile timed by samples with its calls counted: the functions of at least 1% of the time
// that take less per call than the hooks cost per call (the profiler's samples' time over the
// calls) are uncertain, with their callers of at least 1%; a traced profile has none.
TEST_CASE("uncertain times: less time per call than the hooks, and their callers") {
    analysis::Profile p;
    p.time.sampled_traces = 1;
    p.time.own_seconds = 1.0;
    p.total_calls = 100'000'000; // hooks: 10 ns per call
    p.total_time = 1.0;
    auto add = [&](std::string name, uint64_t ncalls, double tottime, std::string kind) {
        analysis::Function f;
        f.name = std::move(name);
        f.kind = std::move(kind);
        f.stats.ncalls = f.stats.pcalls = ncalls;
        f.stats.tottime = tottime;
        p.functions.push_back(f);
        return p.functions.size() - 1;
    };
    size_t host = add("host(int)", 10, 0.40, "function");
    size_t tiny = add("tiny(int)", 50'000'000, 0.20, "function");  // 4 ns per call
    size_t tinier = add("tinier()", 40'000'000, 0.30, "function"); // 7.5 ns
    size_t rare = add("rare()", 40'000'000, 0.005, "function");    // 0.5% of the time
    size_t big = add("big()", 1'000'000, 0.09, "function");        // 90 ns
    size_t scope = add("a scope", 9'000'000, 0.05, "scope");       // a marked scope
    auto edge = [&](size_t caller, size_t callee) {
        analysis::Edge e;
        e.caller = caller;
        e.callee = callee;
        p.edges.push_back(e);
    };
    edge(analysis::kRoot, host);
    edge(host, tiny);
    edge(host, tinier);
    edge(tiny, tinier); // an uncertain caller is listed once, with the functions
    edge(big, rare);    // a caller of a function too small to matter
    edge(host, big);
    edge(host, scope);
    analysis::UncertainTimes u = analysis::uncertain_times(p);
    CHECK(u.hook_seconds_per_call == doctest::Approx(10e-9));
    CHECK(u.functions == std::vector<size_t>{tinier, tiny});
    CHECK(u.callers == std::vector<size_t>{host});
    p.time.sampled_traces = 0; // timed by the hooks
    p.time.traced_traces = 1;
    CHECK(analysis::uncertain_times(p).empty());
}

// Marked scopes and functions of at least 1% of the time that take under ten clock reads per
// activation (the trace's calibrated PROF_LINE cost) are uncertain where scopes are timed by
// their clock reads; none when the clock reads' cost was not subtracted.
TEST_CASE("uncertain times: marked scopes under ten clock reads per activation") {
    analysis::Profile p;
    p.total_time = 1.0;
    p.compensated = true;
    p.time.traced_traces = 1;
    reader::TraceInfo info;
    info.ticks_per_second = 2e9;
    info.line_overhead = 40; // 20 ns
    p.traces.push_back(info);
    auto add = [&](std::string name, uint64_t ncalls, double cumtime, std::string kind) {
        analysis::Function f;
        f.name = std::move(name);
        f.kind = std::move(kind);
        f.stats.ncalls = f.stats.pcalls = ncalls;
        f.stats.cumtime = f.stats.tottime = cumtime;
        p.functions.push_back(f);
        return p.functions.size() - 1;
    };
    size_t short_scope = add("scan", 1'000'000, 0.10, "scope");         // 100 ns
    size_t shorter = add("probe", 10'000'000, 0.15, "marked function"); // 15 ns
    add("long", 1'000'000, 0.30, "scope");                              // 300 ns
    add("rare", 1'000'000, 0.005, "scope");                             // 0.5% of the time
    add("tiny(int)", 50'000'000, 0.20, "function"); // a function: the hooks' question
    analysis::UncertainTimes u = analysis::uncertain_times(p);
    CHECK(u.clock_read_seconds == doctest::Approx(20e-9));
    CHECK(u.marked == std::vector<size_t>{shorter, short_scope});
    CHECK(u.functions.empty()); // traced
    CHECK(!u.empty());
    p.time.traced_traces = 0; // timed by samples, scopes too: DWARF found their blocks
    p.time.sampled_traces = 1;
    CHECK(analysis::uncertain_times(p).marked.empty());
    p.time.measured_run_threads = 1; // not all of them
    CHECK(analysis::uncertain_times(p).marked == std::vector<size_t>{shorter, short_scope});
    p.compensated = false;
    CHECK(analysis::uncertain_times(p).empty());
}

// Timed by samples of which the markers' own code took at least half: the functions holding
// marked lines and scopes are named, with the share.
TEST_CASE("uncertain times: the markers' code took most of the samples") {
    analysis::Profile p;
    p.total_time = 1.0;
    p.time.sampled_traces = 1;
    p.time.samples = 20;
    p.time.marker_samples = 80;
    reader::TraceInfo info;
    reader::Site line, scope, function;
    line.kind = format::SiteKind::kLine;
    line.function = "int step(int)";
    scope.kind = format::SiteKind::kScope;
    scope.function = "void run()";
    function.kind = format::SiteKind::kFunction; // PROF_FUNCTION alone marks no code inside
    function.function = "void other()";
    info.sites[1] = line;
    info.sites[2] = scope;
    info.sites[3] = function;
    p.traces.push_back(info);
    analysis::UncertainTimes u = analysis::uncertain_times(p);
    CHECK(u.marker_share == doctest::Approx(0.8));
    CHECK(u.marker_functions == std::vector<std::string>{"run()", "step(int)"});
    p.time.marker_samples = 19; // under half
    CHECK(analysis::uncertain_times(p).marker_functions.empty());
    CHECK(analysis::uncertain_times(p).empty());
}
