// diff's renderings: the per-function and per-site tables as text, CSV and JSON.
#include "render/diff.hpp"
#include "render/model.hpp"

#include "reader/trace_reader.hpp"
#include "render/memory_report.hpp"
#include "render/report.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace prof::render {
namespace {

std::string pct_text(double p, bool present) {
    if (!present) return "gone";
    if (std::isinf(p)) return "new";
    return fmt::format("{:+.1f}%", p);
}

// A site's change of measure `w`: a site the base did not have is new in every measure, even
// one that is 0 in both (a block freed before the peak has no peak bytes anywhere).
double site_percent(const MemoryDiffRow& r, MemoryWeight w) {
    return r.in_base ? percent(r.base.get(w), r.next.get(w))
                     : std::numeric_limits<double>::infinity();
}

} // namespace

void print_diff(std::FILE* out, const DiffResult& d, const DiffOptions& o,
                const std::string& format) {
    int p = o.precision;
    if (format == "csv") {
        const char *t0 = time_column(o.metric, 0), *t1 = time_column(o.metric, 1);
        fmt::print(out,
                   "name,file,line,status,ncalls_base,ncalls_new,{0}_base,{0}_new,"
                   "{0}_change_percent,{1}_base,{1}_new,{1}_change_percent,"
                   "regression,metric,change_percent,change_uncertainty_percent,undecided\n",
                   t0, t1);
        for (const DiffRow& r : d.rows) {
            auto pc = [&](double b, double n) {
                double v = percent(b, n);
                return std::isinf(v) ? std::string("") : fmt::format("{:.3f}", v);
            };
            auto finite = [](double v) {
                return std::isinf(v) ? std::string("") : fmt::format("{:.3f}", v);
            };
            fmt::print(out, "{},{},{},{},{},{},{:.9f},{:.9f},{},{:.9f},{:.9f},{},{},{},{},{},{}\n",
                       text::csv_escape(r.name), text::csv_escape(r.file), r.line,
                       !r.in_base  ? "new"
                       : !r.in_new ? "gone"
                                   : "both",
                       r.base.ncalls, r.next.ncalls, r.base.tottime, r.next.tottime,
                       pc(r.base.tottime, r.next.tottime), r.base.cumtime, r.next.cumtime,
                       pc(r.base.cumtime, r.next.cumtime), r.regression ? 1 : 0,
                       metric_name(o.metric), finite(r.percent), finite(r.percent_uncertainty),
                       r.undecided ? 1 : 0);
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
            "  \"new_runs\": {},\n  \"spread_known\": {},\n  \"total\": {{\"base_time\": {:.9f}, "
            "\"new_time\": {:.9f}, \"base_calls\": {}, \"new_calls\": {}, \"change_percent\": {}, "
            "\"change_uncertainty_percent\": {}, \"regression\": {}, \"undecided\": {}}},\n"
            "  \"failed\": {},\n  \"undecided\": {},\n  \"functions\": [",
            metric_name(o.metric),
            o.fail_above < 0 ? std::string("null") : fmt::format("{}", o.fail_above), d.base_runs,
            d.new_runs, d.spread_known ? "true" : "false", d.base_total.tottime,
            d.new_total.tottime, d.base_total.ncalls, d.new_total.ncalls, num(d.total_percent),
            num(d.total_uncertainty), d.total_regression ? "true" : "false",
            d.total_undecided ? "true" : "false", d.failed() ? "true" : "false",
            d.undecided() ? "true" : "false");
        for (size_t i = 0; i < d.rows.size(); ++i) {
            const DiffRow& r = d.rows[i];
            fmt::print(
                out,
                "{}\n    {{\"name\": \"{}\", \"file\": \"{}\", \"line\": {}, \"in_base\": {}, "
                "\"in_new\": {}, \"ncalls\": [{}, {}], \"{}\": [{:.9f}, {:.9f}], "
                "\"{}\": [{:.9f}, {:.9f}], \"change_percent\": {}, "
                "\"change_uncertainty_percent\": {}, \"regression\": {}, \"undecided\": {}}}",
                i ? "," : "", text::json_escape(r.name), text::json_escape(r.file), r.line,
                r.in_base ? "true" : "false", r.in_new ? "true" : "false", r.base.ncalls,
                r.next.ncalls, time_column(o.metric, 0), r.base.tottime, r.next.tottime,
                time_column(o.metric, 1), r.base.cumtime, r.next.cumtime, num(r.percent),
                num(r.percent_uncertainty), r.regression ? "true" : "false",
                r.undecided ? "true" : "false");
        }
        fmt::print(out, "\n  ]\n}}\n");
        return;
    }
    auto change = [](double percent, double uncertainty, bool present) {
        std::string c = pct_text(percent, present);
        if (present && !std::isinf(percent) && uncertainty > 0 && !std::isinf(uncertainty))
            c += fmt::format(" +-{:.1f}", uncertainty);
        return c;
    };
    if (o.metric == DiffMetric::kP99) {
        // The tails: each function's calls' p50 and p99, means per run; no total.
        fmt::print(out, "   base: {} run{}, {} calls per run\n", d.base_runs,
                   d.base_runs == 1 ? "" : "s", d.base_total.ncalls);
        fmt::print(out, "    new: {} run{}, {} calls per run\n", d.new_runs,
                   d.new_runs == 1 ? "" : "s", d.new_total.ncalls);
    } else {
        fmt::print(out, "   base: {} run{}, {} calls in {:.{}f} seconds per run\n", d.base_runs,
                   d.base_runs == 1 ? "" : "s", d.base_total.ncalls, d.base_total.tottime, p);
        fmt::print(out, "    new: {} run{}, {} calls in {:.{}f} seconds per run ({} {})\n",
                   d.new_runs, d.new_runs == 1 ? "" : "s", d.new_total.ncalls, d.new_total.tottime,
                   p, o.metric == DiffMetric::kNcalls ? "calls" : "time",
                   change(d.total_percent, d.total_uncertainty, true));
    }
    fmt::print(out, "   change: of {}, +- its uncertainty (95%): {}\n", metric_name(o.metric),
               o.metric == DiffMetric::kP99
                   ? (d.spread_known ? "the spread between the runs and each p99's own interval"
                                     : "each p99's own interval (its calls as a sample)")
               : d.spread_known ? "the spread between the runs and the sampling error"
               : o.metric == DiffMetric::kNcalls
                   ? "exact with one run a side (the spread between runs needs two or more)"
                   : "the sampling error only (the spread between runs needs two or more a side)");
    fmt::print(out, "   Ordered by: largest {} increase{}\n\n", metric_name(o.metric),
               o.fail_above >= 0
                   ? fmt::format("; ! marks a regression above {0}% beyond the noise, ? one above "
                                 "{0}% within it",
                                 o.fail_above)
                   : "");
    int w = p + 6;
    fmt::print(out,
               "  {:>10} {:>10} {:>{}} {:>{}} {:>{}} {:>{}} {:>16}  filename:lineno(function)\n",
               "ncalls", "(new)", time_column(o.metric, 0), w, "(new)", w, time_column(o.metric, 1),
               w, "(new)", w, "change");
    for (const DiffRow& r : d.rows) {
        fmt::print(out, "{} {:>10} {:>10} {:>{}.{}f} {:>{}.{}f} {:>{}.{}f} {:>{}.{}f} {:>16}  {}\n",
                   r.regression  ? "!"
                   : r.undecided ? "?"
                                 : " ",
                   r.in_base ? fmt::format("{}", r.base.ncalls) : "-",
                   r.in_new ? fmt::format("{}", r.next.ncalls) : "-", r.base.tottime, w, p,
                   r.next.tottime, w, p, r.base.cumtime, w, p, r.next.cumtime, w, p,
                   change(r.in_base ? r.percent : std::numeric_limits<double>::infinity(),
                          r.percent_uncertainty, r.in_new),
                   text::printable(fmt::format("{}:{}({})", r.file, r.line, r.name)));
    }
    fmt::print(out, "\n");
}

// ---- memory diff ---------------------------------------------------------------------------------

void print_memory_diff(std::FILE* out, const MemoryDiffResult& d, const MemoryDiffOptions& o,
                       const std::string& format) {
    const MemoryWeight order = o.measure.value_or(MemoryWeight::kBytes);
    if (format == "csv") {
        fmt::print(out, "stack,status");
        for (MemoryWeight w : kMemoryMeasures)
            fmt::print(out, ",{0}_base,{0}_new,{0}_change_percent", memory_weight_name(w));
        fmt::print(out, ",regression\n");
        for (const MemoryDiffRow& r : d.rows) {
            std::string stack;
            for (size_t i = 0; i < r.stack.size(); ++i) stack += (i ? ";" : "") + r.stack[i];
            fmt::print(out, "{},{}", text::csv_escape(stack),
                       !r.in_base  ? "new"
                       : !r.in_new ? "gone"
                                   : "both");
            for (MemoryWeight w : kMemoryMeasures) {
                double b = r.base.get(w), n = r.next.get(w), p = site_percent(r, w);
                fmt::print(out, ",{},{},{}", amount(b), amount(n),
                           std::isinf(p) ? std::string() : fmt::format("{:.3f}", p));
            }
            fmt::print(out, ",{}\n", r.regressed.empty() ? 0 : 1);
        }
        return;
    }
    auto measures_json = [&](const MemoryValues& b, const MemoryValues& n, bool is_new = false) {
        std::string s;
        for (MemoryWeight w : kMemoryMeasures) {
            double p =
                is_new ? std::numeric_limits<double>::infinity() : percent(b.get(w), n.get(w));
            s += fmt::format("{}\"{}\": {{\"base\": {}, \"new\": {}, \"change_percent\": {}}}",
                             s.empty() ? "" : ", ", memory_weight_name(w), amount(b.get(w)),
                             amount(n.get(w)), std::isinf(p) ? "null" : fmt::format("{:.6f}", p));
        }
        return s;
    };
    auto names = [](const std::vector<MemoryWeight>& ws) {
        std::string s;
        for (MemoryWeight w : ws) s += fmt::format("{}\"{}\"", s.empty() ? "" : ", ", memory_weight_name(w));
        return "[" + s + "]";
    };
    if (format == "json") {
        double rp = percent(d.base_rss, d.new_rss);
        fmt::print(out,
                   "{{\n  \"measure\": {},\n  \"fail_above\": {},\n  \"base_runs\": {},\n"
                   "  \"new_runs\": {},\n  \"total\": {{{}, \"peak_rss\": {{\"base\": {}, \"new\": {}, "
                   "\"change_percent\": {}}}, \"regressed\": {}}},\n  \"failed\": {},\n  \"sites\": [",
                   o.measure ? fmt::format("\"{}\"", memory_weight_name(*o.measure)) : "null",
                   o.fail_above < 0 ? std::string("null") : fmt::format("{}", o.fail_above),
                   d.base_runs, d.new_runs, measures_json(d.base_total, d.new_total),
                   amount(d.base_rss), amount(d.new_rss),
                   std::isinf(rp) ? "null" : fmt::format("{:.6f}", rp), names(d.total_regressed),
                   d.failed() ? "true" : "false");
        for (size_t i = 0; i < d.rows.size(); ++i) {
            const MemoryDiffRow& r = d.rows[i];
            std::string stack;
            for (size_t k = 0; k < r.stack.size(); ++k)
                stack += fmt::format("{}\"{}\"", k ? ", " : "", text::json_escape(r.stack[k]));
            fmt::print(out,
                       "{}\n    {{\"stack\": [{}], \"in_base\": {}, \"in_new\": {}, {}, "
                       "\"regressed\": {}}}",
                       i ? "," : "", stack, r.in_base ? "true" : "false",
                       r.in_new ? "true" : "false", measures_json(r.base, r.next, !r.in_base),
                       names(r.regressed));
        }
        fmt::print(out, "\n  ]\n}}\n");
        return;
    }
    auto summary = [&](const MemoryValues& v, double rss, const MemoryValues* base,
                       double base_rss) {
        auto pc = [&](double b, double n) {
            return base ? " (" + pct_text(percent(b, n), true) + ")" : std::string();
        };
        return fmt::format("{} allocations{}, {} allocated{}, peak heap {}{}, leaked {}{}, "
                           "peak RSS {}{}",
                           amount(v.allocations), pc(base ? base->allocations : 0, v.allocations),
                           text::format_bytes(v.bytes), pc(base ? base->bytes : 0, v.bytes),
                           text::format_bytes(v.peak), pc(base ? base->peak : 0, v.peak),
                           text::format_bytes(v.leaked), pc(base ? base->leaked : 0, v.leaked),
                           rss ? text::format_bytes(rss) : std::string("n/a"), pc(base_rss, rss));
    };
    fmt::print(out, "   base: {} run{}: {} per run\n", d.base_runs, d.base_runs == 1 ? "" : "s",
               summary(d.base_total, d.base_rss, nullptr, 0));
    fmt::print(out, "    new: {} run{}: {} per run\n\n", d.new_runs, d.new_runs == 1 ? "" : "s",
               summary(d.new_total, d.new_rss, &d.base_total, d.base_rss));
    fmt::print(out, "   Ordered by: largest {} increase{}\n\n", measure_label(order, false),
               o.fail_above >= 0
                   ? fmt::format("; ! marks a regression above {}% of {}", o.fail_above,
                                 o.measure ? measure_label(*o.measure, false) : "any measure")
                   : "");
    fmt::print(out, "  {:>11} {:>11} {:>8} {:>11} {:>11} {:>8} {:>11} {:>11} {:>8} {:>11} {:>11} "
                    "{:>8}  site (innermost frame first)\n",
               "allocations", "(new)", "change", "bytes", "(new)", "change", "peak", "(new)",
               "change", "leaked", "(new)", "change");
    for (const MemoryDiffRow& r : d.rows) {
        fmt::print(out, "{}", r.regressed.empty() ? " " : "!");
        for (MemoryWeight w : kMemoryMeasures) {
            double b = r.base.get(w), n = r.next.get(w);
            fmt::print(out, " {:>11} {:>11} {:>8}", r.in_base ? amount(b) : "-",
                       r.in_new ? amount(n) : "-", pct_text(site_percent(r, w), r.in_new));
        }
        fmt::print(out, "  {}\n", text::printable(site_text(r.stack, 6)));
    }
    fmt::print(out, "\n");
}


} // namespace prof::render
