// Line tables: PROF_LINE sums per site and thread from the trace, plus PROF_SCOPE and
// PROF_FUNCTION activations from the call profile, grouped by enclosing function.
#include "analysis/model/lines.hpp"

#include "text/pattern.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sys/stat.h>

namespace prof::analysis {

std::vector<LineTable> line_tables(const Profile& p, const std::string& match) {
    std::map<std::pair<std::string, std::string>, std::map<uint32_t, LineRow>> groups;
    std::map<std::pair<std::string, std::string>, double> function_time;
    std::map<std::pair<std::string, std::string>, uint64_t> markers_in_total;
    std::set<std::pair<size_t, uint32_t>> covered; // (trace, stream) of this profile
    for (const ThreadSummary& t : p.threads) covered.insert({t.trace, t.stream});

    for (size_t ti = 0; ti < p.traces.size(); ++ti) {
        const reader::TraceInfo& info = p.traces[ti];
        double tps = info.ticks_per_second > 0 ? info.ticks_per_second : 1e9;
        for (const auto& [key, ls] : info.lines) {
            if (!covered.count({ti, key.first})) continue;
            auto site = info.sites.find(key.second);
            if (site == info.sites.end()) continue;
            const reader::Site& s = site->second;
            LineRow& row = groups[{s.file, function_display_name(s.function)}][s.line];
            row.line = s.line;
            row.kind = "line";
            // A trace sampled from outside has a line per sampled source line, unmarked.
            if (row.mark.empty() && !info.meta.count("sampler"))
                row.mark = "PROF_LINE(" + s.label + ")";
            row.sampled = info.meta.count("sampler") != 0;
            row.hits += ls.hits;
            if (!row.sampled && !ls.sample_timed)
                markers_in_total[{s.file, function_display_name(s.function)}] += ls.hits;
            // Each hit measured the clock reads around the statement too (line_overhead). Their
            // cost in place differs from the calibrated one by about its own size (the CPU
            // overlaps them with the statement, or stalls on them), so a statement that takes
            // under ten times that per hit is timed by its samples in a trace timed by them
            // (those of its own code and of code inlined there: a call out of line there is
            // not seen). A longer one keeps its clock reads, which also see it wait off CPU.
            double overhead = p.compensated ? info.line_overhead : 0;
            double ticks = std::max(0.0, double(ls.ticks) - overhead * double(ls.hits));
            bool short_hits = double(ticks) < 10 * info.line_overhead * double(ls.hits);
            row.time += ls.sample_timed && short_hits ? ls.sampled_seconds : ticks / tps;
            row.memory_samples += ls.rss_samples;
            row.rss_samples += ls.rss_reads;
            row.rss_increment += double(ls.rss_increment);
            row.heap_increment += double(ls.heap_increment);
            if (ls.rss_reads) row.rss_last = double(ls.rss_last);
        }
    }
    // Scopes, marked functions and regions come from the call profile (per activation).
    for (const Function& f : p.functions) {
        if (f.kind == "function" || !f.stats.ncalls) continue;
        auto key = std::make_pair(f.file, f.context);
        LineRow& row = groups[key][f.line];
        row.line = f.line;
        if (row.kind == "line") {
            // PROF_LINE statements on the line of a scope (`PROF_SCOPE("s"); PROF_LINE(f());`)
            // run inside it, which times the rest of its block: the line's hits and time are
            // the scope's activations, not those plus the statements' again.
            row.hits = 0;
            row.time = 0;
            row.mark.clear();
        }
        if (row.kind.empty() || row.kind == "line") row.kind = f.kind;
        if (row.mark.empty())
            row.mark = f.kind == "marked function" ? "PROF_FUNCTION()"
                       : f.kind == "region"        ? "PROF_REGION_BEGIN(\"" + f.name + "\")"
                                                   : "PROF_SCOPE(\"" + f.name + "\")";
        row.hits += f.stats.ncalls;
        row.time += f.stats.cumtime;
        if (f.kind == "marked function") function_time[key] += f.stats.cumtime;
    }

    // The memory profiler measures the heap at every marked line, whether or not it changed.
    bool heap = false;
    for (const reader::TraceInfo& info : p.traces) heap |= info.meta.count("memory_profiler") > 0;
    for (const auto& [key, rows] : groups)
        for (const auto& [line, row] : rows) heap |= row.heap_increment != 0;
    std::vector<LineTable> out;
    text::Pattern re(match.empty() ? std::string(".") : match);
    for (auto& [key, rows] : groups) {
        if (!match.empty() && !re.search(key.first + ":" + key.second)) continue;
        LineTable t;
        t.file = key.first;
        t.function = key.second;
        t.heap = heap;
        for (auto& [line, row] : rows) t.rows.push_back(row);
        auto ft = function_time.find(key);
        if (ft != function_time.end()) {
            t.total_time = ft->second;
            if (auto m = markers_in_total.find(key); m != markers_in_total.end())
                t.markers_in_total = m->second;
        } else {
            for (const LineRow& r : t.rows) t.total_time += r.time;
        }
        out.push_back(std::move(t));
    }
    std::sort(out.begin(), out.end(),
              [](const LineTable& a, const LineTable& b) { return a.total_time > b.total_time; });
    return out;
}

} // namespace prof::analysis
