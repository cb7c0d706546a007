// profreport report, the default command: the cProfile-style table of one or more traces, or
// the callers/callees of functions; it also takes the views' flags of the earlier command line
// (--lines, --memory, --tree, --flamegraph FILE, --html FILE, --export FORMAT, --info), which
// hand over to their commands.
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "export_formats.hpp"
#include "output.hpp"
#include "reader/trace_reader.hpp"
#include "reading.hpp"
#include "render/render.hpp"
#include "render/report.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

namespace prof::profreport {

namespace {

// The combinations of report's flags that its declarations cannot refuse (they depend on which
// view a value names), and the options the report asked for would silently ignore: the
// refusal, or "". The pairs of views, --info and --lines with a view, and --lines with
// --callers or --callees are declared (CLI11 refuses them); the memory report's, the ranks',
// the tree's and the export's own are their commands' (refuse_memory_report, refuse_ranks_sort,
// refuse_tree, refuse_export).
std::string refuse_report(const Args& a) {
    const bool view = a.view();
    // Memory views: the allocation flame graph and an export that takes --memory.
    const bool memory_view =
        a.memory && !a.lines.chosen &&
        (!a.flamegraph.file.empty() || (a.exporter.format && a.exporter.format->options & kMemory));
    // --memory with a view that takes none (with an export, refuse_export says it).
    if (view && !a.exporter.format && a.memory && !memory_view) return memory_views_refusal();
    if (a.weight && !memory_view) return kWeightRule;
    if (!a.flamegraph.file.empty() && memory_view && (a.threads || a.thread))
        return kPerProcessRule;
    if (std::string refused = refuse_export(a); !refused.empty()) return refused;
    if (view &&
        (a.info || a.lines.chosen || !a.report.callers.empty() || !a.report.callees.empty()))
        return "--info, --lines, --memory, --callers and --callees are not views of "
               "diff, --tree, --flamegraph, --html or --export";
    if (!a.tree.chosen && (a.tree.opts.max_depth || a.tree.opts.min_percent > 0))
        return "--depth and --min-percent apply to --tree";
    if (a.flamegraph.file.empty() && (a.flamegraph.icicle || a.flamegraph.min_width != 0.1))
        return "--icicle and --min-width apply to --flamegraph";
    if (a.flamegraph.file.empty() && a.html.file.empty() && !a.title.empty())
        return "--title applies to --flamegraph and --html";
    if (a.tree.chosen)
        if (std::string refused = refuse_tree(a); !refused.empty()) return refused;
    if (a.ranks && (view || a.lines.chosen || a.memory || a.info || !a.report.callers.empty() ||
                    !a.report.callees.empty() || a.threads || a.thread))
        return "--ranks is a table of its own: no other view, --callers, --callees, "
               "--threads or --thread with it";
    // The --memory text/JSON report.
    const bool memory_report = a.memory && !a.lines.chosen && !view;
    if (!a.memory_report.plot.empty() && !memory_report)
        return "--plot applies to --memory (not with --lines or a view)";
    if (a.lines.unit_given && !a.lines.chosen) return "--unit applies to --lines";
    if (!a.lines.opts.source_dirs.empty() && !a.lines.chosen && a.html.file.empty())
        return "--source-dir applies to --lines and --html";
    if (memory_report)
        if (std::string refused = refuse_memory_report(a); !refused.empty()) return refused;
    if (a.info && (a.format != "text" || a.lines.chosen || a.memory || a.threads || a.thread ||
                   !a.report.callers.empty() || !a.report.callees.empty()))
        return "--info describes the trace as text and takes no other view";
    if (!view && a.format == "json" && (!a.report.callers.empty() || !a.report.callees.empty()))
        return "--format json is not available for --callers and --callees";
    if (!view && a.format == "csv" && !a.report.callers.empty() && !a.report.callees.empty())
        return "--format csv takes one of --callers and --callees at a time";
    if (a.format != "text" && (!a.flamegraph.file.empty() || !a.html.file.empty()))
        return format_refusal();
    return {};
}

} // namespace

CLI::App* add_report(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "report", "[options] TRACE [TRACE...]",
        "The cProfile-style table, or callers/callees.\n"
        "\n"
        "Prints the cProfile-style table of one or more libprof traces (several traces are\n"
        "merged, like pstats' Stats.add); the views' flags hand over to their commands.");
    cli.help_name(declare_table(*sub, a).match, "-m, --match REGEX");
    // Each command's flag is declared by the command (add_*_flag), in this order: a later
    // one's callback names the command to run over an earlier one's (--memory over --lines'
    // table, a view over --memory); the combinations left are refused.
    CLI::Option* lines = add_lines_flag(*sub, a);
    CLI::Option* memory = add_memory_flag(*sub, a);
    declare_unit(*sub, a);
    declare_source_dir(*sub, a);
    CLI::Option* callers =
        sub->add_option("--callers", a.report.callers,
                        "who called the matching functions (pstats print_callers)")
            ->type_name("REGEX");
    CLI::Option* callees =
        sub->add_option("--callees", a.report.callees,
                        "what the matching functions called (pstats print_callees)")
            ->type_name("REGEX");
    add_ranks_flag(*sub, a);
    declare_threads(*sub, a);
    declare_format(*sub, a, {"text", "json", "csv"});
    CLI::Option* output = declare_output(*sub, a);
    declare_reading(*sub, a);
    CLI::Option* info = add_info_flag(*sub, a);

    // The views of the earlier command line, each also a command of its own: its flag and the
    // options the command declares with it form one group.
    const std::string views = "views and exports (one at a time; --thread, --threads, -o and "
                              "--format csv apply)";
    const size_t before_views = sub->get_options().size();
    CLI::Option* tree = add_tree_flag(*sub, a);
    CLI::Option* flame = add_flamegraph_flag(*sub, a);
    CLI::Option* html = add_html_flag(*sub, a);
    CLI::Option* exporter = add_export_flag(*sub, a);
    std::vector<CLI::Option*> declared = sub->get_options();
    for (size_t i = before_views; i < declared.size(); ++i) declared[i]->group(views);
    declare_traces(cli, *sub, a);

    // The refusals that depend on no value; the others are checked after parsing.
    CLI::Option* one_view[] = {tree, flame, html, exporter};
    for (size_t i = 0; i < std::size(one_view); ++i)
        for (size_t j = i + 1; j < std::size(one_view); ++j) cli.excludes(one_view[i], one_view[j]);
    for (CLI::Option* v : one_view) cli.excludes(info, v), cli.excludes(lines, v);
    cli.excludes(info, lines);
    cli.excludes(info, memory);
    cli.excludes(lines, callers, "--callers and --callees do not apply to --lines");
    cli.excludes(lines, callees, "--callers and --callees do not apply to --lines");
    cli.excludes(flame, output, "--flamegraph and --html take their file: -o does not apply");
    cli.excludes(html, output, "--flamegraph and --html take their file: -o does not apply");
    // The views' flags name their commands (the declarations refuse two views at once);
    // --memory alone is the memory report, and with --lines memory_profiler's view.
    sub->callback([&a] {
        if (!a.command) a.command = run_report; // no command's flag: the table
        if (std::string refused = refuse_report(a); !refused.empty())
            throw CLI::ValidationError(refused);
    });
    cli.default_subcommand(sub);
    return sub;
}

void refuse_commands_options(CLI::App& report, const std::vector<const CLI::App*>& commands) {
    for (const CLI::App* command : commands)
        for (const CLI::Option* o : command->get_options()) {
            if (o->get_lnames().empty()) continue; // a positional, or only a short name
            const std::string name = "--" + o->get_lnames().front();
            if (report.get_option_no_throw(name)) continue; // report's too
            const std::string refused =
                fmt::format("{} is an option of profreport {}", name, command->get_name());
            if (o->get_expected_max() == 0)
                report.add_flag_callback(name, [refused] { throw CLI::ValidationError(refused); });
            else
                report.add_option_function<std::string>(
                    name, [refused](const std::string&) { throw CLI::ValidationError(refused); });
            report.get_option(name)->group(""); // not listed under --help
        }
}

namespace {

// Under an empty pstats table: where the data of a trace without function calls is.
std::string no_calls_hint(const analysis::Profile& p, const analysis::Session& b) {
    // A trace sampled from outside counts no calls by design; the table says so in its header.
    if (!p.time.calls_counted()) return {};
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
    if (a.lines.chosen) return print_lines(out, a, p, title);
    render::TableOptions o = a.table;
    o.title = title;
    if (!a.report.callers.empty() || !a.report.callees.empty()) {
        if (!title.empty() && a.format != "csv") fmt::print(out, "{}\n", text::printable(title));
        for (bool callees : {false, true}) {
            const std::string& filter = callees ? a.report.callees : a.report.callers;
            if (filter.empty()) continue;
            o.filter = filter;
            if (a.format == "csv")
                render::print_callers_csv(out, p, o.filter, callees);
            else
                render::print_callers(out, p, o, callees);
        }
    } else if (a.format == "json") {
        render::print_json(out, p, o);
    } else if (a.format == "csv") {
        render::print_csv(out, p, o);
    } else {
        render::print_table(out, p, o);
    }
}

} // namespace

// The table, callers/callees and the line tables: merged, or one per thread.
int run_report(const Args& a, const tools::ToolLog& log) {
    std::unique_ptr<Reading> reading = read_traces(a, log);
    if (!reading) return 1;
    analysis::Session& session = *reading->session;
    analysis::Profile merged = session.profile();
    for (const std::string& w : render::data_warnings(merged)) log.warn(w);

    struct View {
        std::string title;
        analysis::Profile profile;
    };
    std::vector<View> views;
    if (a.threads || a.thread) {
        std::vector<analysis::ThreadFilter> list = session.thread_list();
        for (size_t i = 0; i < list.size(); ++i) {
            // The thread's tid is known without building its profile.
            analysis::ThreadSummary th = session.thread(i);
            if (a.thread && th.tid != *a.thread) continue;
            analysis::Profile p = session.profile(list[i]);
            views.push_back({fmt::format("Thread {} (tid {}{}{})", th.stream, th.tid,
                                         th.name.empty() ? "" : ", ", th.name),
                             std::move(p)});
        }
        if (views.empty()) {
            log.error(fmt::format("no thread with tid {} in the trace", a.thread.value_or(0)));
            return 1;
        }
    }

    // The traces are read: only now is the output opened.
    Output out(a.output);
    return guarded(out, log, [&] {
        if (!out.open(log)) return 1;
        std::FILE* f = out.file();
        if (views.empty()) {
            print_view(f, a, merged, "");
            if (a.format == "text" && !a.lines.chosen && a.report.callers.empty() &&
                a.report.callees.empty() && merged.total_calls == 0)
                if (std::string hint = no_calls_hint(merged, session); !hint.empty())
                    fmt::print(f, "{}\n", hint);
        } else if (a.threads && a.format != "text") { // one document for all threads
            std::vector<render::ThreadDocument> docs;
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
            render::print_thread_documents(f, docs, a.format);
        } else {
            for (const View& v : views) print_view(f, a, v.profile, v.title);
        }
        return out.close(log) ? 0 : 1;
    });
}

} // namespace prof::profreport
