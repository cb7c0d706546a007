// The run's settings reach every process: read before the C library sets `environ` (a first
// hook in a .preinit_array function, tests/programs/preinit.c), and carried into children
// started with an environment of their own (execve, execle, execvpe, fexecve, execveat,
// posix_spawn, posix_spawnp with envp = {PATH, HOME}: tests/programs/clean_env.cpp).
#include "analysis/engine/session.hpp"
#include "analysis/model/profile.hpp"
#include "reader/run_manifest.hpp"
#include "reader/trace_reader.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace prof;
using namespace prof::test;

namespace {

bool ends_with(const std::string& s, const std::string& end) {
    return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

// The ncalls of the functions whose name ends with `name` ("child_work(int)" for
// "(anonymous namespace)::child_work(int)"), over `traces` merged.
uint64_t calls_of(const std::vector<std::string>& traces, const std::string& name) {
    analysis::Session s;
    for (const std::string& t : traces) s.add_trace(t);
    uint64_t n = 0;
    for (const auto& f : s.profile().functions)
        if (ends_with(f.name, name)) n += f.stats.ncalls;
    return n;
}

// The count and bytes of the allocations whose stack passes through a function whose name
// ends with `name`, over `traces` merged.
std::pair<uint64_t, uint64_t> allocations_through(const std::vector<std::string>& traces,
                                                  const std::string& name) {
    analysis::Session s;
    for (const std::string& t : traces) s.add_trace(t);
    analysis::MemoryReport m = s.memory();
    uint64_t count = 0, bytes = 0;
    for (const auto& site : m.sites) {
        bool through = false;
        for (const auto& f : site.stack) through |= ends_with(f.name, name);
        if (!through) continue;
        count += site.allocations;
        bytes += site.bytes;
    }
    return {count, bytes};
}

size_t files_in(const std::string& dir) {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
    return n;
}

// The paths of the traces in a run's directory.
std::vector<std::string> traces_in(const std::string& dir) {
    std::vector<std::string> paths;
    for (const std::string& name : reader::run_traces(dir)) paths.push_back(dir + "/" + name);
    return paths;
}

// `argv` run with its working directory `cwd` (made empty first) and `env`.
RunResult run_in(const std::string& cwd, const std::vector<std::string>& argv,
                 std::vector<std::pair<std::string, std::string>> env = {}) {
    std::filesystem::remove_all(cwd);
    std::filesystem::create_directories(cwd);
    std::string command = "cd '" + cwd + "' && exec";
    for (const std::string& a : argv) command += " '" + a + "'";
    return run({"/bin/sh", "-c", command}, env);
}

// The value of `key=` in the program's output ("environ_at_preinit=null pid=123").
std::string printed(const std::string& out, const std::string& key) {
    size_t at = out.find(key + "=");
    if (at == std::string::npos) return "";
    at += key.size() + 1;
    return out.substr(at, out.find_first_of(" \n", at) - at);
}

// Each child's `child K preload=VALUE` line of clean_env's output: K to VALUE.
std::map<int, std::string> child_preloads(const std::string& out) {
    std::map<int, std::string> preloads;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        int k = 0;
        char value[4096];
        if (std::sscanf(line.c_str(), "child %d preload=%4095s", &k, value) == 2)
            preloads[k] = value;
    }
    return preloads;
}

} // namespace

// Set in ASan/UBSan/TSan builds by cmake/sanitizers.cmake: there the memory profiler's
// LD_PRELOAD cannot run (ASan's runtime must come first), and its tests are skipped.
#ifdef PROF_SANITIZER_BUILD
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif

TEST_SUITE("settings before environ") {

    TEST_CASE("a first hook before environ exists honours PROF_OUT, and the preinit calls count") {
        std::string cwd = temp_path("preinit-cwd"), trace = temp_path("preinit.trace");
        auto r = run_in(cwd, {PROF_TEST_PREINIT}, {{"PROF_OUT", trace}, {"PREINIT_PROBE", "kept"}});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        // The case at hand: the C library had not set environ when the hooks began.
        CHECK(printed(r.out, "environ_at_preinit") == "null");
        // And the runtime's start there left the program its environment (it ran the C
        // library's initializer early, with none, when it looked up the wait family by dlopen).
        CHECK(printed(r.out, "probe") == "kept");
        CHECK(r.err.empty());
        CHECK(files_in(cwd) == 0);
        REQUIRE(std::filesystem::exists(trace));
        CHECK(calls_of({trace}, "at_preinit") == 1);
        CHECK(calls_of({trace}, "early") == 3);
        CHECK(calls_of({trace}, "main") == 1);
        CHECK(traces_next_to(trace).empty());
    }

    TEST_CASE("profrun -o and -d: the trace of a program whose hooks begin before environ") {
        std::string cwd = temp_path("preinit-cwd"), trace = temp_path("preinit-o.trace");
        auto r = run_in(cwd, {PROFRUN, "-q", "--no-pack", "-o", trace, "--", PROF_TEST_PREINIT});
        CHECK_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.err.find("wrote no trace") == std::string::npos);
        CHECK(files_in(cwd) == 0);
        CHECK(calls_of({trace}, "early") == 3);

        // In a run's directory, named by its program and pid (read from /proc before the C
        // library names the program).
        std::string dir = temp_path("preinit-run");
        r = run_in(cwd, {PROFRUN, "-q", "-d", dir, "--", PROF_TEST_PREINIT});
        CHECK_MESSAGE(r.exit_code == 0, r.err);
        CHECK(files_in(cwd) == 0);
        std::vector<std::string> traces = traces_in(dir);
        REQUIRE(traces.size() == 1);
        CHECK(std::filesystem::path(traces[0]).filename() ==
              "test_preinit." + printed(r.out, "pid") + ".trace");
        CHECK(calls_of(traces, "at_preinit") == 1);
        reader::TraceReader tr(traces[0]);
        reader::RunManifest m = reader::parse_manifest(slurp(dir + "/run.json"));
        CHECK(tr.read_metadata().meta.at("run") == m.run); // PROF_RUN_ID, read there too
    }

    TEST_CASE("PROF_DISABLE, PROF_LOG and PROF_FORCE before environ (PROF_FORCE then removed)") {
        std::string cwd = temp_path("preinit-cwd");
        auto r = run_in(cwd, {PROF_TEST_PREINIT}, {{"PROF_DISABLE", "1"}, {"PROF_LOG", "info"}});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK(files_in(cwd) == 0);
        CHECK(r.err.find("event=trace_disabled") != std::string::npos);
        CHECK(r.err.find("reason=PROF_DISABLE") != std::string::npos);

        std::string trace = temp_path("preinit-force.trace");
        {
            std::ofstream old(trace);
            old << "an older file";
        }
        r = run_in(cwd, {PROF_TEST_PREINIT},
                   {{"PROF_OUT", trace}, {"PROF_FORCE", "1"}, {"PREINIT_PROBE", "kept"}});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.err.empty());
        CHECK(traces_next_to(trace).empty()); // replaced, not written beside it
        CHECK(calls_of({trace}, "early") == 3);
        CHECK(printed(r.out, "prof_force") == "unset"); // main's environ no longer has it
        CHECK(printed(r.out, "probe") == "kept");       // but has the others
    }

    // Not in sanitizer builds: their runtimes read /proc themselves (LeakSanitizer stops the
    // program at its exit without it).
    TEST_CASE("no /proc before environ: the defaults, and one line that says so" *
              doctest::skip(kSanitizerBuild)) {
        // A mount namespace whose /proc is an empty tmpfs (needs CAP_SYS_ADMIN, as CI's root).
        if (run({"/bin/sh", "-c", "exec unshare -m true"}).exit_code != 0) {
            MESSAGE("unshare -m is not permitted here: not checked");
            return;
        }
        std::string cwd = temp_path("preinit-cwd"), trace = temp_path("preinit-noproc.trace");
        const std::string script =
            std::string("mount -t tmpfs none /proc && exec ") + PROF_TEST_PREINIT;
        auto r = run_in(cwd, {"unshare", "-m", "sh", "-c", script}, {{"PROF_OUT", trace}});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        std::string pid = printed(r.out, "pid");
        CHECK(r.err == "libprof: level=warn event=options_unread pid=" + pid +
                           " reason=\"the runtime started before the C library set environ, "
                           "and /proc/self/environ could not be read\" using=defaults\n");
        CHECK(!std::filesystem::exists(trace));
        CHECK(std::filesystem::exists(cwd + "/prof." + pid + ".trace")); // the default path
        CHECK(files_in(cwd) == 1);
        // The line follows PROF_LOG, read once environ exists.
        r = run_in(cwd, {"unshare", "-m", "sh", "-c", script}, {{"PROF_LOG", "quiet"}});
        REQUIRE(r.exit_code == 0);
        CHECK(r.err.empty());
    }

    TEST_CASE("profrun --mem: an allocation of the preinit function is recorded" *
              doctest::skip(kSanitizerBuild)) {
        std::string cwd = temp_path("preinit-cwd"), trace = temp_path("preinit-mem.trace");
        auto r = run_in(
            cwd, {PROFRUN, "--mem", "-q", "--no-pack", "-o", trace, "--", PROF_TEST_PREINIT});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK(files_in(cwd) == 0);
        CHECK(allocations_through({trace}, "at_preinit") == std::pair<uint64_t, uint64_t>{1, 4000});
    }

} // TEST_SUITE

TEST_SUITE("children with an environment of their own") {

    // clean_env starts 5 children by fork then execve, execle, execvpe, fexecve, execveat, and 2
    // by posix_spawn and posix_spawnp: 13 traces (itself, 5 forked children, 7 child images).
    constexpr size_t kProcesses = 13;

    TEST_CASE("profrun -d: every process of the run is in its directory, with exact counts") {
        std::string cwd = temp_path("clean-cwd"), dir = temp_path("clean-run");
        auto r = run_in(cwd, {PROFRUN, "-d", dir, "--", PROF_TEST_CLEAN_ENV});
        REQUIRE_MESSAGE(r.exit_code == 0, (r.err + r.out));
        CHECK(files_in(cwd) == 0);
        CHECK(r.err.find("run written to " + dir + ": 13 traces") != std::string::npos);
        std::vector<std::string> traces = traces_in(dir);
        REQUIRE(traces.size() == kProcesses);
        CHECK(calls_of(traces, "child_work(int)") == 28);
        reader::RunManifest m = reader::parse_manifest(slurp(dir + "/run.json"));
        // Each child K called child_work K times, in a trace of its own, of the same run.
        std::map<uint64_t, int> images_by_calls;
        for (const std::string& t : traces) {
            CAPTURE(t);
            reader::TraceReader tr(t);
            CHECK(tr.read_metadata().meta.at("run") == m.run);
            ++images_by_calls[calls_of({t}, "child_work(int)")];
        }
        CHECK(images_by_calls ==
              std::map<uint64_t, int>{
                  {0, 6}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}});
    }

    TEST_CASE("PROF_OUT: every child's trace is beside it") {
        std::string cwd = temp_path("clean-cwd"), trace = temp_path("clean-out.trace");
        auto r = run_in(cwd, {PROF_TEST_CLEAN_ENV}, {{"PROF_OUT", trace}});
        REQUIRE_MESSAGE(r.exit_code == 0, (r.err + r.out));
        CHECK(files_in(cwd) == 0);
        std::vector<std::string> traces = traces_next_to(trace);
        traces.push_back(trace);
        CHECK(traces.size() == kProcesses);
        CHECK(calls_of(traces, "child_work(int)") == 28);
    }

    TEST_CASE("PROF_DISABLE=1 in the given environment still disables those children") {
        std::string cwd = temp_path("clean-cwd"), dir = temp_path("clean-disabled");
        auto r =
            run_in(cwd, {PROFRUN, "-q", "-d", dir, "--", PROF_TEST_CLEAN_ENV, "PROF_DISABLE=1"});
        REQUIRE_MESSAGE(r.exit_code == 0, (r.err + r.out));
        CHECK(files_in(cwd) == 0);
        std::vector<std::string> traces = traces_in(dir);
        CHECK(traces.size() == 6); // the parent and its 5 forked children, no child image
        CHECK(calls_of(traces, "child_work(int)") == 0);
    }

    TEST_CASE("an envp of 200 variables: the child is in the run, and failing calls keep errno") {
        std::string cwd = temp_path("clean-cwd"), dir = temp_path("clean-large");
        auto r = run_in(cwd, {PROFRUN, "-q", "-d", dir, "--", PROF_TEST_CLEAN_ENV, "large"});
        REQUIRE_MESSAGE(r.exit_code == 0, (r.err + r.out));
        CHECK(r.out.find("large ok\n") != std::string::npos);
        CHECK(files_in(cwd) == 0);
        std::vector<std::string> traces = traces_in(dir);
        CHECK(traces.size() == 2); // clean_env and its child
        CHECK(calls_of(traces, "child_work(int)") == 1);
    }

    TEST_CASE("profrun --mem: the children are memory-profiled too" *
              doctest::skip(kSanitizerBuild)) {
        std::string cwd = temp_path("clean-cwd"), dir = temp_path("clean-mem");
        auto r = run_in(cwd, {PROFRUN, "--mem", "-q", "-d", dir, "--", PROF_TEST_CLEAN_ENV});
        REQUIRE_MESSAGE(r.exit_code == 0, (r.err + r.out));
        CHECK(files_in(cwd) == 0);
        std::vector<std::string> traces = traces_in(dir);
        REQUIRE(traces.size() == kProcesses);
        // Child K allocates K * 1000 bytes once: 7 allocations, 28000 bytes.
        CHECK(allocations_through(traces, "child_alloc(int)") ==
              std::pair<uint64_t, uint64_t>{7, 28000});
        std::map<int, std::string> preloads = child_preloads(r.out);
        CHECK(preloads.size() == 7);
        for (const auto& [k, preload] : preloads) {
            CAPTURE(k);
            CHECK(ends_with(preload, "/libprofmem.so"));
            CHECK(preload.find(':') == std::string::npos);
        }

        // An LD_PRELOAD of the caller's own is kept, after ours.
        dir = temp_path("clean-mem-preload");
        r = run_in(cwd, {PROFRUN, "--mem", "-q", "-d", dir, "--", PROF_TEST_CLEAN_ENV,
                         "LD_PRELOAD=libm.so.6"});
        REQUIRE_MESSAGE(r.exit_code == 0, (r.err + r.out));
        CHECK(files_in(cwd) == 0);
        traces = traces_in(dir);
        REQUIRE(traces.size() == kProcesses);
        CHECK(allocations_through(traces, "child_alloc(int)") ==
              std::pair<uint64_t, uint64_t>{7, 28000});
        preloads = child_preloads(r.out);
        CHECK(preloads.size() == 7);
        for (const auto& [k, preload] : preloads) {
            CAPTURE(k);
            CHECK(ends_with(preload, "/libprofmem.so:libm.so.6"));
            CHECK(std::count(preload.begin(), preload.end(), ':') == 1);
        }
    }

} // TEST_SUITE
