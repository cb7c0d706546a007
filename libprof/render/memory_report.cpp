// Renderings of a MemoryReport.
#include "render/memory_report.hpp"
#include "render/model.hpp"

#include "render/report.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string_view>

namespace prof::render {

namespace {

// "1 call", "2 calls".
std::string count(uint64_t n, const char* one, const char* many) {
    return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string frame_text(const MemoryFrame& f, bool full_paths) {
    std::string file = f.file;
    if (!full_paths && file.rfind('/') != std::string::npos) file = file.substr(file.rfind('/') + 1);
    std::string where = file.empty() ? std::string() : fmt::format(" ({}:{})", file, f.line);
    if (file.empty() && !f.module.empty()) {
        std::string mod = f.module.substr(f.module.rfind('/') == std::string::npos ? 0 : f.module.rfind('/') + 1);
        where = fmt::format(" (in {})", mod);
    }
    return text::printable(f.name + where + (f.inlined ? " [inlined]" : ""));
}

void print_stack(std::FILE* out, const MemorySite& s, const MemoryOptions& o) {
    if (s.stack.empty()) {
        fmt::print(out, "      <no stack: allocated outside any traced call>\n");
        return;
    }
    for (size_t i = 0; i < s.stack.size() && i < o.depth; ++i)
        fmt::print(out, "      {} {}\n", i == 0 ? "at" : "  ", frame_text(s.stack[i], o.full_paths));
    if (s.stack.size() > o.depth) fmt::print(out, "         ... {} more frames\n", s.stack.size() - o.depth);
}

void section(std::FILE* out, const MemoryReport& m, const MemoryOptions& o, const char* title,
             const std::function<uint64_t(const MemorySite&)>& key,
             const std::function<std::string(const MemorySite&)>& line) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < m.sites.size(); ++i)
        if (key(m.sites[i])) idx.push_back(i);
    if (idx.empty()) return;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return key(m.sites[a]) > key(m.sites[b]); });
    fmt::print(out, "\n{}\n", title);
    for (size_t k = 0; k < idx.size() && k < o.limit; ++k) {
        fmt::print(out, "  {}\n", line(m.sites[idx[k]]));
        print_stack(out, m.sites[idx[k]], o);
    }
    if (idx.size() > o.limit)
        fmt::print(out, "  ... and {} more {}\n", idx.size() - o.limit,
                   idx.size() - o.limit == 1 ? "site" : "sites");
}

} // namespace

void print_memory(std::FILE* out, const MemoryReport& m, const MemoryOptions& o) {
    if (!m.present) {
        fmt::print(out, "No allocation data in this trace: record with `profrun --mem` "
                        "(or LD_PRELOAD=libprofmem.so).\n");
        return;
    }
    fmt::print(out, "calls to allocation functions: {} ({} temporary)\n", m.allocations, m.temporary);
    fmt::print(out, "calls to release functions: {}{}\n", m.frees,
               m.unknown_frees
                   ? fmt::format(" ({} of {} allocated before tracing)", m.unknown_frees,
                                 m.unknown_frees == 1 ? "a block" : "blocks")
                   : "");
    fmt::print(out, "bytes allocated: {}\n", text::format_bytes(double(m.bytes_allocated)));
    fmt::print(out, "peak heap: {} at {:.3f} s   peak RSS: {}   leaked: {} in {}{}\n",
               text::format_bytes(double(m.peak_heap)), m.peak_heap_time,
               m.peak_rss ? text::format_bytes(double(m.peak_rss)) : std::string("n/a"),
               text::format_bytes(double(m.leaked_bytes)),
               count(m.leaked_blocks, "block", "blocks"),
               // A trace cut short: what was live at the cut may have been freed after it.
               m.partial ? fmt::format("   unknown: {} in {} (live where the trace is cut)",
                                       text::format_bytes(double(m.unknown_bytes)),
                                       count(m.unknown_blocks, "block", "blocks"))
                         : std::string());
    if (m.late_events)
        fmt::print(out, "note: {} records were older than records replayed before them (a writer "
                        "that did not keep the format's order); peak and timeline may be off by "
                        "their sizes\n",
                   m.late_events);
    if (!m.mismatches.empty()) {
        fmt::print(out, "\nMISMATCHED ALLOCATION AND RELEASE\n");
        for (const Mismatch& mm : m.mismatches) {
            fmt::print(out, "  {} block{} allocated with {} and released with {}\n", mm.count,
                       mm.count == 1 ? "" : "s", mm.allocated_with, mm.freed_with);
            print_stack(out, m.sites[mm.site], o);
        }
    }
    section(
        out, m, o, "MOST CALLS TO ALLOCATION FUNCTIONS",
        [](const MemorySite& s) { return s.allocations; },
        [](const MemorySite& s) {
            return fmt::format("{}, {} allocated", count(s.allocations, "call", "calls"),
                               text::format_bytes(double(s.bytes)));
        });
    section(
        out, m, o, "PEAK MEMORY CONSUMERS", [](const MemorySite& s) { return s.peak_bytes; },
        [](const MemorySite& s) {
            return fmt::format("{} live at the peak ({})", text::format_bytes(double(s.peak_bytes)),
                               count(s.allocations, "call", "calls"));
        });
    section(
        out, m, o, "MEMORY LEAKED", [](const MemorySite& s) { return s.leaked_bytes; },
        [](const MemorySite& s) {
            return fmt::format("{} leaked in {}", text::format_bytes(double(s.leaked_bytes)),
                               count(s.leaked_blocks, "block", "blocks"));
        });
    section(
        out, m, o, "FATE UNKNOWN (LIVE WHERE THE TRACE IS CUT)",
        [](const MemorySite& s) { return s.unknown_bytes; },
        [](const MemorySite& s) {
            return fmt::format("{} of unknown fate in {}",
                               text::format_bytes(double(s.unknown_bytes)),
                               count(s.unknown_blocks, "block", "blocks"));
        });
    section(
        out, m, o, "MOST TEMPORARY ALLOCATIONS", [](const MemorySite& s) { return s.temporary; },
        [](const MemorySite& s) {
            return fmt::format("{} temporary of {}", s.temporary,
                               count(s.allocations, "call", "calls"));
        });
    fmt::print(out, "\n");
}

void print_memory_json(std::FILE* out, const MemoryReport& m, const MemoryOptions& o) {
    fmt::print(
        out,
        "{{\n  \"summary\": {{\"allocations\": {}, \"frees\": {}, \"temporary_allocations\": {}, "
        "\"bytes_allocated\": {}, \"peak_heap\": {}, \"peak_rss\": {}, \"leaked_bytes\": {}, "
        "\"leaked_blocks\": {}, \"unknown_frees\": {}{}}},\n  \"mismatches\": [",
        m.allocations, m.frees, m.temporary, m.bytes_allocated, m.peak_heap, m.peak_rss,
        m.leaked_bytes, m.leaked_blocks, m.unknown_frees,
        // Only for a trace cut short, whose blocks live at the cut are of unknown fate.
        m.partial ? fmt::format(", \"partial\": true, \"unknown_bytes\": {}, "
                                "\"unknown_blocks\": {}",
                                m.unknown_bytes, m.unknown_blocks)
                  : std::string());
    for (size_t i = 0; i < m.mismatches.size(); ++i)
        fmt::print(out, "{}\n    {{\"allocated_with\": \"{}\", \"freed_with\": \"{}\", \"count\": {}, \"site\": {}}}",
                   i ? "," : "", m.mismatches[i].allocated_with, m.mismatches[i].freed_with,
                   m.mismatches[i].count, m.mismatches[i].site);
    fmt::print(out, "\n  ],\n  \"sites\": [");
    for (size_t i = 0; i < m.sites.size(); ++i) {
        const MemorySite& s = m.sites[i];
        fmt::print(out, "{}\n    {{\"stack\": [", i ? "," : "");
        for (size_t k = 0; k < s.stack.size() && k < std::max<size_t>(o.depth, 64); ++k)
            fmt::print(out, "{}{{\"name\": \"{}\", \"file\": \"{}\", \"line\": {}{}}}",
                       k ? ", " : "", text::json_escape(s.stack[k].name),
                       text::json_escape(s.stack[k].file), s.stack[k].line,
                       s.stack[k].inlined ? ", \"inlined\": true" : "");
        fmt::print(
            out,
            "], \"allocations\": {}, \"bytes\": {}, \"peak_bytes\": {}, \"leaked_bytes\": {}, "
            "\"leaked_blocks\": {}, \"temporary_allocations\": {}{}}}",
            s.allocations, s.bytes, s.peak_bytes, s.leaked_bytes, s.leaked_blocks, s.temporary,
            m.partial ? fmt::format(", \"unknown_bytes\": {}, \"unknown_blocks\": {}",
                                    s.unknown_bytes, s.unknown_blocks)
                      : std::string());
    }
    // The RSS readings with the heap at each; `pid` only when the report covers several
    // processes (each with its own timeline, t from its own start).
    bool several = std::any_of(m.timeline.begin(), m.timeline.end(), [&](const MemoryPoint& p) {
        return p.pid != m.timeline.front().pid;
    });
    fmt::print(out, "\n  ],\n  \"timeline\": [");
    for (size_t i = 0; i < m.timeline.size(); ++i) {
        const MemoryPoint& p = m.timeline[i];
        fmt::print(out, "{}\n    {{\"t\": {:.6f}, \"heap\": {}, \"rss\": {}{}}}", i ? "," : "", p.t,
                   p.heap, p.rss, several ? fmt::format(", \"pid\": {}", p.pid) : std::string());
    }
    fmt::print(out, "{}]\n}}\n", m.timeline.empty() ? "" : "\n  ");
}

} // namespace prof::render

namespace prof::render {

namespace {

// A "nice" tick step (1, 2 or 5 times a power of ten) that cuts `span` into about `n` parts.
double nice_step(double span, int n) {
    double raw = span / n;
    double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

} // namespace

// Heap and resident memory over time, as `mprof plot` draws it: one self-contained SVG. Ticks
// fall on 1-2-5 steps (of seconds, and of the byte unit that fits the peak), the axes end on a
// tick, and the legend sits above the plot area, clear of the curves.
void write_memory_plot(std::FILE* out, const MemoryReport& m, const std::string& title) {
    const double w = 900, h = 440, left = 80, right = 40, top = 64, bottom = 50;
    double tmax = 0, ymax = 0;
    for (const auto& series : {&m.heap_timeline, &m.rss_timeline})
        for (const auto& [t, v] : *series) tmax = std::max(tmax, t), ymax = std::max(ymax, v);
    if (tmax <= 0) tmax = 1;
    if (ymax <= 0) ymax = 1;
    const double tstep = nice_step(tmax, 5);
    tmax = std::ceil(tmax / tstep - 1e-9) * tstep;
    // Bytes in the binary unit of the peak (B, KiB, MiB, ...), stepped 1-2-5 in that unit.
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double scale = 1;
    while (ymax / scale >= 1024 && u < 4) scale *= 1024, ++u;
    const double ystep = nice_step(ymax / scale, 5) * scale;
    ymax = std::ceil(ymax / ystep - 1e-9) * ystep;
    auto x = [&](double t) { return left + (w - left - right) * t / tmax; };
    auto y = [&](double v) { return h - bottom - (h - top - bottom) * v / ymax; };
    fmt::print(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
                    "viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"12\">\n",
               w, h, w, h);
    fmt::print(out, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    fmt::print(out, "<text x=\"{}\" y=\"22\" font-size=\"15\">{}</text>\n", left,
               text::xml_escape(title));
    fmt::print(out, "<g stroke=\"#444\"><line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/>"
                    "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\"/></g>\n",
               left, h - bottom, w - right, top);
    for (int i = 0; i * tstep <= tmax * (1 + 1e-9); ++i) {
        double t = i * tstep;
        fmt::print(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{:g} s</text>\n", x(t),
                   h - bottom + 18, t);
    }
    for (int i = 0; i * ystep <= ymax * (1 + 1e-9); ++i) {
        double v = i * ystep;
        fmt::print(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:g} {}</text>\n", left - 6,
                   y(v) + 4, v / scale, units[u]);
        fmt::print(out, "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#ddd\"/>\n", left,
                   y(v), w - right, y(v));
    }
    auto polyline = [&](const std::vector<std::pair<double, double>>& pts, const char* color,
                        const char* name, int col) {
        if (pts.empty()) return;
        // Steps: a value holds until the next sample (nothing was measured in between).
        fmt::print(out, "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"", color);
        for (size_t i = 0; i < pts.size(); ++i) {
            if (i) fmt::print(out, "{:.1f},{:.1f} ", x(pts[i].first), y(pts[i - 1].second));
            fmt::print(out, "{:.1f},{:.1f} ", x(pts[i].first), y(pts[i].second));
        }
        fmt::print(out, "\"><title>{}</title></polyline>\n", name);
        // The legend: one row above the plot area, under the title.
        double lx = left + 220 * col;
        fmt::print(out,
                   "<g class=\"legend\"><rect x=\"{}\" y=\"{}\" width=\"12\" height=\"3\" "
                   "fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text></g>\n",
                   lx, top - 20, color, lx + 18, top - 15, name);
    };
    polyline(m.rss_timeline, "#d62728", "resident set size (RSS)", 0);
    polyline(m.heap_timeline, "#1f77b4", "heap (live blocks)", 1);
    fmt::print(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">time since start</text>\n",
               (left + w - right) / 2, h - 12);
    fmt::print(out, "</svg>\n");
}

} // namespace prof::render
