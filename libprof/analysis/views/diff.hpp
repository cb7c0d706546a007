// Per-function comparison of two profiles (two traces, or two sets of runs averaged per run):
// ncalls, tottime and cumtime deltas and ratios, ordered by the largest regression, and a
// pass/fail verdict for CI gates.
#pragma once

#include "analysis/profile.hpp"

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
// format: "text", "csv" or "json".
void print_diff(std::FILE* out, const DiffResult& d, const DiffOptions& o,
                const std::string& format);
// One line per reason the gate fails ("cumtime of f regressed by 12.3% (limit 5%)").
std::vector<std::string> diff_failures(const DiffResult& d, const DiffOptions& o);

} // namespace prof::analysis::views
