// profreport's command line: the values every command reads, and the declarations of the
// options that several commands share (each declared once, called once per command).
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

// Views and exports.
struct ViewArgs {
    bool diff = false, tree = false, icicle = false;
    double min_width = 0.1;
    size_t vs = SIZE_MAX; // index of the first new trace of diff's `--vs`
    std::string flamegraph, html, title;
    const ExportFormat* exporter = nullptr; // --export FORMAT, profreport export FORMAT
    std::optional<analysis::views::MemoryWeight> weight; // --weight (with --memory)
    analysis::views::TreeOptions tree_opts;
    analysis::views::TimelineOptions timeline;
    analysis::views::DiffOptions diff_opts;
    bool metric_given = false;
    bool active() const { return diff || tree || !flamegraph.empty() || !html.empty() || exporter; }
};

struct Args {
    analysis::TableOptions table;
    std::vector<std::string> traces;
    std::string callers, callees, format = "text", output;
    std::optional<uint32_t> thread;
    bool threads = false, info = false, lines = false, memory = false, raw = false;
    bool processes = false;         // profreport processes DIR...
    bool ranks = false;             // profreport ranks / --ranks: the MPI load-imbalance table
    std::string process;            // --process PID|NAME: one process of a run
    std::vector<std::string> run_dirs; // the run directories among the arguments
    bool no_inline = false; // sampled traces: physical frames only
    bool limit_given = false, sort_given = false, unit_given = false;
    unsigned jobs = 0; // 0: one per core
    analysis::TimeSource time = analysis::TimeSource::kAuto;
    std::string plot;
    analysis::LineOptions line;
    ViewArgs view;
    // The command to run, set by the one the command line named (report's by its flags).
    int (*command)(const Args&, const tools::ToolLog&) = nullptr;
};

// Rules that two commands declare (flamegraph and diff, flamegraph and report), written once.
inline constexpr const char* kWeightRule =
    "--weight applies to --flamegraph --memory and diff --memory";
inline constexpr const char* kPerProcessRule =
    "allocation sites are per process: --threads and --thread do not apply to --memory views";

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
// --tree's: --depth, --min-percent; `context` leads their help ("with --tree: " on report).
void declare_tree_options(CLI::App& app, Args& a, const std::string& context = "");
// --flamegraph's: --icicle, --min-width, and --title (also --html's).
void declare_flame_options(CLI::App& app, Args& a);
CLI::Option* declare_title(CLI::App& app, Args& a, const std::string& description);
// chrome/speedscope's: --from, --to, --min-duration.
void declare_timeline_options(CLI::App& app, Args& a);
// diff's: --fail-above, --metric, --min-share (and --vs with the traces).
CLI::Option* declare_diff_options(CLI::App& app, Args& a);
// The checks that depend on the values given, after parsing: the message of the first
// combination refused, or "" when the command line is good.
std::string check(Args& a, const tools::ToolLog& log);

} // namespace prof::profreport
