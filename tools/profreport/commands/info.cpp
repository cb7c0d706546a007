// profreport info (or --info): what a trace holds, as text.
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "output.hpp"
#include "reader/trace_reader.hpp"
#include "reading.hpp"
#include "render/info.hpp"
#include "render/report.hpp"

#include <fmt/format.h>

namespace prof::profreport {

CLI::App* add_info(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "info", "[options] TRACE...",
        "What each trace holds.\n"
        "\n"
        "Describes each trace (process, threads, modules, clock) (the same as profreport\n"
        "--info).");
    declare_output(*sub, a);
    declare_reading(*sub, a);
    declare_traces(cli, *sub, a);
    sub->callback([&a] {
        a.info = true;
        a.command = run_info;
    });
    return sub;
}

CLI::Option* add_info_flag(CLI::App& report, Args& a) {
    return report.add_flag_callback(
        "--info",
        [&a] {
            a.info = true;
            a.command = run_info;
        },
        "describe the trace (process, threads, modules, clock) and stop\n"
        "(profreport info)");
}

int run_info(const Args& a, const tools::ToolLog& log) {
    std::unique_ptr<Reading> reading = read_traces(a, log);
    if (!reading) return 1;
    analysis::Profile merged = reading->session->profile();
    for (const std::string& w : render::data_warnings(merged)) log.warn(w);
    Output out(a.output);
    return guarded(out, log, [&] {
        if (!out.open(log)) return 1;
        render::print_info(out.file(), merged);
        return out.close(log) ? 0 : 1;
    });
}

} // namespace prof::profreport
