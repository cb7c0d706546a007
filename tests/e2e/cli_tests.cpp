// profreport and profrun as a user runs them: exit codes, one-line errors, formats.
#include "support/run.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_builder.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>

using prof::test::run;
using prof::test::temp_path;

namespace {

std::string fib_trace() {
    static const std::string path = [] {
        std::string p = temp_path("cli-fib.trace");
        auto r = run({PROF_SAMPLE_FIB, "15"}, {{"PROF_OUT", p}});
        REQUIRE(r.exit_code == 0);
        return p;
    }();
    return path;
}

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

} // namespace

TEST_CASE("profreport prints the pstats table") {
    auto r = run({PROFREPORT, "--sort", "cumtime", fib_trace()});
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.find("1974 function calls (2 primitive calls) in") != std::string::npos);
    CHECK(r.out.find("Ordered by: cumulative time") != std::string::npos);
    CHECK(r.out.find("   ncalls  tottime  percall  cumtime  percall filename:lineno(function)") !=
          std::string::npos);
    CHECK(r.out.find("   1973/1 ") != std::string::npos);
    CHECK(r.out.find("fib.cpp:") != std::string::npos);
    // main comes first by cumulative time.
    CHECK(r.out.find("(main)") < r.out.find("(fib(int))"));
}

TEST_CASE("profreport sort keys, aliases, limit and callers") {
    for (const char* key : {"tottime", "time", "ncalls", "calls", "pcalls", "name", "file",
                            "filename", "module", "line", "nfl", "stdname", "cumulative"})
        CHECK_MESSAGE(run({PROFREPORT, "-s", key, fib_trace()}).exit_code == 0, key);
    auto limited = run({PROFREPORT, "-n", "1", fib_trace()});
    CHECK(limited.out.find("List reduced from 2 to 1") != std::string::npos);
    auto callers = run({PROFREPORT, "--callers", "fib", fib_trace()});
    CHECK(callers.exit_code == 0);
    CHECK(callers.out.find("was called by...") != std::string::npos);
    auto callees = run({PROFREPORT, "--callees", "main", fib_trace()});
    CHECK(callees.out.find("called...") != std::string::npos);
    CHECK(callees.out.find("fib.cpp") != std::string::npos);
}

TEST_CASE("profreport --format json and csv") {
    auto j = run({PROFREPORT, "--format", "json", fib_trace()});
    CHECK(j.exit_code == 0);
    for (const char* key : {"\"name\": \"fib(int)\"", "\"symbol\": \"_Z3fibi\"", "\"module\": ",
                            "\"file\": ", "\"line\": ", "\"ncalls\": 1973",
                            "\"primitive_calls\": 1", "\"tottime\": ", "\"cumtime\": "})
        CHECK_MESSAGE(j.out.find(key) != std::string::npos, key);
    auto c = run({PROFREPORT, "--format", "csv", fib_trace()});
    CHECK(c.out.rfind("ncalls,primitive_calls,tottime", 0) == 0);
    CHECK(lines(c.out) == 3);
}

TEST_CASE("bad usage and bad input: one line on stderr and a non-zero exit") {
    auto unknown = run({PROFREPORT, "--frobnicate", fib_trace()});
    CHECK(unknown.exit_code == 2);
    CHECK(lines(unknown.err) == 1);
    CHECK(unknown.err.find("unknown option '--frobnicate'") != std::string::npos);

    auto badsort = run({PROFREPORT, "--sort", "speed", fib_trace()});
    CHECK(badsort.exit_code == 2);
    CHECK(badsort.err.find("unknown sort key 'speed'") != std::string::npos);

    auto missing = run({PROFREPORT, temp_path("nope.trace")});
    CHECK(missing.exit_code == 1);
    CHECK(lines(missing.err) == 1);
    CHECK(missing.err.find("cannot open") != std::string::npos);

    std::string junk = temp_path("junk.trace");
    prof::test::TraceBuilder::save(junk, std::vector<uint8_t>(6000, 7));
    auto notrace = run({PROFREPORT, junk});
    CHECK(notrace.exit_code == 1);
    CHECK(notrace.err.find("not a libprof trace") != std::string::npos);

    auto unwritable = run({PROFREPORT, "-o", "/nonexistent-dir/x.txt", fib_trace()});
    CHECK(unwritable.exit_code == 1);
    CHECK(unwritable.err.find("cannot write /nonexistent-dir/x.txt") != std::string::npos);

    auto json_log = run({PROFREPORT, "--log-format", "json", temp_path("nope.trace")});
    CHECK(json_log.err.rfind("{\"tool\":\"profreport\",\"level\":\"error\"", 0) == 0);
}

TEST_CASE("a truncated real trace reports what was read and says it is incomplete") {
    std::string full = prof::test::slurp(fib_trace());
    std::string cut = temp_path("cut-fib.trace");
    std::vector<uint8_t> bytes(full.begin(), full.begin() + long(full.size() / 2));
    prof::test::TraceBuilder::save(cut, bytes);
    auto r = run({PROFREPORT, cut});
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("incomplete trace") != std::string::npos);
    CHECK(r.out.find("function calls") != std::string::npos);
}

TEST_CASE("profrun passes the exit status through and writes the trace") {
    std::string out = temp_path("profrun-fib.trace");
    auto r = run({PROFRUN, "-q", "-o", out, "--", PROF_SAMPLE_FIB, "10"});
    CHECK(r.exit_code == 0);
    auto report = run({PROFREPORT, out});
    CHECK(report.out.find("177/1") != std::string::npos);
    // A second run keeps the first trace as .old instead of overwriting it silently.
    auto again = run({PROFRUN, "-o", out, "--", PROF_SAMPLE_FIB, "10"});
    CHECK(again.err.find(".old") != std::string::npos);
    CHECK(run({PROFREPORT, out + ".old"}).exit_code == 0);

    // -f replaces the file up front: a program that writes no trace is not reported with
    // the previous run's.
    auto replaced = run({PROFRUN, "-f", "-o", out, "--", "/bin/true"});
    CHECK(replaced.exit_code == 0);
    CHECK(replaced.err.find("wrote no trace") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out));

    auto failing = run({PROFRUN, "-q", "-o", temp_path("false.trace"), "--", "/bin/sh", "-c", "exit 7"});
    CHECK(failing.exit_code == 7);
    auto killed = run({PROFRUN, "-q", "-o", temp_path("k.trace"), "--", "/bin/sh", "-c", "kill -9 $$"});
    CHECK(killed.exit_code == 128 + 9);
    auto nocmd = run({PROFRUN});
    CHECK(nocmd.exit_code == 2);
    CHECK(nocmd.err.find("no command given") != std::string::npos);
}

TEST_CASE("an unwritable PROF_OUT: one line on stderr, the program runs on untouched") {
    auto r = run({PROF_SAMPLE_FIB, "10"}, {{"PROF_OUT", "/nonexistent-dir/x.trace"}});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "fib(10) = 55\n");
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find("event=trace_disabled") != std::string::npos);
}

TEST_CASE("--help on every tool") {
    CHECK(run({PROFREPORT, "--help"}).out.find("usage: profreport") == 0);
    CHECK(run({PROFRUN, "--help"}).out.find("usage: profrun") == 0);
}

TEST_CASE("progress on a terminal only") {
    std::string trace = temp_path("progress.trace");
    REQUIRE(run({PROF_SAMPLE_FIB, "32"}, {{"PROF_OUT", trace}}).exit_code == 0); // 7 M calls
    auto piped = run({PROFREPORT, trace});
    CHECK(piped.err.empty());
    if (access("/usr/bin/script", X_OK) != 0) {
        MESSAGE("skipped the terminal half: no /usr/bin/script");
        return;
    }
    // script(1) gives profreport a pseudo-terminal as standard error.
    auto tty = run({"/usr/bin/script", "-qc", std::string(PROFREPORT) + " " + trace + " > /dev/null", "/dev/null"});
    CHECK(tty.out.find("profreport: reading") != std::string::npos);
}
