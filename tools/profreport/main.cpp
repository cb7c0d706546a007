// profreport: reads libprof traces and prints the cProfile-style table and related views.
#include "analysis/model/lines.hpp"
#include "render/lines.hpp"
#include "render/memory_report.hpp"
#include "analysis/engine/session.hpp"
#include "analysis/model/profile.hpp"
#include "render/report.hpp"
#include "analysis/model/call_tree.hpp"
#include "analysis/model/diff.hpp"
#include "render/diff.hpp"
#include "render/render.hpp"
#include "render/durations.hpp"
#include "render/timeline.hpp"
#include "common/tool_log.hpp"
#include "reader/trace_reader.hpp"

#include <prof/version.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace {

using namespace prof;

constexpr const char* kUsage = R"(usage: profreport [options] TRACE [TRACE...]
       profreport diff [options] BASE NEW       (or: BASE... --vs NEW...)

Prints the cProfile-style table of one or more libprof traces (several traces are merged,
like pstats' Stats.add).

options:
  -s, --sort KEY        order rows by KEY: cumtime (default), tottime, ncalls, pcalls, name,
                        file, line, nfl, stdname; pstats aliases work too (cumulative, time,
                        calls, filename, module)
  -n, --limit N         print at most N rows (0: no limit)
  -m, --match REGEX     only functions whose `path:line(function)` (full path) matches REGEX
      --lines           line_profiler's view: per function with PROF_LINE/PROF_SCOPE/
                        PROF_FUNCTION sites, hits and time per source line
      --memory          the memory report of a `profrun --mem` trace: allocation calls,
                        peak heap and RSS, leaks, temporaries, top sites with stacks
                        (--limit sites per section); with --lines, memory_profiler's
                        view (Mem usage, Increment, Occurrences per line)
      --plot FILE       with --memory (without --lines): draw heap and RSS over time into
                        FILE (SVG)
      --unit SECONDS    timer unit of --lines (default 1e-9)
      --source-dir DIR  also look for source files in DIR (repeatable)
      --callers REGEX   who called the matching functions (pstats print_callers)
      --callees REGEX   what the matching functions called (pstats print_callees)
      --threads         one table per thread instead of one merged table (JSON: one
                        document with a `threads` array; CSV: one header and a `tid` column)
      --thread TID      only the thread with this kernel thread id
  -f, --format FORMAT   text (default), json or csv
  -o, --output FILE     write the report to FILE instead of standard output; FILE (like
                        the files of --flamegraph, --html and --plot) is replaced only once
                        the whole report was written, and never when it is one of the traces
      --no-compensation do not subtract the runtime's own cost per call and per marked line
                        (measured when the program started) from the times
      --full-paths      keep directories in file names
      --precision N     decimals in time columns (default 3)
      --info            describe the trace (process, threads, modules, clock) and stop
      --log-format F    text (default) or json for messages on standard error
  -h, --help            show this help
  -V, --version         show the version

views and exports (one at a time; --thread, --threads, -o and --format csv apply):
      --tree            the call tree in the terminal (uftrace graph-like); --format csv
                        gives one row per call path (id, parent, calls, total_ns, self_ns)
      --depth N         with --tree: down to depth N
      --min-percent P   with --tree: hide call paths under P% of the total time
      --flamegraph FILE self-contained interactive SVG (hover, click to zoom, Ctrl-F to
                        search); widths are exact nanoseconds of each call path; --threads
                        splits by thread, --icicle puts the root on top, --title TEXT,
                        --min-width PX leaves out narrower frames (default 0.1)
      --html FILE       one self-contained page (no network): sortable pstats table,
                        callers/callees on click, icicle of the call tree, line tables;
                        for a `profrun --mem` trace also the memory summary, heap/RSS
                        plot and sortable allocation sites with their stacks
      --flamegraph FILE --memory [--weight W]
                        allocation flame graph of a `profrun --mem` trace: widths are the
                        sites' bytes (default), allocations, leaked bytes or peak (bytes
                        live at the peak heap), W one of bytes, allocations, leaked, peak
      --export FORMAT   to -o FILE or standard output, FORMAT one of:
                          chrome      Chrome Trace Event JSON (Perfetto UI, chrome://tracing);
                                      heap and RSS as counters for `profrun --mem` traces
                          speedscope  speedscope's evented profiles, one per thread
                          collapsed   folded stacks `a;b;c <self ns>` (flamegraph.pl, inferno)
                          callgrind   callgrind format, event `ns` (KCachegrind, callgrind_annotate)
      --from T, --to T  chrome/speedscope: only activations overlapping [T, T'] after the
                        trace started, clipped to it (T like 1.5s, 200ms, 30us, 100ns)
      --min-duration T  chrome/speedscope: drop activations shorter than T

diff (per-function ncalls, tottime and cumtime, mean per run of each set):
      --fail-above PCT  exit with status 3 when the total or a function (at least
                        --min-share of the total) regressed by more than PCT percent
      --metric KEY      cumtime (default), tottime or ncalls: what is compared and sorted
      --min-share PCT   functions under PCT% of the total never fail the gate (default 1)
      --vs              separates the base traces from the new ones
      --memory          compare allocation sites instead (matched by their stacks' function
                        names): allocations, bytes, bytes live at the peak and leaked bytes,
                        and the totals; --fail-above checks all four (--weight W: only W, which
                        also orders the sites)

Exit status: 0 on success, 1 when a trace cannot be read or the output cannot be written,
2 on bad usage, 3 when diff --fail-above finds a regression.
)";

// ---- views and exports: options ------------------------------------------------------------
struct ViewArgs {
    bool diff = false, tree = false, icicle = false;
    double min_width = 0.1;
    size_t vs = SIZE_MAX; // index of the first new trace of diff's `--vs`
    std::string flamegraph, html, exporter, title;
    std::optional<analysis::views::MemoryWeight> weight; // --weight (with --memory)
    analysis::views::TreeOptions tree_opts;
    analysis::views::TimelineOptions timeline;
    analysis::views::DiffOptions diff_opts;
    std::vector<std::string> diff_only; // options given that only diff takes
    bool active() const {
        return diff || tree || !flamegraph.empty() || !html.empty() || !exporter.empty();
    }
};

struct Args {
    analysis::TableOptions table;
    std::vector<std::string> traces;
    std::string callers, callees, format = "text", output;
    std::optional<uint32_t> thread;
    bool threads = false, info = false, lines = false, memory = false, raw = false;
    bool limit_given = false, sort_given = false, unit_given = false;
    std::string plot;
    analysis::LineOptions line;
    ViewArgs view; // views and exports
};

struct UsageError {
    std::string msg;
};

uint64_t parse_number(const std::string& opt, const std::string& v) {
    char* end = nullptr;
    errno = 0;
    unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end || errno || v[0] == '-')
        throw UsageError{fmt::format("{} expects a non-negative whole number, got '{}'", opt, v)};
    return n;
}

// ---- views and exports: parsing ------------------------------------------------------------
double parse_percent(const std::string& opt, std::string v) {
    if (!v.empty() && v.back() == '%') v.pop_back();
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || !(d >= 0) || d > 1e9)
        throw UsageError{fmt::format("{} expects a percentage such as 5 or 5%, got '{}'", opt, v)};
    return d;
}

uint64_t parse_time(const std::string& opt, const std::string& v) {
    uint64_t ns = 0;
    if (!analysis::views::parse_duration(v, ns))
        throw UsageError{
            fmt::format("{} expects a time such as 1.5s, 200ms, 30us or 100ns, got '{}'", opt, v)};
    return ns;
}

// Takes the views' options out of the command line; true when `arg` was one of them.
template <typename Next>
bool parse_view_option(Args& a, int i, const std::string& arg, Next next) {
    ViewArgs& v = a.view;
    if (i == 1 && arg == "diff")
        v.diff = true;
    else if (arg == "--vs")
        v.vs = a.traces.size(), v.diff_only.push_back(arg);
    else if (arg == "--tree")
        v.tree = true;
    else if (arg == "--depth")
        v.tree_opts.max_depth = uint32_t(parse_number(arg, next()));
    else if (arg == "--min-percent")
        v.tree_opts.min_percent = parse_percent(arg, next());
    else if (arg == "--flamegraph")
        v.flamegraph = next();
    else if (arg == "--icicle")
        v.icicle = true;
    else if (arg == "--min-width") {
        std::string w = next();
        char* end = nullptr;
        v.min_width = std::strtod(w.c_str(), &end);
        if (w.empty() || *end || !(v.min_width >= 0) || v.min_width > 1e6)
            throw UsageError{fmt::format("--min-width expects pixels such as 0.1, got '{}'", w)};
    } else if (arg == "--title")
        v.title = next();
    else if (arg == "--html")
        v.html = next();
    else if (arg == "--export") {
        v.exporter = next();
        if (v.exporter == "perfetto") v.exporter = "chrome";
        if (v.exporter != "chrome" && v.exporter != "speedscope" && v.exporter != "collapsed" &&
            v.exporter != "callgrind")
            throw UsageError{fmt::format("unknown export format '{}' (expected chrome, speedscope, "
                                         "collapsed or callgrind)",
                                         v.exporter)};
    } else if (arg == "--weight") { // allocation flame graph and memory diff
        std::string w = next();
        v.weight = analysis::views::parse_memory_weight(w);
        if (!v.weight)
            throw UsageError{fmt::format(
                "unknown weight '{}' (expected bytes, allocations, leaked or peak)", w)};
    } else if (arg == "--from")
        v.timeline.from_ns = parse_time(arg, next());
    else if (arg == "--to")
        v.timeline.to_ns = parse_time(arg, next());
    else if (arg == "--min-duration")
        v.timeline.min_duration_ns = parse_time(arg, next());
    else if (arg == "--fail-above") {
        v.diff_opts.fail_above = parse_percent(arg, next());
        v.diff_only.push_back(arg);
    } else if (arg == "--min-share") {
        v.diff_opts.min_share = parse_percent(arg, next());
        v.diff_only.push_back(arg);
    } else if (arg == "--metric") {
        std::string m = next();
        auto metric = analysis::views::parse_diff_metric(m);
        if (!metric)
            throw UsageError{
                fmt::format("unknown metric '{}' (expected cumtime, tottime or ncalls)", m)};
        v.diff_opts.metric = *metric;
        v.diff_only.push_back(arg);
    } else
        return false;
    return true;
}

void check_view_args(Args& a) {
    ViewArgs& v = a.view;
    int views = v.diff + v.tree + !v.flamegraph.empty() + !v.html.empty() + !v.exporter.empty();
    if (views > 1)
        throw UsageError{"give one of diff, --tree, --flamegraph, --html and --export at a time"};
    // Memory views: the allocation flame graph and the memory diff.
    const bool memory_view = a.memory && !a.lines && (!v.flamegraph.empty() || v.diff);
    if (views && a.memory && !memory_view)
        throw UsageError{"--memory applies to --flamegraph and diff (the HTML report and "
                         "--export chrome include allocations when the trace has them)"};
    if (v.weight && !memory_view)
        throw UsageError{"--weight applies to --flamegraph --memory and diff --memory"};
    if (memory_view && (a.threads || a.thread))
        throw UsageError{"allocation sites are per process: --threads and --thread do not apply "
                         "to --memory views"};
    if (memory_view && v.diff &&
        std::find(v.diff_only.begin(), v.diff_only.end(), "--metric") != v.diff_only.end())
        throw UsageError{"diff --memory takes --weight, not --metric"};
    if (views && (a.info || a.lines || (a.memory && !memory_view) || !a.callers.empty() ||
                  !a.callees.empty()))
        throw UsageError{"--info, --lines, --memory, --callers and --callees are not views of "
                         "diff, --tree, --flamegraph, --html or --export"};
    if (!v.diff && !v.diff_only.empty())
        throw UsageError{fmt::format("{} is an option of profreport diff", v.diff_only.front())};
    if (v.timeline.from_ns > v.timeline.to_ns) throw UsageError{"--from is later than --to"};
    bool timeline = v.exporter == "chrome" || v.exporter == "speedscope";
    if (!timeline &&
        (v.timeline.from_ns || v.timeline.to_ns != UINT64_MAX || v.timeline.min_duration_ns))
        throw UsageError{"--from, --to and --min-duration apply to --export chrome and speedscope"};
    if (!v.tree && (v.tree_opts.max_depth || v.tree_opts.min_percent > 0))
        throw UsageError{"--depth and --min-percent apply to --tree"};
    if (v.flamegraph.empty() && (v.icicle || v.min_width != 0.1))
        throw UsageError{"--icicle and --min-width apply to --flamegraph"};
    if (v.flamegraph.empty() && v.html.empty() && !v.title.empty())
        throw UsageError{"--title applies to --flamegraph and --html"};
    if (v.diff) {
        size_t split = v.vs == SIZE_MAX ? 1 : v.vs;
        if ((v.vs == SIZE_MAX && a.traces.size() != 2) || split == 0 || split >= a.traces.size())
            throw UsageError{
                "diff compares two traces (BASE NEW), or two sets (BASE... --vs NEW...)"};
        v.vs = split;
    }
    if (a.format == "json" && (v.tree || !v.exporter.empty()))
        throw UsageError{"--format json is not available for --tree and --export"};
}

// Options that the report given would silently ignore are refused, one line each.
void check_report_args(const Args& a) {
    const ViewArgs& v = a.view;
    const bool view = v.active();
    const bool memory_report = a.memory && !a.lines && !view; // the --memory text/JSON report
    if (!a.plot.empty() && !memory_report)
        throw UsageError{"--plot applies to --memory (not with --lines or a view)"};
    if (a.unit_given && !a.lines) throw UsageError{"--unit applies to --lines"};
    if (!a.line.source_dirs.empty() && !a.lines && v.html.empty())
        throw UsageError{"--source-dir applies to --lines and --html"};
    if (a.lines && (!a.callers.empty() || !a.callees.empty()))
        throw UsageError{"--callers and --callees do not apply to --lines"};
    if (memory_report) {
        if (a.threads || a.thread)
            throw UsageError{"allocation sites are per process: --threads and --thread do not "
                             "apply to --memory (they do to --lines --memory)"};
        if (!a.table.filter.empty())
            throw UsageError{"--match does not apply to --memory (it does to --lines --memory)"};
        if (!a.callers.empty() || !a.callees.empty())
            throw UsageError{"--callers and --callees do not apply to --memory"};
        if (a.sort_given)
            throw UsageError{"--sort does not apply to --memory (each section has its order)"};
        if (a.format == "csv") throw UsageError{"--memory prints text or --format json"};
    }
    if (a.info && (a.format != "text" || a.lines || a.memory || a.threads || a.thread ||
                   !a.callers.empty() || !a.callees.empty()))
        throw UsageError{"--info describes the trace as text and takes no other view"};
    if (!view && a.format == "json" && (!a.callers.empty() || !a.callees.empty()))
        throw UsageError{"--format json is not available for --callers and --callees"};
    if (!view && a.format == "csv" && !a.callers.empty() && !a.callees.empty())
        throw UsageError{"--format csv takes one of --callers and --callees at a time"};
    if (a.format != "text" && (!v.flamegraph.empty() || !v.html.empty() || !v.exporter.empty()))
        throw UsageError{"--format does not apply to --flamegraph, --html and --export (each "
                         "has its own format)"};
    if (!a.output.empty() && (!v.flamegraph.empty() || !v.html.empty()))
        throw UsageError{"--flamegraph and --html take their file: -o does not apply"};
}

// An output that is one of the traces would destroy it; two outputs on one file, each other.
void check_outputs(const Args& a) {
    const std::pair<const char*, std::string> outs[] = {{"-o", a.output},
                                                        {"--flamegraph", a.view.flamegraph},
                                                        {"--html", a.view.html},
                                                        {"--plot", a.plot}};
    auto same = [](const struct stat& x, const struct stat& y) {
        return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
    };
    for (size_t i = 0; i < std::size(outs); ++i) {
        const auto& [opt, path] = outs[i];
        if (path.empty() || path == "-") continue;
        struct stat so {};
        bool exists = ::stat(path.c_str(), &so) == 0;
        for (const std::string& t : a.traces) {
            struct stat st {};
            if (t == path || (exists && ::stat(t.c_str(), &st) == 0 && same(so, st)))
                throw UsageError{
                    fmt::format("{} {} is the trace {}: refusing to overwrite it", opt, path, t)};
        }
        for (size_t j = 0; j < i; ++j) {
            const auto& [opt2, path2] = outs[j];
            if (path2.empty() || path2 == "-") continue;
            struct stat s2 {};
            if (path2 == path || (exists && ::stat(path2.c_str(), &s2) == 0 && same(so, s2)))
                throw UsageError{fmt::format("{} and {} name the same file", opt2, opt)};
        }
    }
}

Args parse(int argc, char** argv, tools::ToolLog& log) {
    Args a;
    bool only_files = false;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        std::string value;
        bool has_inline = false;
        if (!only_files && arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
            value = arg.substr(arg.find('=') + 1);
            arg = arg.substr(0, arg.find('='));
            has_inline = true;
        }
        auto next = [&]() -> std::string {
            if (has_inline) return value;
            if (i + 1 >= argc) throw UsageError{fmt::format("option {} needs a value", arg)};
            return argv[++i];
        };
        if (!only_files && parse_view_option(a, i, arg, next)) continue; // views and exports
        if (only_files || arg.empty() || arg[0] != '-' || arg == "-") {
            a.traces.push_back(arg);
        } else if (arg == "--") {
            only_files = true;
        } else if (arg == "-h" || arg == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (arg == "-V" || arg == "--version") {
            fmt::print("profreport {} (trace format {}.{})\n", PROF_VERSION_STRING,
                       format::kMajor, format::kMinor);
            std::exit(0);
        } else if (arg == "-s" || arg == "--sort") {
            std::string k = next();
            auto key = analysis::parse_sort_key(k);
            if (!key)
                throw UsageError{fmt::format("unknown sort key '{}' (expected cumtime, tottime, "
                                             "ncalls, pcalls, name, file, line, nfl or stdname)", k)};
            a.table.sort = *key;
            a.sort_given = true;
        } else if (arg == "-n" || arg == "--limit") {
            a.table.limit = parse_number(arg, next());
            a.limit_given = true;
        } else if (arg == "-m" || arg == "--match" || arg == "--filter") {
            a.table.filter = next();
        } else if (arg == "--callers") {
            a.callers = next();
        } else if (arg == "--callees") {
            a.callees = next();
        } else if (arg == "--threads") {
            a.threads = true;
        } else if (arg == "--thread") {
            a.thread = uint32_t(parse_number(arg, next()));
        } else if (arg == "-f" || arg == "--format") {
            a.format = next();
            if (a.format != "text" && a.format != "json" && a.format != "csv")
                throw UsageError{fmt::format("unknown format '{}' (expected text, json or csv)", a.format)};
        } else if (arg == "-o" || arg == "--output") {
            a.output = next();
        } else if (arg == "--no-compensation") {
            a.raw = true;
        } else if (arg == "--full-paths") {
            a.table.full_paths = true;
        } else if (arg == "--precision") {
            uint64_t n = parse_number(arg, next());
            if (n > 9) throw UsageError{"--precision takes 0 to 9"};
            a.table.precision = int(n);
        } else if (arg == "--lines") {
            a.lines = true;
        } else if (arg == "--memory") {
            a.memory = a.line.memory = true;
        } else if (arg == "--plot") {
            a.plot = next();
        } else if (arg == "--unit") {
            std::string v = next();
            char* end = nullptr;
            double u = std::strtod(v.c_str(), &end);
            if (v.empty() || *end || !(u > 0) || u > 1e3)
                throw UsageError{fmt::format("--unit expects seconds per unit such as 1e-6, got '{}'", v)};
            a.line.unit = u;
            a.unit_given = true;
        } else if (arg == "--source-dir") {
            a.line.source_dirs.push_back(next());
            struct stat st {};
            if (::stat(a.line.source_dirs.back().c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
                log.warn(
                    fmt::format("--source-dir {}: not a directory", a.line.source_dirs.back()));
        } else if (arg == "--info") {
            a.info = true;
        } else if (arg == "--log-format") {
            std::string f = next();
            if (f != "text" && f != "json")
                throw UsageError{fmt::format("unknown log format '{}' (expected text or json)", f)};
            log.json = f == "json";
        } else {
            throw UsageError{fmt::format("unknown option '{}' (see profreport --help)", arg)};
        }
    }
    if (a.traces.empty()) throw UsageError{"no trace given (see profreport --help)"};
    check_view_args(a);
    check_report_args(a);
    check_outputs(a);
    for (const std::string* re : {&a.table.filter, &a.callers, &a.callees}) {
        try {
            if (!re->empty()) std::regex check(*re);
        } catch (const std::regex_error& e) {
            throw UsageError{fmt::format("bad regular expression '{}': {}", *re, e.what())};
        }
    }
    return a;
}

void print_info(std::FILE* out, const analysis::Profile& p) {
    for (const reader::TraceInfo& t : p.traces) {
        auto meta = [&](const char* k) {
            auto it = t.meta.find(k);
            return it == t.meta.end() ? std::string("?") : reader::printable(it->second);
        };
        fmt::print(out, "trace:     {}\n", reader::printable(t.path));
        if (t.header.flags & format::kFilePacked)
            fmt::print(out, "format:    {}.{} packed ({} bytes, {} chunks of up to {} KiB; memory "
                            "times to {:.2f} us)\n",
                       t.header.major, t.header.minor, t.bytes, t.chunks,
                       t.header.chunk_size / 1024,
                       t.seconds(uint64_t(1) << t.header.memory_time_shift) * 1e6);
        else
            fmt::print(out, "format:    {}.{}  ({} bytes, {} chunks of {} KiB)\n", t.header.major,
                       t.header.minor, t.bytes, t.chunks, t.header.chunk_size / 1024);
        fmt::print(out, "process:   pid {} (parent {})  {}\n", t.header.pid, t.header.ppid, meta("cmdline"));
        fmt::print(out, "clock:     {} at {:.6f} GHz\n",
                   t.header.clock_kind == uint32_t(format::ClockKind::kTsc) ? "tsc" : "monotonic",
                   t.ticks_per_second / 1e9);
        fmt::print(out, "state:     {}\n", t.incomplete ? "incomplete: " + t.incomplete_reason : "complete");
        fmt::print(out, "symbols:   {}   modules: {}\n", t.symbols.size(), t.modules.size());
        for (const auto& [stream, th] : t.threads)
            fmt::print(out, "thread:    {} tid {} '{}' {} events{}{}\n", stream, th.tid,
                       reader::printable(th.name), th.events,
                       th.dropped ? fmt::format(", {} dropped", th.dropped) : "",
                       th.abandoned ? fmt::format(", {} frames abandoned", th.abandoned) : "");
        for (const reader::Module& m : t.modules)
            fmt::print(out, "module:    {:#x}-{:#x} {} {}{}\n", m.start, m.end,
                       reader::printable(m.path), m.build_id,
                       m.unload_ticks == UINT64_MAX
                           ? ""
                           : fmt::format("  unloaded at {:.6f} s",
                                         t.seconds(m.unload_ticks - t.header.start_ticks)));
        fmt::print(out, "\n");
    }
}

// "No marked lines" unless the counts may have been lost: before format 1.3 they were written
// when each thread ended, so a process that did not finish (killed, crashed) left none; since,
// only the hits that sample the resident set size are.
std::string no_lines_text(const analysis::Profile& p) {
    for (const reader::TraceInfo& t : p.traces) {
        if (t.finished && !t.incomplete) continue;
        if (t.header.major == 1 && t.header.minor < 3)
            return fmt::format(
                "No line counts in this trace: they are written when each thread ends, and {} "
                "is incomplete ({}).",
                reader::printable(t.path), t.incomplete_reason);
        return fmt::format("No marked lines in this trace. {} is incomplete ({}): the counts of "
                           "lines that sample the resident set size (PROF_LINE_RSS=1, the "
                           "memory profiler) are written when each thread ends.",
                           reader::printable(t.path), t.incomplete_reason);
    }
    return "No marked lines in this trace: mark code with PROF_LINE, PROF_SCOPE or "
           "PROF_FUNCTION (see <prof/prof.hpp>).";
}

// Under an empty pstats table: where the data of a trace without function calls is.
std::string no_calls_hint(const analysis::Profile& p, const analysis::Session& b) {
    bool lines = false;
    for (const reader::TraceInfo& t : p.traces) lines |= !t.lines.empty() || !t.sites.empty();
    std::vector<std::string> where;
    if (b.memory().present) where.push_back("its allocations: profreport --memory");
    if (lines) where.push_back("its marked lines: profreport --lines");
    if (where.empty()) return {};
    return fmt::format("No function calls in this trace (no code built with "
                       "-finstrument-functions ran); see {}.",
                       where.size() == 1 ? where[0] : where[0] + "; " + where[1]);
}

// One view of one profile (a thread's, or all threads merged): the line tables, callers or
// callees, or the pstats table, in the format asked for.
void print_view(std::FILE* out, const Args& a, const analysis::Profile& p,
                const std::string& title) {
    analysis::TableOptions o = a.table;
    o.title = title;
    if (a.lines) {
        if (!title.empty() && a.format == "text") fmt::print(out, "{}\n", reader::printable(title));
        analysis::LineOptions lo = a.line;
        // Relative source paths are tried against the directory the program ran in.
        for (const reader::TraceInfo& t : p.traces)
            if (auto cwd = t.meta.find("cwd"); cwd != t.meta.end())
                lo.source_dirs.push_back(cwd->second);
        auto tables = analysis::line_tables(p, a.table.filter);
        if (a.format == "json")
            analysis::print_line_json(out, tables);
        else if (a.format == "csv")
            analysis::views::print_lines_csv(out, tables);
        else if (tables.empty())
            fmt::print(out, "{}\n", no_lines_text(p));
        else
            analysis::print_line_tables(out, tables, lo);
    } else if (!a.callers.empty() || !a.callees.empty()) {
        if (!title.empty() && a.format != "csv") fmt::print(out, "{}\n", reader::printable(title));
        for (bool callees : {false, true}) {
            const std::string& filter = callees ? a.callees : a.callers;
            if (filter.empty()) continue;
            o.filter = filter;
            if (a.format == "csv")
                analysis::views::print_callers_csv(out, p, o.filter, callees);
            else
                analysis::print_callers(out, p, o, callees);
        }
    } else if (a.format == "json") {
        analysis::print_json(out, p, o);
    } else if (a.format == "csv") {
        analysis::print_csv(out, p, o);
    } else {
        analysis::print_table(out, p, o);
    }
}

// ---- output files --------------------------------------------------------------------------
// Where a report, view or plot goes: -o, --flamegraph, --html, --plot, or standard output ("" or
// "-"). A regular file (or a new one) is written to a temporary file in its directory that is
// renamed over it only once everything was written, so a failed run never truncates, removes or
// half-writes a file it did not create. Anything else (a device, a fifo, a terminal) is written
// in place and never removed. Every failure is one error line that names the path.
class Output {
  public:
    explicit Output(std::string path) : path_(std::move(path)) {}
    Output(const Output&) = delete;
    Output& operator=(const Output&) = delete;
    ~Output() { discard(); }

    std::string name() const { return stdout_path() ? "standard output" : path_; }
    std::FILE* file() const { return f_; }

    bool open(const tools::ToolLog& log) {
        if (stdout_path()) {
            f_ = stdout;
            return true;
        }
        struct stat st {};
        if (::stat(path_.c_str(), &st) == 0) {
            if (S_ISDIR(st.st_mode)) return fail(log, EISDIR);
            if (!S_ISREG(st.st_mode)) { // written in place: no O_TRUNC, no O_CREAT, never removed
                int fd = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
                if (fd < 0) return fail(log, errno);
                return wrap(log, fd);
            }
        } else if (errno != ENOENT) {
            return fail(log, errno);
        }
        // The file itself when the path is a symbolic link to one: the link stays.
        target_ = path_;
        if (char* real = ::realpath(path_.c_str(), nullptr)) {
            target_ = real;
            std::free(real);
        }
        std::string dir = ".", base = target_;
        if (size_t slash = target_.rfind('/'); slash != std::string::npos) {
            dir = slash ? target_.substr(0, slash) : "/";
            base = target_.substr(slash + 1);
        }
        for (int attempt = 0; attempt < 100 && !f_; ++attempt) {
            tmp_ = fmt::format("{}/.{}.{}-{}.tmp", dir, base, ::getpid(), attempt);
            int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (fd < 0) {
                if (errno == EEXIST) continue;
                int err = errno;
                tmp_.clear();
                return fail(log, err);
            }
            if (S_ISREG(st.st_mode)) (void)::fchmod(fd, st.st_mode & 07777); // keep its mode
            if (!wrap(log, fd)) {
                ::unlink(tmp_.c_str());
                tmp_.clear();
                return false;
            }
        }
        if (!f_) return fail(log, EEXIST);
        return true;
    }

    // Flushes, closes and puts the file in place; false (and one error line) on a write error.
    bool close(const tools::ToolLog& log) {
        if (!f_) return true;
        errno = 0;
        bool ok = std::fflush(f_) == 0 && !std::ferror(f_);
        int err = errno;
        if (f_ != stdout) {
            if (std::fclose(f_) != 0 && ok) ok = false, err = errno;
        }
        if (err_) err = err_; // the first failed write(2) says best what went wrong
        f_ = nullptr;
        if (ok && !tmp_.empty() && ::rename(tmp_.c_str(), target_.c_str()) != 0)
            ok = false, err = errno;
        if (ok) {
            tmp_.clear();
            return true;
        }
        discard();
        return fail(log, err ? err : EIO);
    }

    // After a failure: the temporary file goes, the target is left as it was.
    void discard() {
        if (f_ && f_ != stdout) std::fclose(f_);
        f_ = nullptr;
        if (!tmp_.empty()) ::unlink(tmp_.c_str());
        tmp_.clear();
    }

    // A write that threw (fmt reports a failed fwrite as std::system_error): whether it was
    // this output's, reported with its name.
    bool report_write_error(const tools::ToolLog& log, const std::system_error& e) {
        if (!f_ || !std::ferror(f_)) return false;
        discard();
        fail(log, err_ ? err_ : e.code().value() ? e.code().value() : EIO);
        return true;
    }

  private:
    // The stream writes through these, to keep the errno of the first write that failed: stdio
    // forgets it once its buffer is dropped.
    static ssize_t write_fd(void* self, const char* buf, size_t n) {
        auto* o = static_cast<Output*>(self);
        size_t done = 0;
        while (done < n) {
            ssize_t w = ::write(o->fd_, buf + done, n - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                if (!o->err_) o->err_ = w < 0 ? errno : EIO;
                return done ? ssize_t(done) : -1;
            }
            done += size_t(w);
        }
        return ssize_t(done);
    }
    static int close_fd(void* self) {
        auto* o = static_cast<Output*>(self);
        int r = ::close(o->fd_);
        if (r != 0 && !o->err_) o->err_ = errno;
        o->fd_ = -1;
        return r;
    }
    bool wrap(const tools::ToolLog& log, int fd) {
        fd_ = fd;
        f_ = ::fopencookie(this, "w", cookie_io_functions_t{nullptr, write_fd, nullptr, close_fd});
        if (f_) return true;
        int err = errno;
        ::close(fd);
        fd_ = -1;
        return fail(log, err);
    }

    bool stdout_path() const { return path_.empty() || path_ == "-"; }
    bool fail(const tools::ToolLog& log, int err) {
        log.error(fmt::format("cannot write {}: {}", name(), std::strerror(err)));
        return false;
    }

    std::string path_, target_, tmp_;
    std::FILE* f_ = nullptr;
    int fd_ = -1;
    int err_ = 0; // errno of the first failed write
};

// ---- views and exports: dispatch -----------------------------------------------------------
// "reading N%" on standard error while long traces are read, when it is a terminal; erased
// when the reading ends.
class ProgressLine {
  public:
    ProgressLine() : tty_(isatty(2)) {}
    ~ProgressLine() {
        if (shown_) std::fputs("\r\033[K", stderr);
    }
    analysis::ProgressFn callback() {
        if (!tty_) return {};
        return [this](const analysis::Progress& p) {
            if (p.fraction < 0)
                std::fprintf(stderr, "\rprofreport: reading %s: %llu M events",
                             reader::printable(*p.path).c_str(),
                             (unsigned long long)(p.events >> 20));
            else
                std::fprintf(stderr, "\rprofreport: reading %s: %3.0f%%",
                             reader::printable(*p.path).c_str(), 100 * p.fraction);
            shown_ = true;
        };
    }

  private:
    bool tty_, shown_ = false;
};

// One pass over the traces for every view of this run.
struct Reading {
    ProgressLine progress;
    std::unique_ptr<analysis::Session> session;
    Reading(const Args& a, const std::vector<std::string>& traces) {
        analysis::SessionOptions o;
        o.compensate = !a.raw;
        o.progress = progress.callback();
        session = std::make_unique<analysis::Session>(o);
        session->add_traces(traces);
    }
};

int run_view(const Args& a, tools::ToolLog& log) {
    namespace views = analysis::views;
    const ViewArgs& v = a.view;
    Output out{!v.flamegraph.empty() ? v.flamegraph : !v.html.empty() ? v.html : a.output};
    try {
        if (v.exporter == "chrome" || v.exporter == "speedscope") {
            // Streamed while the traces are read: their headers are checked before the output is
            // opened, and a regular file is only replaced once the whole export was written.
            for (const std::string& t : a.traces) reader::TraceReader check(t);
            if (!out.open(log)) return 1;
            views::TimelineOptions o = v.timeline;
            o.tid = a.thread.value_or(0);
            o.compensate = !a.raw;
            ProgressLine progress;
            o.progress = progress.callback();
            views::TimelineResult r = v.exporter == "chrome"
                                          ? views::write_chrome_trace(out.file(), a.traces, o)
                                          : views::write_speedscope(out.file(), a.traces, o);
            if (!out.close(log)) return 1;
            if (r.events > views::kTimelineWarnEvents || r.bytes > views::kTimelineWarnBytes)
                log.warn(fmt::format("{} events in {:.0f} MB: browser viewers load a few million "
                                     "events at most; narrow it with --from/--to, --min-duration "
                                     "or --thread",
                                     r.events, r.bytes / 1e6));
            if (a.thread && r.threads == 0) {
                log.error(fmt::format("no events of a thread with tid {} in the trace", *a.thread));
                return 1;
            }
            return 0;
        }
        if (a.memory && (v.diff || !v.flamegraph.empty())) { // memory views
            if (v.diff) { // one report per run: sets are compared per run
                std::vector<analysis::MemoryReport> base, next;
                for (size_t i = 0; i < a.traces.size(); ++i) {
                    Reading r(a, {a.traces[i]});
                    (i < v.vs ? base : next).push_back(r.session->memory());
                }
                views::MemoryDiffOptions o;
                o.measure = v.weight;
                o.fail_above = v.diff_opts.fail_above;
                o.min_share = v.diff_opts.min_share;
                o.limit = a.table.limit;
                views::MemoryDiffResult d;
                try {
                    d = views::diff_memory(base, next, o);
                } catch (const std::invalid_argument& e) {
                    log.error(e.what());
                    return 1;
                }
                if (!out.open(log)) return 1;
                views::print_memory_diff(out.file(), d, o, a.format);
                if (!out.close(log)) return 1;
                std::vector<std::string> failures = views::memory_diff_failures(d, o);
                for (const std::string& f : failures) log.error("regression: " + f);
                return failures.empty() ? 0 : 3;
            }
            Reading r(a, a.traces);
            analysis::Session& builder = *r.session;
            if (!builder.memory().present) {
                log.error(fmt::format("no allocation data in {}: record it with `profrun --mem`",
                                      a.traces.size() == 1 ? a.traces.front() : "these traces"));
                return 1;
            }
            views::FlameOptions o;
            o.icicle = v.icicle;
            o.min_width = v.min_width;
            o.title = v.title;
            if (!out.open(log)) return 1;
            views::write_memory_flamegraph(out.file(), builder.memory(),
                                           v.weight.value_or(views::MemoryWeight::kBytes),
                                           builder.traces(), o);
            return out.close(log) ? 0 : 1;
        }
        if (v.diff) {
            Reading base(a, {a.traces.begin(), a.traces.begin() + ptrdiff_t(v.vs)});
            Reading next(a, {a.traces.begin() + ptrdiff_t(v.vs), a.traces.end()});
            views::DiffOptions o = v.diff_opts;
            o.limit = a.table.limit;
            if (a.table.precision != 3) o.precision = a.table.precision;
            views::DiffResult d =
                views::diff_profiles(base.session->profile(), v.vs, next.session->profile(),
                                    a.traces.size() - v.vs, o);
            if (!out.open(log)) return 1;
            views::print_diff(out.file(), d, o, a.format);
            if (!out.close(log)) return 1;
            std::vector<std::string> failures = views::diff_failures(d, o);
            for (const std::string& f : failures) log.error("regression: " + f);
            return failures.empty() ? 0 : 3;
        }
        // Views of the call tree (and, for --html, of the profile).
        // Views of the call tree (and, for --html, of the profile), from one reading.
        Reading r(a, a.traces);
        analysis::Session& session = *r.session;
        views::CallTreeOptions co;
        co.split_threads = a.threads;
        if (a.thread) {
            auto f = session.find_thread(*a.thread);
            if (!f) {
                log.error(fmt::format("no thread with tid {} in the trace", *a.thread));
                return 1;
            }
            co.thread = *f;
        }
        views::CallTree tree = session.call_tree(co);
        if (!v.html.empty()) {
            analysis::Profile p = session.profile(co.thread);
            for (const std::string& w : analysis::data_warnings(p)) log.warn(w);
            views::HtmlOptions ho;
            ho.title = v.title;
            ho.source_dirs = a.line.source_dirs;
            for (const reader::TraceInfo& t : p.traces)
                if (auto cwd = t.meta.find("cwd"); cwd != t.meta.end())
                    ho.source_dirs.push_back(cwd->second);
            auto lines = analysis::line_tables(p);
            ho.memory = &session.memory(); // the memory section, when the trace has allocations
            if (!out.open(log)) return 1;
            views::write_html(out.file(), p, tree, lines, ho);
            return out.close(log) ? 0 : 1;
        }
        if (!out.open(log)) return 1;
        if (v.tree) {
            views::TreeOptions o = v.tree_opts;
            o.csv = a.format == "csv";
            views::print_tree(out.file(), tree, o);
        } else if (!v.flamegraph.empty()) {
            views::FlameOptions o;
            o.icicle = v.icicle;
            o.min_width = v.min_width;
            o.title = v.title;
            views::write_flamegraph(out.file(), tree, o);
        } else if (v.exporter == "collapsed") {
            views::write_collapsed(out.file(), tree);
        } else if (v.exporter == "callgrind") {
            views::write_callgrind(out.file(), tree);
        }
        return out.close(log) ? 0 : 1;
    } catch (const std::system_error& e) {
        if (!out.report_write_error(log, e)) log.error(e.what());
        return 1;
    } catch (const std::exception& e) {
        out.discard();
        log.error(e.what());
        return 1;
    }
}

int run(int argc, char** argv) {
    tools::ToolLog log("profreport");
    Args a;
    try {
        a = parse(argc, argv, log);
    } catch (const UsageError& e) {
        log.error(e.msg);
        return 2;
    }
    if (a.view.active()) return run_view(a, log); // views and exports
    std::unique_ptr<Reading> reading;
    try {
        reading = std::make_unique<Reading>(a, a.traces);
    } catch (const reader::TraceError& e) {
        log.error(e.what());
        return 1;
    }
    analysis::Session& builder = *reading->session;
    analysis::Profile merged = builder.profile();
    for (const std::string& w : analysis::data_warnings(merged)) log.warn(w);

    struct View {
        std::string title;
        analysis::Profile profile;
    };
    std::vector<View> views;
    if (a.threads || a.thread) {
        std::vector<analysis::ThreadFilter> list = builder.thread_list();
        for (size_t i = 0; i < list.size(); ++i) {
            // The thread's tid is known without building its profile.
            analysis::ThreadSummary th = builder.thread(i);
            if (a.thread && th.tid != *a.thread) continue;
            analysis::Profile p = builder.profile(list[i]);
            views.push_back({fmt::format("Thread {} (tid {}{}{})", th.stream, th.tid,
                                         th.name.empty() ? "" : ", ", th.name),
                             std::move(p)});
        }
        if (views.empty()) {
            log.error(fmt::format("no thread with tid {} in the trace", a.thread.value_or(0)));
            return 1;
        }
    }

    // The traces are read: only now are the outputs opened.
    Output out(a.output), plot(a.plot);
    Output* writing = &plot;
    try {
        if (a.memory && !a.lines && !a.plot.empty()) {
            if (!plot.open(log)) return 1;
            analysis::write_memory_plot(plot.file(), builder.memory(),
                                        "memory: " + a.traces.front());
            if (!plot.close(log)) return 1;
        }
        writing = &out;
        if (!out.open(log)) return 1;
        std::FILE* f = out.file();
        if (a.info) {
            print_info(f, merged);
        } else if (a.memory && !a.lines) {
            analysis::MemoryOptions mo;
            if (a.limit_given) mo.limit = a.table.limit ? a.table.limit : SIZE_MAX; // 0: all
            mo.full_paths = a.table.full_paths;
            if (a.format == "json")
                analysis::print_memory_json(f, builder.memory(), mo);
            else
                analysis::print_memory(f, builder.memory(), mo);
        } else if (views.empty()) {
            print_view(f, a, merged, "");
            if (a.format == "text" && !a.lines && a.callers.empty() && a.callees.empty() &&
                merged.total_calls == 0)
                if (std::string hint = no_calls_hint(merged, builder); !hint.empty())
                    fmt::print(f, "{}\n", hint);
        } else if (a.threads && a.format != "text") { // one document for all threads
            std::vector<analysis::ThreadDocument> docs;
            for (const View& v : views) {
                char* buf = nullptr;
                size_t len = 0;
                std::FILE* m = open_memstream(&buf, &len);
                if (!m) throw std::runtime_error("out of memory");
                print_view(m, a, v.profile, v.title);
                std::fclose(m);
                docs.push_back({v.profile.threads.front(), std::string(buf, len)});
                std::free(buf);
            }
            analysis::print_thread_documents(f, docs, a.format);
        } else {
            for (const View& v : views) print_view(f, a, v.profile, v.title);
        }
        return out.close(log) ? 0 : 1;
    } catch (const std::system_error& e) {
        if (!writing->report_write_error(log, e)) log.error(e.what());
        return 1;
    }
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        prof::tools::ToolLog("profreport").error(e.what());
        return 1;
    }
}
