#include "render/ranks.hpp"
#include "render/model.hpp"

#include "reader/trace_reader.hpp"
#include "text/pattern.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace prof::render {

namespace {

enum class Metric { kNcalls, kTottime, kCumtime };

Metric metric_of(SortKey k) {
    switch (k) {
    case SortKey::kNcalls:
    case SortKey::kPcalls:
        return Metric::kNcalls;
    case SortKey::kTottime:
        return Metric::kTottime;
    default:
        return Metric::kCumtime;
    }
}

const RankSpread& spread_of(const RankedFunction& f, Metric m) {
    return m == Metric::kNcalls ? f.ncalls : m == Metric::kTottime ? f.tottime : f.cumtime;
}

const char* metric_name(Metric m) {
    return m == Metric::kNcalls ? "ncalls" : m == Metric::kTottime ? "tottime" : "cumtime";
}

std::vector<size_t> selected(const RankComparison& c, const TableOptions& o, Metric m) {
    std::vector<size_t> rows(c.functions.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
    if (!o.filter.empty()) {
        text::Pattern re(o.filter);
        std::erase_if(rows,
                      [&](size_t i) { return !re.search(label(c.functions[i].function, true)); });
    }
    std::stable_sort(rows.begin(), rows.end(), [&](size_t a, size_t b) {
        const RankSpread &x = spread_of(c.functions[a], m), &y = spread_of(c.functions[b], m);
        if (x.max != y.max) return x.max > y.max;
        return label(c.functions[a].function) < label(c.functions[b].function);
    });
    if (o.limit && rows.size() > o.limit) rows.resize(o.limit);
    return rows;
}

std::string count_text(double v, bool counted) {
    return counted ? fmt::format("{:.0f}", v) : std::string("?");
}

void print_text(std::FILE* out, const RankComparison& c, const TableOptions& o, Metric m) {
    size_t traces = 0;
    for (const RankProfile& r : c.ranks) traces += r.profile.traces.size();
    fmt::print(out,
               "   {} ranks ({} traces): each function's min, mean and max over the ranks, "
               "and the rank of the max\n",
               c.ranks.size(), traces);
    if (std::string basis = time_basis_text(c.time); !basis.empty())
        fmt::print(out, "   {}\n", basis);
    fmt::print(out, "\n{:>6} {:>12} {:>12} {:>10}  {}\n", "rank", "calls", "time s", "pids",
               "host");
    for (const RankProfile& r : c.ranks) {
        std::string pids;
        for (uint32_t pid : r.pids) pids += (pids.empty() ? "" : ",") + std::to_string(pid);
        fmt::print(out, "{:>6} {:>12} {:>12.{}f} {:>10}  {}\n", r.rank,
                   count_text(double(r.profile.total_calls), c.calls_counted), r.profile.total_time,
                   o.precision, pids, text::printable(r.host));
    }
    std::vector<size_t> rows = selected(c, o, m);
    fmt::print(out, "\n   Ordered by: max {}; imbal% = ({} max / mean - 1) * 100\n", metric_name(m),
               metric_name(m));
    if (!o.filter.empty() || (o.limit && rows.size() < c.functions.size()))
        fmt::print(out, "   List reduced from {} to {} due to restriction\n", c.functions.size(),
                   rows.size());
    size_t nw = 6, tw = 8;
    for (size_t i : rows) {
        const RankedFunction& f = c.functions[i];
        nw = std::max(nw, fmt::format("{:.1f}", f.ncalls.max).size());
        tw = std::max(tw, fmt::format("{:.{}f}", f.cumtime.max, o.precision).size());
        tw = std::max(tw, fmt::format("{:.{}f}", f.tottime.max, o.precision).size());
    }
    auto group = [&](const char* name, size_t w) {
        size_t width = 3 * (w + 1) + 4;
        std::string title = fmt::format(" {} ", name);
        size_t left = (width - title.size()) / 2;
        return std::string(left, '-') + title + std::string(width - left - title.size(), '-');
    };
    fmt::print(out, "\n{}  {}  {}\n", group("ncalls", nw), group("tottime", tw),
               group("cumtime", tw));
    auto heads = [&](size_t w) {
        return fmt::format("{:>{}} {:>{}} {:>{}} {:>4}", "min", w, "mean", w, "max", w, "rank");
    };
    fmt::print(out, "{}  {}  {}  {:>7}  filename:lineno(function)\n", heads(nw), heads(tw),
               heads(tw), "imbal%");
    for (size_t i : rows) {
        const RankedFunction& f = c.functions[i];
        std::string calls =
            c.calls_counted
                ? fmt::format("{:>{}.0f} {:>{}.1f} {:>{}.0f} {:>4}", f.ncalls.min, nw,
                              f.ncalls.mean, nw, f.ncalls.max, nw, f.ncalls.max_rank)
                : fmt::format("{:>{}} {:>{}} {:>{}} {:>4}", "?", nw, "?", nw, "?", nw, "-");
        auto times = [&](const RankSpread& s) {
            return fmt::format("{:>{}.{}f} {:>{}.{}f} {:>{}.{}f} {:>4}", s.min, tw, o.precision,
                               s.mean, tw, o.precision, s.max, tw, o.precision, s.max_rank);
        };
        fmt::print(out, "{}  {}  {}  {:>7.1f}  {}\n", calls, times(f.tottime), times(f.cumtime),
                   spread_of(f, m).imbalance_percent(),
                   text::printable(label(f.function, o.full_paths)));
    }
}

void print_json(std::FILE* out, const RankComparison& c, const TableOptions& o, Metric m) {
    auto count = [&](double v) { return c.calls_counted ? fmt::format("{:.0f}", v) : "null"; };
    fmt::print(out, "{{\n  \"ranks\": [");
    for (size_t i = 0; i < c.ranks.size(); ++i) {
        const RankProfile& r = c.ranks[i];
        std::string pids;
        for (uint32_t pid : r.pids) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
        fmt::print(out,
                   "{}\n    {{\"rank\": {}, \"pids\": [{}], \"host\": \"{}\", \"traces\": {}, "
                   "\"total_calls\": {}, \"total_time\": {:.9f}}}",
                   i ? "," : "", r.rank, pids, text::json_escape(r.host), r.profile.traces.size(),
                   count(double(r.profile.total_calls)), r.profile.total_time);
    }
    fmt::print(out, "\n  ],\n  \"sort\": \"max {}\",\n  \"functions\": [", metric_name(m));
    auto spread = [&](const RankSpread& s, bool calls) {
        if (calls && !c.calls_counted) return std::string("null");
        return fmt::format("{{\"min\": {:.9g}, \"mean\": {:.9g}, \"max\": {:.9g}, \"max_rank\": "
                           "{}, \"imbalance_percent\": {:.3f}}}",
                           s.min, s.mean, s.max, s.max_rank, s.imbalance_percent());
    };
    bool first = true;
    for (size_t i : selected(c, o, m)) {
        const RankedFunction& f = c.functions[i];
        const Function& fn = f.function;
        fmt::print(out,
                   "{}\n    {{\"name\": \"{}\", \"symbol\": \"{}\", \"module\": \"{}\", "
                   "\"file\": \"{}\", \"line\": {}, \"kind\": \"{}\", \"ranks\": {}, "
                   "\"ncalls\": {}, \"tottime\": {}, \"cumtime\": {}}}",
                   first ? "" : ",", text::json_escape(fn.name), text::json_escape(fn.symbol),
                   text::json_escape(fn.module), text::json_escape(fn.file), fn.line, fn.kind,
                   f.ranks, spread(f.ncalls, true), spread(f.tottime, false),
                   spread(f.cumtime, false));
        first = false;
    }
    fmt::print(out, "\n  ]\n}}\n");
}

void print_csv(std::FILE* out, const RankComparison& c, const TableOptions& o, Metric m) {
    fmt::print(out, "name,file,line,ranks");
    for (const char* metric : {"ncalls", "tottime", "cumtime"})
        fmt::print(out, ",{0}_min,{0}_mean,{0}_max,{0}_max_rank,{0}_imbalance_percent", metric);
    fmt::print(out, "\n");
    for (size_t i : selected(c, o, m)) {
        const RankedFunction& f = c.functions[i];
        fmt::print(out, "{},{},{},{}", text::csv_escape(f.function.name),
                   text::csv_escape(f.function.file), f.function.line, f.ranks);
        if (c.calls_counted)
            fmt::print(out, ",{:.0f},{:.6g},{:.0f},{},{:.3f}", f.ncalls.min, f.ncalls.mean,
                       f.ncalls.max, f.ncalls.max_rank, f.ncalls.imbalance_percent());
        else
            fmt::print(out, ",,,,,");
        for (const RankSpread* s : {&f.tottime, &f.cumtime})
            fmt::print(out, ",{:.9f},{:.9f},{:.9f},{},{:.3f}", s->min, s->mean, s->max, s->max_rank,
                       s->imbalance_percent());
        fmt::print(out, "\n");
    }
}

} // namespace

void print_ranks(std::FILE* out, const RankComparison& c, const TableOptions& o,
                 const std::string& format) {
    Metric m = metric_of(o.sort);
    if (format == "json")
        print_json(out, c, o, m);
    else if (format == "csv")
        print_csv(out, c, o, m);
    else
        print_text(out, c, o, m);
}

} // namespace prof::render
