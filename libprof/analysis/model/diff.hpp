// Per-function comparison of two profiles (two traces, or two sets of runs averaged per run):
// ncalls, tottime and cumtime deltas and ratios, ordered by the largest regression, and a
// pass/fail verdict for CI gates that knows the noise.
//
// Each change comes with its uncertainty, 95%: about two standard errors of the difference of
// the two means (Student's t at Welch's degrees of freedom when the spread between runs is
// known, so that three runs a side widen it to 2.8). A side's standard error is what its runs know:
// the spread between them (two runs or more), and never less than the sampling error of times taken
// from CPU samples (a function's time from n samples of period s varies by about s*sqrt(n): the
// square root of its time times the period). Counts, and times a clock measured per call, have no
// sampling error: with one run a side they are compared exactly. A change beyond --fail-above fails
// the gate only when it is beyond its uncertainty too; one within it is undecided, and the report
// says more runs would decide.
#pragma once

#include "analysis/model/latency.hpp"
#include "analysis/model/memory.hpp"
#include "analysis/model/profile.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace prof::analysis::views {

// kP99: the 99th percentile of a function's calls' durations (diff_tails), with its p50.
enum class DiffMetric { kCumtime, kTottime, kNcalls, kP99 };

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
    double uncertainty = 0;  // of `change`, in the metric's unit (95%); 0: exact
    double percent_uncertainty = 0; // the same in percent of the base; inf for a new function
    bool regression = false;        // beyond fail_above and its uncertainty, above min_share
    bool undecided = false;         // beyond fail_above, above min_share, within its uncertainty
};

struct DiffResult {
    size_t base_runs = 1, new_runs = 1;
    Stats base_total, new_total; // ncalls, pcalls, tottime (= total time) per run
    double total_percent = 0;    // of the metric's total
    double total_uncertainty = 0; // of the total's change, in percent of the base (95%)
    bool total_regression = false, total_undecided = false;
    // Whether the spread between runs is known (two runs or more on each side); otherwise
    // only the sampling error is.
    bool spread_known = false;
    std::vector<DiffRow> rows; // ordered by `change`, largest first
    bool failed() const;
    bool undecided() const; // something changed beyond the limit within the noise
};

std::optional<DiffMetric> parse_diff_metric(const std::string& s);
// Two sets of runs, one profile per run: means per run, and the spread between runs.
DiffResult diff_runs(const std::vector<Profile>& base, const std::vector<Profile>& next,
                     const DiffOptions& o);
// The tail of each function's calls (o.metric kP99), one latency report per run: in each row's
// Stats, ncalls is the calls, tottime the p50 and cumtime the p99 (seconds), means per run. A
// run's p99 varies as its confidence interval says (LatencyReport's p99_low, p99_high), and
// with two runs or more a side as the runs do. No total is gated.
DiffResult diff_tails(const std::vector<LatencyReport>& base,
                      const std::vector<LatencyReport>& next, const DiffOptions& o);
// Two profiles, each merged from `runs` runs: means per run; the spread between runs is not
// known, only the sampling error.
DiffResult diff_profiles(const Profile& base, size_t base_runs, const Profile& next,
                         size_t new_runs, const DiffOptions& o);
// Caller -> callee pairs of both sides, matched like the rows: what the differential views
// show as a function's callers and callees.
struct DiffEdge {
    size_t caller = SIZE_MAX; // index into DiffResult::rows; SIZE_MAX: the start of a thread
    size_t callee = 0;        // index into DiffResult::rows
    Stats base, next;         // the callee's calls from this caller, per run
    double uncertainty = 0;   // of next.cumtime - base.cumtime (95%); 0: exact
};
// The edges of the runs `d` was made from (by diff_runs, without a limit: every function has
// its row).
std::vector<DiffEdge> diff_edges(const DiffResult& d, const std::vector<Profile>& base,
                                 const std::vector<Profile>& next);
// One line per reason the gate fails ("cumtime of f regressed by 12.3% +-2.1 (limit 5%)").
std::vector<std::string> diff_failures(const DiffResult& d, const DiffOptions& o);
// One line per change beyond the limit that the noise cannot tell from none, and what would
// decide it.
std::vector<std::string> diff_undecided(const DiffResult& d, const DiffOptions& o);

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
// What the table's two time columns hold: "tottime" and "cumtime", or "p50" and "p99".
const char* time_column(DiffMetric m, int which);
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
