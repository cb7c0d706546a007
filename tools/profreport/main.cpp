// profreport: reads libprof traces and prints the cProfile-style table and related views.
#include "analysis/lines.hpp"
#include "analysis/memory_report.hpp"
#include "analysis/profile.hpp"
#include "analysis/report.hpp"
#include "common/tool_log.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace {

using namespace prof;

constexpr const char* kUsage = R"(usage: profreport [options] TRACE [TRACE...]

Prints the cProfile-style table of one or more libprof traces (several traces are merged,
like pstats' Stats.add).

options:
  -s, --sort KEY        order rows by KEY: cumtime (default), tottime, ncalls, pcalls, name,
                        file, line, nfl, stdname; pstats aliases work too (cumulative, time,
                        calls, filename, module)
  -n, --limit N         print at most N rows
  -m, --match REGEX     only functions whose `path:line(function)` (full path) matches REGEX
      --lines           line_profiler's view: per function with PROF_LINE/PROF_SCOPE/
                        PROF_FUNCTION sites, hits and time per source line
      --memory          the memory report of a `profrun --mem` trace: allocation calls,
                        peak heap and RSS, leaks, temporaries, top sites with stacks
                        (--limit sites per section); with --lines, memory_profiler's
                        view (Mem usage, Increment, Occurrences per line)
      --unit SECONDS    timer unit of --lines (default 1e-9)
      --source-dir DIR  also look for source files in DIR (repeatable)
      --callers REGEX   who called the matching functions (pstats print_callers)
      --callees REGEX   what the matching functions called (pstats print_callees)
      --threads         one table per thread instead of one merged table
      --thread TID      only the thread with this kernel thread id
  -f, --format FORMAT   text (default), json or csv
  -o, --output FILE     write the report to FILE instead of standard output
      --full-paths      keep directories in file names
      --precision N     decimals in time columns (default 3)
      --info            describe the trace (process, threads, modules, clock) and stop
      --log-format F    text (default) or json for messages on standard error
  -h, --help            show this help
  -V, --version         show the version

Exit status: 0 on success, 1 when a trace cannot be read, 2 on bad usage.
)";

struct Args {
    analysis::TableOptions table;
    std::vector<std::string> traces;
    std::string callers, callees, format = "text", output;
    std::optional<uint32_t> thread;
    bool threads = false, info = false, lines = false, memory = false;
    analysis::LineOptions line;
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
        } else if (arg == "-n" || arg == "--limit") {
            a.table.limit = parse_number(arg, next());
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
        } else if (arg == "--unit") {
            std::string v = next();
            char* end = nullptr;
            double u = std::strtod(v.c_str(), &end);
            if (v.empty() || *end || !(u > 0) || u > 1e3)
                throw UsageError{fmt::format("--unit expects seconds per unit such as 1e-6, got '{}'", v)};
            a.line.unit = u;
        } else if (arg == "--source-dir") {
            a.line.source_dirs.push_back(next());
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
            fmt::print(out, "module:    {:#x}-{:#x} {} {}\n", m.start, m.end, reader::printable(m.path),
                       m.build_id);
        fmt::print(out, "\n");
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
    analysis::ProfileBuilder builder;
    try {
        for (const std::string& t : a.traces) builder.add_trace(t);
    } catch (const reader::TraceError& e) {
        log.error(e.what());
        return 1;
    }
    std::FILE* out = stdout;
    if (!a.output.empty()) {
        out = std::fopen(a.output.c_str(), "w");
        if (!out) {
            log.error(fmt::format("cannot write {}: {}", a.output, std::strerror(errno)));
            return 1;
        }
    }
    analysis::Profile merged = builder.build();
    for (const std::string& w : analysis::data_warnings(merged)) log.warn(w);

    std::vector<std::pair<std::string, analysis::Profile>> views;
    if (a.threads || a.thread) {
        for (const analysis::ThreadFilter& f : builder.thread_list()) {
            analysis::Profile p = builder.build(f);
            const analysis::ThreadSummary& th = p.threads.front();
            if (a.thread && th.tid != *a.thread) continue;
            views.emplace_back(fmt::format("Thread {} (tid {}{}{})", th.stream, th.tid,
                                           th.name.empty() ? "" : ", ", th.name),
                               std::move(p));
        }
        if (views.empty()) {
            log.error(fmt::format("no thread with tid {} in the trace", a.thread.value_or(0)));
            return 1;
        }
    } else {
        views.emplace_back("", std::move(merged));
    }

    for (auto& [title, p] : views) {
        analysis::TableOptions o = a.table;
        o.title = title;
        if (a.info) print_info(out, p);
        else if (a.memory && !a.lines) {
            analysis::MemoryOptions mo;
            if (a.table.limit) mo.limit = a.table.limit;
            mo.full_paths = a.table.full_paths;
            if (a.format == "json") analysis::print_memory_json(out, builder.memory(), mo);
            else analysis::print_memory(out, builder.memory(), mo);
            break;
        } else if (a.lines) {
            if (!o.title.empty() && a.format == "text") fmt::print(out, "{}\n", o.title);
            analysis::LineOptions lo = a.line;
            // Relative source paths are tried against the directory the program ran in.
            for (const reader::TraceInfo& t : p.traces)
                if (auto cwd = t.meta.find("cwd"); cwd != t.meta.end()) lo.source_dirs.push_back(cwd->second);
            auto tables = analysis::line_tables(p, a.table.filter);
            if (a.format == "json") analysis::print_line_json(out, tables);
            else if (tables.empty())
                fmt::print(out, "No marked lines in this trace: mark code with PROF_LINE, "
                                "PROF_SCOPE or PROF_FUNCTION (see <prof/prof.hpp>).\n");
            else analysis::print_line_tables(out, tables, lo);
        } else if (!a.callers.empty() || !a.callees.empty()) {
            if (!o.title.empty()) fmt::print(out, "{}\n", o.title);
            if (!a.callers.empty()) {
                o.filter = a.callers;
                analysis::print_callers(out, p, o, false);
            }
            if (!a.callees.empty()) {
                o.filter = a.callees;
                analysis::print_callers(out, p, o, true);
            }
        } else if (a.format == "json") analysis::print_json(out, p, o);
        else if (a.format == "csv") analysis::print_csv(out, p, o);
        else analysis::print_table(out, p, o);
        if (a.info) break;
    }
    if (std::fflush(out) != 0 || std::ferror(out)) {
        log.error(fmt::format("write error on {}: {}", a.output.empty() ? "standard output" : a.output,
                              std::strerror(errno)));
        return 1;
    }
    if (out != stdout) std::fclose(out);
    return 0;
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
