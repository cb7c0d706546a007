// profreport and profrun as a user runs them: exit codes, one-line errors, formats.
#include "support/run.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_builder.hpp"

#include "profreport/export_formats.hpp"

#include <prof/trace_format.hpp>
#include <prof/version.h>

#include <doctest/doctest.h>

// libprofmem.so interposes malloc, as ASan and TSan do themselves: the tests that record a
// trace with profrun --mem are skipped in sanitizer builds (cmake/sanitizers.cmake).
#ifdef PROF_SANITIZER_BUILD
constexpr bool kNoMemoryProfiler = true;
#else
constexpr bool kNoMemoryProfiler = false;
#endif

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <vector>

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

void write_file(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
}

// A copy of the fib trace whose header is fine but whose first chunk is garbage: only reading
// it to the end finds out.
std::string corrupt_trace() {
    static const std::string path = [] {
        std::string bytes = prof::test::slurp(fib_trace());
        for (size_t i = 4200; i < 4600 && i < bytes.size(); ++i) bytes[i] = char(0xff);
        std::string p = temp_path("cli-corrupt.trace");
        write_file(p, bytes);
        return p;
    }();
    return path;
}

// The files of a directory (temporary files left behind show up here).
std::vector<std::string> files_in(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

// Runs profreport with writes limited to 512 bytes per file (RLIMIT_FSIZE; SIGXFSZ ignored, so
// a write past it fails with EFBIG): its outputs fail, its short error line still gets out.
prof::test::RunResult run_small_files(const std::vector<std::string>& args,
                                      const std::string& stdout_to = "") {
    std::string cmd = "trap '' XFSZ; ulimit -f 1; exec";
    for (const std::string& a : args) cmd += " '" + a + "'";
    if (!stdout_to.empty()) cmd += " > '" + stdout_to + "'";
    return run({"/bin/sh", "-c", cmd});
}

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
    CHECK(replaced.exit_code == 125);
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

// python -m cProfile -s KEY: the report's table after the run, here on standard error (the
// program's own output stays alone on standard output); the same table profreport prints.
TEST_CASE("profrun -s KEY -n N prints the report's table after the run, in each mode") {
    std::string out = temp_path("profrun-sort.trace");
    auto r = run({PROFRUN, "-f", "-s", "ncalls", "-n", "1", "-o", out, "--", PROF_SAMPLE_FIB, "10"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "fib(10) = 55\n");
    auto table = run({PROFREPORT, "--sort", "ncalls", "--limit", "1", out});
    REQUIRE(table.exit_code == 0);
    CHECK(table.out.find("177/1") != std::string::npos);
    CHECK(table.out.find("List reduced from 2 to 1") != std::string::npos);
    CHECK(r.err.find(table.out) != std::string::npos);
    // -q keeps the report asked for, and drops profrun's own line.
    auto quiet = run({PROFRUN, "-q", "-f", "-s", "calls", "-o", out, "--", PROF_SAMPLE_FIB, "10"});
    CHECK(quiet.exit_code == 0);
    CHECK(quiet.err.find("trace written") == std::string::npos);
    CHECK(quiet.err.find("Ordered by: call count") != std::string::npos);
    CHECK(quiet.err.find("fib.cpp:13(main)") != std::string::npos);

    // A run directory: the report of the run.
    std::string dir = temp_path("profrun-sort-dir");
    std::filesystem::remove_all(dir);
    auto in_dir = run({PROFRUN, "-q", "-s", "tottime", "-d", dir, "--", PROF_SAMPLE_FIB, "10"});
    CHECK(in_dir.exit_code == 0);
    CHECK(in_dir.err.find("Ordered by: internal time") != std::string::npos);
    CHECK(in_dir.err.find("177/1") != std::string::npos);

    // Asked wrong: one line and exit 2 before anything runs.
    std::string never = temp_path("profrun-sort-never.trace");
    std::filesystem::remove(never);
    auto bad = run({PROFRUN, "-s", "bogus", "-o", never, "--", PROF_SAMPLE_FIB, "10"});
    CHECK(bad.exit_code == 2);
    CHECK(lines(bad.err) == 1);
    CHECK(bad.err.find("unknown sort key 'bogus'") != std::string::npos);
    CHECK(bad.out.empty());
    CHECK_FALSE(std::filesystem::exists(never));
    auto rows_alone = run({PROFRUN, "-n", "3", "--", PROF_SAMPLE_FIB, "10"});
    CHECK(rows_alone.exit_code == 2);
    CHECK(lines(rows_alone.err) == 1);
}

TEST_CASE("profrun --mem -s adds the memory summary, and the report is not profiled itself" *
          doctest::skip(kNoMemoryProfiler)) {
    std::string out = temp_path("profrun-sort-mem.trace");
    auto r = run({PROFRUN, "-q", "-f", "--mem", "-s", "cumtime", "-n", "2", "-o", out, "--",
                  PROF_TEST_ALLOC_AMOUNT});
    CHECK(r.exit_code == 0);
    auto memory = run({PROFREPORT, "memory", "--limit", "2", out});
    REQUIRE(memory.exit_code == 0);
    CHECK(memory.out.find("calls to allocation functions:") != std::string::npos);
    CHECK(r.err.find(memory.out) != std::string::npos);
    CHECK(r.err.find("Ordered by: cumulative time") < r.err.find(memory.out));
    // profreport ran without the preload and PROF_OUT given to COMMAND: no trace of its own,
    // no line of the runtime's.
    CHECK(r.err.find("libprof") == std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out + ".old"));
}

// The README's table of profrun's exit statuses, row by row: COMMAND's own status, or 125 when
// COMMAND succeeded and the trace it should have written is missing or unreadable (said in one
// line, -q or not), 2 for bad usage, 127 for a command not found.
TEST_CASE("profrun's exit statuses: a lost trace is never a success") {
    struct Case {
        std::vector<std::string> argv;
        int status;
        std::string message; // the line of profrun's own that says why, or "" for none
    };
    std::string dir = temp_path("exit-status-run");
    std::string garbage = temp_path("exit-status-garbage.trace");
    for (const Case& c : std::vector<Case>{
             {{PROFRUN, "-q", "-o", temp_path("exit-fib.trace"), "--", PROF_SAMPLE_FIB, "10"}, 0, ""},
             {{PROFRUN, "-q", "-o", temp_path("exit-7.trace"), "--", "/bin/sh", "-c", "exit 7"},
              7, ""},
             {{PROFRUN, "-o", temp_path("exit-true.trace"), "--", "/bin/true"},
              125, "true wrote no trace: build it with -finstrument-functions"},
             {{PROFRUN, "-q", "-o", temp_path("exit-true.trace"), "--", "/bin/true"},
              125, "true wrote no trace: build it with -finstrument-functions"},
             {{PROFRUN, "-q", "-o", "/proc/exit-fib.trace", "--", PROF_SAMPLE_FIB, "10"},
              125, "wrote no trace at /proc/exit-fib.trace although it loads libprof"},
             {{PROFRUN, "-q", "--mem", "-o", "/proc/exit-mem.trace", "--", PROF_SAMPLE_FIB, "10"},
              125, "wrote no trace at /proc/exit-mem.trace although it loads libprof"},
             {{PROFRUN, "-q", "-d", dir, "--", "/bin/true"},
              125, "true wrote no trace into " + dir},
             {{PROFRUN, "-q", "-f", "-o", garbage, "--", "/bin/sh", "-c", "echo x > \"$0\"", garbage},
              125, "is not a readable trace (it does not start with a trace header)"},
             {{PROFRUN, "-q", "-o", temp_path("exit-killed.trace"), "--", "/bin/sh", "-c", "kill -9 $$"},
              128 + 9, ""},
             {{PROFRUN, "-q", "-o", temp_path("exit-none.trace"), "--", "/nonexistent/program"},
              127, ""},
             {{PROFRUN, "-o", "/etc/passwd/x.trace", "--", PROF_SAMPLE_FIB, "10"},
              2, "cannot write the trace to /etc/passwd/x.trace: /etc/passwd is not a directory"},
             {{PROFRUN, "--pid", "0"}, 2, "--pid: 0 is not a process ID"},
             {{PROFRUN, "--pid", "abc"}, 2, "--pid: abc is not a process ID"},
             {{PROFRUN, "--pid", "1", "--duration", "0"}, 2, "--duration: 0 is not a number above 0"},
             {{PROFRUN, "--sample", "--rate", "0", "--", "/bin/true"},
              2, "--rate: 0 is not a number from 1 to 20000"},
             {{PROFPACK, "--bogus"}, 2, "unknown option '--bogus' (see profpack --help)"},
             {{PROFREPORT, "--bogus"}, 2, "unknown option '--bogus'"},
             {{PROFREPORT, "tree"}, 2, "no trace given (see profreport tree --help)"},
         }) {
        bool records_memory = std::find(c.argv.begin(), c.argv.end(), "--mem") != c.argv.end();
        if (records_memory && kNoMemoryProfiler) continue;
        auto r = run(c.argv);
        std::string said;
        for (size_t k = 1; k < c.argv.size(); ++k) said += c.argv[k] + " ";
        CHECK_MESSAGE(r.exit_code == c.status, said, ": ", r.err);
        if (!c.message.empty()) {
            CHECK_MESSAGE(r.err.find(c.message) != std::string::npos, r.err);
            // One line of profrun's own (the runtime may add its own line before it).
            std::string tool = std::filesystem::path(c.argv[0]).filename().string() + ": ";
            size_t own = 0;
            for (size_t at = 0; (at = r.err.find(tool, at)) != std::string::npos; ++at) ++own;
            CHECK_MESSAGE(own == 1, r.err);
        }
    }
    // A program killed by a signal without a trace: no "its trace holds" for a trace that
    // does not exist, and its status is 128+N (it did not succeed: its own status stands).
    auto killed = run({PROFRUN, "-o", temp_path("exit-killed2.trace"), "--", "/bin/sh", "-c",
                       "kill -SEGV $$"});
    CHECK(killed.exit_code == 128 + SIGSEGV);
    CHECK(killed.err.find("its trace holds") == std::string::npos);
    CHECK(killed.err.find("wrote no trace") != std::string::npos);
}

TEST_CASE("an unwritable PROF_OUT: one line on stderr, the program runs on untouched") {
    auto r = run({PROF_SAMPLE_FIB, "10"}, {{"PROF_OUT", "/nonexistent-dir/x.trace"}});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "fib(10) = 55\n");
    CHECK(lines(r.err) == 1);
    CHECK(r.err.find("event=trace_disabled") != std::string::npos);
}

TEST_CASE("help texts name each value once, without CLI11's type and range tags") {
    // CLI11 appends a validator's text to the value's name ("--time SOURCE:{auto,traced,
    // sampled}", "PID:POSITIVE"); the option's own text says what it takes.
    std::vector<std::vector<std::string>> helps = {
        {PROFRUN, "--help"}, {PROFPACK, "--help"}, {PROFREPORT, "--help"}};
    // Every command profreport's help lists, so that a new one is read too.
    std::istringstream top(run({PROFREPORT, "--help"}).out);
    bool in_commands = false;
    for (std::string line; std::getline(top, line);) {
        if (line == "commands:")
            in_commands = true;
        else if (in_commands && line.empty())
            break;
        else if (in_commands && line.size() > 2 && line.rfind("  ", 0) == 0 && line[2] != ' ')
            helps.push_back({PROFREPORT, line.substr(2, line.find(' ', 2) - 2), "--help"});
    }
    CHECK(helps.size() >= 3 + 12); // the three tools, and at least the 12 commands of 2026-12
    const std::regex tagged(R"(^ +(-\w, )?--[\w-]+ \S*[:\[{])");
    for (const auto& argv : helps) {
        auto r = run(argv);
        REQUIRE_MESSAGE(r.exit_code == 0, argv[1]);
        std::istringstream lines(r.out);
        int options = 0;
        for (std::string line; std::getline(lines, line);) {
            if (line.find("  --") != std::string::npos || line.rfind("  -", 0) == 0) ++options;
            CHECK_MESSAGE(!std::regex_search(line, tagged), argv[1], ": ", line);
        }
        CHECK_MESSAGE(options > 2, argv[1]);
    }
}

TEST_CASE("--help on every tool") {
    CHECK(run({PROFREPORT, "--help"}).out.find("usage: profreport") == 0);
    CHECK(run({PROFRUN, "--help"}).out.find("usage: profrun") == 0);
    // profrun and profpack: the usage line, the explanation, every option with its value's
    // name, -h as --help, exit 0 and nothing on stderr.
    for (const char* help : {"--help", "-h"}) {
        auto r = run({PROFRUN, help});
        CHECK(r.exit_code == 0);
        CHECK(r.err.empty());
        CHECK(r.out.rfind("usage: profrun [options] [--] COMMAND [ARGS...]\n\nRuns COMMAND with "
                          "profiling enabled",
                          0) == 0);
        for (const char* line :
             {"\noptions:\n  -o, --output FILE         trace file (default: COMMAND's name + "
              ".trace); an existing file\n                            is moved to FILE.old",
              "\n  -f, --force               replace an existing FILE\n",
              "\n      --pack, --no-pack     after the run, pack each finished trace",
              "\n      --exclude-modules S   do not record functions of objects",
              "\n      --chunk-size BYTES    per-thread buffer size (PROF_CHUNK_SIZE, default "
              "256K)\n",
              "\n  -q, --quiet               no message after the run (the report of -s is "
              "still printed)\n",
              "\n  -s, --sort KEY            after the run, print the report's table",
              "\n      --dump                with --pid: print every thread's call stack now",
              "\n      --log-format F        text (default) or json",
              "\n  -h, --help                show this help\n  -V, --version             show "
              "the version\n\nEvery PROF_* variable (docs/configuration.md) set in the "
              "environment is passed on as well.\n"})
            CHECK_MESSAGE(r.out.find(line) != std::string::npos, line);
        auto p = run({PROFPACK, help});
        CHECK(p.exit_code == 0);
        CHECK(p.out.rfind("usage: profpack [options] TRACE...\n\nRewrites each finished trace",
                          0) == 0);
        for (const char* line :
             {"\noptions:\n  -o, --output FILE     write the packed trace to FILE (one TRACE "
              "only)",
              "\n  -l, --level N         zstd level, 1 (fastest) to 19 (smallest); default 9\n",
              "\n      --exact-times     keep the times of memory records to the clock tick\n",
              "\n  -V, --version         show the version\n"})
            CHECK_MESSAGE(p.out.find(line) != std::string::npos, line);
    }
    for (const char* tool : {PROFRUN, PROFPACK}) {
        auto v = run({tool, "--version"});
        CHECK(v.exit_code == 0);
        CHECK(v.out.find(" " PROF_VERSION_STRING "\n") != std::string::npos);
        CHECK(run({tool, "-V"}).out == v.out);
    }
}

// Combinations CLI11 refuses from the tools' declarations, and the other usage errors: one
// line naming the options, exit 2, nothing run or written.
TEST_CASE("profrun and profpack: usage errors in one line, exit 2") {
    std::string never = temp_path("cli-never.trace");
    struct Case {
        std::vector<std::string> argv;
        const char* message;
    };
    for (const Case& c : std::vector<Case>{
             {{PROFRUN, "--no-pack", "--exact-times", "-o", never, "--", PROF_SAMPLE_FIB},
              "--exact-times is an option of the packing, and --no-pack turns it off"},
             {{PROFRUN, "--exact-times", "--mem", "--pack", "--no-pack", "-o", never, "--",
               PROF_SAMPLE_FIB},
              "--exact-times is an option of the packing, and --no-pack turns it off"},
             {{PROFRUN, "--exact-times", "-o", never, PROF_SAMPLE_FIB},
              "--exact-times is an option of the packing, which --pack turns on"},
             {{PROFRUN, "--frobnicate", "-o", never, PROF_SAMPLE_FIB},
              "unknown option '--frobnicate' (see profrun --help)"},
             {{PROFRUN, "-o"}, "option -o needs a value"},
             {{PROFRUN, "-q", "--exclude"}, "option --exclude needs a value"},
             {{PROFRUN, "--log-format", "xml", "--", PROF_SAMPLE_FIB},
              "unknown log format 'xml' (expected text or json)"},
             {{PROFRUN, "-q", "-o", never}, "no command given (see profrun --help)"},
             {{PROFPACK, "--frobnicate", never},
              "unknown option '--frobnicate' (see profpack --help)"},
             {{PROFPACK, "-o", never, never, never}, "--output takes one trace only"},
             {{PROFPACK, "--level=0", never}, "expected a number from 1 to 19, not '0'"},
             {{PROFPACK, "-l", "1x", never}, "expected a number from 1 to 19, not '1x'"},
             {{PROFPACK, never, "--output"}, "option --output needs a value"},
             {{PROFPACK, "-q"}, "no trace given (see profpack --help)"},
         }) {
        auto r = run(c.argv);
        CHECK_MESSAGE(r.exit_code == 2, c.message);
        CHECK_MESSAGE(lines(r.err) == 1, r.err);
        CHECK_MESSAGE(r.err.find(c.message) != std::string::npos, r.err);
        CHECK(r.out.empty());
        CHECK_FALSE(std::filesystem::exists(never));
    }
    // In JSON from the first argument on, when --log-format json comes first.
    for (const char* tool : {PROFRUN, PROFPACK}) {
        auto j = run({tool, "--log-format", "json", "--frobnicate", never});
        CHECK(j.exit_code == 2);
        CHECK(j.err.rfind("{\"tool\":\"", 0) == 0);
        CHECK(j.err.find("\"level\":\"error\",\"msg\":\"unknown option '--frobnicate'") !=
              std::string::npos);
    }
}

TEST_CASE("profrun: the command's arguments reach it untouched, with or without --") {
    std::string trace = temp_path("cli-echo.trace");
    auto dashed = run({PROFRUN, "-q", "--output=" + trace, "--", "/bin/echo", "--help", "-o", "x",
                       "--", "-q", "--mem"});
    // echo has no hooks, so it writes no trace (125); its arguments reach it all the same.
    CHECK(dashed.exit_code == 125);
    CHECK(dashed.out == "--help -o x -- -q --mem\n");
    auto bare = run({PROFRUN, "-q", "-o", trace, "/bin/echo", "-V", "--frobnicate"});
    CHECK(bare.exit_code == 125);
    CHECK(bare.out == "-V --frobnicate\n");
    // An option given twice: the last one counts.
    std::string first = temp_path("cli-first.trace"), last = temp_path("cli-last.trace");
    REQUIRE(run({PROFRUN, "-q", "-o", first, "-o", last, PROF_SAMPLE_FIB, "5"}).exit_code == 0);
    CHECK(std::filesystem::exists(last));
    CHECK_FALSE(std::filesystem::exists(first));
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

TEST_CASE("output files: a failed run never removes, truncates or half-writes them" *
          doctest::skip(kNoMemoryProfiler)) {
    const std::string dir = temp_path("outputs");
    std::filesystem::create_directories(dir);
    const std::string kept = dir + "/kept";
    const std::string mem = temp_path("cli-mem.trace");
    REQUIRE(run({PROFRUN, "--mem", "-q", "-f", "-o", mem, "--", PROF_SAMPLE_THREADS}).exit_code ==
            0);

    // An unreadable trace: the existing output stays as it was, for every way of naming one.
    for (const std::string& trace : {temp_path("nope.trace"), corrupt_trace()})
        for (std::vector<std::string> argv : {
                 std::vector<std::string>{"--export", "chrome", "-o", kept},
                 {"--export", "speedscope", "-o", kept},
                 {"--export", "collapsed", "-o", kept},
                 {"--flamegraph", kept},
                 {"--html", kept},
                 {"-o", kept},
                 {"--tree", "-o", kept},
             }) {
            write_file(kept, "keep");
            argv.insert(argv.begin(), PROFREPORT);
            argv.push_back(trace);
            auto r = run(argv);
            CHECK_MESSAGE(r.exit_code == 1, argv[1]);
            CHECK(lines(r.err) == 1);
            CHECK_MESSAGE(prof::test::slurp(kept) == "keep", argv[1], " ", trace);
            CHECK(files_in(dir) == std::vector<std::string>{"kept"});
        }

    // A write that fails: one line naming the file, exit 1, the old file intact, no temporary
    // file left.
    for (std::vector<std::string> argv : {
             std::vector<std::string>{"--flamegraph", kept, fib_trace()},
             {"--html", kept, fib_trace()},
             {"--export", "chrome", "-o", kept, fib_trace()},
             {"--format", "json", "-o", kept, fib_trace()},
             {"--memory", "--flamegraph", kept, mem},
             {"--memory", "--plot", kept, mem},
         }) {
        write_file(kept, "keep");
        argv.insert(argv.begin(), PROFREPORT);
        auto r = run_small_files(argv);
        CHECK_MESSAGE(r.exit_code == 1, argv[1], " ", r.err);
        CHECK(lines(r.err) == 1);
        CHECK_MESSAGE(r.err.find("cannot write " + kept + ": File too large") != std::string::npos,
                      r.err);
        CHECK(prof::test::slurp(kept) == "keep");
        CHECK(files_in(dir) == std::vector<std::string>{"kept"});
    }
    // Standard output that fails.
    auto out = run_small_files({PROFREPORT, "--format", "json", fib_trace()}, dir + "/stdout");
    CHECK(out.exit_code == 1);
    CHECK(out.err.find("cannot write standard output: File too large") != std::string::npos);
    std::filesystem::remove(dir + "/stdout");

    // Success replaces the file, keeping its mode.
    write_file(kept, "keep");
    std::filesystem::permissions(kept, std::filesystem::perms(0640));
    REQUIRE(run({PROFREPORT, "--flamegraph", kept, fib_trace()}).exit_code == 0);
    CHECK(prof::test::slurp(kept).rfind("<?xml", 0) == 0);
    CHECK(std::filesystem::status(kept).permissions() == std::filesystem::perms(0640));
    CHECK(files_in(dir) == std::vector<std::string>{"kept"});

    // A fifo is written in place and stays a fifo.
    const std::string fifo = dir + "/fifo", got = dir + "/got";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    auto piped = run({"/bin/sh", "-c",
                      "cat '" + fifo + "' > '" + got + "' & '" + PROFREPORT + "' --flamegraph '" +
                          fifo + "' '" + fib_trace() + "'; s=$?; wait; exit $s"});
    CHECK_MESSAGE(piped.exit_code == 0, piped.err);
    CHECK(std::filesystem::is_fifo(fifo));
    CHECK(prof::test::slurp(got).find("</svg>") != std::string::npos);

    // A device that is always full (made here, needs privileges): every output fails with one
    // line naming it, and the node stays.
    const std::string node = dir + "/full";
    if (mknod(node.c_str(), S_IFCHR | 0600, makedev(1, 7)) != 0) {
        MESSAGE("skipped the full-device half: mknod needs privileges");
        return;
    }
    for (std::vector<std::string> argv : {
             std::vector<std::string>{"--flamegraph", node, fib_trace()},
             {"--html", node, fib_trace()},
             {"-o", node, fib_trace()},
             {"--export", "chrome", "-o", node, fib_trace()},
             {"--export", "chrome", "-o", node, corrupt_trace()},
             {"--memory", "--flamegraph", node, mem},
             {"--memory", "--plot", node, mem},
         }) {
        argv.insert(argv.begin(), PROFREPORT);
        auto r = run(argv);
        CHECK_MESSAGE(r.exit_code == 1, argv[1]);
        CHECK(lines(r.err) == 1);
        if (argv.back() != corrupt_trace())
            CHECK_MESSAGE(r.err.find("cannot write " + node + ": No space left on device") !=
                              std::string::npos,
                          r.err);
        CHECK(std::filesystem::is_character_file(node));
    }
    auto full_stdout =
        run({"/bin/sh", "-c", std::string(PROFREPORT) + " '" + fib_trace() + "' > '" + node + "'"});
    CHECK(full_stdout.exit_code == 1);
    CHECK(full_stdout.err.find("cannot write standard output: No space left on device") !=
          std::string::npos);
    CHECK(std::filesystem::is_character_file(node));
}

TEST_CASE("an output that is one of the traces is refused") {
    std::string trace = temp_path("cli-self.trace");
    std::filesystem::copy_file(fib_trace(), trace);
    std::string link = temp_path("cli-self-link.trace");
    std::filesystem::create_hard_link(trace, link);
    const std::string before = prof::test::slurp(trace);
    for (std::vector<std::string> argv : {
             std::vector<std::string>{"-o", trace, trace},
             {"-o", link, trace},
             {"--flamegraph", link, trace},
             {"--html", trace, trace},
             {"--export", "chrome", "-o", link, trace},
         }) {
        argv.insert(argv.begin(), PROFREPORT);
        auto r = run(argv);
        CHECK_MESSAGE(r.exit_code == 2, argv[1], " ", argv[2]);
        CHECK(lines(r.err) == 1);
        CHECK(r.err.find("refusing to overwrite it") != std::string::npos);
    }
    CHECK(prof::test::slurp(trace) == before);
    std::string svg = temp_path("cli-twice.svg");
    auto twice = run({PROFREPORT, "--memory", "--plot", svg, "-o", svg, trace});
    CHECK(twice.exit_code == 2);
    CHECK(twice.err.find("-o and --plot name the same file") != std::string::npos);
}

TEST_CASE("options a report would ignore are refused, --limit 0 is no limit") {
    std::string svg = temp_path("cli-ignored.svg");
    for (std::vector<std::string> argv : {
             std::vector<std::string>{"--memory", "--thread", "1"},
             {"--memory", "--threads"},
             {"--memory", "--match", "main"},
             {"--memory", "--callers", "main"},
             {"--memory", "--sort", "tottime"},
             {"--memory", "--format", "csv"},
             {"--plot", svg},
             {"--lines", "--memory", "--plot", svg},
             {"--unit", "1e-6"},
             {"--lines", "--callers", "main"},
             {"--export", "chrome", "--format", "csv"},
             {"--flamegraph", svg, "--format", "csv"},
             {"--flamegraph", svg, "-o", svg + ".2"},
             {"--callers", "main", "--format", "json"},
             {"--source-dir", "/"},
         }) {
        argv.insert(argv.begin(), PROFREPORT);
        argv.push_back(fib_trace());
        auto r = run(argv);
        CHECK_MESSAGE(r.exit_code == 2, argv[1], " ", argv[2]);
        CHECK_MESSAGE(lines(r.err) == 1, r.err);
        CHECK(r.out.empty());
    }
    CHECK_FALSE(std::filesystem::exists(svg));
    // A source directory that does not exist: a warning, the report all the same.
    auto nodir = run({PROFREPORT, "--lines", "--source-dir", "/nonexistent-dir", fib_trace()});
    CHECK(nodir.exit_code == 0);
    CHECK(nodir.err.find("--source-dir /nonexistent-dir: not a directory") != std::string::npos);
    // --limit 0: every row, as --help says.
    CHECK(run({PROFREPORT, "--help"}).out.find("print at most N rows (0: no limit)") !=
          std::string::npos);
    auto all = run({PROFREPORT, "-n", "0", fib_trace()});
    CHECK(all.exit_code == 0);
    CHECK(all.out.find("(main)") != std::string::npos);
    CHECK(all.out.find("(fib(int))") != std::string::npos);
}

TEST_CASE("--precision 9 keeps the columns under their headers") {
    for (const char* precision : {"3", "9"}) {
        auto r = run({PROFREPORT, "--precision", precision, fib_trace()});
        REQUIRE(r.exit_code == 0);
        std::istringstream in(r.out);
        std::string line, header;
        size_t rows = 0;
        while (std::getline(in, line)) {
            if (line.find("filename:lineno(function)") != std::string::npos)
                header = line;
            else if (!header.empty() && !line.empty()) {
                ++rows;
                // Each value ends where its header ends; the names start where theirs does.
                CHECK_MESSAGE(line.find("fib.cpp:") == header.find("filename:"), line);
                for (const char* col : {"ncalls", "tottime", "cumtime"}) {
                    size_t end = header.find(col) + std::string(col).size();
                    CHECK_MESSAGE(line[end - 1] != ' ', precision, ": ", line);
                    CHECK_MESSAGE(line[end] == ' ', precision, ": ", line);
                }
            }
        }
        CHECK(rows == 2);
    }
}

TEST_CASE("a trace cut before its line records: no lines, and why there may be none") {
    std::string trace = temp_path("cli-lines.trace");
    REQUIRE(run({PROF_TEST_LINES}, {{"PROF_OUT", trace}}).exit_code == 0);
    auto whole = run({PROFREPORT, "--lines", trace});
    CHECK(whole.out.find("Line #") != std::string::npos);
    // A copy of the first chunk only (the process stream's) has no line records: the report
    // says the trace is incomplete, and which counts a trace holds only at thread end.
    std::string full = prof::test::slurp(trace), cut = temp_path("cli-lines-cut.trace");
    write_file(cut, full.substr(0, 4096 + 262144));
    auto r = run({PROFREPORT, "--lines", cut});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("mark code with") == std::string::npos);
    CHECK(r.out.find("No marked lines in this trace. " + cut + " is incomplete (") !=
          std::string::npos);
    CHECK(r.out.find("that sample the resident set size") != std::string::npos);
    // A finished trace without marks still says to mark code.
    auto unmarked = run({PROFREPORT, "--lines", fib_trace()});
    CHECK(unmarked.out.find("No marked lines in this trace: mark code with PROF_LINE") !=
          std::string::npos);
}

TEST_CASE("a trace with allocations but no calls points to --memory" *
          doctest::skip(kNoMemoryProfiler)) {
    std::string trace = temp_path("cli-memonly.trace");
    REQUIRE(
        run({PROFRUN, "--mem", "-q", "-f", "-o", trace, "--", PROF_TEST_ALLOC_AMOUNT}).exit_code ==
        0);
    auto r = run({PROFREPORT, trace});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("0 function calls") != std::string::npos);
    CHECK(r.out.find("see its allocations: profreport --memory.") != std::string::npos);
    CHECK(run({PROFREPORT, fib_trace()}).out.find("profreport --memory") == std::string::npos);
}

TEST_CASE("profreport's commands give what the flags of the default report give") {
    const std::string t = fib_trace();
    struct Pair {
        std::vector<std::string> command, flags;
    };
    for (const Pair& p : std::vector<Pair>{
             {{"lines", t}, {"--lines", t}},
             {{"tree", "--depth", "2", t}, {"--tree", "--depth", "2", t}},
             {{"export", "collapsed", t}, {"--export", "collapsed", t}},
             {{"export", "callgrind", "-j", "1", t}, {"--export", "callgrind", t}},
             {{"info", t}, {"--info", t}},
             {{"report", "--sort", "tottime", t}, {"--sort", "tottime", "-j", "2", t}},
             {{"diff", "-j", "1", t, t}, {"diff", t, "--vs", t}},
         }) {
        std::vector<std::string> a = p.command, b = p.flags;
        a.insert(a.begin(), PROFREPORT);
        b.insert(b.begin(), PROFREPORT);
        auto ra = run(a), rb = run(b);
        CHECK_MESSAGE(ra.exit_code == 0, a[1], " ", ra.err);
        CHECK_MESSAGE(rb.exit_code == 0, b[1], " ", rb.err);
        CHECK_MESSAGE(!ra.out.empty(), a[1]);
        CHECK_MESSAGE(ra.out == rb.out, a[1]);
    }
    std::string svg = temp_path("cli-command.svg");
    auto flame = run({PROFREPORT, "flamegraph", "-o", svg, t});
    CHECK(flame.exit_code == 0);
    CHECK(prof::test::slurp(svg).find("<svg") != std::string::npos);
    for (const char* command :
         {"report", "lines", "memory", "tree", "flamegraph", "html", "export", "diff", "info"}) {
        auto h = run({PROFREPORT, command, "--help"});
        CHECK_MESSAGE(h.exit_code == 0, command);
        CHECK_MESSAGE(h.out.rfind(std::string("usage: profreport ") + command + " ", 0) == 0,
                      command);
    }
    CHECK(run({PROFREPORT, "--help"}).out.find("-j, --jobs N") != std::string::npos);
    // Usage errors of the commands: one line, exit 2.
    for (std::vector<std::string> argv : {
             std::vector<std::string>{"flamegraph", t},
             {"lines", "--callers", "main", t},
             {"export", "pdf", t},
             {"flamegraph", "-o", svg + ".2", "--memory", "--thread", "1", t},
             {"diff", "--memory", "--metric", "ncalls", t, t},
             {"--jobs", "many", t},
         }) {
        argv.insert(argv.begin(), PROFREPORT);
        auto r = run(argv);
        CHECK_MESSAGE(r.exit_code == 2, argv[1], " ", argv[2]);
        CHECK_MESSAGE(lines(r.err) == 1, r.err);
    }
}

// The export formats are one table (tools/profreport/export_formats.cpp): every help that lists
// them, and the README's list, name each of its formats.
TEST_CASE("every export format of the table is in each help that lists formats and in the README") {
    auto help = [](std::vector<std::string> argv) {
        argv.insert(argv.begin(), PROFREPORT);
        auto r = run(argv);
        REQUIRE(r.exit_code == 0);
        return r.out;
    };
    // The line of `text` that holds `from`, and the lines that go on with its description
    // (indented to the help's second column).
    auto block = [](const std::string& text, const std::string& from) {
        size_t at = text.find(from);
        REQUIRE_MESSAGE(at != std::string::npos, from);
        at = text.rfind('\n', at + from.size() - 1) + 1;
        size_t end = at;
        do {
            end = text.find('\n', end) + 1;
        } while (end < text.size() && text.compare(end, 20, std::string(20, ' ')) == 0);
        return text.substr(at, end - at);
    };
    auto names = [](const std::string& text, const std::string& name) {
        return std::regex_search(text, std::regex("(^|[^a-z])" + name + "([^a-z]|$)"));
    };
    const std::string tool = help({"--help"}), report = help({"report", "--help"}),
                      exp = help({"export", "--help"});
    const std::string tool_flag = block(tool, "--export FORMAT"),
                      report_flag = block(report, "--export FORMAT"),
                      command = block(tool, "\n  export "), exp_title = block(exp, "\n\nWrites ");
    const std::string readme = prof::test::slurp(PROF_SOURCE_DIR "/README.md");
    std::set<std::string> in_table;
    for (const prof::profreport::ExportFormat& f : prof::profreport::export_formats()) {
        const std::string name(f.name);
        in_table.insert(name);
        CHECK_MESSAGE(names(tool_flag, name), name, " in profreport --help:\n", tool_flag);
        CHECK_MESSAGE(names(report_flag, name), name, " in profreport report --help");
        CHECK_MESSAGE(names(command, name), name, " in profreport --help's commands:\n", command);
        CHECK_MESSAGE(names(exp_title, name), name, " in profreport export --help:\n", exp_title);
        CHECK_MESSAGE(exp.find("\n  " + name + " ") != std::string::npos, name,
                      " under profreport export --help's FORMAT");
        CHECK_MESSAGE(readme.find("\nprofreport --export " + name + " ") != std::string::npos, name,
                      " in the README's list of exports");
    }
    // And the README lists no format the table does not have.
    std::regex listed("\nprofreport --export ([a-z]+) ");
    size_t count = 0;
    for (auto it = std::sregex_iterator(readme.begin(), readme.end(), listed);
         it != std::sregex_iterator(); ++it, ++count)
        CHECK_MESSAGE(in_table.count((*it)[1]) == 1, (*it)[1], " is listed by the README");
    CHECK(count == in_table.size());
    // Each name and alias is taken, anything else refused with the list.
    for (const prof::profreport::ExportFormat& f : prof::profreport::export_formats())
        for (std::string_view name : {f.name, f.alias})
            if (!name.empty()) CHECK(prof::profreport::find_export_format(name) == &f);
    auto pdf = run({PROFREPORT, "export", "pdf", fib_trace()});
    CHECK(pdf.exit_code == 2);
    CHECK(pdf.err.find("unknown export format 'pdf' (expected " +
                       prof::profreport::export_format_names() + ")") != std::string::npos);
}

TEST_CASE("profreport ranks refuses a --sort that is no metric of the ranks") {
    const std::string refusal = "the ranks are sorted by the max of cumtime, tottime or ncalls: "
                                "--sort name, file, line, nfl and stdname do not apply";
    for (std::vector<std::string> argv : {
             std::vector<std::string>{"ranks", "--sort", "name"},
             {"ranks", "-s", "stdname"},
             {"--ranks", "--sort", "file"},
             {"--sort", "nfl", "--ranks"},
         }) {
        argv.insert(argv.begin(), PROFREPORT);
        argv.push_back(fib_trace());
        auto r = run(argv);
        CHECK_MESSAGE(r.exit_code == 2, argv[1], " ", argv[2]);
        CHECK_MESSAGE(lines(r.err) == 1, r.err);
        CHECK_MESSAGE(r.err.find(refusal) != std::string::npos, r.err);
    }
    // A metric is taken: the fib trace is of no MPI rank, which is the error then.
    auto metric = run({PROFREPORT, "ranks", "--sort", "tottime", fib_trace()});
    CHECK(metric.exit_code == 1);
    CHECK(metric.err.find("no trace of an MPI rank") != std::string::npos);
}

TEST_CASE("profreport export pprof --memory is --export pprof --memory" *
          doctest::skip(kNoMemoryProfiler)) {
    std::string trace = temp_path("cli-export-mem.trace");
    REQUIRE(
        run({PROFRUN, "--mem", "-q", "-f", "-o", trace, "--", PROF_TEST_ALLOC_AMOUNT}).exit_code ==
        0);
    std::string command = temp_path("cli-export-command.pb.gz"),
                flag = temp_path("cli-export-flag.pb.gz");
    auto c = run({PROFREPORT, "export", "pprof", "--memory", "-o", command, trace});
    auto f = run({PROFREPORT, "--export", "pprof", "--memory", "-o", flag, trace});
    REQUIRE_MESSAGE(c.exit_code == 0, c.err);
    REQUIRE_MESSAGE(f.exit_code == 0, f.err);
    CHECK(prof::test::slurp(command).size() > 20);
    CHECK(prof::test::slurp(command) == prof::test::slurp(flag));
    // The formats that take no --memory refuse it, as --export's do.
    for (const char* format : {"collapsed", "chrome"}) {
        auto r = run({PROFREPORT, "export", format, "--memory", trace});
        CHECK(r.exit_code == 2);
        CHECK(r.err.find("--memory applies to --flamegraph, diff and --export pprof") !=
              std::string::npos);
    }
    auto threads =
        run({PROFREPORT, "export", "pprof", "--memory", "--threads", "-o", command, trace});
    CHECK(threads.exit_code == 2);
    CHECK(threads.err.find("allocation sites are per process") != std::string::npos);
}

// A format version is shown in three places, all from the format header's constants.
TEST_CASE("the trace format's versions: profreport -V, profpack --help and the README agree") {
    std::string plain = std::to_string(prof::format::kMajor) + "." +
                        std::to_string(prof::format::kMinor);
    std::string packed = std::to_string(prof::format::kPackedMajor) + "." +
                         std::to_string(prof::format::kPackedMinor);
    auto v = run({PROFREPORT, "-V"});
    CHECK(v.out == "profreport " PROF_VERSION_STRING " (reads trace formats up to " + plain +
                       ", packed " + packed + ")\n");
    CHECK(run({PROFPACK, "--help"}).out.find("packed form (trace format " + packed + ")") !=
          std::string::npos);
    const std::string readme = prof::test::slurp(PROF_SOURCE_DIR "/README.md");
    CHECK(readme.find("in the packed form (format " + packed + ",") != std::string::npos);
}
