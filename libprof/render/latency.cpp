#include "render/latency.hpp"

#include "render/durations.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

namespace prof::render {
namespace {

std::string label(const FunctionLatency& f) {
    return text::printable(fmt::format("{}:{}({})", f.file, f.line, f.name));
}

std::string path_text(const std::vector<std::string>& path) {
    std::string s;
    for (size_t i = 0; i < path.size(); ++i) s += (i ? " > " : "") + text::printable(path[i]);
    return s;
}

std::string seconds(double ns) {
    return fmt::format("{:.9f}", ns * 1e-9);
}

void print_json(std::FILE* out, const LatencyReport& r, const LatencyPrint& o) {
    fmt::print(out, "{{\n  \"calls\": {},\n  \"untimed\": {},\n  \"functions\": [", r.calls,
               r.untimed);
    size_t n = o.limit && o.limit < r.functions.size() ? o.limit : r.functions.size();
    for (size_t i = 0; i < n; ++i) {
        const FunctionLatency& f = r.functions[i];
        fmt::print(out,
                   "{}\n    {{\"name\": {}, \"file\": {}, \"line\": {}, \"calls\": {}, "
                   "\"total\": {}, \"mean\": {}, \"p50\": {}, \"p90\": {}, \"p99\": {}, "
                   "\"p999\": {}, \"max\": {}, \"untimed\": {}, \"bound\": {:.4f},\n"
                   "     \"histogram_log2_ns\": [",
                   i ? "," : "", text::json_quoted(text::printable(f.name)),
                   text::json_quoted(f.file), f.line, f.calls, seconds(double(f.total_ns)),
                   seconds(f.mean_ns), seconds(double(f.p50)), seconds(double(f.p90)),
                   seconds(double(f.p99)), seconds(double(f.p999)), seconds(double(f.max)),
                   f.untimed, f.bound);
        for (size_t b = 0; b < f.histogram.size(); ++b)
            fmt::print(out, "{}{}", b ? ", " : "", f.histogram[b]);
        fmt::print(out, "],\n     \"slow_calls\": [");
        for (size_t k = 0; k < f.slowest.size(); ++k) {
            const SlowCall& s = f.slowest[k];
            fmt::print(out,
                       "{}{{\"duration\": {}, \"start\": {}, \"tid\": {}, \"thread\": {}, "
                       "\"path\": [",
                       k ? ", " : "", seconds(double(s.duration_ns)), seconds(double(s.start_ns)),
                       s.tid, text::json_quoted(text::printable(s.thread)));
            for (size_t p = 0; p < s.path.size(); ++p)
                fmt::print(out, "{}{}", p ? ", " : "",
                           text::json_quoted(text::printable(s.path[p])));
            fmt::print(out, "]}}");
        }
        fmt::print(out,
                   "],\n     \"tail\": {{\"calls\": {}, \"from\": {}, \"slowest_only\": {}, "
                   "\"self_share\": {:.4f}, \"typical_self_share\": {:.4f}, \"callees\": [",
                   f.tail_calls, seconds(double(f.tail_threshold_ns)),
                   f.tail_from_slowest ? "true" : "false", f.tail_self_share, f.typical_self_share);
        for (size_t k = 0; k < f.tail.size(); ++k) {
            const TailCallee& c = f.tail[k];
            fmt::print(out,
                       "{}{{\"name\": {}, \"file\": {}, \"line\": {}, \"slow_share\": {:.4f}, "
                       "\"typical_share\": {:.4f}, \"slow_mean\": {}, \"typical_mean\": {}}}",
                       k ? ", " : "", text::json_quoted(text::printable(c.name)),
                       text::json_quoted(c.file), c.line, c.slow_share, c.typical_share,
                       seconds(c.slow_mean_ns), seconds(c.typical_mean_ns));
        }
        fmt::print(out, "]}}}}");
    }
    fmt::print(out, "\n  ]\n}}\n");
}

std::string ns_text(double ns) {
    return human_ns(uint64_t(ns + 0.5));
}

} // namespace

void print_latency(std::FILE* out, const LatencyReport& r, const LatencyPrint& o) {
    if (o.format == "json") return print_json(out, r, o);
    fmt::print(out, "   {} calls of {} functions{}: each call's inclusive wall time\n", r.calls,
               r.functions.size(), o.source.empty() ? "" : " in " + text::printable(o.source));
    bool bucketed = false;
    for (const FunctionLatency& f : r.functions) bucketed |= f.bound > 0;
    if (r.counted)
        fmt::print(
            out,
            "   Counted calls: timed only on the call paths whose calls last PROF_LATENCY_MIN{} "
            "on average ({} other calls not timed){}\n",
            r.latency_min_ns ? " (" + ns_text(double(r.latency_min_ns)) + ")" : "", r.untimed,
            bucketed ? "; their percentiles (~) are within 6.25%, mean and max exact" : "");
    fmt::print(out, "\n");
    fmt::print(out, "{:>10} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}  {}\n", "calls", "mean",
               "p50", "p90", "p99", "p99.9", "max", "filename:lineno(function)");
    size_t n = o.limit && o.limit < r.functions.size() ? o.limit : r.functions.size();
    for (size_t i = 0; i < n; ++i) {
        const FunctionLatency& f = r.functions[i];
        auto q = [&f](uint64_t ns) { return (f.bound > 0 ? "~" : "") + ns_text(double(ns)); };
        fmt::print(out, "{:>10} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}  {}\n", f.calls,
                   ns_text(f.mean_ns), q(f.p50), q(f.p90), q(f.p99), q(f.p999),
                   ns_text(double(f.max)), label(f));
    }
    // The details of the first functions with a distribution (two calls or more).
    for (size_t i = 0, shown = 0; i < n && shown < o.detail; ++i) {
        const FunctionLatency& f = r.functions[i];
        if (f.calls < 2) continue;
        ++shown;
        fmt::print(out, "\n{}\n", label(f));
        fmt::print(out, "   slowest call{}:\n", f.slowest.size() == 1 ? "" : "s");
        for (const SlowCall& s : f.slowest)
            fmt::print(out, "   {:>11} at {:.6f} s in thread {}{}: {}\n",
                       ns_text(double(s.duration_ns)), double(s.start_ns) * 1e-9, s.tid,
                       s.thread.empty() ? "" : " (" + text::printable(s.thread) + ")",
                       path_text(s.path));
        if (f.tail_from_slowest)
            fmt::print(out,
                       "   its slowest call ({}), against the other {}: the callees whose own "
                       "slowest call lies inside it\n",
                       ns_text(double(f.tail_threshold_ns)), f.calls - 1);
        else
            fmt::print(out,
                       "   its tail, the slowest {} call{} (from {}), against the other {}: where "
                       "their time went\n",
                       f.tail_calls, f.tail_calls == 1 ? "" : "s",
                       ns_text(double(f.tail_threshold_ns)), f.calls - f.tail_calls);
        fmt::print(out, "   {:>13} {:>13} {:>9} {:>9}  {}\n", "per slow call", "per other",
                   "slow %", "other %", "where");
        fmt::print(out, "   {:>13} {:>13} {:>9.1f} {:>9.1f}  {}\n", "", "", 100 * f.tail_self_share,
                   100 * f.typical_self_share,
                   f.tail_from_slowest ? "(the rest)" : "(its own code)");
        for (const TailCallee& c : f.tail)
            fmt::print(out, "   {:>13} {:>13} {:>9.1f} {:>9.1f}  {}\n", ns_text(c.slow_mean_ns),
                       ns_text(c.typical_mean_ns), 100 * c.slow_share, 100 * c.typical_share,
                       text::printable(fmt::format("{}:{}({})", c.file, c.line, c.name)));
    }
}

} // namespace prof::render
