// profreport: reads libprof traces and prints the cProfile-style table and related views.
// Each command is declared and run in commands/; this parses the command line and runs the
// command it named.
#include "commands/commands.hpp"
#include "common/cli.hpp"
#include "options.hpp"
#include "runs.hpp"

#include <prof/trace_format.hpp>

#include <prof/version.h>

#include <fmt/format.h>

#include <vector>

int main(int argc, char** argv) {
    using namespace prof;
    tools::Cli cli("profreport",
                   "[options] TRACE|DIR [TRACE|DIR...]\n"
                   "       profreport COMMAND [options] ...\n"
                   "       profreport diff [options] BASE NEW       (or: BASE... --vs NEW...)",
                   "Prints the cProfile-style table of one or more libprof traces (several traces\n"
                   "are merged, like pstats' Stats.add), or another view of them (each command\n"
                   "has its --help; the views' options of `report` name them too).");
    cli.help_column(24);
    cli.version(fmt::format("profreport {} (reads trace formats up to {}.{}, packed {}.{})",
                            PROF_VERSION_STRING, format::kMajor, format::kMinor,
                            format::kPackedMajor, format::kPackedMinor));
    profreport::Args a;
    CLI::App* report = profreport::add_report(cli, a);
    std::vector<const CLI::App*> commands;
    for (auto add : {profreport::add_lines, profreport::add_memory, profreport::add_tree,
                     profreport::add_flamegraph, profreport::add_html, profreport::add_export,
                     profreport::add_diff, profreport::add_latency, profreport::add_info,
                     profreport::add_processes, profreport::add_ranks})
        commands.push_back(add(cli, a));
    profreport::refuse_commands_options(*report, commands);
    cli.app().footer(
        "diff: --fail-above PCT exits with status 3 when the total or a function regressed by\n"
        "more than PCT percent (see profreport diff --help).\n"
        "\n"
        "Exit status: 0 on success, 1 when a trace cannot be read or the output cannot be\n"
        "written, 2 on bad usage, 3 when diff --fail-above finds a regression.");
    try {
        if (std::optional<int> status = cli.parse(argc, argv)) return *status;
        if (std::string refused = profreport::expand_runs(a, cli.log()); !refused.empty())
            return cli.usage_error(refused);
        if (std::string refused = profreport::check(a, cli.log()); !refused.empty())
            return cli.usage_error(refused);
        return a.command(a, cli.log());
    } catch (const std::exception& e) {
        cli.log().error(e.what());
        return 1;
    }
}
