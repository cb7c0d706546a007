// profreport's options, declared with CLI11; the checks that need the values given.
#include "options.hpp"

#include "reader/run_manifest.hpp"
#include "text/pattern.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace prof::profreport {

[[noreturn]] void refuse(std::string msg) {
    throw CLI::ValidationError(std::move(msg));
}

uint64_t parse_number(const std::string& opt, const std::string& v) {
    char* end = nullptr;
    errno = 0;
    unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end || errno || v[0] == '-')
        refuse(fmt::format("{} expects a non-negative whole number, got '{}'", opt, v));
    return n;
}

double parse_percent(const std::string& opt, std::string v) {
    if (!v.empty() && v.back() == '%') v.pop_back();
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || !(d >= 0) || d > 1e9)
        refuse(fmt::format("{} expects a percentage such as 5 or 5%, got '{}'", opt, v));
    return d;
}

uint64_t parse_time(const std::string& opt, const std::string& v) {
    uint64_t ns = 0;
    if (!render::parse_duration(v, ns))
        refuse(
            fmt::format("{} expects a time such as 1.5s, 200ms, 30us or 100ns, got '{}'", opt, v));
    return ns;
}

CLI::Option* declare_traces(tools::Cli& cli, CLI::App& app, Args& a) {
    CLI::Option* t =
        app.add_option("TRACE", a.traces)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    cli.required(t, fmt::format("no trace given (see profreport{} --help)",
                                app.get_parent() ? " " + app.get_name() : ""));
    return t;
}

void declare_reading(CLI::App& app, Args& a) {
    app.add_option("--process", a.process,
                   "of a run's directory (profrun -d DIR): only the traces of the process\n"
                   "with this pid, or of the processes of this program (its name)")
        ->type_name("PID|NAME");
    app.add_flag("--no-inline", a.no_inline,
                 "a trace sampled from outside: no frames for the functions inlined\n"
                 "at its addresses (the machine code's own functions, as perf's\n"
                 "--no-inline shows them)");
    app.add_flag("--no-compensation", a.raw,
                 "do not subtract the runtime's own cost per call and per marked line\n"
                 "(measured when the program started) from the times");
    value(
        app, "--time", "SOURCE",
        [&a](const std::string& v) {
            if (v == "auto") a.time = analysis::TimeSource::kAuto;
            else if (v == "sampled") a.time = analysis::TimeSource::kSampled;
            else if (v == "traced") a.time = analysis::TimeSource::kTraced;
            else refuse(fmt::format("--time expects auto, sampled or traced, got '{}'", v));
        },
        "where times come from: sampled (CPU samples for time on CPU, the hooks'\n"
        "clock for time off CPU), traced (the hooks' clock less their measured\n"
        "cost), or auto (default: sampled when a trace has enough samples)");
    value(
        app, "--clock", "CLOCK",
        [&a](const std::string& v) {
            a.clock_given = true;
            if (v == "wall")
                a.clock = analysis::Clock::kWall;
            else if (v == "cpu")
                a.clock = analysis::Clock::kCpu;
            else
                refuse(fmt::format("--clock expects wall or cpu, got '{}'", v));
        },
        "which time functions get: wall (default: on CPU, waiting for a CPU,\n"
        "blocked or sleeping, as cProfile's) or cpu (on CPU only, from the CPU\n"
        "samples: a busy machine's preemption and the program's sleeps left out)");
    value(
        app, "-j,--jobs", "N",
        [&a](const std::string& v) { a.jobs = unsigned(parse_number("--jobs", v)); },
        "read with N threads (default: one per core): several traces at once, or\n"
        "the thread streams of one trace");
}

CLI::Option* declare_output(CLI::App& app, Args& a) {
    return app
        .add_option("-o,--output", a.output,
                    "write the report to FILE instead of standard output; FILE (like\n"
                    "the files of --flamegraph, --html and --plot) is replaced only once\n"
                    "the whole report was written, and never when it is one of the traces")
        ->type_name("FILE");
}

CLI::Option* declare_format(CLI::App& app, Args& a, std::vector<std::string> formats) {
    std::string list;
    for (size_t i = 0; i < formats.size(); ++i)
        list += (i ? i + 1 == formats.size() ? " or " : ", " : "") + formats[i];
    std::string description = formats[0] + " (default)";
    for (size_t i = 1; i < formats.size(); ++i)
        description += (i + 1 == formats.size() ? " or " : ", ") + formats[i];
    return value(
        app, "-f,--format", "FORMAT",
        [&a](const std::string& f) {
            if (f != "text" && f != "json" && f != "csv")
                refuse(fmt::format("unknown format '{}' (expected text, json or csv)", f));
            a.format = f;
        },
        description);
}

CLI::Option* declare_limit(CLI::App& app, Args& a) {
    return value(
        app, "-n,--limit", "N",
        [&a](const std::string& v) {
            a.table.limit = parse_number("--limit", v);
            a.limit_given = true;
        },
        "print at most N rows (0: no limit)");
}

CLI::Option* declare_precision(CLI::App& app, Args& a) {
    return value(
        app, "--precision", "N",
        [&a](const std::string& v) {
            uint64_t n = parse_number("--precision", v);
            if (n > 9) refuse("--precision takes 0 to 9");
            a.table.precision = int(n);
        },
        "decimals in time columns (default 3)");
}

CLI::Option* declare_full_paths(CLI::App& app, Args& a) {
    return app.add_flag("--full-paths", a.table.full_paths, "keep directories in file names");
}

TableFlags declare_table(CLI::App& app, Args& a) {
    TableFlags f{};
    f.sort = value(
        app, "-s,--sort", "KEY",
        [&a](const std::string& k) {
            auto key = render::parse_sort_key(k);
            if (!key)
                refuse(fmt::format("unknown sort key '{}' (expected cumtime, tottime, ncalls, "
                                   "pcalls, name, file, line, nfl or stdname)",
                                   k));
            a.table.sort = *key;
            a.sort_given = true;
        },
        "order rows by KEY: cumtime (default), tottime, ncalls, pcalls, name,\n"
        "file, line, nfl, stdname; pstats aliases work too (cumulative, time,\n"
        "calls, filename, module)");
    f.limit = declare_limit(app, a);
    f.match = app.add_option("-m,--match,--filter", a.table.filter,
                             "only functions whose `path:line(function)` (full path) matches REGEX")
                  ->type_name("REGEX");
    f.full_paths = declare_full_paths(app, a);
    f.precision = declare_precision(app, a);
    return f;
}

CLI::Option* declare_thread(CLI::App& app, Args& a) {
    return value(
        app, "--thread", "TID",
        [&a](const std::string& v) { a.thread = uint32_t(parse_number("--thread", v)); },
        "only the thread with this kernel thread id");
}

std::pair<CLI::Option*, CLI::Option*> declare_threads(CLI::App& app, Args& a) {
    CLI::Option* threads =
        app.add_flag("--threads", a.threads,
                     "one table per thread instead of one merged table (JSON: one\n"
                     "document with a `threads` array; CSV: one header and a `tid` column)");
    return {threads, declare_thread(app, a)};
}

CLI::Option* declare_unit(CLI::App& app, Args& a) {
    return value(
        app, "--unit", "SECONDS",
        [&a](const std::string& v) {
            char* end = nullptr;
            double u = std::strtod(v.c_str(), &end);
            if (v.empty() || *end || !(u > 0) || u > 1e3)
                refuse(fmt::format("--unit expects seconds per unit such as 1e-6, got '{}'", v));
            a.lines.opts.unit = u;
            a.lines.unit_given = true;
        },
        "timer unit of --lines (default 1e-9)");
}

CLI::Option* declare_source_dir(CLI::App& app, Args& a) {
    return app
        .add_option("--source-dir", a.lines.opts.source_dirs,
                    "also look for source files in DIR (repeatable)")
        ->type_name("DIR")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

CLI::Option* declare_memory_flag(CLI::App& app, Args& a, const std::string& description) {
    return app.add_flag_callback(
        "--memory", [&a] { a.memory = a.lines.opts.memory = true; }, description);
}

CLI::Option* declare_weight(CLI::App& app, Args& a, const std::string& description) {
    return value(
        app, "--weight", "W",
        [&a](const std::string& w) {
            a.weight = analysis::views::parse_memory_weight(w);
            if (!a.weight)
                refuse(fmt::format(
                    "unknown weight '{}' (expected bytes, allocations, leaked or peak)", w));
        },
        description);
}

CLI::Option* declare_title(CLI::App& app, Args& a, const std::string& description) {
    return app.add_option("--title", a.title, description)->type_name("TEXT");
}

namespace {

// diff's BASE... --vs NEW...: where the new traces start, once run directories are expanded.
std::string split_diff(Args& a) {
    size_t& vs = a.diff.vs;
    size_t split = vs == SIZE_MAX ? 1 : vs;
    if ((vs == SIZE_MAX && a.traces.size() != 2) || split == 0 || split >= a.traces.size())
        return "diff compares two traces (BASE NEW), or two sets (BASE... --vs NEW...)";
    vs = split;
    return {};
}

// An output that is one of the traces would destroy it; two outputs on one file, each other.
std::string check_outputs(const Args& a) {
    const std::pair<const char*, std::string> outs[] = {{"-o", a.output},
                                                        {"--flamegraph", a.flamegraph.file},
                                                        {"--html", a.html.file},
                                                        {"--plot", a.memory_report.plot},
                                                        {"--folded", a.diff.folded}};
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
                return fmt::format("{} {} is the trace {}: refusing to overwrite it", opt, path, t);
        }
        for (const std::string& dir : a.run_dirs) {
            std::string manifest = dir + "/" + reader::kManifestName;
            struct stat sm {};
            if (exists && ::stat(manifest.c_str(), &sm) == 0 && same(so, sm))
                return fmt::format("{} {} is the manifest of the run {}: refusing to overwrite it",
                                   opt, path, dir);
        }
        for (size_t j = 0; j < i; ++j) {
            const auto& [opt2, path2] = outs[j];
            if (path2.empty() || path2 == "-") continue;
            struct stat s2 {};
            if (path2 == path || (exists && ::stat(path2.c_str(), &s2) == 0 && same(so, s2)))
                return fmt::format("{} and {} name the same file", opt2, opt);
        }
    }
    return {};
}

} // namespace

std::string check(Args& a, const tools::ToolLog& log) {
    for (const std::string& dir : a.lines.opts.source_dirs) {
        struct stat st {};
        if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
            log.warn(fmt::format("--source-dir {}: not a directory", dir));
    }
    if (a.diff.chosen)
        if (std::string msg = split_diff(a); !msg.empty()) return msg;
    if (std::string msg = check_outputs(a); !msg.empty()) return msg;
    if (a.clock == analysis::Clock::kCpu && a.time == analysis::TimeSource::kTraced)
        return "--clock cpu takes times from the CPU samples, --time traced from the hooks' "
               "wall clock: give one of them";
    for (const std::string* re : {&a.table.filter, &a.report.callers, &a.report.callees})
        if (std::string why = re->empty() ? std::string() : text::Pattern::error(*re); !why.empty())
            return fmt::format("bad regular expression '{}': {}", *re, why);
    return {};
}

} // namespace prof::profreport
