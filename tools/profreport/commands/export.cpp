// profreport export FORMAT (or --export FORMAT): chrome, speedscope, collapsed or callgrind.
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "output.hpp"
#include "reader/run_manifest.hpp"
#include "reader/trace_reader.hpp"
#include "reading.hpp"
#include "render/pprof.hpp"
#include "render/render.hpp"
#include "render/rows.hpp"
#include "render/timeline.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace prof::profreport {

CLI::App* add_export(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "export", "FORMAT [options] TRACE...",
        "Chrome, speedscope, collapsed stacks or callgrind.\n"
        "\n"
        "Writes the traces for other viewers (the same as profreport --export FORMAT), to -o\n"
        "FILE or standard output, FORMAT one of:\n"
        "  chrome      Chrome Trace Event JSON (Perfetto UI, chrome://tracing); heap and RSS\n"
        "              as counters for `profrun --mem` traces (perfetto is the same)\n"
        "  speedscope  speedscope's evented profiles, one per thread; a sampled profile\n"
        "              of each thread's call tree when the times come from samples\n"
        "              (and no --from, --to or --min-duration is given)\n"
        "  collapsed   folded stacks `a;b;c <self ns>` (flamegraph.pl, inferno)\n"
        "  callgrind   callgrind format, event `ns` (KCachegrind, callgrind_annotate)\n"
        "  pprof       gzipped profile.proto (go tool pprof, Pyroscope, Parca, Grafana);\n"
        "              with --memory, the heap profile (docs/runs.md)\n"
        "  rows        one row per process and function (per thread with --threads) and\n"
        "              per allocation site, for SQL engines: NDJSON, or CSV with\n"
        "              --format csv or an -o FILE.csv (schema: docs/rows.md)");
    CLI::Option* format = sub->add_option_function<std::string>(
        "FORMAT", [&a](const std::string& f) { a.view.exporter = parse_export_format(f); });
    cli.required(format, "no export format given (expected chrome, speedscope, collapsed, "
                         "callgrind, pprof or rows)");
    declare_timeline_options(*sub, a);
    declare_threads(*sub, a);
    CLI::Option* f = declare_format(*sub, a, {"text", "json", "csv"});
    f->description("of --export rows: json (NDJSON, the default) or csv");
    declare_output(*sub, a);
    declare_reading(*sub, a);
    declare_traces(cli, *sub, a);
    return sub;
}

namespace {

// --export rows: each trace read on its own (a process), its functions, threads and sites.
int export_rows(const Args& a, const tools::ToolLog& log, Output& out) {
    std::vector<std::vector<std::string>> groups;
    for (const std::string& t : a.traces) groups.push_back({t});
    auto sessions = read_groups(a, groups);
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
    std::vector<analysis::RowsProcess> processes;
    for (size_t i = 0; i < sessions.size(); ++i) {
        const reader::TraceInfo& info = sessions[i]->traces().front();
        reader::RunProcess who = reader::describe_trace(info, a.traces[i]);
        analysis::RowsProcess p;
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
    if (!out.open(log)) return 1;
    analysis::write_rows(out.file(), processes,
                         csv ? analysis::RowsFormat::kCsv : analysis::RowsFormat::kNdjson);
    return out.close(log) ? 0 : 1;
}

// --export pprof: each trace read on its own, its call tree (or allocation sites) with the
// process's labels.
int export_pprof(const Args& a, const tools::ToolLog& log, Output& out) {
    std::vector<std::vector<std::string>> groups;
    for (const std::string& t : a.traces) groups.push_back({t});
    auto sessions = read_groups(a, groups);
    std::vector<analysis::views::CallTree> trees;
    trees.reserve(sessions.size());
    std::vector<analysis::PprofProcess> processes;
    for (size_t i = 0; i < sessions.size(); ++i) {
        trees.push_back(sessions[i]->call_tree());
        reader::RunProcess who = reader::describe_trace(sessions[i]->traces().front(), a.traces[i]);
        analysis::PprofProcess p;
        p.host = who.host;
        p.pid = who.pid;
        p.rank = who.rank;
        p.start_utc_ns = who.start_utc_ns;
        p.end_utc_ns = who.end_utc_ns;
        p.tree = &trees.back();
        p.memory = &sessions[i]->memory();
        processes.push_back(p);
    }
    std::string profile = analysis::gzip(analysis::pprof_profile(processes, a.memory));
    if (!out.open(log)) return 1;
    if (std::fwrite(profile.data(), 1, profile.size(), out.file()) != profile.size())
        throw std::system_error(errno, std::generic_category(), "write");
    return out.close(log) ? 0 : 1;
}

} // namespace

int run_export(const Args& a, const tools::ToolLog& log) {
    namespace views = analysis::views;
    const ViewArgs& v = a.view;
    Output out(a.output);
    return guarded(out, log, [&] {
        if (v.exporter == "rows") return export_rows(a, log, out);
        if (v.exporter == "pprof") return export_pprof(a, log, out);
        if (v.exporter == "chrome" || v.exporter == "speedscope") {
            // Streamed while the traces are read: their headers are checked before the output is
            // opened, and a regular file is only replaced once the whole export was written.
            // A PROF_TIME=sampled trace has no times for a timeline: the engine refuses it, and
            // the output is then discarded.
            bool chrome = v.exporter == "chrome";
            for (const std::string& t : a.traces) reader::TraceReader check(t);
            if (!out.open(log)) return 1;
            views::TimelineOptions o = v.timeline;
            o.tid = a.thread.value_or(0);
            o.compensate = !a.raw;
            o.time = a.time;
            ProgressLine progress;
            o.progress = progress.callback();
            views::TimelineResult r = v.exporter == "chrome"
                                          ? views::write_chrome_trace(out.file(), a.traces, o)
                                          : views::write_speedscope(out.file(), a.traces, o);
            if (!out.close(log)) return 1;
            if (chrome && r.sampled_time)
                log.info("the timeline's activations are on the hooks' clock (less their "
                         "measured cost); the table's times come from the CPU samples");
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
        Reading r(a, a.traces);
        views::CallTreeOptions co;
        if (!call_tree_options(a, log, *r.session, co)) return 1;
        views::CallTree tree = r.session->call_tree(co);
        if (!out.open(log)) return 1;
        if (v.exporter == "collapsed")
            views::write_collapsed(out.file(), tree);
        else
            views::write_callgrind(out.file(), tree);
        return out.close(log) ? 0 : 1;
    });
}

} // namespace prof::profreport
