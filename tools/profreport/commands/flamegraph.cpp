// profreport flamegraph (or --flamegraph FILE): the interactive SVG of the call tree, or with
// --memory the allocation flame graph of a `profrun --mem` trace.
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "output.hpp"
#include "reading.hpp"
#include "render/memory_report.hpp"
#include "render/render.hpp"

#include <fmt/format.h>

namespace prof::profreport {

namespace {

// --icicle and --min-width, on flamegraph and with --flamegraph on report.
void declare_flame_options(CLI::App& app, Args& a) {
    app.add_flag("--icicle", a.flamegraph.icicle, "the root on top");
    value(
        app, "--min-width", "PX",
        [&a](const std::string& w) {
            char* end = nullptr;
            a.flamegraph.min_width = std::strtod(w.c_str(), &end);
            if (w.empty() || *end || !(a.flamegraph.min_width >= 0) || a.flamegraph.min_width > 1e6)
                refuse(fmt::format("--min-width expects pixels such as 0.1, got '{}'", w));
        },
        "leave out frames narrower than PX (default 0.1)");
}

} // namespace

CLI::App* add_flamegraph(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "flamegraph", "-o FILE [options] TRACE...",
        "An interactive flame graph (SVG).\n"
        "\n"
        "A self-contained interactive SVG (hover, click to zoom, Ctrl-F to search); widths are\n"
        "exact nanoseconds of each call path (the same as profreport --flamegraph FILE).");
    CLI::Option* file = sub->add_option("-o,--output,--flamegraph", a.flamegraph.file,
                                        "write the SVG to FILE (replaced only once it was written)")
                            ->type_name("FILE");
    cli.help_name(file, "-o, --output FILE");
    cli.required(file, "profreport flamegraph needs its file: -o FILE");
    declare_flame_options(*sub, a);
    declare_title(*sub, a, "the graph's title");
    CLI::Option* memory =
        declare_memory_flag(*sub, a, "the allocation flame graph of a `profrun --mem` trace");
    CLI::Option* weight =
        declare_weight(*sub, a,
                       "with --memory: widths are the sites' bytes (default), allocations,\n"
                       "leaked bytes or peak (bytes live at the peak heap)");
    auto [threads, thread] = declare_threads(*sub, a);
    declare_reading(*sub, a);
    declare_traces(cli, *sub, a);
    cli.needs(weight, memory, kWeightRule);
    cli.excludes(memory, threads, kPerProcessRule);
    cli.excludes(memory, thread, kPerProcessRule);
    sub->callback([&a] { a.command = run_flamegraph; });
    return sub;
}

CLI::Option* add_flamegraph_flag(CLI::App& report, Args& a) {
    CLI::Option* flame =
        report
            .add_option_function<std::string>(
                "--flamegraph",
                [&a](const std::string& file) {
                    a.flamegraph.file = file;
                    a.command = run_flamegraph;
                },
                "self-contained interactive SVG (hover, click to zoom, Ctrl-F to\n"
                "search); widths are exact nanoseconds of each call path; --threads\n"
                "splits by thread; with --memory, the allocation flame graph of a\n"
                "`profrun --mem` trace (profreport flamegraph)")
            ->type_name("FILE");
    declare_flame_options(report, a);
    declare_title(report, a, "the title of --flamegraph and --html");
    declare_weight(report, a,
                   "--flamegraph --memory: widths are the sites' bytes (default),\n"
                   "allocations, leaked bytes or peak (bytes live at the peak heap),\n"
                   "W one of bytes, allocations, leaked, peak");
    return flame;
}

int run_flamegraph(const Args& a, const tools::ToolLog& log) {
    namespace views = analysis::views;
    Output out(a.flamegraph.file);
    render::FlameOptions o;
    o.icicle = a.flamegraph.icicle;
    o.min_width = a.flamegraph.min_width;
    o.title = a.title;
    return guarded(out, log, [&] {
        Reading r(a, a.traces);
        analysis::Session& session = *r.session;
        warn_partial(log, session);
        if (a.memory) {
            if (!session.memory().present) {
                log.error(fmt::format("no allocation data in {}: record it with `profrun --mem`",
                                      a.traces.size() == 1 ? a.traces.front() : "these traces"));
                return 1;
            }
            if (!out.open(log)) return 1;
            render::write_memory_flamegraph(out.file(), session.memory(),
                                            a.weight.value_or(views::MemoryWeight::kBytes),
                                            session.traces(), o);
            return out.close(log) ? 0 : 1;
        }
        views::CallTreeOptions co;
        if (!call_tree_options(a, log, session, co)) return 1;
        views::CallTree tree = session.call_tree(co);
        if (!out.open(log)) return 1;
        render::write_flamegraph(out.file(), tree, o);
        return out.close(log) ? 0 : 1;
    });
}

} // namespace prof::profreport
