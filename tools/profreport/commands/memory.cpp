// profreport memory (or --memory): the memory report of a `profrun --mem` trace, and --plot.
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "output.hpp"
#include "reader/trace_reader.hpp"
#include "reading.hpp"
#include "render/memory_report.hpp"
#include "render/report.hpp"

namespace prof::profreport {

std::string refuse_memory_report(const Args& a) {
    if (a.threads || a.thread)
        return "allocation sites are per process: --threads and --thread do not "
               "apply to --memory (they do to --lines --memory)";
    if (!a.table.filter.empty())
        return "--match does not apply to --memory (it does to --lines --memory)";
    if (!a.report.callers.empty() || !a.report.callees.empty())
        return "--callers and --callees do not apply to --memory";
    if (a.sort_given) return "--sort does not apply to --memory (each section has its order)";
    if (a.format == "csv") return "--memory prints text or --format json";
    return {};
}

CLI::App* add_memory(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "memory", "[options] TRACE...",
        "The memory report of a `profrun --mem` trace.\n"
        "\n"
        "The memory report of a `profrun --mem` trace: allocation calls, peak heap and RSS,\n"
        "leaks, temporaries, top sites with stacks (the same as profreport --memory; for\n"
        "memory_profiler's view per line, profreport lines --memory).");
    declare_limit(*sub, a)->description("print at most N sites per section (0: no limit)");
    declare_full_paths(*sub, a);
    sub->add_option("--plot", a.memory_report.plot,
                    "draw heap and RSS over time into FILE (SVG); the report is then\n"
                    "printed only with -o FILE")
        ->type_name("FILE");
    declare_format(*sub, a, {"text", "json"});
    declare_output(*sub, a);
    declare_reading(*sub, a);
    declare_traces(cli, *sub, a);
    sub->callback([&a] {
        a.memory = a.lines.opts.memory = true;
        a.command = run_memory;
        if (std::string refused = refuse_memory_report(a); !refused.empty())
            throw CLI::ValidationError(refused);
    });
    return sub;
}

CLI::Option* add_memory_flag(CLI::App& report, Args& a) {
    CLI::Option* memory = report.add_flag_callback(
        "--memory",
        [&a] {
            a.memory = a.lines.opts.memory = true;
            if (!a.lines.chosen) a.command = run_memory; // with --lines, memory_profiler's table
        },
        "the memory report of a `profrun --mem` trace: allocation calls,\n"
        "peak heap and RSS, leaks, temporaries, top sites with stacks\n"
        "(--limit sites per section); with --lines, memory_profiler's\n"
        "view (Mem usage, Increment, Occurrences per line) (profreport memory)");
    report
        .add_option("--plot", a.memory_report.plot,
                    "with --memory (without --lines): draw heap and RSS over time into\n"
                    "FILE (SVG); the report is then printed only with -o FILE")
        ->type_name("FILE");
    return memory;
}

int run_memory(const Args& a, const tools::ToolLog& log) {
    std::unique_ptr<Reading> reading = read_traces(a, log);
    if (!reading) return 1;
    analysis::Session& session = *reading->session;
    for (const std::string& w : render::data_warnings(session.profile())) log.warn(w);
    // The traces are read: only now are the outputs opened.
    Output out(a.output), plot(a.memory_report.plot);
    int status = guarded(plot, log, [&] {
        if (a.memory_report.plot.empty()) return 0;
        if (!plot.open(log)) return 1;
        render::write_memory_plot(plot.file(), session.memory(), "memory: " + a.traces.front());
        return plot.close(log) ? 0 : 1;
    });
    // A picture writes only its file, as --flamegraph does; the report too when -o names one.
    if (status || (!a.memory_report.plot.empty() && a.output.empty())) return status;
    return guarded(out, log, [&] {
        if (!out.open(log)) return 1;
        render::MemoryOptions mo;
        if (a.limit_given) mo.limit = a.table.limit ? a.table.limit : SIZE_MAX; // 0: all
        mo.full_paths = a.table.full_paths;
        if (a.format == "json")
            render::print_memory_json(out.file(), session.memory(), mo);
        else
            render::print_memory(out.file(), session.memory(), mo);
        return out.close(log) ? 0 : 1;
    });
}

} // namespace prof::profreport
