// profreport's export formats as one table: each format's name, help, input, `--format` choices
// and options, and its renderer. `--export` and `profreport export` parse, list, check and run
// the formats from it; nothing else names a format.
#pragma once

#include "analysis/engine/session.hpp"
#include "analysis/model/call_tree.hpp"
#include "options.hpp"
#include "render/timeline.hpp"

#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace prof::profreport {

// What a format is rendered from, read by `profreport export` before the renderer runs.
enum class ExportInput {
    kMerged,     // the traces merged into one session: its call tree (--threads, --thread apply)
    kPerProcess, // each trace read into a session of its own (a process), in the order given
    kStreamed,   // the traces' paths: the renderer streams them (timelines)
};

// The options of the export command line a format takes besides -o, --threads, --thread and
// the reading's; any other format refuses them.
enum ExportOption : unsigned {
    kTimeWindow = 1u << 0, // --from, --to, --min-duration
    kMemory = 1u << 1,     // --memory
};

// The data of one export, as the format's input kind says.
struct ExportData {
    const Args& args;
    const analysis::views::CallTree* tree = nullptr; // kMerged
    // kPerProcess: one session per trace, in the order of args.traces.
    const std::vector<std::unique_ptr<analysis::Session>>* processes = nullptr;
    analysis::ProgressFn progress{}; // kStreamed: while the traces are read
};

// The output, opened by the renderer once its data is ready (so that a failure before leaves
// the target untouched); null when it cannot be opened, which was reported.
using OpenOutput = std::function<std::FILE*()>;

struct ExportResult {
    bool written = false;              // false: the output could not be opened
    std::vector<std::string> notes{};  // said once the output is complete
    render::TimelineResult timeline{}; // kStreamed: for the size warning and --thread
};

// Every export format's renderer has this shape; it throws on an error of the data (one line).
using ExportRender = ExportResult (*)(const ExportData& data, const OpenOutput& open);

struct ExportFormat {
    std::string_view name{};
    std::string_view alias{};   // another name for it ("perfetto"), or empty
    std::string_view summary{}; // a few words for one-line lists ("" when the name says it)
    std::string_view help{};    // `profreport export --help`'s lines for it (lines apart by '\n')
    ExportInput input{};
    // The --format values it takes, the default first (empty: none, only the default text),
    // and their help.
    std::vector<std::string_view> formats{};
    std::string_view formats_help{};
    unsigned options = 0; // ExportOption bits
    // Why it refuses to write to a terminal ("writes a gzipped file: give -o FILE.pb.gz"), or
    // empty when it writes text.
    std::string_view no_terminal{};
    ExportRender render{};
};

std::span<const ExportFormat> export_formats();
// The format named (or aliased) `name`, or null.
const ExportFormat* find_export_format(std::string_view name);

// "chrome, speedscope, ..., pprof or rows": the names of the formats `keep` selects.
std::string export_format_names(const std::function<bool(const ExportFormat&)>& keep = {},
                                std::string_view last_separator = " or ");
// "FORMAT one of chrome (Chrome Trace Event JSON), speedscope, ...": for --export's help.
std::string export_format_list();
// The block of `profreport export --help` that names each format and says what it is.
std::string export_format_help();

// Whether `f` takes `--format format`.
bool takes_format(const ExportFormat& f, std::string_view format);
// The refusals of a --format that --tree, --flamegraph, --html or an export does not take: they
// name the formats that take it.
std::string format_json_refusal();
std::string format_refusal();

// Declares the option or positional `name` that takes an export format into
// `a.exporter.format`: the table's names and aliases, anything else refused by CLI11 with the
// list of names.
CLI::Option* declare_export_format(CLI::App& app, Args& a, const std::string& name,
                                   const std::string& description);

} // namespace prof::profreport
