// What a difference between two sets of runs knows of its own noise: each side's sum and runs
// of one measure, the sampling error of times taken from CPU samples, and the uncertainty (95%)
// of the change of the mean per run. Shared by the per-function diff and the diff of call
// trees (analysis/model/diff.hpp, diff_tree.hpp), so that a change has one uncertainty
// wherever it is shown.
#pragma once

#include "analysis/model/profile.hpp"

#include <cstddef>
#include <vector>

namespace prof::analysis::views::noise {

// The runs of one side: `runs` runs, each known on its own (`each_run`, two or more) or merged.
struct Side {
    size_t runs = 1;
    bool each_run = false;
    bool per_run() const { return each_run && runs >= 2; }
};

// Seconds per CPU sample of a run timed by samples; 0 for one a clock timed per call.
double sample_period(const TimeBasis& time);

// What one side knows of one measure: its sum over the side's runs, each run's value, and the
// variance of the sum that sampling alone gives.
struct Measure {
    double sum = 0, sampling_var = 0;
    std::vector<double> each; // per run, when the side knows them (Side::per_run)
    // Makes room for the side's runs, once (before the first add of a side).
    void fit(const Side& side) {
        size_t runs = side.per_run() ? side.runs : 0;
        if (each.size() != runs) each.assign(runs, 0.0);
    }
    // `value` of run `run`; `period` its seconds (or the unit's) per sample, `timed` whether
    // the value is a time that sampling made.
    void add(size_t run, double value, double period, bool timed);
    // The variance of one run's value: the sample variance between the side's runs (two or
    // more), never less than one run's sampling variance.
    double run_variance(const Side& side) const;
    // The variance of the side's mean per run.
    double mean_variance(const Side& side) const { return run_variance(side) / double(side.runs); }
};

// Two standard errors (95%) of the difference of the two sides' means per run.
double uncertainty(const Measure& base, const Measure& next, const Side& base_side,
                   const Side& new_side);

} // namespace prof::analysis::views::noise
