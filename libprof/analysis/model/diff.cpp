// diff: functions are matched by name and source file (not by line or address, which move
// between builds); sets of runs are compared per run.
#include "analysis/model/diff.hpp"
#include "analysis/model/noise.hpp"

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
    default: // cumtime; a tail's p99
        return s.cumtime;
    }
}

const char* time_column(DiffMetric m, int which) {
    if (m == DiffMetric::kP99) return which ? "p99" : "p50";
    return which ? "cumtime" : "tottime";
}

const char* metric_name(DiffMetric m) {
    switch (m) {
    case DiffMetric::kTottime:
        return "tottime";
    case DiffMetric::kNcalls:
        return "ncalls";
    case DiffMetric::kP99:
        return "p99";
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
    if (s == "p99") return DiffMetric::kP99;
    return std::nullopt;
}

bool DiffResult::undecided() const {
    if (total_undecided) return true;
    return std::any_of(rows.begin(), rows.end(), [](const DiffRow& r) { return r.undecided; });
}

bool DiffResult::failed() const {
    if (total_regression) return true;
    return std::any_of(rows.begin(), rows.end(), [](const DiffRow& r) { return r.regression; });
}

namespace {

using noise::Measure;

// The runs of one side of a diff: one profile per run, or one merged from `runs` runs.
struct Side {
    std::vector<const Profile*> profiles;
    noise::Side noise;
};

bool timed(DiffMetric m) {
    return m != DiffMetric::kNcalls;
}

// A change above the limit (`over`) is a regression beyond its uncertainty, else undecided.
void judge(DiffRow& r, bool over) {
    r.regression = over && r.change > r.uncertainty;
    r.undecided = over && !r.regression;
}

// Largest change first, then the first `limit` rows (0: all). Rows past the limit are not
// shown, but a regression among them still fails the gate, and an undecided change is still
// said: those stay.
void order_and_limit(std::vector<DiffRow>& rows, size_t limit) {
    std::stable_sort(rows.begin(), rows.end(), [](const DiffRow& a, const DiffRow& b) {
        if (a.change != b.change) return a.change > b.change;
        return a.name < b.name;
    });
    if (!limit || rows.size() <= limit) return;
    std::stable_partition(rows.begin() + long(limit), rows.end(),
                          [](const DiffRow& r) { return r.regression || r.undecided; });
    size_t keep = limit;
    while (keep < rows.size() && (rows[keep].regression || rows[keep].undecided)) ++keep;
    rows.resize(keep);
}

DiffResult diff_sides(const Side& base, const Side& next, const DiffOptions& o) {
    DiffResult d;
    d.base_runs = std::max<size_t>(base.noise.runs, 1);
    d.new_runs = std::max<size_t>(next.noise.runs, 1);
    d.spread_known = base.noise.per_run() || next.noise.per_run();
    struct Entry {
        DiffRow row;
        Measure base, next;
    };
    std::map<std::pair<std::string, std::string>, Entry> rows;
    Measure base_total, new_total;
    auto add = [&](const Side& side, bool is_new) {
        Measure& total = is_new ? new_total : base_total;
        total.fit(side.noise);
        for (size_t run = 0; run < side.profiles.size(); ++run) {
            const Profile& p = *side.profiles[run];
            double period = noise::sample_period(p.time);
            for (const Function& f : p.functions) {
                Entry& e = rows[{f.name, base_name(f.file)}];
                DiffRow& r = e.row;
                r.name = f.name;
                r.file = f.file.empty() ? base_name(f.module) : base_name(f.file);
                r.line = f.line;
                (is_new ? r.next : r.base).add(f.stats);
                (is_new ? r.in_new : r.in_base) = true;
                Measure& m = is_new ? e.next : e.base;
                m.fit(side.noise);
                m.add(run, metric(f.stats, o.metric), period, timed(o.metric));
            }
            total.add(run, o.metric == DiffMetric::kNcalls ? double(p.total_calls) : p.total_time,
                      period, timed(o.metric));
            Stats& t = is_new ? d.new_total : d.base_total;
            t.ncalls += p.total_calls;
            t.pcalls += p.primitive_calls;
            t.tottime += p.total_time;
            t.cumtime += p.total_time;
        }
    };
    add(base, false);
    add(next, true);
    d.base_total = scaled(d.base_total, d.base_runs);
    d.new_total = scaled(d.new_total, d.new_runs);
    double base_sum = metric(d.base_total, o.metric), new_sum = metric(d.new_total, o.metric);
    d.total_percent = percent(base_sum, new_sum);
    double total_uncertainty = noise::uncertainty(base_total, new_total, base.noise, next.noise);
    d.total_uncertainty = base_sum > 0 ? 100.0 * total_uncertainty / base_sum : 0;
    bool total_over = o.fail_above >= 0 && d.total_percent > o.fail_above;
    bool total_significant = new_sum - base_sum > total_uncertainty;
    d.total_regression = total_over && total_significant;
    d.total_undecided = total_over && !total_significant;
    for (auto& [key, e] : rows) {
        DiffRow& r = e.row;
        r.base = scaled(r.base, d.base_runs);
        r.next = scaled(r.next, d.new_runs);
        double b = metric(r.base, o.metric), n = metric(r.next, o.metric);
        r.change = n - b;
        r.percent = percent(b, n);
        r.uncertainty = noise::uncertainty(e.base, e.next, base.noise, next.noise);
        r.percent_uncertainty =
            b > 0 ? 100.0 * r.uncertainty / b : std::numeric_limits<double>::infinity();
        bool big = (base_sum > 0 && 100.0 * b / base_sum >= o.min_share) ||
                   (new_sum > 0 && 100.0 * n / new_sum >= o.min_share);
        bool over = o.fail_above >= 0 && big && r.in_new && r.percent > o.fail_above;
        judge(r, over);
        d.rows.push_back(std::move(r));
    }
    order_and_limit(d.rows, o.limit);
    return d;
}

} // namespace

DiffResult diff_runs(const std::vector<Profile>& base, const std::vector<Profile>& next,
                     const DiffOptions& o) {
    Side b, n;
    for (const Profile& p : base) b.profiles.push_back(&p);
    for (const Profile& p : next) n.profiles.push_back(&p);
    b.noise = {std::max<size_t>(base.size(), 1), true};
    n.noise = {std::max<size_t>(next.size(), 1), true};
    return diff_sides(b, n, o);
}

DiffResult diff_profiles(const Profile& base, size_t base_runs, const Profile& next,
                         size_t new_runs, const DiffOptions& o) {
    Side b, n;
    b.profiles = {&base};
    n.profiles = {&next};
    b.noise = {std::max<size_t>(base_runs, 1), false};
    n.noise = {std::max<size_t>(new_runs, 1), false};
    return diff_sides(b, n, o);
}

DiffResult diff_tails(const std::vector<LatencyReport>& base,
                      const std::vector<LatencyReport>& next, const DiffOptions& o) {
    DiffResult d;
    d.base_runs = std::max<size_t>(base.size(), 1);
    d.new_runs = std::max<size_t>(next.size(), 1);
    const noise::Side base_side{d.base_runs, true}, new_side{d.new_runs, true};
    d.spread_known = base_side.per_run() || new_side.per_run();
    struct Entry {
        DiffRow row;
        Measure base, next;
        size_t base_runs = 0, new_runs = 0; // the runs that called it
    };
    std::map<std::pair<std::string, std::string>, Entry> rows;
    const double unbounded = std::numeric_limits<double>::infinity();
    auto add = [&](const std::vector<LatencyReport>& runs, const noise::Side& side, bool is_new) {
        for (size_t run = 0; run < runs.size(); ++run) {
            Stats& total = is_new ? d.new_total : d.base_total;
            total.ncalls += runs[run].calls;
            for (const FunctionLatency& f : runs[run].functions) {
                Entry& e = rows[{f.name, f.file}];
                DiffRow& r = e.row;
                r.name = f.name;
                r.file = f.file;
                r.line = f.line;
                (is_new ? r.in_new : r.in_base) = true;
                ++(is_new ? e.new_runs : e.base_runs);
                Stats s;
                s.ncalls = s.pcalls = f.calls;
                s.tottime = double(f.p50) * 1e-9;
                s.cumtime = double(f.p99) * 1e-9;
                (is_new ? r.next : r.base).add(s);
                Measure& m = is_new ? e.next : e.base;
                m.fit(side);
                m.add(run, s.cumtime, 0, false);
                // The p99's own uncertainty in this run: its 95% interval over 2 x 1.96; none
                // where its calls were too few to bound it.
                double sd = f.p99_high == UINT64_MAX
                                ? unbounded
                                : double(f.p99_high - f.p99_low) * 1e-9 / (2 * 1.96);
                m.sampling_var += sd * sd;
            }
        }
    };
    add(base, base_side, false);
    add(next, new_side, true);
    d.base_total = scaled(d.base_total, d.base_runs);
    d.new_total = scaled(d.new_total, d.new_runs);
    for (auto& [key, e] : rows) {
        DiffRow& r = e.row;
        // Means over the runs that called it: a run without the function has no p99 of it.
        r.base = scaled(r.base, std::max<size_t>(e.base_runs, 1));
        r.next = scaled(r.next, std::max<size_t>(e.new_runs, 1));
        double b = r.base.cumtime, n = r.next.cumtime;
        r.change = n - b;
        r.percent = percent(b, n);
        // Some runs of a side without it: their spread is not the p99's; not decided.
        bool partial =
            (e.base_runs && e.base_runs < base.size()) || (e.new_runs && e.new_runs < next.size());
        r.uncertainty =
            partial ? unbounded : noise::uncertainty(e.base, e.next, base_side, new_side);
        r.percent_uncertainty =
            b > 0 ? 100.0 * r.uncertainty / b : std::numeric_limits<double>::infinity();
        // Tails under a microsecond are a few cycles of a short function: never gated.
        bool over = o.fail_above >= 0 && r.in_base && r.in_new && std::max(b, n) >= 1e-6 &&
                    r.percent > o.fail_above;
        judge(r, over);
        d.rows.push_back(std::move(r));
    }
    order_and_limit(d.rows, o.limit);
    return d;
}

std::vector<DiffEdge> diff_edges(const DiffResult& d, const std::vector<Profile>& base,
                                 const std::vector<Profile>& next) {
    // Rows by the key diff_sides matched functions with.
    std::map<std::pair<std::string, std::string>, size_t> row_of;
    for (size_t i = 0; i < d.rows.size(); ++i) row_of[{d.rows[i].name, d.rows[i].file}] = i;
    auto key = [](const Function& f) {
        return std::make_pair(f.name, f.file.empty() ? base_name(f.module) : base_name(f.file));
    };
    struct Entry {
        DiffEdge edge;
        Measure base, next;
    };
    std::map<std::pair<size_t, size_t>, Entry> edges;
    const noise::Side base_side{std::max<size_t>(base.size(), 1), true},
        new_side{std::max<size_t>(next.size(), 1), true};
    auto add = [&](const std::vector<Profile>& runs, const noise::Side& side, bool is_new) {
        for (size_t run = 0; run < runs.size(); ++run) {
            const Profile& p = runs[run];
            double period = noise::sample_period(p.time);
            for (const Edge& e : p.edges) {
                auto callee = row_of.find(key(p.functions[e.callee]));
                if (callee == row_of.end()) continue;
                size_t caller = SIZE_MAX;
                if (e.caller != kRoot) {
                    auto c = row_of.find(key(p.functions[e.caller]));
                    if (c == row_of.end()) continue;
                    caller = c->second;
                }
                Entry& entry = edges[{caller, callee->second}];
                entry.edge.caller = caller;
                entry.edge.callee = callee->second;
                (is_new ? entry.edge.next : entry.edge.base).add(e.stats);
                Measure& m = is_new ? entry.next : entry.base;
                m.fit(side);
                m.add(run, e.stats.cumtime, period, true);
            }
        }
    };
    add(base, base_side, false);
    add(next, new_side, true);
    std::vector<DiffEdge> out;
    for (auto& [k, e] : edges) {
        e.edge.base = scaled(e.edge.base, base_side.runs);
        e.edge.next = scaled(e.edge.next, new_side.runs);
        e.edge.uncertainty = noise::uncertainty(e.base, e.next, base_side, new_side);
        out.push_back(e.edge);
    }
    return out;
}

namespace {

// "12.3% +-2.1" ("+12.3% +-2.1" `sign`ed), or "12.3%" when exact.
std::string change_text(double percent, double uncertainty, bool sign = false) {
    std::string p = sign ? fmt::format("{:+.1f}%", percent) : fmt::format("{:.1f}%", percent);
    if (uncertainty <= 0 || std::isinf(uncertainty)) return p;
    return fmt::format("{} +-{:.1f}", p, uncertainty);
}

} // namespace

std::vector<std::string> diff_failures(const DiffResult& d, const DiffOptions& o) {
    std::vector<std::string> out;
    const char* m = metric_name(o.metric);
    if (d.total_regression)
        out.push_back(fmt::format("total {} regressed by {} (limit {}%)",
                                  o.metric == DiffMetric::kNcalls ? "calls" : "time",
                                  change_text(d.total_percent, d.total_uncertainty), o.fail_above));
    for (const DiffRow& r : d.rows)
        if (r.regression)
            out.push_back(std::isinf(r.percent)
                              ? fmt::format("{} of {}:{}({}) is new", m, r.file, r.line, r.name)
                              : fmt::format("{} of {}:{}({}) regressed by {} (limit {}%)", m,
                                            r.file, r.line, r.name,
                                            change_text(r.percent, r.percent_uncertainty),
                                            o.fail_above));
    return out;
}

std::vector<std::string> diff_undecided(const DiffResult& d, const DiffOptions& o) {
    std::vector<std::string> out;
    const char* m = metric_name(o.metric);
    std::string more = d.spread_known
                           ? "more runs per side would narrow it"
                           : "give 3 or more runs per side (BASE... --vs NEW...): with one, only "
                             "the sampling error is known, not the spread between runs";
    if (d.total_undecided)
        out.push_back(fmt::format("total {} changed by {}: above the limit ({}%) but within the "
                                  "noise; {}",
                                  o.metric == DiffMetric::kNcalls ? "calls" : "time",
                                  change_text(d.total_percent, d.total_uncertainty, true),
                                  o.fail_above, more));
    // A tail without a bound: too few calls for a p99, or runs of a side that never called it.
    const std::string unbounded = "its p99 has no bound (fewer than 368 calls in a run, or runs of "
                                  "a side without the function): more calls per run would decide";
    for (const DiffRow& r : d.rows)
        if (r.undecided)
            out.push_back(fmt::format(
                "{} of {}:{}({}) changed by {}: above the limit ({}%) but within the noise; {}", m,
                r.file, r.line, r.name,
                std::isinf(r.percent) ? std::string("new")
                                      : change_text(r.percent, r.percent_uncertainty, true),
                o.fail_above,
                o.metric == DiffMetric::kP99 && std::isinf(r.uncertainty) ? unbounded : more));
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
