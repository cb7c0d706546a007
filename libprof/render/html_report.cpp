// The HTML report: one file with the data as JSON in a <script type="application/json">
// element (json_escape writes <, > and & as \u escapes, so no name can end the element) and an
// inline script that builds the page with textContent only (never innerHTML from data). The
// script and the style are assets/report.js and assets/report.css, embedded at build time. No
// network access: no external script, style, font or image.
#include "render/memory_report.hpp"
#include "render/model.hpp"
#include "render/report.hpp"
#include "render/assets.hpp"
#include "render/render.hpp"

#include "reader/trace_reader.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sys/stat.h>

namespace prof::render {
namespace {

std::string js(std::string_view s) {
    return "\"" + text::json_escape(text::printable(s)) + "\"";
}

std::string base_name(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<std::string> read_lines(const std::string& file, const std::vector<std::string>& dirs) {
    std::vector<std::string> candidates{file};
    for (const std::string& d : dirs) {
        candidates.push_back(d + "/" + file);
        candidates.push_back(d + "/" + base_name(file));
    }
    for (const std::string& c : candidates) {
        // Paths come from the trace: regular files of a sane size only (no device, no FIFO).
        struct stat st;
        if (stat(c.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t(64) << 20)) continue;
        std::ifstream in(c);
        if (!in) continue;
        std::vector<std::string> lines;
        std::string l;
        while (std::getline(in, l) && lines.size() < 1'000'000) lines.push_back(l);
        return lines;
    }
    return {};
}

// ---- memory section ------------------------------------------------------------------------

constexpr size_t kTopSites = 500; // per column: the page lists the union of the tops

// The markup, with the heap/RSS plot drawn by write_memory_plot (its XML declaration and
// namespace dropped: the SVG sits inline in the page). Numbers and fixed text only; names come with the data.
void write_memory_section(std::FILE* out, const MemoryReport& m) {
    std::string plot;
    char* buf = nullptr;
    size_t len = 0;
    if (std::FILE* mem = open_memstream(&buf, &len)) {
        write_memory_plot(mem, m, "Heap and resident set size over time");
        std::fclose(mem);
        plot.assign(buf, len);
        std::free(buf);
    }
    if (plot.rfind("<?xml", 0) == 0) plot.erase(0, plot.find('\n') + 1);
    // Inline SVG takes its namespace from the HTML parser; keep the page free of URLs.
    const std::string ns = " xmlns=\"http://www.w3.org/2000/svg\"";
    if (size_t at = plot.find(ns); at != std::string::npos) plot.erase(at, ns.size());
    fmt::print(out,
               "<section id=\"memory\"><h2>Memory</h2><div id=\"mem-summary\"></div>"
               "<div id=\"mem-mismatches\"></div>\n<div id=\"mem-plot\">{}</div>\n"
               "<div id=\"mem-toolbar\"><input id=\"mem-filter\" type=\"search\" "
               "placeholder=\"filter sites by function or file\"><span class=\"muted\" "
               "id=\"mem-shown\"></span><span class=\"muted\">click a column to sort, a row for "
               "its whole stack</span></div>\n"
               "<div class=\"scroll\"><table id=\"mtable\"><thead></thead><tbody></tbody></table>"
               "</div></section>\n",
               plot);
}

void write_memory_data(std::FILE* out, const MemoryReport& m) {
    // The sites: the top kTopSites by each column, in the report's order.
    std::vector<bool> keep(m.sites.size(), false);
    for (auto key : {&MemorySite::allocations, &MemorySite::bytes, &MemorySite::temporary,
                     &MemorySite::peak_bytes, &MemorySite::leaked_bytes}) {
        std::vector<size_t> idx;
        for (size_t i = 0; i < m.sites.size(); ++i)
            if (m.sites[i].*key) idx.push_back(i);
        std::stable_sort(idx.begin(), idx.end(),
                         [&](size_t a, size_t b) { return m.sites[a].*key > m.sites[b].*key; });
        for (size_t k = 0; k < idx.size() && k < kTopSites; ++k) keep[idx[k]] = true;
    }
    std::vector<int64_t> shown(m.sites.size(), -1);
    int64_t count = 0;
    for (size_t i = 0; i < m.sites.size(); ++i)
        if (keep[i]) shown[i] = count++;
    fmt::print(out,
               "{{\"allocations\":{},\"frees\":{},\"temporary\":{},\"bytes\":{},\"peak_heap\":{},"
               "\"peak_time\":{:.6f},\"peak_rss\":{},\"leaked\":{},\"leaked_blocks\":{},"
               "\"total_sites\":{},\"top\":{},\"mismatches\":[",
               m.allocations, m.frees, m.temporary, m.bytes_allocated, m.peak_heap,
               m.peak_heap_time, m.peak_rss, m.leaked_bytes, m.leaked_blocks, m.sites.size(),
               kTopSites);
    for (size_t i = 0; i < m.mismatches.size(); ++i) {
        const Mismatch& mm = m.mismatches[i];
        fmt::print(out, "{}{{\"with\":{},\"freed\":{},\"count\":{},\"site\":{}}}", i ? "," : "",
                   js(mm.allocated_with), js(mm.freed_with), mm.count,
                   mm.site < shown.size() ? shown[mm.site] : -1);
    }
    fmt::print(out, "],\"sites\":[");
    for (size_t i = 0; i < m.sites.size(); ++i) {
        if (shown[i] < 0) continue;
        const MemorySite& s = m.sites[i];
        fmt::print(out, "{}\n{{\"a\":{},\"b\":{},\"t\":{},\"p\":{},\"l\":{},\"lb\":{},\"s\":[",
                   shown[i] ? "," : "", s.allocations, s.bytes, s.temporary, s.peak_bytes,
                   s.leaked_bytes, s.leaked_blocks);
        for (size_t k = 0; k < s.stack.size() && k < 64; ++k)
            fmt::print(out, "{}[{},{},{}]", k ? "," : "", js(memory_frame_name(s.stack[k])),
                       js(base_name(s.stack[k].file)), s.stack[k].line);
        fmt::print(out, "]}}");
    }
    fmt::print(out, "]}}");
}

// A function's per-call latency: its percentiles (ns) and its calls per power of two of ns.
void write_latency(std::FILE* out, const FunctionLatency& l) {
    fmt::print(out,
               ",\"lat\":{{\"calls\":{},\"untimed\":{},\"bound\":{},\"mean\":{:.0f},"
               "\"p50\":{},\"p90\":{},\"p99\":{},\"p999\":{},\"max\":{},\"log2\":[",
               l.calls, l.untimed, l.bound, l.mean_ns, l.p50, l.p90, l.p99, l.p999, l.max);
    for (size_t b = 0; b < l.histogram.size(); ++b)
        fmt::print(out, "{}{}", b ? "," : "", l.histogram[b]);
    fmt::print(out, "]}}");
}

} // namespace

void write_html(std::FILE* out, const Profile& p, const CallTree& t,
                const std::vector<LineTable>& lines, const HtmlOptions& o) {
    std::vector<std::string> trace_names;
    for (const reader::TraceInfo& ti : p.traces) trace_names.push_back(base_name(ti.path));
    std::string title = o.title;
    if (title.empty() && !p.traces.empty()) {
        auto exe = p.traces.front().meta.find("exe");
        title = exe != p.traces.front().meta.end() ? base_name(exe->second) : trace_names.front();
    }
    const MemoryReport* memory = o.memory && o.memory->present ? o.memory : nullptr;
    fmt::print(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'\">\n"
        "<title>libprof: {}</title>\n<style>\n{}</style>\n</head>\n<body>\n"
        "<header><h1>libprof report: {}</h1><div class=\"sub\" id=\"summary\"></div></header>\n",
        text::xml_escape(title), assets::report_css, text::xml_escape(title));
    // Memory first when it is all the trace has (an unmodified program under profrun --mem).
    const bool memory_first = memory && p.total_calls == 0 && p.time.calls_counted();
    if (memory_first) write_memory_section(out, *memory);
    fmt::print(
        out,
        "<section><h2>Call tree</h2><div id=\"icicle-path\"></div><div id=\"icicle-info\">"
        "Click a frame to zoom; hover for times.</div><div id=\"icicle\"></div></section>\n"
        "<section><h2>Functions</h2><div id=\"toolbar\"><input id=\"filter\" type=\"search\" "
        "placeholder=\"filter by file:line(function)\"><span class=\"muted\">click a column "
        "to sort, a row for its callers and callees</span></div>\n"
        "<div class=\"scroll\"><table id=\"ftable\"><thead></thead><tbody></tbody></table></div>"
        "<div id=\"detail\"></div></section>\n"
        "<section><h2>Lines</h2><div id=\"lines\"></div></section>\n");
    if (memory && !memory_first) write_memory_section(out, *memory);

    // The data. Numbers are plain JSON numbers; every string goes through json_escape.
    fmt::print(out,
               "<script id=\"profile-data\" type=\"application/json\">{{\"total_calls\":{},"
               "\"primitive_calls\":{},\"calls_counted\":{},\"total_time\":{:.9f},"
               "\"threads\":{},\"times\":{},\"notes\":[",
               p.total_calls, p.primitive_calls, p.time.calls_counted() ? "true" : "false",
               p.total_time, p.threads.size(), js(time_basis_text(p.time)));
    // The text header's further lines, each under the summary.
    bool first_note = true;
    for (const std::string& note : header_notes(p)) {
        fmt::print(out, "{}{}", first_note ? "" : ",", js(note));
        first_note = false;
    }
    fmt::print(out, "],\"traces\":[");
    for (size_t i = 0; i < trace_names.size(); ++i)
        fmt::print(out, "{}{}", i ? "," : "", js(trace_names[i]));
    fmt::print(out, "],\n\"functions\":[");
    // A function's latency, by what names it (the latency report merges functions as the
    // profile does).
    std::map<std::pair<std::string, uint32_t>, const FunctionLatency*> latency_of;
    if (o.latency)
        for (const FunctionLatency& l : o.latency->functions)
            latency_of.emplace(std::make_pair(l.name, l.line), &l);
    for (size_t i = 0; i < p.functions.size(); ++i) {
        const Function& f = p.functions[i];
        std::string file =
            f.file.empty() ? (f.module.empty() ? "~" : base_name(f.module)) : base_name(f.file);
        fmt::print(out,
                   "{}\n{{\"name\":{},\"file\":{},\"line\":{},\"module\":{},\"kind\":{},"
                   "\"ncalls\":{},\"pcalls\":{},\"tottime\":{:.9f},\"cumtime\":{:.9f}",
                   i ? "," : "", js(f.name), js(file), f.line, js(f.module), js(f.kind),
                   f.stats.ncalls, f.stats.pcalls, f.stats.tottime, f.stats.cumtime);
        auto l = latency_of.find({f.name, f.line});
        if (l != latency_of.end() && l->second->file == file) write_latency(out, *l->second);
        fmt::print(out, "}}");
    }
    fmt::print(out, "],\n\"edges\":[");
    for (size_t i = 0; i < p.edges.size(); ++i) {
        const Edge& e = p.edges[i];
        fmt::print(
            out,
            "{}\n{{\"caller\":{},\"callee\":{},\"ncalls\":{},\"pcalls\":{},\"tottime\":{:.9f},"
            "\"cumtime\":{:.9f}}}",
            i ? "," : "", e.caller == kRoot ? -1 : int64_t(e.caller), e.callee, e.stats.ncalls,
            e.stats.pcalls, e.stats.tottime, e.stats.cumtime);
    }
    // The tree, pruned to paths of at least 1/20000 of the total: the page stays light, and
    // anything narrower is under a pixel anyway.
    const uint64_t cut = t.root().total_ns / 20000;
    std::vector<int64_t> kept(t.nodes.size(), -1);
    fmt::print(out, "],\n\"tree\":{{\"names\":[");
    for (size_t i = 0; i < t.functions.size(); ++i)
        fmt::print(out, "{}{}", i ? "," : "", js(t.functions[i].name));
    fmt::print(out, "],\"kinds\":[");
    for (size_t i = 0; i < t.functions.size(); ++i)
        fmt::print(out, "{}{}", i ? "," : "", js(t.functions[i].kind));
    fmt::print(out, "],\"nodes\":[");
    int64_t count = 0;
    for (size_t i = 0; i < t.nodes.size(); ++i) { // parents precede children
        const CallTreeNode& n = t.nodes[i];
        if (i && (kept[n.parent] < 0 || n.total_ns < cut || n.total_ns == 0)) continue;
        kept[i] = count++;
        fmt::print(out, "{}\n{{\"p\":{},\"f\":{},\"c\":{},\"t\":{},\"s\":{}{}}}", i ? "," : "",
                   i ? kept[n.parent] : -1, n.function == kNoFunction ? -1 : int64_t(n.function),
                   n.calls, n.total_ns, n.self_ns,
                   n.function == kNoFunction ? ",\"l\":" + js(n.label) : std::string());
    }
    fmt::print(out, "]}},\n\"lines\":[");
    for (size_t i = 0; i < lines.size(); ++i) {
        const LineTable& lt = lines[i];
        uint32_t first = UINT32_MAX, last = 0;
        for (const LineRow& r : lt.rows)
            first = std::min(first, r.line), last = std::max(last, r.line);
        if (first == UINT32_MAX) first = last = 0;
        if (last - first > 400) last = first + 400;
        std::vector<std::string> src = read_lines(lt.file, o.source_dirs);
        // line_profiler shows the function from its first marked line down to the last one.
        fmt::print(out,
                   "{}\n{{\"file\":{},\"function\":{},\"total\":{:.9f},\"first\":{},\"last\":{},"
                   "\"rows\":[",
                   i ? "," : "", js(lt.file), js(lt.function), lt.total_time, first, last);
        for (size_t r = 0; r < lt.rows.size(); ++r)
            fmt::print(out, "{}{{\"line\":{},\"hits\":{},\"time\":{:.9f}{}}}", r ? "," : "",
                       lt.rows[r].line, lt.rows[r].hits, lt.rows[r].time,
                       lt.rows[r].sampled ? ",\"sampled\":true" : "");
        fmt::print(out, "],\"source\":[");
        for (uint32_t l = first; l <= last && l >= 1; ++l)
            fmt::print(out, "{}{}", l > first ? "," : "",
                       l - 1 < src.size() ? js(src[l - 1]) : "\"\"");
        fmt::print(out, "]}}");
    }
    fmt::print(out, "],\n\"memory\":");
    if (memory) write_memory_data(out, *memory);
    else fmt::print(out, "null");
    fmt::print(out, "}}</script>\n<script>\n{}{}</script>\n</body>\n</html>\n", assets::page_js,
               assets::report_js);
}

} // namespace prof::render
