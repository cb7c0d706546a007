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
    declare_timeline_options(*sub, a);
    declare_threads(*sub, a);
    std::string taken;
    for (const ExportFormat& e : export_formats())
        if (!e.formats.empty())
            taken += fmt::format("{}of --export {}: {}", taken.empty() ? "" : "; ", e.name,
                                 e.formats_help);
    declare_format(*sub, a, {"text", "json", "csv"})->description(taken);
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

std::string refuse_export(const Args& a) {
    const ExportFormat* e = a.view.exporter;
    const analysis::views::TimelineOptions& t = a.view.timeline;
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
    const ExportFormat& format = *a.view.exporter;
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
            r = format.render({.args = a, .processes = &sessions}, open);
            break;
        }
        case ExportInput::kMerged: {
            Reading reading(a, a.traces);
            views::CallTreeOptions co;
            if (!call_tree_options(a, log, *reading.session, co)) return 1;
            views::CallTree tree = reading.session->call_tree(co);
            r = format.render({.args = a, .tree = &tree}, open);
            break;
        }
        }
        if (!r.written || !out.close(log)) return 1;
        for (const std::string& note : r.notes) log.info(note);
        if (format.input != ExportInput::kStreamed) return 0;
        const views::TimelineResult& t = r.timeline;
        if (t.events > views::kTimelineWarnEvents || t.bytes > views::kTimelineWarnBytes)
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
