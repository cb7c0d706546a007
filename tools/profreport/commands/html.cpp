// profreport html (or --html FILE): one self-contained page of the whole report.
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "analysis/model/latency.hpp"
#include "analysis/model/lines.hpp"
#include "output.hpp"
#include "reader/trace_reader.hpp"
#include "reading.hpp"
#include "render/info.hpp"
#include "render/render.hpp"
#include "render/report.hpp"

#include <fmt/format.h>

namespace prof::profreport {

CLI::App* add_html(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "html", "-o FILE [options] TRACE...",
        "One self-contained HTML page of the whole report.\n"
        "\n"
        "One self-contained page (no network): sortable pstats table, callers/callees on\n"
        "click with each function's latency distribution, icicle of the call tree, line\n"
        "tables; for a `profrun --mem` trace also the memory summary, heap/RSS plot and\n"
        "sortable allocation sites with their stacks (the same as profreport --html FILE).");
    CLI::Option* file =
        sub->add_option("-o,--output,--html", a.html.file,
                        "write the page to FILE (replaced only once it was written)")
            ->type_name("FILE");
    cli.help_name(file, "-o, --output FILE");
    cli.required(file, "profreport html needs its file: -o FILE");
    declare_title(*sub, a, "the page's title");
    declare_source_dir(*sub, a);
    declare_threads(*sub, a);
    declare_reading(*sub, a);
    declare_traces(cli, *sub, a);
    sub->callback([&a] { a.command = run_html; });
    return sub;
}

CLI::Option* add_html_flag(CLI::App& report, Args& a) {
    return report
        .add_option_function<std::string>(
            "--html",
            [&a](const std::string& file) {
                a.html.file = file;
                a.command = run_html;
            },
            "one self-contained page (no network): sortable pstats table,\n"
            "callers/callees on click, icicle of the call tree, line tables;\n"
            "for a `profrun --mem` trace also the memory summary, heap/RSS\n"
            "plot and sortable allocation sites with their stacks (profreport html)")
        ->type_name("FILE");
}

int run_html(const Args& a, const tools::ToolLog& log) {
    namespace views = analysis::views;
    Output out(a.html.file);
    return guarded(out, log, [&] {
        Reading r(a, a.traces);
        analysis::Session& session = *r.session;
        views::CallTreeOptions co;
        if (!call_tree_options(a, log, session, co)) return 1;
        views::CallTree tree = session.call_tree(co);
        analysis::Profile p = session.profile(co.thread);
        for (const std::string& w : render::data_warnings(p)) log.warn(w);
        render::HtmlOptions ho;
        ho.title = a.title;
        ho.source_dirs = render::source_dirs(p, a.lines.opts.source_dirs);
        auto lines = analysis::line_tables(p);
        ho.memory = &session.memory(); // the memory section, when the trace has allocations
        // Each function's latency distribution: the counted paths' timed calls, from the
        // session read already; traced calls need another replay, with an observer.
        views::LatencyReport latency;
        analysis::TimeBasis basis = session.time_basis();
        if (basis.calls_counted()) {
            views::LatencyOptions lo;
            lo.tail = false;
            lo.slowest = 1;
            lo.thread = co.thread; // the page's table is of that thread alone
            if (basis.traced_traces == 0 && basis.switched_traces == 0) lo.read = &session;
            lo.open = [&](analysis::ActivationObserver& observer) {
                analysis::SessionOptions so = session_options(a);
                so.observer = &observer;
                so.observer_takes_counted = true;
                so.memory = false;
                auto s = std::make_unique<analysis::Session>(so);
                s->add_traces(a.traces, 1);
                return s;
            };
            try {
                latency = views::latency(lo);
                ho.latency = &latency;
            } catch (const reader::TraceError& e) { // read once already: not expected
                log.warn(fmt::format("no latencies in the page: {}", e.what()));
            }
        }
        if (!out.open(log)) return 1;
        render::write_html(out.file(), p, tree, lines, ho);
        return out.close(log) ? 0 : 1;
    });
}

} // namespace prof::profreport
