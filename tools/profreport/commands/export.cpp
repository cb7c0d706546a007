// profreport export FORMAT (or --export FORMAT): the formats of export_formats.hpp's table, each
// read as its input kind says and written by its renderer.
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "export_formats.hpp"
#include "output.hpp"
#include "reading.hpp"
#include "render/timeline.hpp"

#include <fmt/format.h>

#include <unistd.h>

namespace prof::profreport {

namespace {

// The timelines' window (chrome, speedscope): --from, --to, --min-duration, on export and with
// --export on report.
void declare_timeline_options(CLI::App& app, Args& a) {
    auto& t = a.exporter.timeline;
    value(
        app, "--from", "T", [&t](const std::string& v) { t.from_ns = parse_time("--from", v); },
        "chrome/speedscope: only activations overlapping [T, T'] after the\n"
        "trace started, clipped to it (T like 1.5s, 200ms, 30us, 100ns)");
    value(
        app, "--to", "T", [&t](const std::string& v) { t.to_ns = parse_time("--to", v); },
        "chrome/speedscope: the end T' of that window");
    value(
        app, "--min-duration", "T",
        [&t](const std::string& v) { t.min_duration_ns = parse_time("--min-duration", v); },
        "chrome/speedscope: drop activations shorter than T");
}

} // namespace

CLI::App* add_export(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "export", "FORMAT [options] TRACE...",
        "Writes " + export_format_names() +
            ".\n"
            "\n"
            "Writes the traces for other viewers (the same as profreport --export FORMAT), to -o\n"
            "FILE or standard output, FORMAT one of:\n" +
            export_format_help());
    CLI::Option* format = declare_export_format(*sub, a, "FORMAT", "");
    cli.required(format, "no export format given (expected " + export_format_names() + ")");
    // The options some format takes (the others refuse them: refuse_export).
    unsigned taken = 0;
    for (const ExportFormat& e : export_formats()) taken |= e.options;
    if (taken & kTimeWindow) declare_timeline_options(*sub, a);
    if (taken & kMemory)
        declare_memory_flag(
            *sub, a,
            "the allocations instead of the calls, for --export " +
                export_format_names(
                    [](const ExportFormat& f) { return (f.options & kMemory) != 0; }, " and ") +
                "\n(a `profrun --mem` trace): pprof's heap profile");
    declare_threads(*sub, a);
    std::string format_help;
    for (const ExportFormat& e : export_formats())
        if (!e.formats.empty())
            format_help += fmt::format("{}of --export {}: {}", format_help.empty() ? "" : "; ",
                                       e.name, e.formats_help);
    declare_format(*sub, a, {"text", "json", "csv"})->description(format_help);
    declare_output(*sub, a);
    declare_reading(*sub, a);
    declare_traces(cli, *sub, a);
    sub->callback([&a] {
        a.command = run_export;
        if (std::string refused = refuse_export(a); !refused.empty())
            throw CLI::ValidationError(refused);
    });
    return sub;
}

CLI::Option* add_export_flag(CLI::App& report, Args& a) {
    CLI::Option* e = declare_export_format(report, a, "--export", export_format_list());
    e->each([&a](const std::string&) { a.command = run_export; });
    declare_timeline_options(report, a);
    return e;
}

std::string memory_views_refusal() {
    return fmt::format(
        "--memory applies to --flamegraph, diff and --export {} (the HTML report "
        "and --export chrome include allocations when the trace has them)",
        export_format_names([](const ExportFormat& f) { return (f.options & kMemory) != 0; },
                            " and "));
}

std::string refuse_export(const Args& a) {
    const ExportFormat* e = a.exporter.format;
    const render::TimelineOptions& t = a.exporter.timeline;
    if (e && a.memory && !(e->options & kMemory)) return memory_views_refusal();
    if (e && a.memory && (a.threads || a.thread)) return kPerProcessRule;
    if (t.from_ns > t.to_ns) return "--from is later than --to";
    if ((t.from_ns || t.to_ns != UINT64_MAX || t.min_duration_ns) &&
        !(e && (e->options & kTimeWindow)))
        return "--from, --to and --min-duration apply to --export " +
               export_format_names(
                   [](const ExportFormat& f) { return (f.options & kTimeWindow) != 0; }, " and ");
    if (!e) return {};
    if (a.format == "json" && !takes_format(*e, "json")) return format_json_refusal();
    if (a.format != "text" && !takes_format(*e, a.format)) return format_refusal();
    if (!e->no_terminal.empty() && (a.output.empty() || a.output == "-") && isatty(1))
        return fmt::format("--export {} {}", e->name, e->no_terminal);
    return {};
}

int run_export(const Args& a, const tools::ToolLog& log) {
    namespace views = analysis::views;
    const ExportFormat& format = *a.exporter.format;
    Output out(a.output);
    OpenOutput open = [&] { return out.open(log) ? out.file() : nullptr; };
    return guarded(out, log, [&] {
        ExportResult r;
        switch (format.input) {
        case ExportInput::kStreamed: {
            ProgressLine progress;
            r = format.render({.args = a, .progress = progress.callback()}, open);
            break;
        }
        case ExportInput::kPerProcess: {
            std::vector<std::vector<std::string>> groups;
            for (const std::string& t : a.traces) groups.push_back({t});
            auto sessions = read_groups(a, groups);
            for (const auto& s : sessions) warn_partial(log, *s);
            r = format.render({.args = a, .processes = &sessions}, open);
            break;
        }
        case ExportInput::kMerged: {
            Reading reading(a, a.traces);
            warn_partial(log, *reading.session);
            views::CallTreeOptions co;
            if (!call_tree_options(a, log, *reading.session, co)) return 1;
            views::CallTree tree = reading.session->call_tree(co);
            r = format.render({.args = a, .tree = &tree}, open);
            break;
        }
        }
        if (!r.written || !out.close(log)) return 1;
        for (const std::string& note : r.notes) log.info(note);
        for (const std::string& w : r.timeline.partial) log.warn(w);
        if (format.input != ExportInput::kStreamed) return 0;
        const render::TimelineResult& t = r.timeline;
        if (t.events > render::kTimelineWarnEvents || t.bytes > render::kTimelineWarnBytes)
            log.warn(fmt::format("{} events in {:.0f} MB: browser viewers load a few million "
                                 "events at most; narrow it with --from/--to, --min-duration "
                                 "or --thread",
                                 t.events, t.bytes / 1e6));
        if (a.thread && t.threads == 0) {
            log.error(fmt::format("no events of a thread with tid {} in the trace", *a.thread));
            return 1;
        }
        return 0;
    });
}

} // namespace prof::profreport
