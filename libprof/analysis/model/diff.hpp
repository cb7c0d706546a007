// Per-function comparison of two profiles (two traces, or two sets of runs averaged per run):
// ncalls, tottime and cumtime deltas and ratios, ordered by the largest regression, and a
// pass/fail verdict for CI gates.
#pragma once

#include "analysis/model/profile.hpp"
#include "analysis/model/memory.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace prof::analysis::views {

enum class DiffMetric { kCumtime, kTottime, kNcalls };

struct DiffOptions {
    DiffMetric metric = DiffMetric::kCumtime; // what --fail-above and the ordering look at
    double fail_above = -1;                   // percent; negative: never fail
    // Functions below this share (percent) of the total in both profiles are reported but
    // never fail the gate: a 2 us function doubling is noise, not a regression.
    double min_share = 1.0;
    size_t limit = 0;
    int precision = 6;
};

struct DiffRow {
    std::string name, file; // file without directories
    uint32_t line = 0;
    bool in_base = false, in_new = false;
    Stats base, next;        // per run
    double change = 0;       // metric: new - base
    double percent = 0;      // metric: relative change; +inf for a new function
    bool regression = false; // beyond fail_above and above min_share
};

struct DiffResult {
    size_t base_runs = 1, new_runs = 1;
    Stats base_total, new_total; // ncalls, pcalls, tottime (= total time) per run
    double total_percent = 0;    // of the metric's total
    bool total_regression = false;
    std::vector<DiffRow> rows; // ordered by `change`, largest first
    bool failed() const;
};

std::optional<DiffMetric> parse_diff_metric(const std::string& s);
DiffResult diff_profiles(const Profile& base, size_t base_runs, const Profile& next,
                         size_t new_runs, const DiffOptions& o);
// One line per reason the gate fails ("cumtime of f regressed by 12.3% (limit 5%)").
std::vector<std::string> diff_failures(const DiffResult& d, const DiffOptions& o);

// ---- memory diff (profreport diff --memory) ---------------------------------------------------
// Allocation sites are matched by the function names of their stacks (memory_frame_name,
// innermost first: not by line or address, which move between builds); sets of runs are
// compared per run (each measure is the mean over the set's traces).

struct MemoryValues {
    double allocations = 0, bytes = 0, peak = 0, leaked = 0; // peak: bytes live at the peak
    double get(MemoryWeight w) const;
};

struct MemoryDiffOptions {
    // The measure that orders the sites and that --fail-above checks; unset: ordered by bytes,
    // and every measure is checked.
    std::optional<MemoryWeight> measure;
    double fail_above = -1; // percent; negative: never fail
    // Sites under this share (percent) of a measure's total in both runs never fail on it.
    double min_share = 1.0;
    size_t limit = 0;
};

struct MemoryDiffRow {
    std::vector<std::string> stack; // frame names, innermost first
    bool in_base = false, in_new = false;
    MemoryValues base, next; // per run
    double change = 0;       // of the ordering measure: new - base
    std::vector<MemoryWeight> regressed; // measures beyond fail_above (and above min_share)
};

struct MemoryDiffResult {
    size_t base_runs = 1, new_runs = 1;
    MemoryValues base_total, new_total; // allocations, bytes allocated, peak heap, leaked
    double base_rss = 0, new_rss = 0;   // peak RSS (reported, never checked: not the program's alone)
    std::vector<MemoryWeight> total_regressed;
    std::vector<MemoryDiffRow> rows; // ordered by `change`, largest first
    bool failed() const;
};

// One report per run of each set. Throws std::invalid_argument when a set has no memory data.
MemoryDiffResult diff_memory(const std::vector<MemoryReport>& base,
                             const std::vector<MemoryReport>& next, const MemoryDiffOptions& o);
// One line per reason the gate fails ("bytes of grow() < main regressed by 20.0% (limit 5%)").
std::vector<std::string> memory_diff_failures(const MemoryDiffResult& d,
                                              const MemoryDiffOptions& o);

// ---- shared by the verdicts and the renderings ---------------------------------------------
double metric(const Stats& s, DiffMetric m);
const char* metric_name(DiffMetric m); // "cumtime"
// Change from base to next in percent; infinite for something new.
double percent(double base, double next);
// The memory measures, in the order tables list them.
inline constexpr MemoryWeight kMemoryMeasures[] = {MemoryWeight::kAllocations, MemoryWeight::kBytes,
                                                   MemoryWeight::kPeak, MemoryWeight::kLeaked};
// What a measure is called in messages, for a site or for the whole run.
const char* measure_label(MemoryWeight w, bool total);
// A site's stack as "f < g < h < ...", at most `frames` frames.
std::string site_text(const std::vector<std::string>& stack, size_t frames = 4);
// Means of whole numbers: whole unless the runs disagree.
std::string amount(double v);

} // namespace prof::analysis::views
