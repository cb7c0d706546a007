// diff: functions are matched by name and source file (not by line or address, which move
// between builds); sets of runs are compared per run.
#include "analysis/views/diff.hpp"

#include "analysis/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace prof::analysis::views {
namespace {

std::string base_name(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

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

Stats scaled(const Stats& s, size_t runs) {
    if (runs <= 1) return s;
    Stats r;
    r.ncalls = uint64_t(std::llround(double(s.ncalls) / runs));
    r.pcalls = uint64_t(std::llround(double(s.pcalls) / runs));
    r.tottime = s.tottime / runs;
    r.cumtime = s.cumtime / runs;
    return r;
}

double percent(double base, double next) {
    if (base == next) return 0;
    if (base <= 0) return std::numeric_limits<double>::infinity();
    return 100.0 * (next - base) / base;
}

std::string pct_text(double p, bool present) {
    if (!present) return "gone";
    if (std::isinf(p)) return "new";
    return fmt::format("{:+.1f}%", p);
}

} // namespace

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
    if (o.limit && d.rows.size() > o.limit) d.rows.resize(o.limit);
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

void print_diff(std::FILE* out, const DiffResult& d, const DiffOptions& o,
                const std::string& format) {
    int p = o.precision;
    if (format == "csv") {
        fmt::print(out, "name,file,line,status,ncalls_base,ncalls_new,tottime_base,tottime_new,"
                        "tottime_change_percent,cumtime_base,cumtime_new,cumtime_change_percent,"
                        "regression\n");
        for (const DiffRow& r : d.rows) {
            auto pc = [&](double b, double n) {
                double v = percent(b, n);
                return std::isinf(v) ? std::string("") : fmt::format("{:.3f}", v);
            };
            fmt::print(out, "{},{},{},{},{},{},{:.9f},{:.9f},{},{:.9f},{:.9f},{},{}\n",
                       csv_escape(r.name), csv_escape(r.file), r.line,
                       !r.in_base  ? "new"
                       : !r.in_new ? "gone"
                                   : "both",
                       r.base.ncalls, r.next.ncalls, r.base.tottime, r.next.tottime,
                       pc(r.base.tottime, r.next.tottime), r.base.cumtime, r.next.cumtime,
                       pc(r.base.cumtime, r.next.cumtime), r.regression ? 1 : 0);
        }
        return;
    }
    if (format == "json") {
        auto num = [](double v) {
            return std::isinf(v) ? std::string("null") : fmt::format("{:.6f}", v);
        };
        fmt::print(
            out,
            "{{\n  \"metric\": \"{}\",\n  \"fail_above\": {},\n  \"base_runs\": {},\n"
            "  \"new_runs\": {},\n  \"total\": {{\"base_time\": {:.9f}, \"new_time\": {:.9f}, "
            "\"base_calls\": {}, \"new_calls\": {}, \"change_percent\": {}, \"regression\": {}}},\n"
            "  \"failed\": {},\n  \"functions\": [",
            metric_name(o.metric),
            o.fail_above < 0 ? std::string("null") : fmt::format("{}", o.fail_above), d.base_runs,
            d.new_runs, d.base_total.tottime, d.new_total.tottime, d.base_total.ncalls,
            d.new_total.ncalls, num(d.total_percent), d.total_regression ? "true" : "false",
            d.failed() ? "true" : "false");
        for (size_t i = 0; i < d.rows.size(); ++i) {
            const DiffRow& r = d.rows[i];
            fmt::print(
                out,
                "{}\n    {{\"name\": \"{}\", \"file\": \"{}\", \"line\": {}, \"in_base\": {}, "
                "\"in_new\": {}, \"ncalls\": [{}, {}], \"tottime\": [{:.9f}, {:.9f}], "
                "\"cumtime\": [{:.9f}, {:.9f}], \"change_percent\": {}, \"regression\": {}}}",
                i ? "," : "", json_escape(r.name), json_escape(r.file), r.line,
                r.in_base ? "true" : "false", r.in_new ? "true" : "false", r.base.ncalls,
                r.next.ncalls, r.base.tottime, r.next.tottime, r.base.cumtime, r.next.cumtime,
                num(r.percent), r.regression ? "true" : "false");
        }
        fmt::print(out, "\n  ]\n}}\n");
        return;
    }
    fmt::print(out, "   base: {} run{}, {} calls in {:.{}f} seconds per run\n", d.base_runs,
               d.base_runs == 1 ? "" : "s", d.base_total.ncalls, d.base_total.tottime, p);
    fmt::print(out, "    new: {} run{}, {} calls in {:.{}f} seconds per run ({})\n\n", d.new_runs,
               d.new_runs == 1 ? "" : "s", d.new_total.ncalls, d.new_total.tottime, p,
               pct_text(percent(d.base_total.tottime, d.new_total.tottime), true));
    fmt::print(out, "   Ordered by: largest {} increase{}\n\n", metric_name(o.metric),
               o.fail_above >= 0 ? fmt::format("; ! marks a regression above {}%", o.fail_above)
                                 : "");
    int w = p + 6;
    fmt::print(
        out, "  {:>10} {:>10} {:>{}} {:>{}} {:>8} {:>{}} {:>{}} {:>8}  filename:lineno(function)\n",
        "ncalls", "(new)", "tottime", w, "(new)", w, "change", "cumtime", w, "(new)", w, "change");
    for (const DiffRow& r : d.rows) {
        fmt::print(
            out, "{} {:>10} {:>10} {:>{}.{}f} {:>{}.{}f} {:>8} {:>{}.{}f} {:>{}.{}f} {:>8}  {}\n",
            r.regression ? "!" : " ", r.in_base ? fmt::format("{}", r.base.ncalls) : "-",
            r.in_new ? fmt::format("{}", r.next.ncalls) : "-", r.base.tottime, w, p, r.next.tottime,
            w, p, pct_text(percent(r.base.tottime, r.next.tottime), r.in_new), r.base.cumtime, w, p,
            r.next.cumtime, w, p, pct_text(percent(r.base.cumtime, r.next.cumtime), r.in_new),
            reader::printable(fmt::format("{}:{}({})", r.file, r.line, r.name)));
    }
    fmt::print(out, "\n");
}

} // namespace prof::analysis::views
