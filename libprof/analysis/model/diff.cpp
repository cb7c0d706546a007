// diff: functions are matched by name and source file (not by line or address, which move
// between builds); sets of runs are compared per run.
#include "analysis/model/diff.hpp"

#include "reader/trace_reader.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

namespace prof::analysis::views {
namespace {

std::string base_name(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

Stats scaled(const Stats& s, size_t runs) {
    if (runs <= 1) return s;
    Stats r;
    r.ncalls = uint64_t(std::llround(double(s.ncalls) / runs));
    r.pcalls = uint64_t(std::llround(double(s.pcalls) / runs));
    r.tottime = s.tottime / runs;
    r.cumtime = s.cumtime / runs;
    return r;
}

} // namespace

double metric(const Stats& s, DiffMetric m) {
    switch (m) {
    case DiffMetric::kTottime:
        return s.tottime;
    case DiffMetric::kNcalls:
        return double(s.ncalls);
    default:
        return s.cumtime;
    }
}

const char* metric_name(DiffMetric m) {
    switch (m) {
    case DiffMetric::kTottime:
        return "tottime";
    case DiffMetric::kNcalls:
        return "ncalls";
    default:
        return "cumtime";
    }
}

double percent(double base, double next) {
    if (base == next) return 0;
    if (base <= 0) return std::numeric_limits<double>::infinity();
    return 100.0 * (next - base) / base;
}

// What a measure is called in messages, for a site or for the whole run.
const char* measure_label(MemoryWeight w, bool total) {
    switch (w) {
    case MemoryWeight::kAllocations:
        return "allocations";
    case MemoryWeight::kPeak:
        return total ? "peak heap" : "bytes live at the peak";
    case MemoryWeight::kLeaked:
        return "leaked bytes";
    default:
        return "bytes allocated";
    }
}

std::string site_text(const std::vector<std::string>& stack, size_t frames) {
    if (stack.empty()) return "[no stack]";
    std::string s;
    for (size_t i = 0; i < stack.size() && i < frames; ++i) s += (i ? " < " : "") + stack[i];
    if (stack.size() > frames) s += " < ...";
    return s;
}

// Means of whole numbers: whole unless the runs disagree.
std::string amount(double v) {
    return v == std::floor(v) ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v);
}

std::optional<DiffMetric> parse_diff_metric(const std::string& s) {
    if (s == "cumtime" || s == "cumulative") return DiffMetric::kCumtime;
    if (s == "tottime" || s == "time") return DiffMetric::kTottime;
    if (s == "ncalls" || s == "calls") return DiffMetric::kNcalls;
    return std::nullopt;
}

bool DiffResult::failed() const {
    if (total_regression) return true;
    return std::any_of(rows.begin(), rows.end(), [](const DiffRow& r) { return r.regression; });
}

DiffResult diff_profiles(const Profile& base, size_t base_runs, const Profile& next,
                         size_t new_runs, const DiffOptions& o) {
    DiffResult d;
    d.base_runs = std::max<size_t>(base_runs, 1);
    d.new_runs = std::max<size_t>(new_runs, 1);
    std::map<std::pair<std::string, std::string>, DiffRow> rows;
    auto add = [&](const Profile& p, size_t runs, bool is_new) {
        for (const Function& f : p.functions) {
            DiffRow& r = rows[{f.name, base_name(f.file)}];
            r.name = f.name;
            r.file = f.file.empty() ? base_name(f.module) : base_name(f.file);
            r.line = f.line;
            Stats& s = is_new ? r.next : r.base;
            Stats per_run = scaled(f.stats, runs);
            s.add(per_run);
            (is_new ? r.in_new : r.in_base) = true;
        }
    };
    add(base, d.base_runs, false);
    add(next, d.new_runs, true);
    d.base_total = Stats{uint64_t(std::llround(double(base.total_calls) / d.base_runs)),
                         uint64_t(std::llround(double(base.primitive_calls) / d.base_runs)),
                         base.total_time / d.base_runs, base.total_time / d.base_runs};
    d.new_total = Stats{uint64_t(std::llround(double(next.total_calls) / d.new_runs)),
                        uint64_t(std::llround(double(next.primitive_calls) / d.new_runs)),
                        next.total_time / d.new_runs, next.total_time / d.new_runs};
    double base_total = metric(d.base_total, o.metric), new_total = metric(d.new_total, o.metric);
    d.total_percent = percent(base_total, new_total);
    d.total_regression = o.fail_above >= 0 && d.total_percent > o.fail_above;
    for (auto& [key, r] : rows) {
        double b = metric(r.base, o.metric), n = metric(r.next, o.metric);
        r.change = n - b;
        r.percent = percent(b, n);
        bool big = (base_total > 0 && 100.0 * b / base_total >= o.min_share) ||
                   (new_total > 0 && 100.0 * n / new_total >= o.min_share);
        r.regression = o.fail_above >= 0 && big && r.in_new && r.percent > o.fail_above;
        d.rows.push_back(std::move(r));
    }
    std::stable_sort(d.rows.begin(), d.rows.end(), [](const DiffRow& a, const DiffRow& b) {
        if (a.change != b.change) return a.change > b.change;
        return a.name < b.name;
    });
    if (o.limit && d.rows.size() > o.limit) {
        // Rows past the limit are not shown, but a regression among them still fails the gate.
        std::stable_partition(d.rows.begin() + long(o.limit), d.rows.end(),
                              [](const DiffRow& r) { return r.regression; });
        size_t keep = o.limit;
        while (keep < d.rows.size() && d.rows[keep].regression) ++keep;
        d.rows.resize(keep);
    }
    return d;
}

std::vector<std::string> diff_failures(const DiffResult& d, const DiffOptions& o) {
    std::vector<std::string> out;
    const char* m = metric_name(o.metric);
    if (d.total_regression)
        out.push_back(fmt::format("total {} regressed by {:.1f}% (limit {}%)",
                                  o.metric == DiffMetric::kNcalls ? "calls" : "time",
                                  d.total_percent, o.fail_above));
    for (const DiffRow& r : d.rows)
        if (r.regression)
            out.push_back(std::isinf(r.percent)
                              ? fmt::format("{} of {}:{}({}) is new", m, r.file, r.line, r.name)
                              : fmt::format("{} of {}:{}({}) regressed by {:.1f}% (limit {}%)", m,
                                            r.file, r.line, r.name, r.percent, o.fail_above));
    return out;
}

namespace {

std::vector<MemoryWeight> checked_measures(const MemoryDiffOptions& o) {
    if (o.measure) return {*o.measure};
    return {std::begin(kMemoryMeasures), std::end(kMemoryMeasures)};
}

} // namespace

double MemoryValues::get(MemoryWeight w) const {
    switch (w) {
    case MemoryWeight::kAllocations:
        return allocations;
    case MemoryWeight::kPeak:
        return peak;
    case MemoryWeight::kLeaked:
        return leaked;
    default:
        return bytes;
    }
}

bool MemoryDiffResult::failed() const {
    if (!total_regressed.empty()) return true;
    return std::any_of(rows.begin(), rows.end(),
                       [](const MemoryDiffRow& r) { return !r.regressed.empty(); });
}

MemoryDiffResult diff_memory(const std::vector<MemoryReport>& base,
                             const std::vector<MemoryReport>& next, const MemoryDiffOptions& o) {
    auto present = [](const std::vector<MemoryReport>& set) {
        return std::any_of(set.begin(), set.end(), [](const MemoryReport& m) { return m.present; });
    };
    if (!present(base) || !present(next))
        throw std::invalid_argument(fmt::format(
            "no allocation data in the {} trace{}: record them with `profrun --mem`",
            present(base) ? "new" : "base", (present(base) ? next : base).size() == 1 ? "" : "s"));
    MemoryDiffResult d;
    d.base_runs = std::max<size_t>(base.size(), 1);
    d.new_runs = std::max<size_t>(next.size(), 1);
    std::map<std::vector<std::string>, MemoryDiffRow> rows;
    auto add = [&](const std::vector<MemoryReport>& set, bool is_new) {
        double runs = double(std::max<size_t>(set.size(), 1));
        MemoryValues& total = is_new ? d.new_total : d.base_total;
        double& rss = is_new ? d.new_rss : d.base_rss;
        for (const MemoryReport& m : set) {
            total.allocations += double(m.allocations) / runs;
            total.bytes += double(m.bytes_allocated) / runs;
            total.peak += double(m.peak_heap) / runs;
            total.leaked += double(m.leaked_bytes) / runs;
            rss += double(m.peak_rss) / runs;
            for (const MemorySite& s : m.sites) {
                std::vector<std::string> key;
                for (const MemoryFrame& f : s.stack) key.push_back(memory_frame_name(f));
                MemoryDiffRow& r = rows[key];
                r.stack = key;
                MemoryValues& v = is_new ? r.next : r.base;
                v.allocations += double(s.allocations) / runs;
                v.bytes += double(s.bytes) / runs;
                v.peak += double(s.peak_bytes) / runs;
                v.leaked += double(s.leaked_bytes) / runs;
                (is_new ? r.in_new : r.in_base) = true;
            }
        }
    };
    add(base, false);
    add(next, true);
    const std::vector<MemoryWeight> measures = checked_measures(o);
    const bool gate = o.fail_above >= 0;
    for (MemoryWeight w : measures)
        if (gate && percent(d.base_total.get(w), d.new_total.get(w)) > o.fail_above)
            d.total_regressed.push_back(w);
    const MemoryWeight order = o.measure.value_or(MemoryWeight::kBytes);
    for (auto& [key, r] : rows) {
        r.change = r.next.get(order) - r.base.get(order);
        for (MemoryWeight w : measures) {
            double b = r.base.get(w), n = r.next.get(w);
            double bt = d.base_total.get(w), nt = d.new_total.get(w);
            bool big = (bt > 0 && 100.0 * b / bt >= o.min_share) ||
                       (nt > 0 && 100.0 * n / nt >= o.min_share);
            if (gate && big && r.in_new && percent(b, n) > o.fail_above) r.regressed.push_back(w);
        }
        d.rows.push_back(std::move(r));
    }
    std::stable_sort(d.rows.begin(), d.rows.end(), [](const MemoryDiffRow& a, const MemoryDiffRow& b) {
        if (a.change != b.change) return a.change > b.change;
        return a.stack < b.stack;
    });
    if (o.limit && d.rows.size() > o.limit) {
        // Rows past the limit are not shown, but a regression among them still fails the gate.
        std::stable_partition(d.rows.begin() + o.limit, d.rows.end(),
                              [](const MemoryDiffRow& r) { return !r.regressed.empty(); });
        size_t keep = o.limit;
        while (keep < d.rows.size() && !d.rows[keep].regressed.empty()) ++keep;
        d.rows.resize(keep);
    }
    return d;
}

std::vector<std::string> memory_diff_failures(const MemoryDiffResult& d,
                                              const MemoryDiffOptions& o) {
    std::vector<std::string> out;
    for (MemoryWeight w : d.total_regressed) {
        double b = d.base_total.get(w), n = d.new_total.get(w);
        double p = percent(b, n);
        out.push_back(std::isinf(p)
                          ? fmt::format("total {} is {} where the base had none", measure_label(w, true),
                                        amount(n))
                          : fmt::format("total {} regressed by {:.1f}% (limit {}%)",
                                        measure_label(w, true), p, o.fail_above));
    }
    for (const MemoryDiffRow& r : d.rows)
        for (MemoryWeight w : r.regressed) {
            double p = percent(r.base.get(w), r.next.get(w));
            out.push_back(std::isinf(p)
                              ? fmt::format("{} of {} is new ({})", measure_label(w, false),
                                            site_text(r.stack), amount(r.next.get(w)))
                              : fmt::format("{} of {} regressed by {:.1f}% (limit {}%)",
                                            measure_label(w, false), site_text(r.stack), p,
                                            o.fail_above));
        }
    for (std::string& s : out) s = text::printable(s);
    return out;
}

} // namespace prof::analysis::views
