// Views and exports of memory profiler traces, end to end: the allocation flame graph (SVG
// checked by tests/views/check_views.py, and in headless Chromium), the HTML report's memory
// section (headless Chromium), heap and RSS counters in the Chrome export (parsed by Python's
// json), and diff --memory with its CI gate. The browser checks are skipped, with a message,
// when chromium is not installed.
#include "analysis/engine/session.hpp"
#include "analysis/model/profile.hpp"
#include "support/browser.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using prof::test::run;
using prof::test::slurp;
using prof::test::temp_path;

using prof::test::browse;
using prof::test::check_console;
using prof::test::chromium;
using prof::test::selftest_dom;
using prof::test::which;

namespace {



size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
}

// A `profrun --mem` trace of the program.
std::string mem_trace(const std::string& name, const std::vector<std::string>& program) {
    std::string p = temp_path(name);
    std::vector<std::string> argv{PROFRUN, "--mem", "-q", "-f", "-o", p, "--"};
    argv.insert(argv.end(), program.begin(), program.end());
    auto r = run(argv);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return p;
}

const std::string& pattern_trace() { // alloc_pattern: exact sites (see the program)
    static const std::string p = mem_trace("mv-pattern.trace", {PROF_TEST_ALLOC_PATTERN});
    return p;
}

// Calls and allocations in one trace: the threads sample (instrumented) under --mem.
const std::string& threads_mem_trace() {
    static const std::string p = mem_trace("mv-threads.trace", {PROF_SAMPLE_THREADS});
    return p;
}

// A trace without allocation records.
const std::string& fib_trace() {
    static const std::string p = [] {
        std::string t = temp_path("mv-fib.trace");
        REQUIRE(run({PROF_SAMPLE_FIB, "12"}, {{"PROF_OUT", t}}).exit_code == 0);
        return t;
    }();
    return p;
}

// `"key": N` of profreport --memory --format json's summary.
uint64_t summary_value(const std::string& trace, const std::string& key) {
    auto r = run({PROFREPORT, "--memory", "--format", "json", trace});
    REQUIRE(r.exit_code == 0);
    std::smatch m;
    REQUIRE_MESSAGE(std::regex_search(r.out, m, std::regex("\"" + key + "\": (\\d+)")), key);
    return std::stoull(m[1]);
}

size_t site_count(const std::string& trace) {
    auto r = run({PROFREPORT, "--memory", "--format", "json", trace});
    REQUIRE(r.exit_code == 0);
    return count(r.out, "{\"stack\": [");
}

prof::test::RunResult check_svg(const std::vector<std::string>& args) {
    std::vector<std::string> argv{which("python3"), PROF_VIEW_CHECKER, "svg"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
}

// data-n (width) and data-c (count) of the frames named `name` in a flame graph, summed.
std::pair<uint64_t, uint64_t> frame(const std::string& svg, const std::string& name) {
    std::regex g("data-n=\"(\\d+)\" data-d=\"\\d+\" data-c=\"(\\d+)\"><title>([^\\n]*)\\n");
    uint64_t n = 0, c = 0;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), g); it != std::sregex_iterator();
         ++it)
        if ((*it)[3] == name) n += std::stoull((*it)[1]), c += std::stoull((*it)[2]);
    return {n, c};
}

// Checks the counter events of a Chrome export; prints a JSON summary, exit 1 on a failure.
constexpr const char* kCounterCheck = R"PY(
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
lo, hi = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (0, None)
def fail(msg):
    print("counter check: " + msg, file=sys.stderr)
    sys.exit(1)
named = {e["pid"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
last, last_by_name, peak = -1, {}, {"heap": 0, "RSS": 0}
counters = complete = 0
for e in doc["traceEvents"]:
    if e["ph"] == "X":
        complete += 1
    if e["ph"] != "C":
        continue
    counters += 1
    for k in ("name", "ts", "pid", "tid", "args"):
        if k not in e:
            fail(f"counter without {k}: {e}")
    if e["name"] not in peak:
        fail(f"unexpected counter {e['name']}")
    v = e["args"].get("bytes")
    if not isinstance(v, int) or v < 0:
        fail(f"bad value {e}")
    ts = round(e["ts"] * 1000)
    if ts < last or ts < last_by_name.get(e["name"], -1):
        fail(f"counter out of time order at {e}")
    if ts < lo or (hi is not None and ts > hi):
        fail(f"counter {e} outside [{lo}, {hi}]")
    last = last_by_name[e["name"]] = ts
    if e["pid"] not in named:
        fail(f"process {e['pid']} has counters but no process_name")
    peak[e["name"]] = max(peak[e["name"]], v)
first = min((round(e["ts"] * 1000) for e in doc["traceEvents"] if e["ph"] == "C"), default=0)
print(json.dumps({"counters": counters, "complete": complete, "heap_max": peak["heap"],
                  "rss_max": peak["RSS"], "series": sorted(last_by_name), "first": first,
                  "last": max(last, 0)}))
)PY";

prof::test::RunResult check_counters(const std::vector<std::string>& args) {
    std::vector<std::string> argv{which("python3"), "-c", kCounterCheck};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
}

// A mismatch of profreport --memory --format json, released with realloc.
std::string fmt_mismatch(const std::string& allocated_with, uint64_t count, size_t site) {
    return "{\"allocated_with\": \"" + allocated_with +
           "\", \"freed_with\": \"realloc\", \"count\": " + std::to_string(count) +
           ", \"site\": " + std::to_string(site) + "}";
}

uint64_t json_field(const std::string& json, const std::string& key) {
    std::smatch m;
    REQUIRE_MESSAGE(std::regex_search(json, m, std::regex("\"" + key + "\": (\\d+)")), key);
    return std::stoull(m[1]);
}

} // namespace

// libprofmem.so interposes malloc with LD_PRELOAD, as ASan and TSan do themselves: the memory
// profiler cannot run in a sanitizer build (cmake/sanitizers.cmake), so its tests are skipped.
#ifdef PROF_SANITIZER_BUILD
TEST_SUITE_BEGIN("memory profiler" * doctest::skip(true));
#endif

TEST_CASE("allocation flame graph: well-formed SVG, widths are the weights, known sites") {
    const std::string& trace = pattern_trace();
    struct Case {
        const char* weight;
        uint64_t total;
    };
    for (Case c : {Case{"bytes", summary_value(trace, "bytes_allocated")},
                   Case{"allocations", summary_value(trace, "allocations")},
                   Case{"leaked", summary_value(trace, "leaked_bytes")},
                   Case{"peak", summary_value(trace, "peak_heap")}}) {
        CAPTURE(c.weight);
        std::string svg = temp_path(std::string("mem-") + c.weight + ".svg");
        auto r = run({PROFREPORT, "--flamegraph", svg, "--memory", "--weight", c.weight,
                      "--min-width", "0", trace});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.err.empty());
        // Well-formed, every frame inside its parent, the root as wide as the report's total.
        auto k = check_svg({svg, "--total", std::to_string(c.total), "--name", "pattern()"});
        CHECK_MESSAGE(k.exit_code == 0, k.err);
        std::string text = slurp(svg);
        CHECK(count(text, "<script") == 1);
        CHECK(text.find(std::string("data-unit=\"") +
                        (std::string(c.weight) == "allocations" ? "allocations" : "bytes") +
                        "\"") != std::string::npos);
        // Stacks are drawn outermost first: the thread's entry below pattern() below leaky().
        CHECK(text.find("Allocation Flame Graph") != std::string::npos);
    }
    // pattern() runs on two threads: 35 calls and 4410 bytes each, 1000 of them leaked by
    // leaky() (see tests/programs/alloc_pattern.cpp).
    std::string bytes = slurp(temp_path("mem-bytes.svg"));
    CHECK(frame(bytes, "pattern()") == std::make_pair(uint64_t(8820), uint64_t(70)));
    CHECK(frame(bytes, "leaky()") == std::make_pair(uint64_t(2000), uint64_t(2)));
    CHECK(frame(slurp(temp_path("mem-allocations.svg")), "pattern()").first == 70);
    std::string leaked = slurp(temp_path("mem-leaked.svg"));
    CHECK(frame(leaked, "leaky()") == std::make_pair(uint64_t(2000), uint64_t(2))); // 2 blocks
    CHECK(frame(leaked, "pattern()").first == 2000); // its only leak is leaky()'s
    CHECK(leaked.find("data-count=\"blocks\"") != std::string::npos);
    // leaky() sits right above pattern() in the tree: same offset, one level up.
    std::smatch m;
    REQUIRE(std::regex_search(
        leaked, m, std::regex("data-o=\"(\\d+)\" data-n=\"\\d+\" data-d=\"(\\d+)\" data-c=\"\\d+\"><title>pattern\\(\\)\\n")));
    std::string pattern_o = m[1], pattern_d = m[2];
    CHECK(std::regex_search(leaked, std::regex("data-o=\"" + pattern_o + "\" data-n=\"2000\" data-d=\"" +
                                               std::to_string(std::stoi(pattern_d) + 1) +
                                               "\" data-c=\"2\"><title>leaky\\(\\)\\n")));
    // Names with <, > and & (std::thread's templates) are escaped.
    CHECK(bytes.find("std::thread::_State_impl&lt;") != std::string::npos);

    // Icicle and a title work as for the time flame graph.
    std::string icicle = temp_path("mem-icicle.svg");
    REQUIRE(run({PROFREPORT, "--flamegraph", icicle, "--memory", "--icicle", "--title",
                 "a <b> & c", trace})
                .exit_code == 0);
    auto k = check_svg({icicle, "--total", std::to_string(summary_value(trace, "bytes_allocated"))});
    CHECK_MESSAGE(k.exit_code == 0, k.err);
    CHECK(slurp(icicle).find(">a &lt;b&gt; &amp; c</text>") != std::string::npos);

    // Usage: a trace without allocations, --weight alone, per-thread options.
    auto none = run({PROFREPORT, "--flamegraph", temp_path("none.svg"), "--memory", fib_trace()});
    CHECK(none.exit_code == 1);
    CHECK(none.err.find("no allocation data") != std::string::npos);
    for (std::vector<std::string> bad :
         {std::vector<std::string>{"--flamegraph", "x.svg", "--weight", "bytes"},
          {"--flamegraph", "x.svg", "--memory", "--weight", "volume"},
          {"--flamegraph", "x.svg", "--memory", "--threads"},
          {"--html", "x.html", "--memory"},
          {"--tree", "--memory"}}) {
        bad.insert(bad.begin(), PROFREPORT);
        bad.push_back(trace);
        auto r = run(bad);
        CHECK_MESSAGE(r.exit_code == 2, bad[1], " ", bad[3]);
        CHECK(count(r.err, "\n") == 1);
    }

    if (chromium().empty()) {
        MESSAGE("chromium not installed (Debian: chromium): skipping the browser check");
        return;
    }
    auto dom = browse({"--dump-dom"}, "file://" + temp_path("mem-bytes.svg") + "#selftest");
    REQUIRE_MESSAGE(dom.exit_code == 0, dom.err);
    CHECK(dom.out.find("data-ready=\"1\"") != std::string::npos);
    CHECK(dom.out.find("data-selftest=\"Matched: 100.00% zoomed\"") != std::string::npos);
    check_console(dom.err);
}

TEST_CASE("HTML report: memory section with summary, heap/RSS plot and sortable sites") {
    const std::string& trace = pattern_trace();
    std::string html = temp_path("mem.html");
    auto r = run({PROFREPORT, "--html", html, trace});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::string text = slurp(html);
    CHECK(count(text, "<script") == 2);
    CHECK(text.find("<section id=\"memory\">") != std::string::npos);
    CHECK(text.find("<polyline") != std::string::npos); // the timeline, inline
    CHECK(text.find("<?xml") == std::string::npos);
    CHECK(text.find("default-src 'none'") != std::string::npos);
    for (const char* remote : {"http://", "https://", "<link", " src="})
        CHECK_MESSAGE(text.find(remote) == std::string::npos, remote);
    // No memory data: no section.
    std::string plain = temp_path("plain.html");
    REQUIRE(run({PROFREPORT, "--html", plain, fib_trace()}).exit_code == 0);
    CHECK(slurp(plain).find("<section id=\"memory\">") == std::string::npos);

    std::string dom = selftest_dom(html);
    if (dom.empty()) return;
    CHECK(dom.find("data-memory=\"1\"") != std::string::npos);
    // One row per allocation site (all of them: far fewer than the page's top 500 per column).
    size_t sites = site_count(trace);
    CHECK(sites > 5);
    CHECK(dom.find("data-mem-rows=\"" + std::to_string(sites) + "\"") != std::string::npos);
    CHECK(count(dom, "<tr data-site=") == sites);
    // The summary and known sites with their stacks.
    for (const char* part : {"calls to allocation functions", "peak heap", "peak RSS", "leaked",
                             "<td>" /* summary values */, "leaky() (alloc_pattern.cpp:",
                             "pattern() (alloc_pattern.cpp:", "mismatches() (alloc_pattern.cpp:",
                             "allocated with new and released with free"})
        CHECK_MESSAGE(dom.find(part) != std::string::npos, part);
    CHECK(dom.find("<td>" + std::to_string(summary_value(trace, "allocations")) + "</td>") !=
          std::string::npos);
    // The self test sorted by leaked, then by bytes twice (descending, then ascending).
    CHECK(dom.find("class=\"sorted-asc\">bytes") != std::string::npos);

    // Calls and allocations together: both sections work.
    std::string both = temp_path("both.html");
    REQUIRE(run({PROFREPORT, "--html", both, threads_mem_trace()}).exit_code == 0);
    auto dom2 = browse({"--dump-dom"}, "file://" + both + "#selftest");
    REQUIRE_MESSAGE(dom2.exit_code == 0, dom2.err);
    CHECK(dom2.out.find("data-selftest=\"ok\"") != std::string::npos);
    CHECK(dom2.out.find("data-memory=\"1\"") != std::string::npos);
    CHECK(dom2.out.find("data-rows=\"0\"") == std::string::npos);
    CHECK(dom2.out.find("data-mem-rows=\"" + std::to_string(site_count(threads_mem_trace())) +
                        "\"") != std::string::npos);
    check_console(dom2.err);

    std::string png = temp_path("mem-report.png");
    auto shot = browse({"--screenshot=" + png, "--window-size=1280,1400", "--hide-scrollbars"},
                       "file://" + html);
    CHECK_MESSAGE(shot.exit_code == 0, shot.err);
    std::string image = slurp(png);
    CHECK(image.size() > 10000);
    CHECK(image.rfind("\x89PNG\r\n\x1a\n", 0) == 0);
}

TEST_CASE("chrome export: heap and RSS counters, in time order, from the memory report") {
    // Allocations only (an unmodified program): counters and the process name.
    std::string json = temp_path("mem-pattern.json");
    auto r = run({PROFREPORT, "--export", "chrome", "-o", json, pattern_trace()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto c = check_counters({json});
    REQUIRE_MESSAGE(c.exit_code == 0, c.err);
    CHECK(json_field(c.out, "counters") > 2);
    CHECK(json_field(c.out, "complete") == 0);
    CHECK(c.out.find("\"series\": [\"RSS\", \"heap\"]") != std::string::npos);
    // The heap counter reaches exactly the peak heap; RSS never exceeds the peak RSS.
    CHECK(json_field(c.out, "heap_max") == summary_value(pattern_trace(), "peak_heap"));
    CHECK(json_field(c.out, "rss_max") <= summary_value(pattern_trace(), "peak_rss"));
    CHECK(json_field(c.out, "rss_max") > 0);

    // Calls and allocations: complete events and counters side by side.
    std::string both = temp_path("mem-threads.json");
    r = run({PROFREPORT, "--export", "chrome", "-o", both, threads_mem_trace()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    c = check_counters({both});
    REQUIRE_MESSAGE(c.exit_code == 0, c.err);
    CHECK(json_field(c.out, "complete") > 30000); // step() and mix() alone make 30000 calls
    CHECK(json_field(c.out, "counters") > 0);
    CHECK(json_field(c.out, "heap_max") == summary_value(threads_mem_trace(), "peak_heap"));

    // A window (the middle third of the counters' span): counters inside it only, starting
    // with the value each had when the window opens.
    c = check_counters({json});
    uint64_t first = json_field(c.out, "first"), last = json_field(c.out, "last");
    REQUIRE(last > first);
    std::string from = std::to_string(first + (last - first) / 3),
                to = std::to_string(first + 2 * (last - first) / 3);
    std::string win = temp_path("mem-window.json");
    r = run({PROFREPORT, "--export", "chrome", "--from", from + "ns", "--to", to + "ns", "-o", win,
             pattern_trace()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    c = check_counters({win, from, to});
    CHECK_MESSAGE(c.exit_code == 0, c.err);
    CHECK(json_field(c.out, "first") == std::stoull(from)); // both series carried in
    CHECK(c.out.find("\"series\": [\"RSS\", \"heap\"]") != std::string::npos);

    // No allocation records, no counters.
    std::string plain = temp_path("mem-fib.json");
    REQUIRE(run({PROFREPORT, "--export", "chrome", "-o", plain, fib_trace()}).exit_code == 0);
    CHECK(slurp(plain).find("\"ph\":\"C\"") == std::string::npos);
}

TEST_CASE("diff --memory: per-site deltas, exit status flips at --fail-above") {
    std::string ten = mem_trace("amount-10.trace", {PROF_TEST_ALLOC_AMOUNT, "10"});
    std::string twelve = mem_trace("amount-12.trace", {PROF_TEST_ALLOC_AMOUNT, "12"});
    std::string leak = mem_trace("amount-10-leak.trace", {PROF_TEST_ALLOC_AMOUNT, "10", "500"});

    auto same = run({PROFREPORT, "diff", "--memory", ten, ten, "--fail-above", "0"});
    CHECK_MESSAGE(same.exit_code == 0, same.err);
    CHECK(same.err.empty());
    CHECK(same.out.find("site (innermost frame first)") != std::string::npos);

    // grow() allocates 12 blocks of 1000 bytes instead of 10, all live at its peak: +20% in
    // allocations, bytes and bytes at the peak; every other site and total changes less.
    auto j = run({PROFREPORT, "diff", "--memory", "--format", "json", ten, twelve});
    REQUIRE(j.exit_code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(j.out, m, std::regex(R"re(\{"stack": \["grow\(int\)", "main"[^\n]*)re")));
    std::string row = m[0];
    CHECK(row.find("\"allocations\": {\"base\": 10, \"new\": 12, \"change_percent\": 20.000000}") !=
          std::string::npos);
    CHECK(row.find("\"bytes\": {\"base\": 10000, \"new\": 12000, \"change_percent\": 20.000000}") !=
          std::string::npos);
    CHECK(row.find("\"peak\": {\"base\": 10000, \"new\": 12000, \"change_percent\": 20.000000}") !=
          std::string::npos);

    auto under = run({PROFREPORT, "diff", "--memory", "--fail-above", "19", ten, twelve});
    CHECK(under.exit_code == 3);
    CHECK(under.err.find("regression: bytes allocated of grow(int) < main") != std::string::npos);
    CHECK(under.out.find("!          10          12   +20.0%       10000       12000   +20.0%") !=
          std::string::npos);
    auto over = run({PROFREPORT, "diff", "--memory", "--fail-above", "21%", ten, twelve});
    CHECK_MESSAGE(over.exit_code == 0, over.err);
    CHECK(over.err.empty());
    // One measure only: the leaks did not change.
    auto leaks_only =
        run({PROFREPORT, "diff", "--memory", "--weight", "leaked", "--fail-above", "0", ten, twelve});
    CHECK_MESSAGE(leaks_only.exit_code == 0, leaks_only.err);
    auto bytes_only =
        run({PROFREPORT, "diff", "--memory", "--weight", "bytes", "--fail-above", "19", ten, twelve});
    CHECK(bytes_only.exit_code == 3);
    CHECK(bytes_only.err.find("allocations of") == std::string::npos);

    // A new leak fails whatever the threshold.
    auto leaked = run({PROFREPORT, "diff", "--memory", "--fail-above", "1000", ten, leak});
    CHECK(leaked.exit_code == 3);
    CHECK(leaked.err.find("regression: leaked bytes of keep(unsigned long) < main") !=
          std::string::npos);

    // Sets compare per run: 10 and 12 against 11 twice is no change in the mean.
    std::string eleven = mem_trace("amount-11.trace", {PROF_TEST_ALLOC_AMOUNT, "11"});
    auto sets = run({PROFREPORT, "diff", "--memory", "--fail-above", "0", ten, twelve, "--vs",
                     eleven, eleven});
    CHECK_MESSAGE(sets.exit_code == 0, sets.err);
    CHECK(sets.out.find("base: 2 runs: ") != std::string::npos);
    CHECK(sets.out.find("    new: 2 runs: ") != std::string::npos);

    auto csv = run({PROFREPORT, "diff", "--memory", "--format", "csv", ten, twelve});
    CHECK(csv.exit_code == 0);
    CHECK(csv.out.rfind("stack,status,allocations_base,allocations_new,", 0) == 0);
    CHECK(csv.out.find("\ngrow(int);main;") != std::string::npos);

    // Errors: no allocation data (1), --metric is the time diff's (2).
    auto none = run({PROFREPORT, "diff", "--memory", fib_trace(), ten});
    CHECK(none.exit_code == 1);
    CHECK(none.err.find("no allocation data in the base trace") != std::string::npos);
    auto metric = run({PROFREPORT, "diff", "--memory", "--metric", "ncalls", ten, twelve});
    CHECK(metric.exit_code == 2);
}

TEST_CASE("diff --memory: a new site is new in every column, counts of one are singular") {
    std::string ten = mem_trace("amount-10-b.trace", {PROF_TEST_ALLOC_AMOUNT, "10"});
    std::string leak = mem_trace("amount-10-leak-b.trace", {PROF_TEST_ALLOC_AMOUNT, "10", "500"});
    // keep() is new: its one block is allocated after grow()'s peak, so it has no bytes at the
    // peak in either run, and is still new there, not "+0.0%".
    auto d = run({PROFREPORT, "diff", "--memory", ten, leak});
    REQUIRE_MESSAGE(d.exit_code == 0, d.err);
    std::smatch m;
    REQUIRE(std::regex_search(d.out, m, std::regex(R"([^\n]*keep\(unsigned long\)[^\n]*)")));
    std::string row = m[0];
    CHECK_MESSAGE(
        std::regex_search(row,
                          std::regex(R"(^ +- +1 +new +- +500 +new +- +0 +new +- +500 +new  keep)")),
        row);
    auto j = run({PROFREPORT, "diff", "--memory", "--format", "json", ten, leak});
    REQUIRE(std::regex_search(j.out, m, std::regex(R"re(\{"stack": \["keep[^\n]*)re")));
    row = m[0];
    CHECK(row.find("\"peak\": {\"base\": 0, \"new\": 0, \"change_percent\": null}") !=
          std::string::npos);

    // The report of the leaking run: one call and one block are singular.
    auto r = run({PROFREPORT, "--memory", leak});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("  1 call, 500 B allocated\n") != std::string::npos);
    CHECK(r.out.find("  500 B leaked in 1 block\n") != std::string::npos);
    CHECK(r.out.find(" 1 calls") == std::string::npos);
    CHECK(r.out.find(" 1 blocks") == std::string::npos);
    size_t sites = site_count(leak);
    REQUIRE(sites > 1);
    auto cut = run({PROFREPORT, "--memory", "-n", std::to_string(sites - 1), leak});
    CHECK(cut.out.find("  ... and 1 more site\n") != std::string::npos);
    CHECK(cut.out.find("1 more sites") == std::string::npos);
    auto all = run({PROFREPORT, "--memory", "-n", "0", leak}); // 0: no limit
    CHECK(all.out.find("more site") == std::string::npos);
}

TEST_CASE("profreport --memory --plot: 1-2-5 ticks, legend above the curves, labels inside") {
    std::string svg = temp_path("mv-plot.svg");
    auto r = run({PROFREPORT, "--memory", "--plot", svg, threads_mem_trace()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::string text = slurp(svg);
    std::smatch m;
    REQUIRE(std::regex_search(text, m, std::regex(R"re(<svg [^>]*width="(\d+)")re")));
    const double width = std::stod(m[1]);
    // A step is 1, 2 or 5 times a power of ten, and every tick a whole number of steps.
    auto check_ticks = [](const std::vector<double>& v, const char* what) {
        REQUIRE_MESSAGE(v.size() >= 3, what);
        double step = v[1] - v[0];
        CHECK(v[0] == 0);
        double mag = std::pow(10.0, std::floor(std::log10(step) + 1e-9));
        double f = step / mag;
        CHECK_MESSAGE((std::abs(f - 1) < 1e-6 || std::abs(f - 2) < 1e-6 || std::abs(f - 5) < 1e-6),
                      what, " step ", step);
        for (size_t i = 0; i < v.size(); ++i)
            CHECK_MESSAGE(std::abs(v[i] - double(i) * step) < step * 1e-6, what, " tick ", v[i]);
    };
    std::vector<double> times, bytes, time_x, grid_y;
    std::regex tx(R"re(<text x="([\d.]+)" y="[\d.]+" text-anchor="middle">([\d.e+-]+) s</text>)re");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), tx); it != std::sregex_iterator();
         ++it)
        times.push_back(std::stod((*it)[2])), time_x.push_back(std::stod((*it)[1]));
    std::regex ty(R"re(text-anchor="end">([\d.e+-]+) (B|KiB|MiB|GiB)</text>)re");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), ty); it != std::sregex_iterator();
         ++it)
        bytes.push_back(std::stod((*it)[1]));
    check_ticks(times, "time");
    check_ticks(bytes, "bytes");
    // The last time label (centred on its tick) fits in the picture.
    CHECK(time_x.back() + 30 <= width);
    std::regex grid(
        R"re(<line x1="[\d.]+" y1="([\d.]+)" x2="[\d.]+" y2="[\d.]+" stroke="#ddd"/>)re");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), grid);
         it != std::sregex_iterator(); ++it)
        grid_y.push_back(std::stod((*it)[1]));
    REQUIRE(!grid_y.empty());
    const double plot_top = *std::min_element(grid_y.begin(), grid_y.end());
    // The legend's entries sit above the plot area.
    std::regex legend(
        R"re(<rect x="[\d.]+" y="([\d.]+)" width="12" height="3"[^>]*/><text x="[\d.]+" y="([\d.]+)">)re");
    size_t entries = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), legend);
         it != std::sregex_iterator(); ++it) {
        ++entries;
        CHECK(std::stod((*it)[1]) + 3 < plot_top);
        CHECK(std::stod((*it)[2]) < plot_top);
    }
    CHECK(entries == 2);
}

// A plugin dlopened, used and dlclosed 300 times: each load gives the same code (often at new
// addresses) and must not give new sites. Two copies of the plugin are two objects: their
// sites stay apart although their frames name the same function, file and line.
TEST_CASE("a plugin loaded and closed in a loop: one site per stack, not one per load") {
    std::string trace = mem_trace("plugin-loop.trace",
                                  {PROF_TEST_PLUGIN_LOOP, "300", PROF_TEST_PLUGIN_LOOP_A});
    prof::analysis::Session pb;
    pb.add_trace(trace);
    const prof::analysis::MemoryReport& m = pb.memory();
    std::vector<const prof::analysis::MemorySite*> plug;
    for (const auto& s : m.sites)
        if (!s.stack.empty() && s.stack[0].name == "plug_alloc") plug.push_back(&s);
    REQUIRE(plug.size() == 2); // free(f(100)) and f(64): two lines of main
    const auto* temp = plug[0]->leaked_blocks ? plug[1] : plug[0];
    const auto* leak = plug[0]->leaked_blocks ? plug[0] : plug[1];
    CHECK(temp->allocations == 300);
    CHECK(temp->bytes == 30000);
    CHECK(temp->temporary == 300);
    CHECK(temp->leaked_blocks == 0);
    CHECK(temp->peak_bytes == 0);
    CHECK(leak->allocations == 300);
    CHECK(leak->bytes == 19200);
    CHECK(leak->temporary == 0);
    CHECK(leak->leaked_blocks == 300);
    CHECK(leak->leaked_bytes == 19200);
    CHECK(leak->peak_bytes == 19200); // the 1 MiB block at the end puts the peak after all leaks
    REQUIRE(leak->stack.size() >= 2);
    CHECK(leak->stack[0].file.find("plugin_loop_lib.c") != std::string::npos);
    CHECK(leak->stack[0].line == 5);
    CHECK(leak->stack[1].name == "main");
    CHECK(leak->stack[1].line == 23);
    // The report: the biggest leak first, once.
    auto text = run({PROFREPORT, "--memory", "-n", "1", trace});
    REQUIRE(text.exit_code == 0);
    CHECK_MESSAGE(text.out.find("MEMORY LEAKED\n  18.75 KiB leaked in 300 blocks\n"
                                "      at plug_alloc (plugin_loop_lib.c:5)\n"
                                "         main (plugin_loop.c:23)\n") != std::string::npos,
                  text.out);
    auto json = run({PROFREPORT, "--memory", "--format", "json", trace});
    REQUIRE(json.exit_code == 0);
    CHECK(count(json.out, "{\"stack\": [{\"name\": \"plug_alloc\"") == 2);
    CHECK(count(json.out, "\"leaked_bytes\": 19200, \"leaked_blocks\": 300") == 1);

    // Two copies loaded in turn: one leaking site per object, 150 loads each.
    std::string two = mem_trace("plugin-two.trace",
                                {PROF_TEST_PLUGIN_LOOP, "300", PROF_TEST_PLUGIN_LOOP_A,
                                 PROF_TEST_PLUGIN_LOOP_B});
    prof::analysis::Session pb2;
    pb2.add_trace(two);
    std::vector<std::string> modules;
    for (const auto& s : pb2.memory().sites)
        if (!s.stack.empty() && s.stack[0].name == "plug_alloc" && s.leaked_blocks) {
            CHECK(s.leaked_blocks == 150);
            CHECK(s.leaked_bytes == 9600);
            CHECK(s.peak_bytes == 9600);
            modules.push_back(s.stack[0].module);
        }
    REQUIRE(modules.size() == 2);
    std::sort(modules.begin(), modules.end());
    CHECK(modules[0] == PROF_TEST_PLUGIN_LOOP_A);
    CHECK(modules[1] == PROF_TEST_PLUGIN_LOOP_B);
}

// realloc may move only blocks of malloc and its kin: a new[] or new block passed to it is a
// mismatch, at the site that allocated it; the block realloc returns is then free's to free.
TEST_CASE("realloc of a block allocated with new[] or new: a mismatch, in text and JSON") {
    std::string trace = mem_trace("realloc-new.trace", {PROF_TEST_REALLOC_NEW});
    prof::analysis::Session pb;
    pb.add_trace(trace);
    const prof::analysis::MemoryReport& m = pb.memory();
    REQUIRE(m.mismatches.size() == 2);
    const auto& array = m.mismatches[0];
    const auto& object = m.mismatches[1];
    CHECK(array.allocated_with == "new[]");
    CHECK(array.freed_with == "realloc");
    CHECK(array.count == 3);
    CHECK(m.sites.at(array.site).stack.at(0).name == "array_then_realloc()");
    CHECK(object.allocated_with == "new");
    CHECK(object.freed_with == "realloc");
    CHECK(object.count == 1);
    CHECK(m.sites.at(object.site).stack.at(0).name == "object_then_realloc()");
    auto text = run({PROFREPORT, "--memory", trace});
    REQUIRE(text.exit_code == 0);
    CHECK_MESSAGE(text.out.find("MISMATCHED ALLOCATION AND RELEASE\n"
                                "  3 blocks allocated with new[] and released with realloc\n"
                                "      at array_then_realloc() (realloc_new.cpp:7)\n") !=
                      std::string::npos,
                  text.out);
    CHECK(text.out.find("  1 block allocated with new and released with realloc\n"
                        "      at object_then_realloc() (realloc_new.cpp:13)\n") !=
          std::string::npos);
    auto json = run({PROFREPORT, "--memory", "--format", "json", trace});
    REQUIRE(json.exit_code == 0);
    CHECK(json.out.find(fmt_mismatch("new[]", 3, array.site)) != std::string::npos);
    CHECK(json.out.find(fmt_mismatch("new", 1, object.site)) != std::string::npos);
    CHECK(count(json.out, "\"freed_with\": ") == 2);
}

// A process that ends with _exit leaves no symbol table: frames are named from the files on
// disk. The static function is in no symbol table of the stripped binary, only in the
// separate debug file that its .gnu_debuglink names (as libc's __libc_start_call_main).
TEST_CASE("a trace of a process that ended with _exit: local functions named from the debug file") {
    std::string trace = mem_trace("local-symbol.trace", {PROF_TEST_LOCAL_SYMBOL});
    prof::analysis::Session pb;
    pb.add_trace(trace);
    const prof::analysis::MemorySite* site = nullptr;
    for (const auto& s : pb.memory().sites)
        if (s.bytes == 4242) site = &s;
    REQUIRE(site);
    REQUIRE(site->stack.size() >= 2);
    CHECK(site->stack[0].name == "hidden_alloc");
    CHECK(site->stack[0].file.find("local_symbol.c") != std::string::npos);
    CHECK(site->stack[0].line == 10);
    CHECK(site->stack[1].name == "main");
    CHECK(site->stack[1].line == 16);
    auto text = run({PROFREPORT, "--memory", trace});
    CHECK_MESSAGE(text.out.find("  4.14 KiB leaked in 1 block\n"
                                "      at hidden_alloc (local_symbol.c:10)\n"
                                "         main (local_symbol.c:16)\n") != std::string::npos,
                  text.out);
}

#ifdef PROF_SANITIZER_BUILD
TEST_SUITE_END();
#endif
