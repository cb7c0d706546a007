// profreport's commands: each declares its subcommand (options, refusals, help) and runs it.
// The default `report` also takes the views' old flags (--lines, --memory, --tree,
// --flamegraph FILE, --html FILE, --export FORMAT, --info, --ranks), each declared by its
// command (add_*_flag); whichever way a view is asked for, the same values are set, the same
// refusals apply (refuse_*) and Args::command names the same command to run.
#pragma once

#include "common/cli.hpp"
#include "options.hpp"

#include "analysis/model/profile.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace prof::profreport {

CLI::App* add_report(tools::Cli& cli, Args& a);
CLI::App* add_lines(tools::Cli& cli, Args& a);
CLI::App* add_memory(tools::Cli& cli, Args& a);
CLI::App* add_tree(tools::Cli& cli, Args& a);
CLI::App* add_flamegraph(tools::Cli& cli, Args& a);
CLI::App* add_html(tools::Cli& cli, Args& a);
CLI::App* add_export(tools::Cli& cli, Args& a);
CLI::App* add_diff(tools::Cli& cli, Args& a);
CLI::App* add_latency(tools::Cli& cli, Args& a);
CLI::App* add_info(tools::Cli& cli, Args& a);
CLI::App* add_processes(tools::Cli& cli, Args& a);
CLI::App* add_ranks(tools::Cli& cli, Args& a);

// Each command as a flag of report, the default command (the earlier command line): declared
// by the command, on report, with its own options there; its callback names the command.
CLI::Option* add_lines_flag(CLI::App& report, Args& a);
CLI::Option* add_memory_flag(CLI::App& report, Args& a); // and --plot
CLI::Option* add_ranks_flag(CLI::App& report, Args& a);
CLI::Option* add_info_flag(CLI::App& report, Args& a);
CLI::Option* add_tree_flag(CLI::App& report, Args& a);
CLI::Option* add_flamegraph_flag(CLI::App& report, Args& a);
CLI::Option* add_html_flag(CLI::App& report, Args& a);
CLI::Option* add_export_flag(CLI::App& report, Args& a);

// The options of `commands` that report does not take, refused on report with a message that
// names their command ("--vs is an option of profreport diff"); not listed under --help.
void refuse_commands_options(CLI::App& report, const std::vector<const CLI::App*>& commands);

int run_report(const Args& a, const tools::ToolLog& log);
int run_memory(const Args& a, const tools::ToolLog& log);
int run_tree(const Args& a, const tools::ToolLog& log);
int run_flamegraph(const Args& a, const tools::ToolLog& log);
int run_html(const Args& a, const tools::ToolLog& log);
int run_export(const Args& a, const tools::ToolLog& log);
int run_diff(const Args& a, const tools::ToolLog& log);
int run_latency(const Args& a, const tools::ToolLog& log);
int run_info(const Args& a, const tools::ToolLog& log);
int run_processes(const Args& a, const tools::ToolLog& log);
int run_ranks(const Args& a, const tools::ToolLog& log);

// The options an export format does not take (the table's), and a time window without a
// timeline: the refusal, or "".
std::string refuse_export(const Args& a);
// "--memory applies to --flamegraph, diff and --export pprof (...)".
std::string memory_views_refusal();

// The options the memory report (profreport memory, or --memory alone) does not take: the
// refusal, or "".
std::string refuse_memory_report(const Args& a);

// --tree's: no --format json (the refusal, or "").
std::string refuse_tree(const Args& a);

// The ranks table sorts by a metric: the refusal of a --sort by name or place, or "".
std::string refuse_ranks_sort(const Args& a);

// The line tables of one profile (a thread's, or all threads merged), in the format asked for.
void print_lines(std::FILE* out, const Args& a, const analysis::Profile& p,
                 const std::string& title);

} // namespace prof::profreport
