#include "analysis/model/noise.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace prof::analysis::views::noise {

double sample_period(const TimeBasis& time) {
    // cpu_seconds stands for every sample, the profiler's own included.
    uint64_t samples = time.samples + time.own_samples;
    return time.samples && time.cpu_seconds > 0 ? time.cpu_seconds / double(samples) : 0;
}

void Measure::add(size_t run, double value, double period, bool timed) {
    sum += value;
    if (run < each.size()) each[run] += value;
    // A time from n samples of period s: n s with variance n s^2 = value * s.
    if (timed) sampling_var += std::max(value, 0.0) * period;
}

double Measure::run_variance(const Side& side) const {
    double runs = double(side.runs);
    double sampling = sampling_var / runs;
    if (!side.per_run()) return sampling;
    double mean = sum / runs, between = 0;
    for (double v : each) between += (v - mean) * (v - mean);
    return std::max(between / (runs - 1), sampling);
}

namespace {

// The 97.5% quantile of Student's t with `df` degrees of freedom: two-sided 95%.
// Between the table's rows, the row of fewer degrees (the larger t): never narrower than it is.
double t_quantile(double df) {
    static constexpr std::pair<double, double> kTable[] = {
        {1, 12.71}, {2, 4.30},  {3, 3.18},  {4, 2.78},  {5, 2.57},  {6, 2.45},
        {7, 2.36},  {8, 2.31},  {9, 2.26},  {10, 2.23}, {12, 2.18}, {15, 2.13},
        {20, 2.09}, {30, 2.04}, {40, 2.02}, {60, 2.00}, {120, 1.98}};
    double t = 12.71;
    for (auto [d, q] : kTable)
        if (df >= d) t = q;
    return df >= 1000 ? 1.96 : t;
}

} // namespace

// With the spread between runs known, Student's t at Welch's degrees of freedom (few runs
// widen it); with the sampling error alone, the normal's.
//
// With several runs on one side only, the other side's one run is taken to vary as much as
// the runs of the side that shows it (a single run has no spread of its own), at that side's
// runs - 1 degrees of freedom: three base runs against one new run do not take a change from
// run to run for a regression.
double uncertainty(const Measure& b, const Measure& n, const Side& base, const Side& next) {
    double vb = b.mean_variance(base), vn = n.mean_variance(next);
    if (base.per_run() && next.per_run()) {
        double var = vb + vn;
        if (var <= 0) return 0;
        double df = var * var / (vb * vb / double(base.runs - 1) + vn * vn / double(next.runs - 1));
        return t_quantile(df) * std::sqrt(var);
    }
    if (base.per_run() != next.per_run()) {
        const Side& known = base.per_run() ? base : next;
        const Side& single = base.per_run() ? next : base;
        const Measure& spread = base.per_run() ? b : n;
        double single_var =
            std::max(spread.run_variance(known) / double(single.runs), base.per_run() ? vn : vb);
        double var = (base.per_run() ? vb : vn) + single_var;
        if (var <= 0) return 0;
        return t_quantile(double(known.runs - 1)) * std::sqrt(var);
    }
    double var = vb + vn;
    return var > 0 ? 1.96 * std::sqrt(var) : 0;
}

} // namespace prof::analysis::views::noise
