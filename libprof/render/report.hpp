// Text, CSV and JSON renderings of a Profile: the pstats table, callers and callees.
// Tools choose what to print; the layout of each view lives here, once.
#pragma once

#include "render/model.hpp"

#include "analysis/model/profile.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace prof::render {

enum class SortKey { kCumtime, kTottime, kNcalls, kPcalls, kName, kFile, kLine, kNfl, kStdname };

// Accepts pstats' keys and aliases (cumulative, time, calls, filename, module, ...).
std::optional<SortKey> parse_sort_key(const std::string& s);
const char* sort_description(SortKey k); // "cumulative time", as pstats prints it
std::vector<size_t> sorted_functions(const Profile& p, SortKey key);

struct TableOptions {
    SortKey sort = SortKey::kCumtime;
    size_t limit = 0;          // 0 = all rows
    std::string filter;        // regex on file:line(name); empty = all
    bool full_paths = false;   // keep directories in file names
    int precision = 3;         // decimals of the time columns
    std::string title;         // printed above the table (e.g. the thread)
};

// The cProfile/pstats table with its header line.
void print_table(std::FILE* out, const Profile& p, const TableOptions& o);
// How the times were obtained, for a report's header: "times from 2,713 CPU samples at 250 Hz
// (...)", or empty for traces that were never sampled (their times are the hooks', as always).
std::string time_basis_text(const TimeBasis& t);
// How the sampled traces' time splits (on CPU, waiting for a CPU, blocked or sleeping) and which
// of it the functions' times hold (--clock); "" for traces timed by their hooks alone.
std::string time_split_text(const TimeBasis& t);
// The header's lines after the time basis, as the table prints them and the HTML report shows
// them: the time split (time_split_text), the functions whose times cannot be vouched for
// ("uncertain: ..."), those whose frames forked children inherited open ("inherited: ..."), and
// the functions whose hooks cost the most, with GCC's flag that leaves them out ("hint: ...");
// only those that have something to say.
std::vector<std::string> header_notes(const Profile& p);
// A function's name as GCC's -finstrument-functions-exclude-function-list matches it (the
// qualified name without parameters or the function template's own arguments; a class
// template's are kept); "" for an operator or a lambda.
std::string gcc_exclusion_name(const std::string& full_name);
// pstats' print_callers / print_callees for the functions matching `o.filter`.
void print_callers(std::FILE* out, const Profile& p, const TableOptions& o, bool callees);
void print_csv(std::FILE* out, const Profile& p, const TableOptions& o);
// JSON document: traces, totals, functions (name, symbol, module, file, line, ncalls,
// primitive_calls, tottime, cumtime, ...), threads.
void print_json(std::FILE* out, const Profile& p, const TableOptions& o);
// Views rendered per thread (--threads), combined into one document. JSON: an object with a
// `threads` array; each entry holds the thread's `tid`, `stream`, `trace` (index) and `name`,
// then the fields of the thread's own document. CSV: the header once, with a leading `tid`
// column, then every thread's rows. `text` is the document the view prints for one thread.
struct ThreadDocument {
    ThreadSummary thread;
    std::string text;
};
void print_thread_documents(std::FILE* out, const std::vector<ThreadDocument>& docs,
                            const std::string& format);
// Notes about the data (incomplete trace, dropped events, ...), one line each, for stderr.
// A trace whose file is cut short (TraceInfo::partial) has the one line of partial_warning.
// Unfinished traces of one reason share one line; the trace of an image that exec'd another
// (a later trace of its pid on its host) has none: it ends at the exec and lacks nothing.
std::vector<std::string> data_warnings(const Profile& p);
// "PATH: partial: read up to T s of the run (incomplete trace: REASON)".
std::string partial_warning(const reader::TraceInfo& t);
// That line for each partial trace: for the views that print no other note about the data.
std::vector<std::string> partial_warnings(const std::vector<reader::TraceInfo>& traces);

} // namespace prof::render
