// End to end: instrumented programs run with the runtime, their traces read back through the
// analysis library and profreport. Exact facts are checked exactly (call counts), timing facts
// as relations and tolerances.
#include "analysis/engine/session.hpp"
#include "analysis/model/latency.hpp"
#include "analysis/model/profile.hpp"
#include "render/report.hpp"
#include "support/browser.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace prof;
using prof::test::run;
using prof::test::temp_path;

// Set in ASan/UBSan/TSan builds by cmake/sanitizers.cmake.
#ifdef PROF_SANITIZER_BUILD
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif

namespace {

// Runs `argv` with PROF_OUT set and returns the profile of the trace it wrote.
analysis::Profile profile_of(const std::vector<std::string>& argv, const std::string& name,
                             std::vector<std::pair<std::string, std::string>> env = {}) {
    std::string trace = temp_path(name);
    env.emplace_back("PROF_OUT", trace);
    test::RunResult r = run(argv, env);
    REQUIRE_MESSAGE(r.exit_code == 0, "stderr: ", r.err);
    analysis::Session pb;
    pb.add_trace(trace);
    return pb.profile();
}

const analysis::Function& fn(const analysis::Profile& p, const std::string& name) {
    for (const auto& f : p.functions)
        if (f.name == name) return f;
    FAIL("no function named ", name);
    throw 0;
}

bool has_function(const analysis::Profile& p, const std::string& name) {
    return std::any_of(p.functions.begin(), p.functions.end(),
                       [&](const analysis::Function& f) { return f.name == name; });
}

// A callee's cumulative time never exceeds its caller's, for every edge of the tree.
void check_nesting(const analysis::Profile& p) {
    for (const analysis::Edge& e : p.edges) {
        if (e.caller == analysis::kRoot || e.caller == e.callee) continue;
        CHECK_MESSAGE(e.stats.cumtime <= p.functions[e.caller].stats.cumtime + 1e-9,
                      p.functions[e.callee].name, " called from ", p.functions[e.caller].name);
    }
}

} // namespace

TEST_CASE("fib(20): exact call counts, recursion shown as total/primitive") {
    analysis::Profile p = profile_of({PROF_SAMPLE_FIB, "20"}, "fib.trace");
    const auto& f = fn(p, "fib(int)");
    CHECK(f.stats.ncalls == 21891);
    CHECK(f.stats.pcalls == 1);
    CHECK(fn(p, "main").stats.ncalls == 1);
    CHECK(p.total_calls == 21892);
    CHECK(p.primitive_calls == 2);
    CHECK(f.file.find("fib.cpp") != std::string::npos);
    CHECK(f.line > 0);
    CHECK(f.stats.cumtime <= fn(p, "main").stats.cumtime);
    check_nesting(p);
    CHECK_FALSE(p.traces.at(0).incomplete);
}

TEST_CASE("names at exit: from libdwfl, or from the fallback when libdw.so.1 cannot be loaded") {
    analysis::Profile dw = profile_of({PROF_SAMPLE_FIB, "10"}, "names-dw.trace");
    // A file that is not a shared object, first in the search path: dlopen("libdw.so.1") fails.
    std::string dir = temp_path("no-libdw");
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/libdw.so.1") << "not a shared object\n";
    analysis::Profile fallback =
        profile_of({PROF_SAMPLE_FIB, "10"}, "names-nodw.trace", {{"LD_LIBRARY_PATH", dir}});
    for (const char* name : {"main", "fib(int)"}) {
        CAPTURE(name);
        const auto &a = fn(dw, name), &b = fn(fallback, name);
        CHECK(a.file.find("fib.cpp") != std::string::npos);
        CHECK(a.line > 0);
        CHECK(b.file == a.file);
        CHECK(b.line == a.line);
        CHECK(b.stats.ncalls == a.stats.ncalls);
    }
    CHECK(fn(dw, "fib(int)").symbol == "_Z3fibi"); // from the symbol table, not only dladdr's
}

TEST_CASE("C functions named like C++ type codes keep their names") {
    analysis::Profile p = profile_of({PROF_TEST_C_NAMES}, "c-names.trace");
    for (const char* name : {"f", "i", "Ss"}) {
        CAPTURE(name);
        CHECK(fn(p, name).stats.ncalls == 3);
    }
    CHECK_FALSE(has_function(p, "float"));
    CHECK_FALSE(has_function(p, "std::string"));
}

// Clang writes no .debug_aranges, through which libdwfl finds an address's unit: functions
// must still get file and line, from the symbol table written at exit and from the binary on
// disk when there is none (PROF_SYMBOLS=0).
TEST_CASE("a binary without .debug_aranges (as Clang builds them): file and line still found") {
    for (const char* symbols : {"1", "0"}) {
        CAPTURE(symbols);
        analysis::Profile p = profile_of({PROF_TEST_C_NAMES_NOARANGES},
                                         std::string("noaranges-") + symbols + ".trace",
                                         {{"PROF_SYMBOLS", symbols}});
        for (const char* name : {"f", "i", "Ss", "main"}) {
            CAPTURE(name);
            const analysis::Function& f = fn(p, name);
            CHECK(f.stats.ncalls == (std::string(name) == "main" ? 1u : 3u));
            CHECK(f.file.find("c_names.c") != std::string::npos);
            CHECK(f.line > 0);
        }
    }
}

TEST_CASE("four threads: exact counts merged and per thread") {
    std::string trace = temp_path("threads.trace");
    test::RunResult r = run({PROF_SAMPLE_THREADS}, {{"PROF_OUT", trace}});
    REQUIRE(r.exit_code == 0);
    analysis::Session pb;
    pb.add_trace(trace);
    analysis::Profile p = pb.profile();
    CHECK(fn(p, "main").stats.ncalls == 1);
    CHECK(fn(p, "worker(int)").stats.ncalls == 4);
    CHECK(fn(p, "nap()").stats.ncalls == 4);
    CHECK(fn(p, "step(unsigned long, unsigned long)").stats.ncalls == 10000);
    CHECK(fn(p, "mix(unsigned long)").stats.ncalls == 20000);
    check_nesting(p);

    std::vector<uint64_t> steps;
    for (const analysis::ThreadFilter& t : pb.thread_list()) {
        analysis::Profile tp = pb.profile(t);
        if (!has_function(tp, "step(unsigned long, unsigned long)")) continue;
        uint64_t n = fn(tp, "step(unsigned long, unsigned long)").stats.ncalls;
        steps.push_back(n);
        CHECK(fn(tp, "mix(unsigned long)").stats.ncalls == 2 * n);
        CHECK(fn(tp, "worker(int)").stats.ncalls == 1);
    }
    std::sort(steps.begin(), steps.end());
    CHECK(steps == std::vector<uint64_t>{1000, 2000, 3000, 4000});
}

TEST_CASE("a function that sleeps 50 ms: cumtime within tolerance, callers nest") {
    std::string trace = temp_path("sleeper.trace");
    test::RunResult r = run({PROF_TEST_SLEEPER}, {{"PROF_OUT", trace}, {"TEST_TIME_SLEEPS", "1"}});
    REQUIRE_MESSAGE(r.exit_code == 0, "stderr: ", r.err);
    double outer_measured = test::seconds_printed(r.err, "outer"); // the program's own clock
    REQUIRE(outer_measured > 0);
    analysis::Session pb;
    pb.add_trace(trace);
    analysis::Profile p = pb.profile();
    double sleep = fn(p, "sleep_50ms()").stats.cumtime;
    CHECK(sleep >= 0.050);
    // A loaded machine oversleeps, never undersleeps: the bound is the program's own measure
    // of the call around it (plus 0.2 ms for the two clocks).
    CHECK(sleep <= outer_measured + 0.0002);
    CHECK(outer_measured < 1.0);
    CHECK(fn(p, "middle()").stats.cumtime >= sleep);
    CHECK(fn(p, "outer()").stats.cumtime >= fn(p, "middle()").stats.cumtime);
    CHECK(fn(p, "main").stats.cumtime >= fn(p, "outer()").stats.cumtime);
    CHECK(fn(p, "outer()").stats.tottime < 0.005);
    check_nesting(p);
}

TEST_CASE("exceptions and longjmp leave a balanced tree") {
    analysis::Profile p = profile_of({PROF_TEST_UNWINDING}, "unwinding.trace");
    CHECK(fn(p, "thrower(int)").stats.ncalls == 18);
    CHECK(fn(p, "thrower(int)").stats.pcalls == 3);
    CHECK(fn(p, "catcher()").stats.ncalls == 3);
    CHECK(fn(p, "jumper(int)").stats.ncalls == 5);
    CHECK(fn(p, "after_jump()").stats.ncalls == 1);
    size_t main_index = SIZE_MAX, after = SIZE_MAX;
    for (size_t i = 0; i < p.functions.size(); ++i) {
        if (p.functions[i].name == "main") main_index = i;
        if (p.functions[i].name == "after_jump()") after = i;
    }
    // after_jump is main's callee, not a callee of a frame the longjmp left.
    for (const analysis::Edge& e : p.edges)
        if (e.callee == after) CHECK(e.caller == main_index);
    uint64_t abandoned = 0, unmatched = 0;
    for (const auto& t : p.threads) abandoned += t.abandoned, unmatched += t.unmatched_exits;
    CHECK(abandoned == 5); // the jumper frames; exceptions run the exit hooks
    CHECK(unmatched == 0);
    // The inlined helper nests inside main and does not end main's frame early.
    CHECK(fn(p, "inlined_helper(int)").stats.ncalls == 2);
    CHECK(fn(p, "leaf()").stats.ncalls == 1);
    for (const analysis::Edge& e : p.edges)
        if (p.functions[e.callee].name == "leaf()") CHECK(e.caller == main_index);
    double callees = 0;
    for (const analysis::Edge& e : p.edges)
        if (e.caller == main_index) callees += e.stats.cumtime;
    CHECK(fn(p, "main").stats.cumtime >= callees);
    check_nesting(p);
}

// After a longjmp out of 5 deep() frames, runner() calls after(), whose frame is larger than
// deep's: after() is runner's callee (it was nested in the frames the longjmp left, which then
// held its 2 ms sleeps). The same with PROF_SCOPE marks instead of instrumentation.
TEST_CASE("longjmp, then a sibling call with a larger frame: the left frames are closed") {
    for (const char* program : {PROF_TEST_LONGJMP_SIBLINGS, PROF_TEST_LONGJMP_SCOPES}) {
        CAPTURE(program);
        bool scopes = std::string(program) == PROF_TEST_LONGJMP_SCOPES;
        analysis::Profile p = profile_of({program}, scopes ? "lj-scopes.trace" : "lj.trace");
        const std::string runner = scopes ? "runner" : "runner()";
        const std::string deep = scopes ? "deep" : "deep(int)";
        const std::string after = scopes ? "after" : "after(int)";
        CHECK(fn(p, deep).stats.ncalls == 15);
        CHECK(fn(p, after).stats.ncalls == 3);
        size_t runner_index = SIZE_MAX, after_index = SIZE_MAX;
        for (size_t i = 0; i < p.functions.size(); ++i) {
            if (p.functions[i].name == runner) runner_index = i;
            if (p.functions[i].name == after) after_index = i;
        }
        for (const analysis::Edge& e : p.edges)
            if (e.callee == after_index) CHECK(e.caller == runner_index);
        CHECK(fn(p, deep).stats.cumtime < 0.002); // none of the 3 x 2 ms sleeps
        CHECK(fn(p, after).stats.cumtime >= 0.006);
        uint64_t abandoned = 0;
        for (const auto& t : p.threads) abandoned += t.abandoned;
        CHECK(abandoned == 15);
        check_nesting(p);
    }
}

TEST_CASE("fork: parent and child each write their own complete trace") {
    std::string trace = temp_path("fork.trace");
    test::RunResult r = run({PROF_TEST_FORKER}, {{"PROF_OUT", trace}});
    REQUIRE(r.exit_code == 0);
    std::string child = test::child_trace(trace);
    REQUIRE_MESSAGE(!child.empty(), "no child trace next to ", trace);

    analysis::Session parent_pb, child_pb;
    parent_pb.add_trace(trace);
    child_pb.add_trace(child);
    analysis::Profile parent = parent_pb.profile(), kid = child_pb.profile();
    CHECK(fn(parent, "parent_work(int)").stats.ncalls == 3);
    CHECK_FALSE(has_function(parent, "child_work(int)"));
    CHECK(fn(kid, "child_work(int)").stats.ncalls == 2);
    CHECK_FALSE(has_function(kid, "parent_work(int)"));
    // The frames open at fork continue in the child's trace: their time is there, but they are
    // the parent's calls (ncalls counts entries), so the run has one call of each.
    CHECK(fn(kid, "common()").stats.ncalls == 0);
    CHECK(fn(kid, "main").stats.ncalls == 0);
    CHECK(fn(kid, "common()").stats.cumtime >= fn(kid, "child_work(int)").stats.cumtime);
    CHECK(fn(kid, "common()").stats.cumtime > 0);
    analysis::Session run_pb;
    run_pb.add_traces({trace, child}, 1);
    analysis::Profile both = run_pb.profile();
    CHECK(fn(both, "main").stats.ncalls == 1);
    CHECK(fn(both, "common()").stats.ncalls == 1);
    CHECK(fn(both, "child_work(int)").stats.ncalls == 2);
    CHECK(fn(both, "parent_work(int)").stats.ncalls == 3);
    CHECK(kid.traces.at(0).header.ppid == parent.traces.at(0).header.pid);
    CHECK_FALSE(kid.traces.at(0).modules.empty()); // the child can be symbolized on its own
    CHECK(kid.traces.at(0).finished);
    CHECK(parent.traces.at(0).finished);
    // The hooks' cost measured once, in the parent: the child's trace repeats its figures.
    CHECK(parent.traces.at(0).overhead_in > 0);
    CHECK(kid.traces.at(0).overhead_in == parent.traces.at(0).overhead_in);
    CHECK(kid.traces.at(0).overhead_out == parent.traces.at(0).overhead_out);
    CHECK(kid.traces.at(0).line_overhead == parent.traces.at(0).line_overhead);
    check_nesting(kid);
}

namespace {

// The truth for the call tests: runs `command` (a *_counted build) with entry_counter.c's
// hooks, which write each process's entries into a fresh directory, and sums them by name.
std::map<std::string, uint64_t> entry_counts(const std::vector<std::string>& command) {
    namespace fs = std::filesystem;
    std::string dir = temp_path("entry-counts");
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto r = run(command, {{"ENTRY_COUNTS_DIR", dir}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::map<std::string, uint64_t> counts;
    for (const auto& e : fs::directory_iterator(dir)) {
        std::ifstream in(e.path());
        std::string name;
        uint64_t n = 0;
        while (in >> name >> n) counts[name] += n;
    }
    return counts;
}

// The program built by GCC with prof::instrument, then by Clang with its recipe
// (-finstrument-functions-after-inlining) when the build found Clang.
std::vector<std::string> call_builds(const std::string& gcc, const std::string& name) {
    std::vector<std::string> builds{gcc};
#ifdef PROF_TEST_CLANG_CALLS
    builds.push_back(std::string(PROF_TEST_CLANG_PROGRAMS) + "/test_" + name + "_clang");
#else
    (void)name;
#endif
    return builds;
}

} // namespace

namespace {
size_t count_of(const std::string& text, const std::string& part) {
    size_t n = 0;
    for (size_t at = 0; (at = text.find(part, at)) != std::string::npos; at += part.size()) ++n;
    return n;
}
} // namespace

// ncalls counts entries. A frame a forked child inherited open is its parent's call, continued:
// in a run of three forked children main has one call, and fork then exec agrees with vfork
// then exec (the exec'd image's main is an entry of its own). The truth is an independent
// counter's (entry_counter.c: entries per process image, summed over the run's processes).
TEST_CASE("ncalls counts entries across fork, fork then exec and vfork then exec") {
    namespace fs = std::filesystem;
    const std::map<std::string, std::map<std::string, uint64_t>> expected = {
        {"fork", {{"main", 1}, {"child_work", 6}}},
        {"exec", {{"main", 2}, {"child_work", 1}}},
        {"vfork", {{"main", 2}, {"child_work", 1}}},
    };
    for (const auto& [mode, calls] : expected) {
        CAPTURE(mode);
        std::map<std::string, uint64_t> truth = entry_counts({PROF_TEST_FORK_EXEC_COUNTED, mode});
        for (const std::string& program : call_builds(PROF_TEST_FORK_EXEC, "fork_exec")) {
            CAPTURE(program);
            std::string dir = temp_path("fork-exec-" + mode);
            fs::remove_all(dir);
            auto r = run({PROFRUN, "-q", "-d", dir, "--", program, mode});
            REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            std::vector<std::string> traces;
            for (const auto& e : fs::directory_iterator(dir))
                if (e.path().extension() == ".trace") traces.push_back(e.path().string());
            std::sort(traces.begin(), traces.end());
            // TSan makes vfork a fork: the child then writes a trace before its exec.
            size_t expected_traces = mode == "fork" ? 4u : 2u + (mode == "exec");
            if (mode == "vfork" && kSanitizerBuild)
                CHECK((traces.size() == 2 || traces.size() == 3));
            else
                CHECK(traces.size() == expected_traces);
            analysis::Session session;
            session.add_traces(traces, 1);
            analysis::Profile p = session.profile();
            for (const auto& [name, n] : calls) {
                CAPTURE(name);
                CHECK(truth[name] == n);
                CHECK(fn(p, name).stats.ncalls == n);
            }
            // The per-call view counts the same calls: an inherited frame has no duration of
            // its own (profreport latency gave main 4 calls in the forked run).
            analysis::views::LatencyOptions lo;
            lo.tail = false;
            lo.open = [&](analysis::ActivationObserver& observer) {
                analysis::SessionOptions so;
                so.observer = &observer;
                auto s = std::make_unique<analysis::Session>(so);
                s->add_traces(traces, 1);
                return s;
            };
            analysis::views::LatencyReport lat = analysis::views::latency(lo);
            for (const auto& [name, n] : calls) {
                CAPTURE(name);
                auto row = std::find_if(lat.functions.begin(), lat.functions.end(),
                                        [&](const auto& f) { return f.name == name; });
                REQUIRE(row != lat.functions.end());
                CHECK(row->calls == n);
            }
            // The views keep such a frame (the child ran inside it), marked: the profile,
            // the table's header and JSON, the timeline.
            if (mode != "vfork" || !kSanitizerBuild)
                CHECK(fn(p, "main").inherited == (mode == "fork" ? 3u : mode == "exec" ? 1u : 0u));
            CHECK(fn(p, "child_work").inherited == 0);
            if (mode == "fork") {
                auto table = run({PROFREPORT, dir});
                CHECK(table.out.find("\n   inherited: 3 frames forked children inherited open "
                                     "(their parents' calls, continued: time of the children's, "
                                     "no calls of their own): main\n") != std::string::npos);
                // main's own object: one call, and the 3 inherited frames; child_work has none.
                auto json = run({PROFREPORT, "--format", "json", dir});
                size_t main_at = json.out.find("{\"name\": \"main\"");
                REQUIRE(main_at != std::string::npos);
                std::string main_json =
                    json.out.substr(main_at, json.out.find('}', main_at) - main_at);
                CHECK(main_json.find("\"ncalls\": 1, \"primitive_calls\": 1, ") !=
                      std::string::npos);
                CHECK(main_json.find("\"inherited\": 3") != std::string::npos);
                CHECK(count_of(json.out, "\"inherited\": ") == 1);
                std::string html = temp_path("fork-exec.html");
                auto page = run({PROFREPORT, "--html", html, dir});
                REQUIRE_MESSAGE(page.exit_code == 0, page.err);
                CHECK(prof::test::slurp(html).find("\"notes\":[\"inherited: 3 frames forked "
                                                   "children inherited open") != std::string::npos);
                std::string dom = prof::test::selftest_dom(html); // "" without Chromium
                if (!dom.empty())
                    CHECK(dom.find("<div class=\"sub\">inherited: 3 frames forked children "
                                   "inherited open") != std::string::npos);
                std::string events_json = temp_path("fork-exec.json");
                auto x = run({PROFREPORT, "--export", "chrome", "-o", events_json, dir});
                REQUIRE_MESSAGE(x.exit_code == 0, x.err);
                // main, in each of the 3 children
                CHECK(count_of(prof::test::slurp(events_json), "\"inherited\":true") == 3);
            }
        }
    }
}

// A program linked with libprof reports the calls it makes without it. libprof.so brings
// libstdc++ into a C program, whose initializer allocates through the program's own malloc
// before libprof.so's constructor; the runtime's own start calls it too (through the C
// library's dlsym). Neither is the program's call, and neither is an event "dropped". In a
// C++ program libstdc++ is the program's own: its call is counted, as the independent entry
// counter counts it. (ASan and TSan replace the allocator themselves: a program's own malloc
// cannot run under them.)
TEST_CASE("a program's own malloc: the calls libprof and its dependencies make are not counted" *
          doctest::skip(kSanitizerBuild)) {
    std::vector<std::pair<std::string, std::string>> builds = {
        {PROF_TEST_OWN_MALLOC_CXX, PROF_TEST_OWN_MALLOC_CXX_COUNTED}};
    for (const std::string& c : call_builds(PROF_TEST_OWN_MALLOC, "own_malloc"))
        builds.emplace_back(c, PROF_TEST_OWN_MALLOC_COUNTED);
    for (const auto& [program, counted] : builds) {
        CAPTURE(program);
        std::map<std::string, uint64_t> truth = entry_counts({counted});
        std::string trace = temp_path("own-malloc.trace");
        auto r = run({PROFRUN, "-q", "-o", trace, "--", program});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        analysis::Session session;
        session.add_trace(trace);
        analysis::Profile p = session.profile();
        CHECK(truth["main"] == 1);
        CHECK(truth["malloc"] >= 3);
        CHECK(fn(p, "main").stats.ncalls == truth["main"]);
        CHECK(fn(p, "malloc").stats.ncalls == truth["malloc"]);
        uint64_t dropped = 0;
        for (const auto& t : p.threads) dropped += t.dropped;
        CHECK(dropped == 0);
    }
}

// A thread is recorded until it really ends: its key destructors run after its start routine
// returned, one of them twice (it sets its key again). Each call counts, as the independent
// entry counter counts it.
TEST_CASE("calls in a thread's key destructors, after its start routine, are counted") {
    std::map<std::string, uint64_t> truth = entry_counts({PROF_TEST_THREAD_EXIT_CALLS_COUNTED});
    for (const std::string& program : call_builds(PROF_TEST_THREAD_EXIT_CALLS, "thread_exit_calls"))
        for (std::string time : {"traced", "sampled"}) {
            CAPTURE(program);
            CAPTURE(time);
            std::string trace = temp_path("thread-exit-calls.trace");
            auto r = run({PROFRUN, "-q", "--time", time, "-o", trace, "--", program});
            REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            analysis::Session session;
            session.add_trace(trace);
            analysis::Profile p = session.profile();
            for (const auto& [name, n] : std::map<std::string, uint64_t>{
                     {"thread_main", 1}, {"tsd_dtor", 2}, {"tsd_work", 2}, {"main", 1}}) {
                CAPTURE(name);
                CHECK(truth[name] == n);
                CHECK(fn(p, name).stats.ncalls == n);
            }
            check_nesting(p);
        }
}

namespace {

bool has_name_containing(const analysis::Profile& p, const std::string& part, uint64_t ncalls) {
    for (const auto& f : p.functions)
        if (f.name.find(part) != std::string::npos && f.stats.ncalls == ncalls) return true;
    return false;
}

void check_names(const analysis::Profile& p) {
    CHECK(has_name_containing(p, "shapes::Widget::Widget(int)", 1)); // C1/C2 aliases: one entry
    CHECK(has_name_containing(p, "static_helper(int)", 1));
    CHECK(has_name_containing(p, "int twice<int>(int)", 1));
    CHECK(has_name_containing(p, "twice<std::__cxx11::basic_string<char", 1));
    CHECK(has_name_containing(p, "main::{lambda(int)#1}::operator()(int) const", 1));
    CHECK(has_name_containing(p, "std::max<int>(int const&, int const&)", 1));
    bool lib = false;
    for (const auto& f : p.functions)
        if (f.name == "lib_function") {
            lib = true;
            CHECK(f.module.find("libtest_naming_lib.so") != std::string::npos);
            CHECK(f.symbol == "lib_function");
        }
    CHECK(lib);
}

} // namespace

TEST_CASE("names: constructor aliases, shared library, static, template, lambda, std") {
    analysis::Profile p = profile_of({PROF_TEST_NAMING}, "naming.trace");
    check_names(p);
    for (const auto& f : p.functions)
        if (f.name == "static_helper(int)") {
            CHECK(f.symbol == "_ZL13static_helperi");
            CHECK(f.file.find("naming.cpp") != std::string::npos);
            CHECK(f.line > 0);
        }
}

TEST_CASE("a process that ends with _exit: no symbol table, names resolved from the binaries") {
    analysis::Profile p = profile_of({PROF_TEST_NAMING, "exit"}, "naming-exit.trace");
    CHECK(p.traces.at(0).incomplete);
    CHECK(p.traces.at(0).symbols.empty());
    check_names(p);
}

TEST_CASE("runtime filters: PROF_EXCLUDE globs and std, PROF_EXCLUDE_MODULES") {
    analysis::Profile all = profile_of({PROF_TEST_NAMING}, "filter-none.trace");
    CHECK(has_name_containing(all, "std::max<int>", 1));

    analysis::Profile no_std =
        profile_of({PROF_TEST_NAMING}, "filter-std.trace", {{"PROF_EXCLUDE", "std"}});
    CHECK_FALSE(has_name_containing(no_std, "std::max<int>", 1));
    CHECK(has_name_containing(no_std, "static_helper(int)", 1));

    analysis::Profile no_twice = profile_of({PROF_TEST_NAMING}, "filter-glob.trace",
                                            {{"PROF_EXCLUDE", "_Z5twice*,_ZL13static*"}});
    CHECK_FALSE(has_name_containing(no_twice, "twice<", 1));
    CHECK_FALSE(has_name_containing(no_twice, "static_helper", 1));
    CHECK(has_name_containing(no_twice, "shapes::Widget::Widget(int)", 1));
    check_nesting(no_twice);

    analysis::Profile no_lib = profile_of({PROF_TEST_NAMING}, "filter-module.trace",
                                          {{"PROF_EXCLUDE_MODULES", "libtest_naming_lib"}});
    CHECK_FALSE(has_function(no_lib, "lib_function"));
    CHECK(has_name_containing(no_lib, "static_helper(int)", 1));
}

// ASan and TSan replace the process's allocator themselves: what these two check is gone.
TEST_CASE("the hot path never calls the application's allocator" * doctest::skip(kSanitizerBuild)) {
    std::string trace = temp_path("alloc-guard.trace");
    test::RunResult r = run({PROF_TEST_ALLOC_GUARD}, {{"PROF_OUT", trace}, {"PROF_CHUNK_SIZE", "64K"}});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "fib=75025 allocator_calls_during_tracing=0 malloc_from=test_alloc_guard\n");
    analysis::Session pb;
    pb.add_trace(trace);
    analysis::Profile p = pb.profile();
    CHECK(fn(p, "fib(int)").stats.ncalls == 242785);
    CHECK(p.traces.at(0).chunks > 10); // many chunks were opened while the count stayed 0
}

TEST_CASE("the application keeps glibc's malloc" * doctest::skip(kSanitizerBuild)) {
    test::RunResult r = run({PROF_TEST_WHICH_MALLOC}, {{"PROF_OUT", temp_path("which.trace")}});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "malloc=libc.so.6 free=libc.so.6 new=libstdc++.so.6 work=42\n");
}

TEST_CASE("pthread_exit from nested frames and a normal thread end") {
    analysis::Profile p = profile_of({PROF_TEST_THREAD_EXIT}, "thread-exit.trace");
    CHECK(fn(p, "inner(int)").stats.ncalls == 2);
    CHECK(fn(p, "leave_early()").stats.ncalls == 1);
    CHECK(fn(p, "exiting_worker(void*)").stats.ncalls == 1);
    CHECK(fn(p, "normal_worker(void*)").stats.ncalls == 1);
    size_t ended = 0;
    for (const auto& [stream, t] : p.traces.at(0).threads) ended += t.ended;
    CHECK(ended == 2); // both worker threads closed their streams
    check_nesting(p);
}

TEST_CASE("several traces merge like pstats' Stats.add") {
    std::string a = temp_path("merge-a.trace"), b = temp_path("merge-b.trace");
    REQUIRE(run({PROF_SAMPLE_FIB, "10"}, {{"PROF_OUT", a}}).exit_code == 0);
    REQUIRE(run({PROF_SAMPLE_FIB, "12"}, {{"PROF_OUT", b}}).exit_code == 0);
    analysis::Session pb;
    pb.add_trace(a);
    pb.add_trace(b);
    analysis::Profile p = pb.profile();
    CHECK(fn(p, "fib(int)").stats.ncalls == 177 + 465);
    CHECK(fn(p, "fib(int)").stats.pcalls == 2);
    CHECK(fn(p, "main").stats.ncalls == 2);
}

TEST_CASE("exit hooks reached by a tail call (GCC -O2) keep recursion exact") {
    analysis::Profile p = profile_of({PROF_TEST_TAIL_EXIT}, "tail-exit.trace");
    const auto& v = fn(p, "visit(Node const*, long*)");
    CHECK(v.stats.ncalls == 2047);
    CHECK(v.stats.pcalls == 1);
    uint64_t abandoned = 0, unmatched = 0;
    for (const auto& t : p.threads) abandoned += t.abandoned, unmatched += t.unmatched_exits;
    CHECK(abandoned == 0);
    CHECK(unmatched == 0);
    check_nesting(p);
}

TEST_CASE("the depth limit drops the deepest frames, keeps the tree exact and says so") {
    analysis::Profile p =
        profile_of({PROF_SAMPLE_FIB, "20"}, "depth.trace", {{"PROF_MAX_DEPTH", "16"}});
    const auto& f = fn(p, "fib(int)");
    CHECK(f.stats.pcalls == 1);
    CHECK(f.stats.ncalls < 21891);
    uint64_t dropped = 0;
    for (const auto& t : p.threads) dropped += t.dropped;
    CHECK(dropped == 2 * (21891 - f.stats.ncalls)); // an enter and an exit per frame
    check_nesting(p);
    auto warnings = render::data_warnings(p);
    CHECK(std::any_of(warnings.begin(), warnings.end(),
                      [](const std::string& w) { return w.find("events dropped") != std::string::npos; }));
}
