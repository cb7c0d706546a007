// profreport lines (or --lines): line_profiler's view, hits and time per marked source line;
// with --memory, memory_profiler's.
#include "commands/commands.hpp"

#include "analysis/model/lines.hpp"
#include "reader/trace_reader.hpp"
#include "render/info.hpp"
#include "render/lines.hpp"
#include "render/report.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

namespace prof::profreport {

CLI::App* add_lines(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "lines", "[options] TRACE...",
        "Hits and time per marked source line.\n"
        "\n"
        "line_profiler's view: per function with PROF_LINE/PROF_SCOPE/PROF_FUNCTION sites,\n"
        "hits and time per source line (the same as profreport --lines).");
    CLI::Option* match =
        sub->add_option("-m,--match,--filter", a.table.filter,
                        "only functions whose `path:line(function)` (full path) matches REGEX")
            ->type_name("REGEX");
    cli.help_name(match, "-m, --match REGEX");
    declare_memory_flag(*sub, a,
                        "memory_profiler's view (Mem usage, Increment, Occurrences per line)");
    declare_unit(*sub, a);
    declare_source_dir(*sub, a);
    declare_threads(*sub, a);
    declare_format(*sub, a, {"text", "json", "csv"});
    declare_output(*sub, a);
    declare_reading(*sub, a);
    declare_traces(cli, *sub, a);
    sub->callback([&a] {
        a.lines.chosen = true;
        a.command = run_report; // the table's view of lines
    });
    return sub;
}

CLI::Option* add_lines_flag(CLI::App& report, Args& a) {
    return report.add_flag_callback(
        "--lines",
        [&a] {
            a.lines.chosen = true;
            a.command = run_report; // the table's view of lines
        },
        "line_profiler's view: per function with PROF_LINE/PROF_SCOPE/\n"
        "PROF_FUNCTION sites, hits and time per source line (profreport lines)");
}

void print_lines(std::FILE* out, const Args& a, const analysis::Profile& p,
                 const std::string& title) {
    if (!title.empty() && a.format == "text") fmt::print(out, "{}\n", text::printable(title));
    render::LineOptions lo = a.lines.opts;
    lo.source_dirs = render::source_dirs(p, a.lines.opts.source_dirs);
    auto tables = analysis::line_tables(p, a.table.filter);
    if (a.format == "json")
        render::print_line_json(out, tables);
    else if (a.format == "csv")
        render::print_lines_csv(out, tables);
    else if (tables.empty())
        fmt::print(out, "{}\n", render::no_lines_text(p));
    else
        render::print_line_tables(out, tables, lo);
}

} // namespace prof::profreport
