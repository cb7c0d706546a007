// Views and exports end to end: each export is checked against its format by a strict parser
// (tests/views/check_views.py: json, xml.etree), callgrind by valgrind's callgrind_annotate,
// the HTML report by headless Chromium. Those two are skipped, with a message, when the tool
// is not installed (tools/quickstart.sh installs both).
#include "support/approx.hpp"
#include "support/browser.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <tuple>

using prof::test::json_number;
using prof::test::run;
using prof::test::RunResult;
using prof::test::slurp;
using prof::test::temp_path;
using prof::test::trace_of;

using prof::test::browse;
using prof::test::check_console;
using prof::test::chromium;
using prof::test::selftest_dom;
using prof::test::which;

namespace {

const std::string& fib15() {
    static const std::string p = trace_of("views-fib15.trace", {PROF_SAMPLE_FIB, "15"});
    return p;
}
const std::string& fib20() {
    static const std::string p = trace_of("views-fib20.trace", {PROF_SAMPLE_FIB, "20"});
    return p;
}
const std::string& threads_trace() {
    static const std::string p = trace_of("views-threads.trace", {PROF_SAMPLE_THREADS});
    return p;
}
const std::string& odd_trace() {
    static const std::string p = trace_of("views-odd.trace", {PROF_TEST_ODD_NAMES});
    return p;
}

// Runs the format checker; the result's exit code is 0 when the file passes.
prof::test::RunResult check(const std::vector<std::string>& args) {
    std::string python = which("python3");
    std::vector<std::string> argv{python, PROF_VIEW_CHECKER};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
}

size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
}

size_t lines(const std::string& s) {
    return count(s, "\n");
}

// The names the odd_names program gives its functions, exactly as demangled.
const char* const kLess = "odd::operator<(odd::V, odd::V)";
const char* const kAnd = "odd::operator&(odd::V, odd::V)";
const char* const kUnbox = "int odd::unbox<int&>(odd::Box<int&> const&)";
const char* const kLiteral = "odd::operator\"\" _kib(unsigned long long)";
const char* const kHostile = "</script><script>alert(1)</script> ]]> \"q\" & <b>";

// Sum of self_ns over `--tree --format csv` rows whose name is `name` ("" = all).
struct TreeCsv {
    std::map<std::string, uint64_t> self, calls;
    uint64_t total = 0;
};
TreeCsv tree_csv(const std::string& trace, bool compensated = true) {
    std::vector<std::string> argv{PROFREPORT, "--tree", "--format", "csv", trace};
    if (!compensated) argv.push_back("--no-compensation");
    auto r = run(argv);
    REQUIRE(r.exit_code == 0);
    TreeCsv t;
    std::istringstream in(r.out);
    std::string line;
    std::getline(in, line);
    CHECK(line == "id,parent,depth,calls,total_ns,self_ns,percent,name,file,line");
    // id,parent,depth,calls,total_ns,self_ns,percent,name,file,line (no commas in fib's names)
    std::regex row(R"((\d+),(\d+),(\d+),(\d+),(\d+),(\d+),([0-9.]+),(.*),(.*),(\d+))");
    while (std::getline(in, line)) {
        std::smatch m;
        REQUIRE_MESSAGE(std::regex_match(line, m, row), line);
        std::string name = m[8];
        t.self[name] += std::stoull(m[6]);
        t.calls[name] += std::stoull(m[4]);
        t.total += std::stoull(m[6]);
    }
    return t;
}

} // namespace

TEST_CASE("profreport --tree: call paths with exact counts, depth and percent cuts, csv") {
    auto r = run({PROFREPORT, "--tree", fib15()});
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.find("# Call tree: 1974 calls in ") == 0);
    CHECK(r.out.find("TOTAL TIME    SELF TIME       CALLS  FUNCTION") != std::string::npos);
    // fib(15) recurses 15 levels below main: one line per call path.
    CHECK(count(r.out, "+-fib(int)") == 15);
    CHECK(r.out.find("           1  main\n") != std::string::npos);

    auto shallow = run({PROFREPORT, "--tree", "--depth", "3", fib15()});
    CHECK(count(shallow.out, "+-fib(int)") == 2);
    auto cut = run({PROFREPORT, "--tree", "--min-percent", "50%", fib15()});
    CHECK(count(cut.out, "+-fib(int)") < 15);

    // Self times add up to the total exactly, and match the pstats table to the nanosecond,
    // with the profiler's cost compensated (the default) and without.
    for (bool compensated : {true, false}) {
        CAPTURE(compensated);
        TreeCsv t = tree_csv(fib15(), compensated);
        CHECK(t.calls["main"] == 1);
        CHECK(t.calls["fib(int)"] == 1973);
        std::vector<std::string> argv{PROFREPORT, "--format", "json", fib15()};
        if (!compensated) argv.push_back("--no-compensation");
        auto json = run(argv);
        double total = json_number(json.out, "total_time");
        CHECK(total > 0);
        CHECK(std::fabs(double(t.total) - total * 1e9) <= 2.0);
        size_t fib_at = json.out.find("\"name\": \"fib(int)\"");
        CHECK(std::fabs(double(t.self["fib(int)"]) -
                        json_number(json.out, "tottime", fib_at) * 1e9) <= 2.0);
    }

    // Per thread: one top-level node per thread.
    auto per_thread = run({PROFREPORT, "--tree", "--threads", "--depth", "1", threads_trace()});
    CHECK(per_thread.exit_code == 0);
    CHECK(count(per_thread.out, "  thread ") == 5);
}

TEST_CASE("collapsed stacks and callgrind: totals equal ours and callgrind_annotate's") {
    TreeCsv t = tree_csv(fib15());
    std::string folded = temp_path("fib.folded");
    REQUIRE(run({PROFREPORT, "--export", "collapsed", "-o", folded, fib15()}).exit_code == 0);
    auto c = check({"collapsed", folded, "--total", std::to_string(t.total)});
    CHECK_MESSAGE(c.exit_code == 0, c.err);
    CHECK(slurp(folded).rfind("main ", 0) == 0);
    // A stack per call path, of its own time: without the hooks' cost subtracted, every path of
    // fib's has some (with it, a path of fib's few ns per call can come to 0, and has no line).
    std::string raw = temp_path("fib-raw.folded");
    REQUIRE(run({PROFREPORT, "--export", "collapsed", "--no-compensation", "-o", raw, fib15()})
                .exit_code == 0);
    CHECK(slurp(raw).find("\nmain;fib(int);fib(int) ") != std::string::npos);
    CHECK(count(slurp(raw), "\n") == 16); // main, and fib at 15 depths below it

    std::string cg = temp_path("callgrind.out.fib");
    REQUIRE(run({PROFREPORT, "--export", "callgrind", "-o", cg, fib15()}).exit_code == 0);
    std::string text = slurp(cg);
    CHECK(text.rfind("# callgrind format\nversion: 1\n", 0) == 0);
    CHECK(text.find("events: ns\n") != std::string::npos);
    CHECK(text.find("summary: " + std::to_string(t.total) + "\n") != std::string::npos);
    CHECK(text.find("calls=1 ") != std::string::npos);    // main -> fib
    CHECK(text.find("calls=1972 ") != std::string::npos); // fib -> fib

    std::string annotate = which("callgrind_annotate");
    if (annotate.empty()) {
        MESSAGE("callgrind_annotate not installed (Debian: valgrind): skipping its check");
        return;
    }
    auto a = run({annotate, "--threshold=100", cg}); // every function, not the top 99%
    REQUIRE_MESSAGE(a.exit_code == 0, a.err);
    INFO(a.out);
    auto number = [](std::string s) {
        s.erase(std::remove(s.begin(), s.end(), ','), s.end());
        return std::stoull(s);
    };
    std::smatch m;
    REQUIRE(std::regex_search(a.out, m, std::regex(R"(([0-9,]+) \([ 0-9.]+%\)\s+PROGRAM TOTALS)")));
    CHECK(number(m[1]) == t.total);
    REQUIRE(std::regex_search(a.out, m,
                              std::regex(R"(([0-9,]+) \([ 0-9.]+%\)\s+\S*fib\.cpp:fib\(int\))")));
    CHECK(number(m[1]) == t.self["fib(int)"]);
    REQUIRE(
        std::regex_search(a.out, m, std::regex(R"(([0-9,]+) \([ 0-9.]+%\)\s+\S*fib\.cpp:main)")));
    CHECK(number(m[1]) == t.self["main"]);
}

TEST_CASE("chrome and speedscope exports: nested per thread, balanced, exact counts, escaped") {
    std::string chrome = temp_path("odd.json");
    auto r = run({PROFREPORT, "--export", "chrome", "-o", chrome, odd_trace()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.empty());
    auto counts = [](const char* w, const char* h) {
        return std::vector<std::string>{
            "--count", std::string(kLess) + "=300",    "--count", std::string(kAnd) + "=300",
            "--count", std::string(kUnbox) + "=300",   "--count", std::string(kLiteral) + "=2",
            "--count", std::string(kHostile) + "=300", "--count", std::string(w) + "=2",
            "--count", std::string(h) + "=300"};
    };
    std::vector<std::string> args{"chrome", chrome};
    for (auto& a : counts("worker(int)", "hostile_scope(int)")) args.push_back(a);
    auto c = check(args);
    CHECK_MESSAGE(c.exit_code == 0, c.err);
    CHECK(c.out.find("\"threads\": 2") != std::string::npos);
    // The scope nests inside hostile_scope inside worker inside main (or the thread's lambda).
    CHECK(c.out.find("\"max_depth\": 4") != std::string::npos);
    CHECK(slurp(chrome).find("</script>") == std::string::npos);

    std::string ss = temp_path("odd.speedscope.json");
    REQUIRE(run({PROFREPORT, "--export", "speedscope", "-o", ss, odd_trace()}).exit_code == 0);
    args = {"speedscope", ss};
    for (auto& a : counts("worker(int)", "hostile_scope(int)")) args.push_back(a);
    c = check(args);
    CHECK_MESSAGE(c.exit_code == 0, c.err);
    CHECK(c.out.find("\"profiles\": 2") != std::string::npos);

    // Threads: 5 threads named in the metadata, counts per function as the sample says.
    std::string th = temp_path("threads.json");
    REQUIRE(run({PROFREPORT, "--export", "chrome", "-o", th, threads_trace()}).exit_code == 0);
    c = check({"chrome", th, "--count", "step(unsigned long, unsigned long)=10000", "--count",
               "mix(unsigned long)=20000", "--count", "nap()=4", "--count", "worker(int)=4"});
    CHECK_MESSAGE(c.exit_code == 0, c.err);
    CHECK(c.out.find("\"threads\": 5") != std::string::npos);
}

TEST_CASE("timeline filters: --min-duration, --from/--to, --thread") {
    // nap() sleeps 10 ms in each of 4 threads; step() and mix() take well under 1 ms.
    std::string all = temp_path("all.json");
    REQUIRE(run({PROFREPORT, "--export", "chrome", "-o", all, threads_trace()}).exit_code == 0);
    std::smatch ts;
    std::string all_text = slurp(all);
    REQUIRE(std::regex_search(all_text, ts, std::regex(R"("name":"main","ts":(\d+))")));
    const uint64_t main_us = std::stoull(ts[1]);
    for (const char* kind : {"chrome", "speedscope"}) {
        CAPTURE(kind);
        std::string out = temp_path(std::string("long.") + kind);
        auto r = run(
            {PROFREPORT, "--export", kind, "--min-duration", "5ms", "-o", out, threads_trace()});
        REQUIRE(r.exit_code == 0);
        auto c = check(
            {kind, out, "--count", "nap()=4", "--count", "worker(int)=4", "--count", "main=1"});
        CHECK_MESSAGE(c.exit_code == 0, c.err);
        // The 30000 short calls are gone (a few could be preempted for 5 ms on a loaded machine).
        std::smatch m;
        REQUIRE(std::regex_search(c.out, m, std::regex(R"("events": (\d+))")));
        CHECK(std::stoul(m[1]) < 100);

        // A window: every event clipped into it, still nested and balanced. It is placed
        // relative to main's start (the runtime's start-up, slower under sanitizers, comes
        // first), inside the 10 ms naps: main + [1, 4] ms.
        uint64_t from_us = main_us + 1000, to_us = main_us + 4000;
        std::string win = temp_path(std::string("window.") + kind);
        r = run({PROFREPORT, "--export", kind, "--from", std::to_string(from_us) + "us", "--to",
                 std::to_string(to_us) + "us", "-o", win, threads_trace()});
        REQUIRE(r.exit_code == 0);
        c = check({kind, win, "--within", std::to_string(from_us * 1000),
                   std::to_string(to_us * 1000), "--count", "main=1"});
        CHECK_MESSAGE(c.exit_code == 0, c.err);
    }
    // One thread by kernel id: main's tid is the process id.
    auto info = run({PROFREPORT, "--info", threads_trace()});
    std::smatch m;
    REQUIRE(std::regex_search(info.out, m, std::regex(R"(pid (\d+) )")));
    std::string out = temp_path("main-only.json");
    REQUIRE(run({PROFREPORT, "--export", "chrome", "--thread", m[1], "-o", out, threads_trace()})
                .exit_code == 0);
    auto c = check({"chrome", out, "--count", "main=1", "--count", "worker(int)=0"});
    CHECK_MESSAGE(c.exit_code == 0, c.err);
    auto none =
        run({PROFREPORT, "--export", "chrome", "--thread", "1", "-o", out, threads_trace()});
    CHECK(none.exit_code == 1);
}

TEST_CASE("flame graph: well-formed SVG, exact widths, names escaped") {
    std::string svg = temp_path("odd.svg");
    auto r = run({PROFREPORT, "--flamegraph", svg, "--min-width", "0", odd_trace()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    TreeCsv t = tree_csv(odd_trace());
    auto c = check({"svg", svg, "--total", std::to_string(t.total), "--name", kLess, "--name", kAnd,
                    "--name", kUnbox, "--name", kLiteral, "--name", kHostile, "--count",
                    std::string(kHostile) + "=300"});
    CHECK_MESSAGE(c.exit_code == 0, c.err);
    std::string text = slurp(svg);
    CHECK(count(text, "<script") == 1); // ours; the scope's label is text
    CHECK(count(text, "]]>") == 1);

    auto fib =
        run({PROFREPORT, "--flamegraph", temp_path("fib.svg"), "--icicle", "--threads", fib15()});
    CHECK(fib.exit_code == 0);
    c = check({"svg", temp_path("fib.svg"), "--count", "fib(int)=1973", "--count", "main=1"});
    CHECK_MESSAGE(c.exit_code == 0, c.err);

    // The script in a browser: zoom into a frame, search everything (#selftest).
    if (chromium().empty()) {
        MESSAGE("chromium not installed (Debian: chromium): skipping the browser check");
        return;
    }
    auto dom = browse({"--dump-dom"}, "file://" + svg + "#selftest");
    REQUIRE_MESSAGE(dom.exit_code == 0, dom.err);
    CHECK(dom.out.find("data-ready=\"1\"") != std::string::npos);
    CHECK(dom.out.find("data-selftest=\"Matched: 100.00% zoomed\"") != std::string::npos);
    check_console(dom.err);
}

TEST_CASE("HTML report: self-contained, escaped, and working in headless Chromium") {
    std::string html = temp_path("odd.html");
    auto r = run({PROFREPORT, "--html", html, odd_trace()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::string text = slurp(html);
    CHECK(count(text, "<script") == 2); // the data and the code
    CHECK(text.find("alert(1)</script>") == std::string::npos);
    for (const char* remote : {"http://", "https://", "<link", " src="})
        CHECK_MESSAGE(text.find(remote) == std::string::npos, remote);
    CHECK(text.find("default-src 'none'") != std::string::npos); // no network, even by mistake

    // After the scripts ran, with the interactions exercised once (#selftest).
    std::string dom = selftest_dom(html);
    if (dom.empty()) return;
    // One row per function of the pstats table.
    auto json = run({PROFREPORT, "--format", "json", odd_trace()});
    size_t functions = count(json.out, "\"ncalls\": ");
    CHECK(dom.find("data-rows=\"" + std::to_string(functions) + "\"") != std::string::npos);
    CHECK(count(dom, "<tr data-fn=") == functions);
    CHECK(dom.find("data-detail=\"callers=") != std::string::npos);
    CHECK(dom.find("data-icicle=\"") != std::string::npos);
    // Names are text in the page, never markup.
    CHECK(dom.find("odd::operator&lt;(odd::V, odd::V)") != std::string::npos);
    CHECK(dom.find("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
    CHECK(count(dom, "<script") == 2);

    std::string png = temp_path("report.png");
    auto shot = browse({"--screenshot=" + png, "--window-size=1280,900", "--hide-scrollbars"},
                       "file://" + html);
    CHECK_MESSAGE(shot.exit_code == 0, shot.err);
    std::string image = slurp(png);
    CHECK(image.size() > 10000);
    CHECK(image.rfind("\x89PNG\r\n\x1a\n", 0) == 0);
}

TEST_CASE("diff: per-function deltas, exit status flips at --fail-above") {
    auto same = run({PROFREPORT, "diff", fib15(), fib15(), "--fail-above", "0"});
    CHECK_MESSAGE(same.exit_code == 0, same.err);
    CHECK(same.out.find("+0.0%") != std::string::npos);

    // fib(25) does 120 times the work of fib(15), but the hooks' times are wall times: a
    // preemption of a few milliseconds inside the base run (0.1 ms under ASan) can make it the
    // slower one on a loaded machine. Such a pair is run again, twice at most, with a fresh base.
    // Calls are exact both ways.
    std::string fib25 = trace_of("views-fib25.trace", {PROF_SAMPLE_FIB, "25"});
    RunResult slower;
    for (int attempt = 0; attempt < 3; ++attempt) {
        std::string base = attempt ? trace_of("views-fib15-" + std::to_string(attempt) + ".trace",
                                              {PROF_SAMPLE_FIB, "15"})
                                   : fib15();
        slower = run({PROFREPORT, "diff", base, fib25, "--fail-above", "5%"});
        if (slower.exit_code == 3) break;
        MESSAGE("attempt " << attempt << ": exit " << slower.exit_code << "\n"
                           << slower.out << slower.err);
    }
    CHECK(slower.exit_code == 3);
    CHECK(slower.err.find("regression: cumtime of fib.cpp:8(fib(int)) regressed by") !=
          std::string::npos);
    CHECK(slower.out.find("!       1973     242785") != std::string::npos);
    auto fewer =
        run({PROFREPORT, "diff", "--metric", "ncalls", fib20(), fib15(), "--fail-above", "5%"});
    CHECK(fewer.exit_code == 0);
    CHECK(fewer.err.empty());

    // The threshold: just under the measured change fails, just over passes.
    auto j = run({PROFREPORT, "diff", "--metric", "ncalls", "--format", "json", fib15(), fib20()});
    REQUIRE(j.exit_code == 0);
    double change = json_number(j.out, "change_percent");
    CHECK(change == prof::test::approx(100.0 * (21892 - 1974) / 1974).epsilon(1e-4));
    auto under = run({PROFREPORT, "diff", "--metric", "ncalls", "--fail-above",
                      std::to_string(change - 1), fib15(), fib20()});
    CHECK(under.exit_code == 3);
    auto over = run({PROFREPORT, "diff", "--metric", "ncalls", "--fail-above",
                     std::to_string(change + 1), fib15(), fib20()});
    CHECK(over.exit_code == 0);
    // The change column is the gated metric's: fib's calls, not its time.
    auto calls = run({PROFREPORT, "diff", "--metric", "ncalls", fib15(), fib20()});
    REQUIRE(calls.exit_code == 0);
    CHECK(calls.out.find(
              "   change: of ncalls, +- its uncertainty (95%): exact with one run a side") !=
          std::string::npos);
    CHECK(calls.out.find(fmt::format("{:+.1f}%  fib.cpp:8(fib(int))",
                                     100.0 * (21891 - 1973) / 1973)) != std::string::npos);

    // Sets are compared per run: two runs of fib(15) against one is no change in calls.
    auto sets = run({PROFREPORT, "diff", "--metric", "ncalls", "--fail-above", "0", fib15(),
                     fib15(), "--vs", fib15()});
    CHECK_MESSAGE(sets.exit_code == 0, sets.err);
    CHECK(sets.out.find("base: 2 runs, 1974 calls") != std::string::npos);

    auto csv = run({PROFREPORT, "diff", "--format", "csv", fib15(), fib20()});
    CHECK(csv.out.rfind("name,file,line,status,ncalls_base,ncalls_new,", 0) == 0);
    CHECK(lines(csv.out) == 3);
}

TEST_CASE("diff --html, --flamegraph, --folded: each call path's change, in headless Chromium") {
    // grows calls mix 10^5 times in each base run and 8 x 10^5 in each new one; shrinks the
    // other way round; steady does the same work in every run. The runs are short enough for
    // the hooks' clock to time them (wall time): on a loaded machine the spread between runs
    // can leave even a factor of 8 within the noise, and the gate then rightly decides
    // nothing (`undecided:`). Such sets are recorded again, twice at most, as the diff test
    // above does.
    std::string html = temp_path("diff.html"), svg = temp_path("diff.svg"),
                folded = temp_path("diff.folded");
    const std::string grows = "(anonymous namespace)::grows(long)",
                      shrinks = "(anonymous namespace)::shrinks(long)";
    std::vector<std::string> args;
    RunResult r;
    std::string text;
    auto fill_of = [&](const std::string& name) {
        size_t title = text.find("<title>" + name + "\n");
        size_t fill = text.find("fill=\"", title);
        return title == std::string::npos
                   ? std::string()
                   : text.substr(fill + 6, text.find('"', fill + 6) - fill - 6);
    };
    const int runs = 5; // a side, alternating: a loaded machine's changes fall on both alike
    for (int attempt = 0; attempt < 3; ++attempt) {
        std::vector<std::string> base, next;
        for (int i = 0; i < runs; ++i) {
            base.push_back(trace_of(fmt::format("diff-work-base-{}-{}.trace", i, attempt),
                                    {PROF_TEST_DIFF_WORK, "1", "8"}));
            next.push_back(trace_of(fmt::format("diff-work-new-{}-{}.trace", i, attempt),
                                    {PROF_TEST_DIFF_WORK, "8", "1"}));
        }
        args = {PROFREPORT, "diff"};
        args.insert(args.end(), base.begin(), base.end());
        args.push_back("--vs");
        args.insert(args.end(), next.begin(), next.end());
        std::vector<std::string> argv = args;
        argv.insert(argv.end(), {"--html", html, "--flamegraph", svg, "--folded", folded,
                                 "--fail-above", "10"});
        r = run(argv);
        text = slurp(svg);
        if (r.exit_code == 3 && fill_of(grows).rfind("rgb(255,", 0) == 0 &&
            fill_of(shrinks).find(",255)") != std::string::npos)
            break;
        MESSAGE("attempt " << attempt << ": exit " << r.exit_code << "\n" << r.out << r.err);
    }
    CHECK_MESSAGE(r.exit_code == 3, r.out << r.err);
    CHECK(
        r.err.find("regression: cumtime of diff_work.cpp:28((anonymous namespace)::grows(long))") !=
        std::string::npos);
    CHECK(r.out.find("base: 5 runs, 1200007 calls") != std::string::npos); // the table, as ever

    // Folded: per call path, the mean self time of each side; grows' subtree eight times as
    // long, shrinks' an eighth.
    std::map<std::string, std::pair<double, double>> by_top;
    double base_sum = 0, new_sum = 0;
    size_t rows = 0;
    std::istringstream in(slurp(folded));
    for (std::string line; std::getline(in, line); ++rows) {
        std::smatch m;
        REQUIRE_MESSAGE(std::regex_match(line, m, std::regex(R"(main(;[^;]+)*? (\d+) (\d+))")),
                        line);
        size_t second = line.find(';');
        std::string top = second == std::string::npos
                              ? "main"
                              : line.substr(second + 1, line.find(';', second + 1) - second - 1);
        double b = std::stod(m[2]), n = std::stod(m[3]);
        by_top[top].first += b;
        by_top[top].second += n;
        base_sum += b;
        new_sum += n;
    }
    CHECK(by_top[grows].second > 2 * by_top[grows].first);
    CHECK(by_top[shrinks].first > 2 * by_top[shrinks].second);
    // The self times add up to each side's mean total (each line rounded to 1 ns).
    std::vector<std::string> json_args = args;
    json_args.insert(json_args.end(), {"--format", "json"});
    auto j = run(json_args);
    REQUIRE(j.exit_code == 0);
    CHECK(std::fabs(base_sum - 1e9 * json_number(j.out, "base_time")) <= double(rows));
    CHECK(std::fabs(new_sum - 1e9 * json_number(j.out, "new_time")) <= double(rows));

    // The flame graph: well formed, children inside their parents, colour by change.
    auto c = check({"svg", svg});
    CHECK_MESSAGE(c.exit_code == 0, c.err);
    CHECK(fill_of(grows).rfind("rgb(255,", 0) == 0);
    CHECK(fill_of(shrinks).find(",255)") != std::string::npos);

    // --memory draws nothing: one line, exit 2.
    auto mem = run({PROFREPORT, "diff", "--memory", "--html", html, args[2], args[3]});
    CHECK(mem.exit_code == 2);
    CHECK(mem.err.find("diff's pictures are of the time diff, not of --memory") !=
          std::string::npos);

    std::string dom = selftest_dom(html);
    if (dom.empty()) return;
    CHECK(dom.find("data-rows=\"6\"") != std::string::npos); // main, steady, grows, ...
    CHECK(count(dom, "<tr data-fn=") == 6);
    CHECK(dom.find("data-detail=\"callers=") != std::string::npos);
    CHECK(dom.find("data-widths=\"new\"") != std::string::npos);
    // The icicle's frames: grows and what it calls slower, shrinks' faster.
    std::regex slower(R"(data-dir="\+"[^>]*>\(anonymous namespace\)::grows\(long\)</div>)");
    std::regex faster(R"(data-dir="-"[^>]*>\(anonymous namespace\)::shrinks\(long\)</div>)");
    CHECK(std::regex_search(dom, slower));
    CHECK(std::regex_search(dom, faster));
}

namespace {
// latency_tail recorded with `env` (VAR=value, may be empty) and `profrun --time TIME`: the
// durations of handle's 50 calls as the program measured them (seconds, sorted), the trace's
// `profreport latency --format json`, and where handle's own object starts in it.
struct LatencyTail {
    std::vector<double> own;
    std::string json;
    size_t handle = std::string::npos;
    std::string run_out;
};
LatencyTail record_latency_tail(const std::string& trace, const std::string& time,
                                const std::string& env = {}) {
    std::vector<std::string> argv = {PROFRUN, "-q",  "--time", time,
                                     "-o",    trace, "--",     PROF_TEST_LATENCY_TAIL};
    if (!env.empty()) argv.insert(argv.begin(), {"/usr/bin/env", env});
    auto rec = run(argv);
    REQUIRE_MESSAGE(rec.exit_code == 0, rec.err);
    LatencyTail t;
    t.run_out = rec.out;
    std::istringstream in(rec.out);
    for (std::string line; std::getline(in, line);) t.own.push_back(std::stod(line) * 1e-9);
    std::sort(t.own.begin(), t.own.end());
    REQUIRE(t.own.size() == 50);
    auto j = run({PROFREPORT, "latency", "--format", "json", trace});
    REQUIRE_MESSAGE(j.exit_code == 0, j.err);
    t.json = j.out;
    t.handle = j.out.find("\n    {\"name\": \"(anonymous namespace)::handle(int, int)\"");
    REQUIRE(t.handle != std::string::npos);
    return t;
}
} // namespace

TEST_CASE(
    "latency: percentiles of each call as the program measured them, the tail's callee named") {
    // handle: 49 calls of 200 us and one of 5 ms, whose extra 4.8 ms are in rebuild. The
    // program prints each call's duration as it measured it; the report's percentiles are
    // those of the same calls, less the hooks' measured cost (a few hooks a call: well under
    // 1%), so they agree within 2% however loaded the machine (a preempted call is long in both).
    std::string trace = temp_path("latency.trace");
    LatencyTail lt = record_latency_tail(trace, "traced");
    const std::vector<double>& own = lt.own;
    const std::string& json = lt.json;
    const size_t handle = lt.handle;
    CHECK(json_number(json, "calls", handle) == 50);
    CHECK(json_number(json, "p50", handle) == prof::test::approx(own[24]).epsilon(0.02));
    CHECK(json_number(json, "p99", handle) == prof::test::approx(own[49]).epsilon(0.02));
    CHECK(json_number(json, "max", handle) == prof::test::approx(own[49]).epsilon(0.02));
    CHECK(json_number(json, "p50", handle) == prof::test::approx(200e-6).epsilon(0.1));
    CHECK(json_number(json, "p99", handle) > 4.5e-3);
    // The tail: one call, the slowest. Unless a loaded machine made another call slower still
    // (the program's own clock says which), it is the call that rebuilt, and most of its time
    // was in rebuild, which the others never call.
    size_t tail = json.find("\"tail\": {\"calls\": 1,", handle);
    REQUIRE(tail != std::string::npos);
    const double rebuilding =
        std::stod(lt.run_out.substr(lt.run_out.rfind('\n', lt.run_out.size() - 2) + 1));
    auto t = run({PROFREPORT, "latency", "--detail", "2", trace});
    REQUIRE(t.exit_code == 0);
    CHECK(t.out.find("its tail, the slowest 1 call (from ") != std::string::npos);
    if (rebuilding * 1e-9 < own[49]) {
        MESSAGE("a call preempted past the rebuilding one: the tail is that call");
    } else {
        size_t rebuild =
            json.find("\"callees\": [{\"name\": \"(anonymous namespace)::rebuild()\"", tail);
        CHECK(rebuild != std::string::npos);
        CHECK(json_number(json, "slow_share", tail) > 0.9);
        CHECK(json_number(json, "typical_share", tail) == 0);
        // The text names it in the tail's table.
        CHECK(t.out.find("((anonymous namespace)::rebuild())") != std::string::npos);
    }

    auto csv = run({PROFREPORT, "latency", "--format", "csv", trace});
    CHECK(csv.exit_code == 2);
    CHECK(csv.err.find("latency prints text or --format json") != std::string::npos);
}

TEST_CASE("latency of counted calls: the timed paths' buckets within 1/16, max and tail exact") {
    // The default recording counts calls without a clock per call (here from the start,
    // --time sampled); the paths whose calls last PROF_LATENCY_MIN (1 us) or more on average
    // have each call timed into log-linear buckets (format 1.13). Every path of this program
    // qualifies: handle 49 x 200 us and 1 x 5 ms, rebuild once (4.8 ms).
    std::string trace = temp_path("latency-counted.trace");
    LatencyTail lt = record_latency_tail(trace, "sampled");
    const std::vector<double>& own = lt.own;
    const std::string& json = lt.json;
    const size_t handle = lt.handle;
    CHECK(json_number(json, "untimed") == 0);
    CHECK(json_number(json, "calls", handle) == 50); // every call, counted exactly
    CHECK(json_number(json, "bound", handle) == 0.0625);
    // A bucket is at most 1/8 of its lower bound wide, its value the middle: within 1/16, and
    // 2% more for the hooks (which these figures do not subtract) and the two clocks.
    CHECK(json_number(json, "p50", handle) == prof::test::approx(own[24]).epsilon(0.0825));
    CHECK(json_number(json, "p50", handle) == prof::test::approx(200e-6).epsilon(0.1));
    // The 50th of 50 calls is the longest, which the record keeps exactly.
    CHECK(json_number(json, "p99", handle) == prof::test::approx(own[49]).epsilon(0.02));
    CHECK(json_number(json, "max", handle) == prof::test::approx(own[49]).epsilon(0.02));
    CHECK(json_number(json, "mean", handle) * 50 ==
          prof::test::approx(std::accumulate(own.begin(), own.end(), 0.0)).epsilon(0.02));
    size_t rebuild = json.find("\n    {\"name\": \"(anonymous namespace)::rebuild()\"");
    REQUIRE(rebuild != std::string::npos);
    CHECK(json_number(json, "calls", rebuild) == 1);
    // The tail of counted calls is the slowest call, and the callees whose own slowest call lies
    // inside it: rebuild, unless a loaded machine made another call slower still.
    size_t tail = json.find("\"tail\": {\"calls\": 1,", handle);
    REQUIRE(tail != std::string::npos);
    CHECK(json.find("\"slowest_only\": true", tail) < json.find("\"callees\"", tail));
    const double rebuilding =
        std::stod(lt.run_out.substr(lt.run_out.rfind('\n', lt.run_out.size() - 2) + 1));
    if (rebuilding * 1e-9 < own[49]) {
        MESSAGE("a call preempted past the rebuilding one: the tail is that call");
    } else {
        CHECK(json.find("\"callees\": [{\"name\": \"(anonymous namespace)::rebuild()\"", tail) !=
              std::string::npos);
        // Its time in that call: its one call, at least the 4.8 ms it spins, exact (no bucket).
        const double in_rebuild = json_number(json, "slow_mean", tail);
        CHECK(in_rebuild >= 4.8e-3);
        CHECK(in_rebuild == prof::test::approx(json_number(json, "max", rebuild)).epsilon(1e-6));
        CHECK(json_number(json, "slow_share", tail) ==
              prof::test::approx(in_rebuild / json_number(json, "max", handle)).epsilon(0.001));
    }
    auto t = run({PROFREPORT, "latency", "--detail", "1", trace});
    REQUIRE(t.exit_code == 0);
    CHECK(t.out.find("Counted calls: timed only on the call paths whose calls last "
                     "PROF_LATENCY_MIN (1.000 us) on average (0 other calls not timed)") !=
          std::string::npos);
    CHECK(t.out.find("its slowest call (") != std::string::npos);

    // The HTML report carries each function's distribution and draws it when selected.
    std::string html = temp_path("latency-counted.html");
    auto page = run({PROFREPORT, "--html", html, trace});
    REQUIRE_MESSAGE(page.exit_code == 0, page.err);
    std::string text = slurp(html);
    size_t in_page = text.find("\"name\":\"(anonymous namespace)::handle(int, int)\"");
    REQUIRE(in_page != std::string::npos);
    CHECK(text.find("\"lat\":{\"calls\":50,\"untimed\":0,\"bound\":0.0625,", in_page) <
          text.find('\n', in_page));
    std::string dom = selftest_dom(html);
    if (!dom.empty()) {
        std::smatch bars;
        REQUIRE(std::regex_search(dom, bars, std::regex(R"re(data-histogram="(\d+)")re")));
        CHECK(std::stoi(bars[1]) >= 1);
        CHECK(dom.find("per-call latency") != std::string::npos);
    }

    // PROF_TIME=auto, counting from the first sample on: the calls before it exact, those
    // after it bucketed, and a call open at the switch in neither (it has no time of its own,
    // not its entry to the thread's end).
    LatencyTail sw =
        record_latency_tail(temp_path("latency-switched.trace"), "auto", "PROF_COUNT_AFTER=1");
    CHECK(json_number(sw.json, "calls", sw.handle) + json_number(sw.json, "untimed", sw.handle) ==
          50);
    CHECK(json_number(sw.json, "max", sw.handle) <= sw.own[49] * 1.02);

    // With PROF_LATENCY_MIN=0 nothing is timed: one line, status 1.
    std::string untimed = temp_path("latency-untimed.trace");
    REQUIRE(run({"/usr/bin/env", "PROF_LATENCY_MIN=0", PROFRUN, "-q", "--time", "sampled", "-o",
                 untimed, "--", PROF_TEST_LATENCY_TAIL})
                .exit_code == 0);
    auto refused = run({PROFREPORT, "latency", untimed});
    CHECK(refused.exit_code == 1);
    CHECK(refused.err.find("no call was timed") != std::string::npos);
    CHECK(lines(refused.err) == 1);
}

// The page of one thread (--thread TID): each function's latency is of that thread's calls, as
// its table is. Traced: every call of step is timed (1000 to 4000 a worker).
TEST_CASE("html and latency --thread: each function's latency holds that thread's calls, as its "
          "table does") {
    std::string trace = temp_path("threads-traced.trace");
    auto rec = run({PROFRUN, "-q", "--time", "traced", "-o", trace, "--", PROF_SAMPLE_THREADS});
    REQUIRE_MESSAGE(rec.exit_code == 0, rec.err);
    auto all = run({PROFREPORT, "--format", "json", trace});
    REQUIRE(all.exit_code == 0);
    std::vector<std::string> tids;
    std::regex tid_re("\"tid\": (\\d+)");
    for (auto it = std::sregex_iterator(all.out.begin(), all.out.end(), tid_re);
         it != std::sregex_iterator(); ++it)
        tids.push_back((*it)[1]);
    REQUIRE(tids.size() == 5); // main and four workers
    const std::string step = "\"name\":\"step(unsigned long, unsigned long)\"";
    // The page's step: its table's ncalls and its latency's calls.
    auto page_step = [&](const std::vector<std::string>& extra) {
        std::string html = temp_path("threads-traced.html");
        std::vector<std::string> args = {PROFREPORT, "--html", html};
        args.insert(args.end(), extra.begin(), extra.end());
        args.push_back(trace);
        auto page = run(args);
        REQUIRE_MESSAGE(page.exit_code == 0, page.err);
        std::string text = slurp(html);
        size_t at = text.find(step);
        if (at == std::string::npos) return std::make_pair(-1.0, -1.0);
        std::string row = text.substr(at, text.find('\n', at) - at);
        std::smatch n, lat;
        REQUIRE(std::regex_search(row, n, std::regex("\"ncalls\":(\\d+)")));
        REQUIRE(std::regex_search(row, lat, std::regex("\"lat\":\\{\"calls\":(\\d+)")));
        return std::make_pair(std::stod(n[1]), std::stod(lat[1]));
    };
    CHECK(page_step({}) == std::make_pair(10000.0, 10000.0));
    std::vector<double> per_thread;
    for (const std::string& tid : tids) {
        auto [ncalls, latency_calls] = page_step({"--thread", tid});
        CHECK(latency_calls == ncalls); // was 10000 on every page
        if (ncalls >= 0) per_thread.push_back(ncalls);
        // profreport latency --thread: the same calls.
        auto latency = run({PROFREPORT, "latency", "--thread", tid, "--format", "json", trace});
        REQUIRE_MESSAGE(latency.exit_code == 0, latency.err);
        std::smatch calls;
        bool listed = std::regex_search(
            latency.out, calls,
            std::regex(
                "\"name\": \"step\\(unsigned long, unsigned long\\)\"[^\n]*?\"calls\": (\\d+)"));
        CHECK(listed == (ncalls >= 0));
        if (listed) CHECK(std::stod(calls[1]) == ncalls);
    }
    std::sort(per_thread.begin(), per_thread.end());
    CHECK(per_thread == std::vector<double>{1000, 2000, 3000, 4000});
    auto unknown = run({PROFREPORT, "latency", "--thread", "1", trace});
    CHECK(unknown.exit_code == 1);
    CHECK(unknown.err.find("no thread with tid 1 in the trace") != std::string::npos);
}

TEST_CASE("diff --metric p99: the gate on the tail, with each p99's own interval") {
    // Every 25th of handle's 400 calls takes 20 ms in the base runs and 60 ms in the new ones
    // (its p99, whose interval then lies among the 16 slow calls: 400 calls bound it, 368 are
    // needed), the others 200 us in both; slow calls long enough that a preemption or two of a
    // busy machine does not move them much. On
    // a loaded machine preempted calls widen the intervals: a pair the noise leaves undecided is
    // recorded again, twice at most.
    auto traced = [](const std::string& name, const char* rebuild_us) {
        std::string t = temp_path(name);
        auto r = run({PROFRUN, "-q", "--time", "traced", "-o", t, "--", PROF_TEST_LATENCY_TAIL,
                      "400", rebuild_us, "25"});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        return t;
    };
    std::vector<std::string> base, next;
    RunResult slower;
    for (int attempt = 0; attempt < 3; ++attempt) {
        base.clear();
        next.clear();
        for (int i = 0; i < 3; ++i) {
            base.push_back(traced(fmt::format("tail-base-{}-{}.trace", i, attempt), "19800"));
            next.push_back(traced(fmt::format("tail-new-{}-{}.trace", i, attempt), "59800"));
        }
        std::vector<std::string> argv{PROFREPORT, "diff", "--metric", "p99", "--fail-above", "50"};
        argv.insert(argv.end(), base.begin(), base.end());
        argv.push_back("--vs");
        argv.insert(argv.end(), next.begin(), next.end());
        slower = run(argv);
        if (slower.exit_code == 3 &&
            slower.err.find("((anonymous namespace)::handle(int, int)) regressed by") !=
                std::string::npos)
            break;
        MESSAGE("attempt " << attempt << ": exit " << slower.exit_code << "\n"
                           << slower.out << slower.err);
    }
    CHECK(slower.exit_code == 3);
    CHECK(slower.err.find("((anonymous namespace)::handle(int, int)) regressed by") !=
          std::string::npos);
    CHECK(slower.out.find("p50        (new)          p99        (new)") != std::string::npos);
    // The same runs on both sides: no change, exit 0.
    auto same = run({PROFREPORT, "diff", "--metric", "p99", "--fail-above", "0", base[0], base[1],
                     "--vs", base[0], base[1]});
    CHECK_MESSAGE(same.exit_code == 0, same.out << same.err);
    CHECK(same.out.find("+0.0%") != std::string::npos);
    // JSON names the columns by what they hold.
    auto j = run({PROFREPORT, "diff", "--metric", "p99", "--format", "json", base[0], next[0]});
    REQUIRE(j.exit_code == 0);
    CHECK(j.out.find("\"metric\": \"p99\"") != std::string::npos);
    CHECK(j.out.find("\"p99\": [") != std::string::npos);
    // No pictures of tails; no tails without every call's time.
    auto pictures = run(
        {PROFREPORT, "diff", "--metric", "p99", "--html", temp_path("t.html"), base[0], next[0]});
    CHECK(pictures.exit_code == 2);
    CHECK(pictures.err.find("--metric p99 draws none") != std::string::npos);
    std::string counted = temp_path("tail-counted.trace");
    REQUIRE(run({PROFRUN, "-q", "--time", "sampled", "-o", counted, "--", PROF_TEST_LATENCY_TAIL})
                .exit_code == 0);
    auto refused = run({PROFREPORT, "diff", "--metric", "p99", base[0], counted});
    CHECK(refused.exit_code == 1);
    CHECK(refused.err.find("--metric p99 needs them") != std::string::npos);
}

TEST_CASE("--threads --format json and csv: one document, each thread with its tid") {
    auto info = run({PROFREPORT, "--info", threads_trace()});
    REQUIRE(info.exit_code == 0);
    const size_t nthreads = count(info.out, "\nthread:");
    REQUIRE(nthreads > 1);
    std::string lt = trace_of("views-threads-lines.trace", {PROF_TEST_LINES});
    std::string python = which("python3");
    // One JSON object: a `threads` array, each entry with its tid and the thread's own fields.
    const std::string check = "import json,sys\n"
                              "d = json.load(open(sys.argv[1]))\n"
                              "t = d['threads']\n"
                              "print(len(t), len({x['tid'] for x in t}), "
                              "all(sys.argv[2] in x and x['tid'] > 0 for x in t))\n";
    for (auto [trace, view, key, threads] :
         {std::tuple{threads_trace(), "", "functions", nthreads},
          std::tuple{lt, "--lines", "lines", size_t(3)}}) { // lines: main and two workers
        std::vector<std::string> argv{PROFREPORT, "--threads", "--format", "json", trace};
        if (*view) argv.insert(argv.begin() + 1, view);
        auto r = run(argv);
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.out.rfind("{\n  \"threads\": [", 0) == 0);
        CHECK(count(r.out, "\n}\n") == 1); // one document, ended once
        if (python.empty()) {
            MESSAGE("skipped parsing the JSON: no python3");
            continue;
        }
        std::string file = temp_path(std::string("threads-") + key + ".json");
        std::ofstream(file) << r.out;
        auto parsed = run({python, "-c", check, file, key});
        CHECK_MESSAGE(parsed.out ==
                          std::to_string(threads) + " " + std::to_string(threads) + " True\n",
                      parsed.out, parsed.err);
    }
    // Without --threads the single document keeps its shape.
    auto single = run({PROFREPORT, "--format", "json", threads_trace()});
    CHECK(single.out.rfind("{\n  \"traces\": [", 0) == 0);

    // CSV: one header with a leading tid column, every row starting with a thread's tid.
    auto csv = run({PROFREPORT, "--threads", "--format", "csv", threads_trace()});
    REQUIRE(csv.exit_code == 0);
    CHECK(csv.out.rfind("tid,ncalls,primitive_calls,tottime,", 0) == 0);
    CHECK(count(csv.out, "ncalls,") == 1);
    std::istringstream in(csv.out);
    std::string line;
    std::getline(in, line);
    std::set<std::string> tids;
    size_t rows = 0;
    while (std::getline(in, line)) {
        ++rows;
        std::string tid = line.substr(0, line.find(','));
        CHECK_MESSAGE(!tid.empty(), line);
        CHECK_MESSAGE(tid.find_first_not_of("0123456789") == std::string::npos, line);
        tids.insert(tid);
    }
    CHECK(rows > nthreads);
    CHECK(tids.size() == nthreads);
    auto lcsv = run({PROFREPORT, "--lines", "--threads", "--format", "csv", lt});
    CHECK(lcsv.out.rfind("tid,file,function,line,kind,hits,", 0) == 0);
    CHECK(count(lcsv.out, "file,function,") == 1);
}

TEST_CASE("--format csv for callers, callees and lines") {
    // The regexes match the full path: `\(fib` is the function, `fib` would match main too.
    auto callers = run({PROFREPORT, "--callers", "\\(fib", "--format", "csv", fib15()});
    CHECK(callers.exit_code == 0);
    CHECK(callers.out.rfind("function,function_file,function_line,caller,", 0) == 0);
    CHECK(callers.out.find("fib(int),") != std::string::npos);
    CHECK(lines(callers.out) == 3); // fib <- main, fib <- fib
    auto callees = run({PROFREPORT, "--callees", "\\(main\\)", "--format", "csv", fib15()});
    CHECK(callees.out.rfind("function,function_file,function_line,callee,", 0) == 0);
    CHECK(lines(callees.out) == 2);

    std::string lt = trace_of("views-lines.trace", {PROF_TEST_LINES});
    auto l = run({PROFREPORT, "--lines", "--format", "csv", lt});
    CHECK(l.exit_code == 0);
    CHECK(l.out.rfind("file,function,line,kind,hits,time,rss_samples,rss_increment,rss_last,"
                      "heap_increment\n",
                      0) == 0);
    CHECK(lines(l.out) > 2);
}

TEST_CASE("views: bad usage and unwritable outputs give one line and a non-zero exit") {
    auto one_line = [](const prof::test::RunResult& r) { return lines(r.err) == 1; };
    auto svg = run({PROFREPORT, "--flamegraph", "/nonexistent-dir/x.svg", fib15()});
    CHECK(svg.exit_code == 1);
    CHECK(one_line(svg));
    CHECK(svg.err.find("cannot write /nonexistent-dir/x.svg") != std::string::npos);
    for (const char* kind : {"chrome", "speedscope", "collapsed", "callgrind"}) {
        auto r = run({PROFREPORT, "--export", kind, "-o", "/nonexistent-dir/x", fib15()});
        CHECK_MESSAGE(r.exit_code == 1, kind);
        CHECK(one_line(r));
    }
    auto html = run({PROFREPORT, "--html", "/nonexistent-dir/x.html", fib15()});
    CHECK(html.exit_code == 1);
    CHECK(one_line(html));
    // A device that is always full, made here (never /dev/full itself): one line naming it,
    // and the node stays.
    std::string node = temp_path("views-full");
    if (mknod(node.c_str(), S_IFCHR | 0600, makedev(1, 7)) == 0) {
        auto full = run({PROFREPORT, "--export", "chrome", "-o", node, fib15()});
        CHECK(full.exit_code == 1);
        CHECK(one_line(full));
        CHECK(full.err.find("cannot write " + node + ": No space left on device") !=
              std::string::npos);
        CHECK(std::filesystem::is_character_file(node));
    } else {
        MESSAGE("skipped the full-device check: mknod needs privileges");
    }
    // A missing trace leaves no half-written output behind.
    std::string partial = temp_path("partial.json");
    auto missing = run({PROFREPORT, "--export", "chrome", "-o", partial, temp_path("nope.trace")});
    CHECK(missing.exit_code == 1);
    CHECK(one_line(missing));
    CHECK_FALSE(std::filesystem::exists(partial));

    for (std::vector<std::string> bad : {
             std::vector<std::string>{"--export", "pdf"},
             {"--export", "chrome", "--from", "soon"},
             {"--export", "chrome", "--from", "2s", "--to", "1s"},
             {"--tree", "--from", "1s"},
             {"--depth", "2"},
             {"--fail-above", "5"},
             {"--tree", "--flamegraph", "x.svg"},
             {"--tree", "--format", "json"},
         }) {
        bad.insert(bad.begin(), PROFREPORT);
        bad.push_back(fib15());
        auto r = run(bad);
        CHECK_MESSAGE(r.exit_code == 2, bad[1], " ", bad[2]);
        CHECK(one_line(r));
    }
    auto lone = run({PROFREPORT, "diff", fib15()});
    CHECK(lone.exit_code == 2);
    CHECK(lone.err.find("diff compares two traces") != std::string::npos);

    auto help = run({PROFREPORT, "--help"});
    for (const char* opt : {"--tree", "--flamegraph", "--html", "--export FORMAT", "speedscope",
                            "callgrind", "--min-duration", "profreport diff", "--fail-above"})
        CHECK_MESSAGE(help.out.find(opt) != std::string::npos, opt);
}
