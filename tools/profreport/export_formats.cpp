// The table of profreport's export formats, and each format's renderer in the one shape of
// ExportRender: the data its input kind gives, to the output it opens when ready.
#include "export_formats.hpp"

#include "reader/run_manifest.hpp"
#include "reader/trace_reader.hpp"
#include "render/pprof.hpp"
#include "render/render.hpp"
#include "render/rows.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace prof::profreport {

namespace {

namespace views = analysis::views;

// chrome and speedscope: streamed while the traces are read. Their headers are checked before
// the output is opened. A PROF_TIME=sampled trace has no times for a timeline: the engine
// refuses it, and the output is then discarded.
template <auto Write>
ExportResult timeline(const ExportData& d, const OpenOutput& open) {
    const Args& a = d.args;
    for (const std::string& t : a.traces) reader::TraceReader check(t);
    ExportResult r;
    std::FILE* out = open();
    if (!out) return r;
    render::TimelineOptions o = a.exporter.timeline;
    o.tid = a.thread.value_or(0);
    o.compensate = !a.raw;
    o.time = a.time;
    o.clock = a.clock;
    o.progress = d.progress;
    r.timeline = Write(out, a.traces, o);
    r.written = true;
    return r;
}

ExportResult chrome(const ExportData& d, const OpenOutput& open) {
    if (d.args.clock == analysis::Clock::kCpu)
        throw std::runtime_error("--clock cpu: a Chrome/Perfetto timeline places calls at the "
                                 "hooks' wall-clock times; leave out --clock cpu");
    ExportResult r = timeline<render::write_chrome_trace>(d, open);
    if (r.timeline.sampled_time)
        r.notes.push_back("the timeline's activations are on the hooks' clock (less their "
                          "measured cost); the table's times come from the CPU samples");
    return r;
}

ExportResult collapsed(const ExportData& d, const OpenOutput& open) {
    std::FILE* out = open();
    if (out) render::write_collapsed(out, *d.tree);
    return {.written = out != nullptr};
}

ExportResult callgrind(const ExportData& d, const OpenOutput& open) {
    std::FILE* out = open();
    if (out) render::write_callgrind(out, *d.tree);
    return {.written = out != nullptr};
}

// Each process's call tree (or allocation sites) with its labels.
ExportResult pprof(const ExportData& d, const OpenOutput& open) {
    const Args& a = d.args;
    const auto& sessions = *d.processes;
    std::vector<views::CallTree> trees;
    trees.reserve(sessions.size());
    std::vector<render::PprofProcess> processes;
    for (size_t i = 0; i < sessions.size(); ++i) {
        trees.push_back(sessions[i]->call_tree());
        reader::RunProcess who = reader::describe_trace(sessions[i]->traces().front(), a.traces[i]);
        render::PprofProcess p;
        p.host = who.host;
        p.pid = who.pid;
        p.rank = who.rank;
        p.start_utc_ns = who.start_utc_ns;
        p.end_utc_ns = who.end_utc_ns;
        p.tree = &trees.back();
        p.memory = &sessions[i]->memory();
        processes.push_back(p);
    }
    std::string profile = render::gzip(render::pprof_profile(processes, a.memory));
    std::FILE* out = open();
    if (!out) return {};
    if (std::fwrite(profile.data(), 1, profile.size(), out) != profile.size())
        throw std::system_error(errno, std::generic_category(), "write");
    return {.written = true};
}

// Each process's functions, threads (--threads) and allocation sites.
ExportResult rows(const ExportData& d, const OpenOutput& open) {
    const Args& a = d.args;
    const auto& sessions = *d.processes;
    std::vector<analysis::Profile> profiles, thread_profiles;
    profiles.reserve(sessions.size());
    std::vector<std::vector<size_t>> threads_of(sessions.size());
    for (size_t i = 0; i < sessions.size(); ++i) {
        profiles.push_back(sessions[i]->profile());
        if (!a.threads) continue;
        for (const analysis::ThreadSummary& t : profiles.back().threads) {
            threads_of[i].push_back(thread_profiles.size());
            thread_profiles.push_back(sessions[i]->profile({t.trace, t.stream}));
        }
    }
    std::vector<render::RowsProcess> processes;
    for (size_t i = 0; i < sessions.size(); ++i) {
        const reader::TraceInfo& info = sessions[i]->traces().front();
        reader::RunProcess who = reader::describe_trace(info, a.traces[i]);
        render::RowsProcess p;
        auto run = info.meta.find("run");
        p.run = run == info.meta.end() ? "" : run->second;
        p.host = who.host;
        p.exe = who.exe;
        p.trace = a.traces[i];
        p.rank = who.rank;
        p.pid = who.pid;
        p.ppid = who.ppid;
        p.profile = &profiles[i];
        p.memory = &sessions[i]->memory();
        for (size_t t : threads_of[i]) p.threads.push_back(&thread_profiles[t]);
        processes.push_back(std::move(p));
    }
    bool csv = a.format == "csv" || (a.format == "text" && a.output.size() > 4 &&
                                     a.output.compare(a.output.size() - 4, 4, ".csv") == 0);
    std::FILE* out = open();
    if (!out) return {};
    render::write_rows(out, processes,
                       csv ? render::RowsFormat::kCsv : render::RowsFormat::kNdjson);
    return {.written = true};
}

const ExportFormat kFormats[] = {
    {.name = "chrome",
     .alias = "perfetto",
     .summary = "Chrome Trace Event JSON",
     .help = "Chrome Trace Event JSON (Perfetto UI, chrome://tracing); heap and RSS\n"
             "as counters for `profrun --mem` traces (perfetto is the same)",
     .input = ExportInput::kStreamed,
     .options = kTimeWindow,
     .render = chrome},
    {.name = "speedscope",
     .help = "speedscope's evented profiles, one per thread; a sampled profile\n"
             "of each thread's call tree when the times come from samples\n"
             "(and no --from, --to or --min-duration is given)",
     .input = ExportInput::kStreamed,
     .options = kTimeWindow,
     .render = timeline<render::write_speedscope>},
    {.name = "collapsed",
     .summary = "folded stacks",
     .help = "folded stacks `a;b;c <self ns>` (flamegraph.pl, inferno)",
     .input = ExportInput::kMerged,
     .render = collapsed},
    {.name = "callgrind",
     .help = "callgrind format, event `ns` (KCachegrind, callgrind_annotate)",
     .input = ExportInput::kMerged,
     .render = callgrind},
    {.name = "pprof",
     .summary = "gzipped profile.proto",
     .help = "gzipped profile.proto (go tool pprof, Pyroscope, Parca, Grafana);\n"
             "with --memory, the heap profile (docs/runs.md)",
     .input = ExportInput::kPerProcess,
     .options = kMemory,
     .no_terminal = "writes a gzipped file: give -o FILE.pb.gz",
     .render = pprof},
    {.name = "rows",
     .summary = "NDJSON or CSV for SQL engines",
     .help = "one row per process and function (per thread with --threads) and\n"
             "per allocation site, for SQL engines: NDJSON, or CSV with\n"
             "--format csv or an -o FILE.csv (schema: docs/rows.md)",
     .input = ExportInput::kPerProcess,
     .formats = {"json", "csv"},
     .formats_help = "json (NDJSON, the default) or csv",
     .render = rows},
};

// Lines of at most `width` characters, broken at spaces.
std::string wrap(const std::string& text, size_t width) {
    std::string out, line;
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find(' ', at);
        if (end == std::string::npos) end = text.size();
        std::string word = text.substr(at, end - at);
        if (!line.empty() && line.size() + 1 + word.size() > width) {
            out += line + "\n";
            line.clear();
        }
        line += (line.empty() ? "" : " ") + word;
        at = end + 1;
    }
    return out + line;
}

} // namespace

std::span<const ExportFormat> export_formats() {
    return kFormats;
}

const ExportFormat* find_export_format(std::string_view name) {
    for (const ExportFormat& f : kFormats)
        if (f.name == name || (!f.alias.empty() && f.alias == name)) return &f;
    return nullptr;
}

std::string export_format_names(const std::function<bool(const ExportFormat&)>& keep,
                                std::string_view last_separator) {
    std::vector<std::string_view> names;
    for (const ExportFormat& f : kFormats)
        if (!keep || keep(f)) names.push_back(f.name);
    std::string list;
    for (size_t i = 0; i < names.size(); ++i)
        list += fmt::format("{}{}",
                            i == 0                  ? ""
                            : i + 1 == names.size() ? last_separator
                                                    : ", ",
                            names[i]);
    return list;
}

std::string export_format_list() {
    std::string list = "to -o FILE or standard output, FORMAT one of";
    for (size_t i = 0; i < std::size(kFormats); ++i) {
        const ExportFormat& f = kFormats[i];
        list += i == 0 ? " " : i + 1 == std::size(kFormats) ? " or " : ", ";
        list += f.name;
        if (!f.summary.empty()) list += fmt::format(" ({})", f.summary);
    }
    return wrap(list + " (profreport export)", 68);
}

std::string export_format_help() {
    std::string help;
    for (const ExportFormat& f : kFormats) {
        std::string_view text = f.help;
        for (size_t at = 0, n = 0; at <= text.size(); ++n) {
            size_t end = std::min(text.find('\n', at), text.size());
            help += fmt::format("  {:<10}  {}\n", n == 0 ? f.name : "", text.substr(at, end - at));
            at = end + 1;
        }
    }
    return help;
}

bool takes_format(const ExportFormat& f, std::string_view format) {
    return std::find(f.formats.begin(), f.formats.end(), format) != f.formats.end();
}

std::string format_json_refusal() {
    return "--format json is not available for --tree and --export (but --export " +
           export_format_names([](const ExportFormat& f) { return takes_format(f, "json"); },
                               " and ") +
           ")";
}

std::string format_refusal() {
    std::string taken; // "--export rows takes --format json or csv"
    for (const ExportFormat& f : kFormats) {
        if (f.formats.empty()) continue;
        std::string list;
        for (size_t i = 0; i < f.formats.size(); ++i)
            list += fmt::format("{}{}",
                                i == 0                      ? ""
                                : i + 1 == f.formats.size() ? " or "
                                                            : ", ",
                                f.formats[i]);
        taken +=
            fmt::format("{}--export {} takes --format {}", taken.empty() ? "" : "; ", f.name, list);
    }
    return "--format does not apply to --flamegraph, --html and --export (each has its own "
           "format; " +
           taken + ")";
}

CLI::Option* declare_export_format(CLI::App& app, Args& a, const std::string& name,
                                   const std::string& description) {
    CLI::Option* o = app.add_option_function<std::string>(
        name, [&a](const std::string& f) { a.exporter.format = find_export_format(f); },
        description);
    o->type_name("FORMAT")->check(CLI::Validator(
        [](std::string& f) -> std::string {
            if (find_export_format(f)) return {};
            return fmt::format("unknown export format '{}' (expected {})", f,
                               export_format_names());
        },
        "")); // no description: --help shows the type name alone
    return o;
}

} // namespace prof::profreport
