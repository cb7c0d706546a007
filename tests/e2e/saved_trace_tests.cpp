// Saved traces of every released format version (tests/data/traces, written by the runtime of
// the commit named in its README): today's profreport must print exactly the saved reports.
// A reader or analysis change that breaks an old version, or changes what a view prints,
// fails here with the lines that differ. After a deliberate change of a view, rerun with
// PROF_UPDATE_SAVED_REPORTS=1 to rewrite the expected files, and check their call and
// allocation counts against the README before committing them.
#include "support/run.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using prof::test::run;
using prof::test::slurp;

namespace {

const std::string kDir = PROF_SAVED_TRACES_DIR;

// One saved report: profreport's options (the trace is appended) and the file holding the
// expected output.
struct View {
    std::vector<std::string> options;
    std::string expected;
};

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

// The lines that differ between `expected` and `actual`, as a unified diff without context
// (a longest common subsequence; reports are at most a few hundred lines).
std::string line_diff(const std::string& expected, const std::string& actual) {
    std::vector<std::string> a = lines_of(expected), b = lines_of(actual);
    size_t n = a.size(), m = b.size();
    std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
    for (size_t i = n; i-- > 0;)
        for (size_t j = m; j-- > 0;)
            lcs[i][j] =
                a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    std::string out;
    size_t shown = 0, i = 0, j = 0;
    auto add = [&](char mark, size_t line, const std::string& text) {
        if (++shown <= 40) out += mark + std::to_string(line + 1) + ": " + text + "\n";
    };
    while (i < n || j < m) {
        if (i < n && j < m && a[i] == b[j]) {
            ++i, ++j;
        } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
            add('-', i, a[i]), ++i;
        } else {
            add('+', j, b[j]), ++j;
        }
    }
    if (shown > 40) out += "... and " + std::to_string(shown - 40) + " more changed lines\n";
    if (out.empty()) out = "(the outputs differ only in their final newline)\n";
    return out;
}

// Runs profreport over the saved trace `name` with each view's options and compares its
// standard output with the view's expected file. The trace is named by its file name alone in
// the output (as when profreport runs in the data directory), so that nothing depends on
// where the source tree lives.
void check_saved(const std::string& name, const std::vector<View>& views) {
    const std::string trace = kDir + "/" + name;
    const bool update = std::getenv("PROF_UPDATE_SAVED_REPORTS") != nullptr;
    for (const View& view : views) {
        std::vector<std::string> argv{PROFREPORT};
        argv.insert(argv.end(), view.options.begin(), view.options.end());
        argv.push_back(trace);
        // As run in the data directory.
        std::string command = "profreport";
        for (size_t k = 1; k < argv.size(); ++k)
            command += " " + (argv[k].rfind(kDir + "/", 0) == 0 ? argv[k].substr(kDir.size() + 1)
                                                                : argv[k]);
        CAPTURE(command);
        // Where a trace leaves a name or source position out, profreport looks in the object
        // file on disk when it still has the build-id the trace names: never over the network
        // (debuginfod) here. The saved reports are those of a machine without those files.
        auto r = run(argv, {{"DEBUGINFOD_URLS", ""}});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        std::string out = r.out;
        for (size_t at = 0; (at = out.find(trace, at)) != std::string::npos; at += name.size())
            out.replace(at, trace.size(), name);
        const std::string path = kDir + "/" + view.expected;
        if (update) {
            std::ofstream(path, std::ios::binary) << out;
            MESSAGE("rewrote " << path);
            continue;
        }
        std::string expected = slurp(path);
        REQUIRE_MESSAGE(!expected.empty(), "missing expected report " << path);
        if (out != expected)
            FAIL_CHECK("`" << command << "` differs from " << path << " (-expected +actual):\n"
                           << line_diff(expected, out));
    }
}

// The views every saved trace is read with, then those of what its version added. `sources/`
// holds the source files the marked lines of a trace were compiled from (the trace names the
// scratch directory they were built in), so that --lines prints their contents.
std::vector<View> call_views(const std::string& stem) {
    return {{{}, stem + ".table.txt"},
            {{"--callers", "."}, stem + ".callers.txt"},
            {{"--format", "json"}, stem + ".json"},
            {{"--info"}, stem + ".info.txt"}};
}

std::vector<View> with(std::vector<View> views, const std::vector<View>& more) {
    views.insert(views.end(), more.begin(), more.end());
    return views;
}

std::vector<View> memory_views(const std::string& stem) {
    return {{{"--memory"}, stem + ".memory.txt"},
            {{"--memory", "--format", "json"}, stem + ".memory.json"}};
}

std::vector<View> line_views(const std::string& stem, const std::string& sources) {
    return {{{"--lines", "--source-dir", kDir + "/sources/" + sources}, stem + ".lines.txt"}};
}

} // namespace

TEST_CASE("saved trace 1.0: calls left by exceptions and longjmp (Abandon)") {
    check_saved("v1.0-unwinding.trace", call_views("v1.0-unwinding"));
}

TEST_CASE("saved trace 1.1: marked lines and a scope under the memory profiler") {
    const std::string stem = "v1.1-lines-mem";
    check_saved(stem + ".trace",
                with(with(call_views(stem), line_views(stem, "v1.1")),
                     with(memory_views(stem),
                          {{{"--lines", "--memory", "--source-dir", kDir + "/sources/v1.1"},
                            stem + ".lines-memory.txt"}})));
}

TEST_CASE("saved trace 1.2: a library unloaded and another at its address (Unload)") {
    check_saved("v1.2-reload.trace", call_views("v1.2-reload"));
}

TEST_CASE("saved trace 1.2: recursion whose thread opens a second chunk (Pause)") {
    check_saved("v1.2-fib.trace", call_views("v1.2-fib"));
}

TEST_CASE(
    "saved trace 1.3: scope runs of three threads and line counts (ScopeRun and LineCounts)") {
    const std::string stem = "v1.3-scope-runs";
    check_saved(stem + ".trace", with(with(call_views(stem), line_views(stem, "v1.3")),
                                      {{{"--threads"}, stem + ".threads.txt"}}));
}

TEST_CASE("saved trace 1.4: aligned new and delete matched and mismatched (alignment fields)") {
    check_saved("v1.4-aligned-pairs.trace",
                with(call_views("v1.4-aligned-pairs"), memory_views("v1.4-aligned-pairs")));
}

TEST_CASE("saved trace 2.0: packed memory records of three threads with their calls") {
    const std::string stem = "v2.0-alloc-pattern";
    check_saved(stem + ".trace", with(with(call_views(stem), memory_views(stem)),
                                      {{{"--threads"}, stem + ".threads.txt"}}));
}

TEST_CASE("saved trace 2.1: the 1.4 trace packed by profpack (MemAligned)") {
    check_saved("v2.1-aligned-pairs.trace",
                with(call_views("v2.1-aligned-pairs"), memory_views("v2.1-aligned-pairs")));
}
