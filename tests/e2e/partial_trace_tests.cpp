// End to end for traces whose file is cut short (an interrupted copy, a full disk on the copy, a
// partial download): copies of real traces cut at 25, 50, 75 and 99 % of their bytes are read
// up to their last whole record, say so in one warning line, and report no total, no function
// time, no call count and no leak above the whole trace's.
#include "support/json.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using prof::test::Json;
using prof::test::parse_json;
using prof::test::run;
using prof::test::slurp;
using prof::test::temp_path;

namespace {

#ifdef PROF_SANITIZER_BUILD
constexpr bool kNoMemoryProfiler = true;
#else
constexpr bool kNoMemoryProfiler = false;
#endif

const double kCuts[] = {0.25, 0.50, 0.75, 0.99};

// The first `fraction` of the bytes of `trace`, as a file of its own.
std::string cut_copy(const std::string& trace, double fraction, const std::string& name) {
    std::string bytes = slurp(trace);
    std::string path = temp_path(name);
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), std::streamsize(double(bytes.size()) * fraction));
    return path;
}

size_t count(const std::string& s, const std::string& needle) {
    size_t n = 0;
    for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
    return n;
}

// The seconds of the warning "...: partial: read up to T s of the run (...)".
double read_up_to(const std::string& err) {
    size_t at = err.find("partial: read up to ");
    REQUIRE(at != std::string::npos);
    return std::strtod(err.c_str() + at + 20, nullptr);
}

// A function's row of `profreport --format json`; calls are -1 when not counted (null).
struct Row {
    double tottime = 0, cumtime = 0;
    long long ncalls = -1;
};

// The rows by what names a function (name, file, line, module); rows with the same name
// (several traces' functions merged alike) are summed.
std::map<std::string, Row> rows(const Json& doc) {
    std::map<std::string, Row> out;
    for (const Json& f : doc["functions"].items) {
        std::string key =
            f["name"].text + " " + f["file"].text + ":" + f["line"].text + " " + f["module"].text;
        Row& r = out[key];
        r.tottime += f["tottime"].number;
        r.cumtime += f["cumtime"].number;
        if (f["ncalls"].kind == Json::kNumber)
            r.ncalls = std::max(r.ncalls, 0LL) + f["ncalls"].number;
    }
    return out;
}

struct Report {
    int exit_code;
    std::string out, err;
    Json doc;
};

Report json_report(const std::string& trace, const std::vector<std::string>& options = {}) {
    std::vector<std::string> argv{PROFREPORT, "--format", "json"};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.push_back(trace);
    auto r = run(argv);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return Report{r.exit_code, r.out, r.err, parse_json(r.out)};
}

// `text` with every `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
        text.replace(at, from.size(), to);
    return text;
}

// Whether the report of `cut` is the whole trace's, byte for byte but for the trace's path: a
// cut that fell past every record (in the unused end of the file's last chunk) lost nothing.
bool same_as_whole(const Report& cut, const std::string& cut_path, const Report& whole,
                   const std::string& whole_path) {
    return cut.err.empty() && replaced(cut.out, cut_path, whole_path) == whole.out;
}

// The checks every cut of `whole` passes, with `options` (the time basis) for both reports:
// status 0, the partial line once, the JSON's fields, and no total, function time or call count
// above the whole trace's. A cut can fall in the unused end of the file's last chunk, after
// every record (at 75 % of a trace of three chunks whose last is a quarter full): its report
// must then be the whole trace's, byte for byte. Returns how many cuts read
// any function, so that a caller can tell its cuts were not all empty.
int check_cuts(const std::string& whole, const std::string& name,
               const std::vector<std::string>& options = {}) {
    Report all = json_report(whole, options);
    CHECK(all.err.find("partial") == std::string::npos);
    const Json& whole_trace = all.doc["traces"][0];
    CHECK_FALSE(whole_trace.has("partial"));
    CHECK_FALSE(whole_trace.has("read_up_to_seconds"));
    const double whole_total = all.doc["total_time"].number;
    std::map<std::string, Row> whole_rows = rows(all.doc);
    REQUIRE(whole_total > 0);
    int read_something = 0;
    for (double fraction : kCuts) {
        CAPTURE(fraction);
        std::string cut =
            cut_copy(whole, fraction, name + "-" + std::to_string(int(fraction * 100)));
        Report r = json_report(cut, options);
        CHECK(r.exit_code == 0);
        if (same_as_whole(r, cut, all, whole)) {
            MESSAGE("the cut at ", fraction, " fell after every record: the whole report");
            continue;
        }
        CHECK(count(r.err, "partial: read up to ") == 1);
        CHECK(count(r.err, "level=warn msg=\"" + cut + ": partial: read up to ") == 1);
        CHECK(count(r.err, "incomplete trace") == 1); // in the partial line, not a line of its own
        const Json& trace = r.doc["traces"][0];
        REQUIRE(trace.has("partial"));
        CHECK(trace["partial"].boolean);
        double up_to = trace["read_up_to_seconds"].number;
        CHECK(up_to >= 0);
        CHECK(std::abs(read_up_to(r.err) - up_to) <= 0.0005 + 1e-9); // printed to the ms
        // The exact times: no more than the whole trace's, to the nanosecond JSON prints.
        CHECK(r.doc["total_time"].number <= whole_total);
        std::map<std::string, Row> cut_rows = rows(r.doc);
        if (!cut_rows.empty()) ++read_something;
        for (const auto& [key, row] : cut_rows) {
            CAPTURE(key);
            auto w = whole_rows.find(key);
            REQUIRE_MESSAGE(w != whole_rows.end(), "a function the whole trace does not have");
            CHECK(row.cumtime <= w->second.cumtime);
            CHECK(row.tottime <= w->second.tottime);
            CHECK(row.ncalls <= w->second.ncalls);
        }
    }
    return read_something;
}

bool perf_events_allowed() {
    perf_event_attr a{};
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.sample_period = 1000000;
    a.disabled = 1;
    a.exclude_kernel = 1;
    long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd < 0) return false;
    close(int(fd));
    return true;
}

} // namespace

// Every call traced with its time (PROF_TIME=traced): four threads, small chunks so that the
// cuts land inside the threads' chunks at different times. Each thread's calls open at the cut
// end at that thread's last event.
TEST_CASE("a traced trace cut at 25/50/75/99 %: partial once, nothing above the whole trace") {
    std::string trace = temp_path("partial-traced.trace");
    auto r = run({PROF_SAMPLE_THREADS},
                 {{"PROF_OUT", trace}, {"PROF_TIME", "traced"}, {"PROF_CHUNK_SIZE", "64K"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(check_cuts(trace, "partial-traced", {"--time", "traced"}) > 0);
}

// The default mode (PROF_TIME=auto): calls timed by the hooks until the run has samples enough
// (10 here), then counted in a call tree and timed by the samples.
TEST_CASE("a counting trace cut at 25/50/75/99 %: partial once, nothing above the whole trace") {
    std::string trace = temp_path("partial-counted.trace");
    auto r = run({PROF_TEST_TRUE_TIME, "0.4"},
                 {{"PROF_OUT", trace}, {"PROF_COUNT_AFTER", "10"}, {"PROF_CHUNK_SIZE", "64K"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(check_cuts(trace, "partial-counted", {"--time", "sampled"}) > 0);
}

// A program sampled from outside (profrun --sample): sampled stacks, no calls counted.
TEST_CASE("a trace sampled from outside cut at 25/50/75/99 %: nothing above the whole trace") {
    if (!perf_events_allowed()) {
        MESSAGE("perf_event_open is refused here (perf_event_paranoid > 2 or seccomp): skipped");
        return;
    }
    std::string trace = temp_path("partial-sampled.trace");
    auto r = run(
        {PROFRUN, "-q", "--sample", "-o", trace, "--", PROF_TEST_SPINNERS, "threads", "2", "0.4"},
        {{"PROF_CHUNK_SIZE", "64K"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(check_cuts(trace, "partial-sampled") > 0);
}

// A memory trace packed after the run (profrun --mem --pack): blocks handed between threads. A block
// still live where the copy was cut may have been freed after it: unknown, never leaked.
TEST_CASE("a packed memory trace cut at 25/50/75/99 %: blocks live at the cut are unknown" *
          doctest::skip(kNoMemoryProfiler)) {
    std::string trace = temp_path("partial-mem.trace");
    auto r = run({PROFRUN, "--mem", "--pack", "-q", "-o", trace, "--", PROF_TEST_HANDOFF},
                 {{"PROF_CHUNK_SIZE", "64K"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    REQUIRE(run({PROFREPORT, "--info", trace}).out.find("packed") != std::string::npos);
    auto whole = run({PROFREPORT, "memory", "--format", "json", trace});
    REQUIRE_MESSAGE(whole.exit_code == 0, whole.err);
    Json w = parse_json(whole.out)["summary"];
    CHECK_FALSE(w.has("partial"));
    CHECK_FALSE(w.has("unknown_blocks"));
    CHECK(w["leaked_blocks"].integer() >= 1); // main keeps one block (the C library some too)
    uint64_t unknown_seen = 0;
    for (double fraction : kCuts) {
        CAPTURE(fraction);
        std::string cut =
            cut_copy(trace, fraction, "partial-mem-" + std::to_string(int(fraction * 100)));
        auto c = run({PROFREPORT, "memory", "--format", "json", cut});
        CHECK(c.exit_code == 0);
        CHECK(count(c.err, "partial: read up to ") == 1);
        Json m = parse_json(c.out)["summary"];
        REQUIRE(m.has("partial"));
        CHECK(m["partial"].boolean);
        CHECK(m["leaked_blocks"].integer() <= w["leaked_blocks"].integer());
        CHECK(m["leaked_bytes"].integer() <= w["leaked_bytes"].integer());
        CHECK(m["allocations"].integer() <= w["allocations"].integer());
        CHECK(m["frees"].integer() <= w["frees"].integer());
        CHECK(m["bytes_allocated"].integer() <= w["bytes_allocated"].integer());
        CHECK(m["unknown_blocks"].integer() <= m["allocations"].integer());
        unknown_seen += m["unknown_blocks"].integer();
        auto text = run({PROFREPORT, "--memory", cut});
        CHECK(text.exit_code == 0);
        CHECK(count(text.err, "partial: read up to ") == 1);
        CHECK(text.out.find("leaked: 0 B in 0 blocks   unknown: ") != std::string::npos);
    }
    CHECK(unknown_seen > 0);
}

// The other views read the same replay: each says once that its trace is partial, and the
// call tree's and the folded stacks' totals stay within the whole trace's.
TEST_CASE("every view of a cut trace says it is partial, once, and stays within the whole") {
    std::string trace = temp_path("partial-views.trace");
    auto r = run({PROF_SAMPLE_THREADS},
                 {{"PROF_OUT", trace}, {"PROF_TIME", "traced"}, {"PROF_CHUNK_SIZE", "64K"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::string cut = cut_copy(trace, 0.5, "partial-views-50.trace");
    auto folded_total = [](const std::string& text) {
        double sum = 0;
        size_t at = 0;
        while (at < text.size()) {
            size_t nl = text.find('\n', at);
            if (nl == std::string::npos) nl = text.size();
            std::string line = text.substr(at, nl - at);
            size_t space = line.rfind(' ');
            if (space != std::string::npos) sum += std::strtod(line.c_str() + space + 1, nullptr);
            at = nl + 1;
        }
        return sum;
    };
    auto whole_folded = run({PROFREPORT, "export", "collapsed", "-o", "-", trace});
    auto cut_folded = run({PROFREPORT, "export", "collapsed", "-o", "-", cut});
    REQUIRE(whole_folded.exit_code == 0);
    CHECK(cut_folded.exit_code == 0);
    CHECK(count(cut_folded.err, "partial: read up to ") == 1);
    CHECK(whole_folded.err.find("partial") == std::string::npos);
    CHECK(folded_total(cut_folded.out) > 0);
    CHECK(folded_total(cut_folded.out) <= folded_total(whole_folded.out));
    for (std::vector<std::string> view :
         {std::vector<std::string>{"tree"}, std::vector<std::string>{"--callers", "."},
          std::vector<std::string>{"lines"}, std::vector<std::string>{"info"},
          std::vector<std::string>{"flamegraph", "-o", temp_path("partial.svg")},
          std::vector<std::string>{"html", "-o", temp_path("partial.html")},
          std::vector<std::string>{"export", "chrome", "-o", temp_path("partial.json")},
          std::vector<std::string>{"export", "speedscope", "-o", temp_path("partial.ss.json")},
          std::vector<std::string>{"diff", trace}}) {
        CAPTURE(view.front());
        std::vector<std::string> argv{PROFREPORT};
        argv.insert(argv.end(), view.begin(), view.end());
        argv.push_back(cut);
        auto v = run(argv);
        CHECK_MESSAGE(v.exit_code == 0, v.err);
        CHECK(count(v.err, "partial: read up to ") == 1);
    }
}

// The fuzzer's idea by hand: a small trace cut at every 1/64 of its bytes, as written and
// packed, is read or refused in one line; never a crash, never a made-up profile.
TEST_CASE("a small trace cut at every 1/64 of its bytes: a partial report or one line") {
    std::string trace = temp_path("partial-small.trace");
    auto r = run({PROF_SAMPLE_FIB, "18"}, {{"PROF_OUT", trace}, {"PROF_CHUNK_SIZE", "64K"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::string packed = temp_path("partial-small-packed.trace");
    REQUIRE(run({PROFPACK, "-o", packed, trace}).exit_code == 0);
    for (const std::string& whole : {trace, packed}) {
        CAPTURE(whole);
        Report all = json_report(whole);
        double whole_total = all.doc["total_time"].number;
        int partial = 0;
        for (int i = 0; i < 64; ++i) {
            CAPTURE(i);
            std::string cut = cut_copy(whole, i / 64.0, "partial-small-cut");
            auto c = run({PROFREPORT, "--format", "json", cut});
            CHECK(c.exit_code < 128);
            if (c.exit_code != 0) {
                CHECK(count(c.err, "\n") == 1);
                continue;
            }
            if (same_as_whole(Report{c.exit_code, c.out, c.err, {}}, cut, all, whole)) continue;
            ++partial;
            CHECK(count(c.err, "partial: read up to ") == 1);
            CHECK(parse_json(c.out)["total_time"].number <= whole_total);
        }
        MESSAGE(partial, " of 64 cuts partial");
        CHECK(partial > 0);
    }
}
