// profreport's command line: each command's values in a struct of its own, those several
// commands read, and the declarations of the options that several commands share (each
// declared once, called once per command).
#pragma once

#include "analysis/model/call_tree.hpp"
#include "analysis/model/diff.hpp"
#include "analysis/model/lines.hpp"
#include "common/cli.hpp"
#include "render/durations.hpp"
#include "render/lines.hpp"
#include "render/render.hpp"
#include "render/report.hpp"
#include "render/timeline.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace prof::profreport {

struct ExportFormat; // export_formats.hpp

// Each command's own options, in its struct; the options several commands take are Args'.

// report's own: --callers, --callees.
struct ReportArgs {
    std::string callers, callees;
};

// lines' (report --lines): the line tables' options (--source-dir is html's too).
struct LinesArgs {
    bool chosen = false;      // lines or --lines; with --memory, memory_profiler's view
    render::LineOptions opts; // --unit, --source-dir, and --memory for the line view
    bool unit_given = false;
};

// memory's (report --memory): the memory report's plot.
struct MemoryArgs {
    std::string plot; // --plot FILE
};

// tree's (report --tree): --depth, --min-percent.
struct TreeArgs {
    bool chosen = false;
    render::TreeOptions opts;
};

// flamegraph's (report --flamegraph FILE): its file, --icicle, --min-width.
struct FlamegraphArgs {
    std::string file;
    bool icicle = false;
    double min_width = 0.1;
};

// html's (report --html FILE): its file.
struct HtmlArgs {
    std::string file;
};

// export's (report --export FORMAT): the format, and the timelines' --from, --to,
// --min-duration.
struct ExportArgs {
    const ExportFormat* format = nullptr;
    render::TimelineOptions timeline;
};

// diff's: where the new traces start (BASE... --vs NEW...), and the gate and metric
// (--fail-above, --metric, --min-share).
struct DiffArgs {
    bool chosen = false;
    size_t vs = SIZE_MAX; // index of the first new trace
    analysis::views::DiffOptions opts;
    // The pictures (their files: Args::html, Args::flamegraph, and this one): the folded
    // "stack base new" lines, and whether the flame graph's widths are the base's.
    std::string folded;
    bool base_widths = false;
};

// latency's: how many functions get their slowest calls and tail, and how many slow calls.
struct LatencyArgs {
    size_t detail = 3;
    size_t slowest = 3;
};

struct Args {
    // Every command's: the traces, how they are read, and the output.
    std::vector<std::string> traces;
    std::vector<std::string> run_dirs; // the run directories among the arguments
    std::string process;               // --process PID|NAME: one process of a run
    bool raw = false;                  // --no-compensation
    bool no_inline = false;            // sampled traces: physical frames only
    unsigned jobs = 0;                 // 0: one per core
    analysis::TimeSource time = analysis::TimeSource::kAuto;
    analysis::Clock clock = analysis::Clock::kWall; // --clock
    bool clock_given = false;
    std::string format = "text", output;

    // Taken by several commands: the table's options, the threads', --memory, --title, --weight.
    render::TableOptions table;
    bool limit_given = false, sort_given = false;
    bool threads = false;
    std::optional<uint32_t> thread;
    bool memory = false; // the allocations (memory, lines, flamegraph, diff, export)
    std::string title;   // flamegraph's and html's
    std::optional<analysis::views::MemoryWeight> weight; // flamegraph --memory, diff --memory

    // Each command's own.
    ReportArgs report;
    LinesArgs lines;
    MemoryArgs memory_report;
    TreeArgs tree;
    FlamegraphArgs flamegraph;
    HtmlArgs html;
    ExportArgs exporter;
    DiffArgs diff;
    LatencyArgs latency;
    bool info = false;      // info, report --info
    bool ranks = false;     // ranks, report --ranks: the MPI load-imbalance table
    bool processes = false; // processes: the run directories are listed, not read

    // Whether a view or an export was chosen (tree, flamegraph, html, export or diff).
    bool view() const {
        return diff.chosen || tree.chosen || !flamegraph.file.empty() || !html.file.empty() ||
               exporter.format;
    }
    // The command to run, set by the one the command line named (report's by its flags).
    int (*command)(const Args&, const tools::ToolLog&) = nullptr;
};

// Rules that two commands declare (flamegraph and diff, flamegraph and report), written once.
inline constexpr const char* kWeightRule =
    "--weight applies to --flamegraph --memory and diff --memory";
inline constexpr const char* kPerProcessRule =
    "allocation sites are per process: --threads and --thread do not apply to --memory views";

// For the declarations of options, the commands' own too: a refusal of the value given (a usage
// error with this message), and the values' parsers, which refuse with the option's name.
[[noreturn]] void refuse(std::string msg);
uint64_t parse_number(const std::string& opt, const std::string& v);
double parse_percent(const std::string& opt, std::string v);       // 5 or 5%
uint64_t parse_time(const std::string& opt, const std::string& v); // 1.5s, 200ms, 30us, 100ns
// An option whose value `set` takes apart (and refuses with its own message).
template <class Set>
CLI::Option* value(CLI::App& app, const std::string& names, const char* type, Set set,
                   const std::string& description) {
    return app.add_option_function<std::string>(names, set, description)->type_name(type);
}

// Every command: TRACE..., --no-compensation, --time, -j/--jobs.
CLI::Option* declare_traces(tools::Cli& cli, CLI::App& app, Args& a);
void declare_reading(CLI::App& app, Args& a);
CLI::Option* declare_output(CLI::App& app, Args& a);
// -f/--format with the formats the command prints.
CLI::Option* declare_format(CLI::App& app, Args& a, std::vector<std::string> formats);
// The table's options: --sort, --limit, --match, --full-paths, --precision.
struct TableFlags {
    CLI::Option *sort, *limit, *match, *full_paths, *precision;
};
TableFlags declare_table(CLI::App& app, Args& a);
CLI::Option* declare_limit(CLI::App& app, Args& a);
CLI::Option* declare_precision(CLI::App& app, Args& a);
CLI::Option* declare_full_paths(CLI::App& app, Args& a);
// --threads and --thread TID.
std::pair<CLI::Option*, CLI::Option*> declare_threads(CLI::App& app, Args& a);
CLI::Option* declare_thread(CLI::App& app, Args& a);
// --lines' own: --unit, --source-dir.
CLI::Option* declare_unit(CLI::App& app, Args& a);
CLI::Option* declare_source_dir(CLI::App& app, Args& a);
CLI::Option* declare_memory_flag(CLI::App& app, Args& a, const std::string& description);
CLI::Option* declare_weight(CLI::App& app, Args& a, const std::string& description);
CLI::Option* declare_title(CLI::App& app, Args& a, const std::string& description);
// The checks that depend on the values given, after parsing: the message of the first
// combination refused, or "" when the command line is good.
std::string check(Args& a, const tools::ToolLog& log);

} // namespace prof::profreport
