// Line tables printed next to the source text read from the file the trace names
// (line_profiler's and memory_profiler's layouts), and as JSON.
#include "render/lines.hpp"
#include "render/model.hpp"

#include "render/report.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sys/stat.h>

namespace prof::render {

namespace {

bool read_source(const std::string& path, const std::vector<std::string>& dirs,
                 std::vector<std::string>& lines) {
    std::vector<std::string> candidates = {path};
    std::string base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    for (const std::string& d : dirs) {
        if (!path.empty() && path[0] != '/') candidates.push_back(d + "/" + path);
        candidates.push_back(d + "/" + base);
    }
    for (const std::string& c : candidates) {
        // Paths come from the trace: regular files of a sane size only (no device, no FIFO).
        struct stat st;
        if (stat(c.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t(64) << 20))
            continue;
        std::ifstream in(c);
        if (!in) continue;
        std::string l;
        while (std::getline(in, l)) lines.push_back(l);
        return true;
    }
    return false;
}

size_t indent_of(const std::string& s) {
    size_t i = 0;
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    return i;
}

// The identifier before the parameter list: "ns::work(int)" -> "work".
std::string short_name(const std::string& function) {
    size_t open = function.find('(');
    std::string head = function.substr(0, open);
    size_t colon = head.rfind("::");
    if (colon != std::string::npos) head = head.substr(colon + 2);
    size_t lt = head.find('<');
    return lt == std::string::npos ? head : head.substr(0, lt);
}

// line_profiler shows the whole function: find its first line (the nearest line above the
// first marked one that names it) and its closing brace.
std::pair<uint32_t, uint32_t> function_span(const std::vector<std::string>& src,
                                            const LineTable& t) {
    uint32_t first = t.rows.front().line, last = t.rows.back().line;
    if (src.empty() || first == 0 || first > src.size()) return {first, last};
    std::string name = short_name(t.function);
    uint32_t start = first;
    if (!name.empty())
        for (uint32_t l = first; l >= 1 && first - l < 300; --l)
            if (src[l - 1].find(name + "(") != std::string::npos) {
                start = l;
                break;
            }
    if (last > src.size() || last - first > 5000) return {first, last}; // not this source
    // The closing brace that balances the first opening one from the start line on (string
    // and character literals and comments skipped): a one-line function ends on its line.
    int depth = 0;
    bool opened = false, block_comment = false;
    for (uint32_t l = start; l <= src.size() && l - start < 5000; ++l) {
        const std::string& s = src[l - 1];
        for (size_t i = 0; i < s.size(); ++i) {
            char c = s[i];
            if (block_comment) {
                if (c == '*' && i + 1 < s.size() && s[i + 1] == '/') block_comment = false, ++i;
                continue;
            }
            if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') break;
            if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
                block_comment = true;
                ++i;
            } else if (c == '"' || c == '\'') {
                for (++i; i < s.size() && s[i] != c; ++i)
                    if (s[i] == '\\') ++i;
            } else if (c == '{') {
                ++depth;
                opened = true;
            } else if (c == '}' && opened && --depth == 0) {
                if (l >= last) return {start, l};
                l = uint32_t(src.size()); // closed before the last marked line: not the span
                break;
            }
        }
    }
    uint32_t end = std::min<uint32_t>(last, uint32_t(src.size()));
    size_t indent = indent_of(src[start - 1]);
    for (uint32_t l = end + 1; l <= src.size() && l - last < 500; ++l) {
        const std::string& s = src[l - 1];
        size_t i = indent_of(s);
        if (i < s.size() && s[i] == '}' && i <= indent) {
            end = l;
            break;
        }
    }
    return {start, std::max(end, last)};
}

std::string num(double v) {
    return fmt::format("{:.1f}", v);
}
std::string mib(double bytes) {
    return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
}

} // namespace

void print_line_tables(std::FILE* out, const std::vector<LineTable>& tables, const LineOptions& o) {
    if (!o.memory) fmt::print(out, "Timer unit: {:g} s\n\n", o.unit);
    bool rss_unread = false; // a row measured the heap only: its RSS columns show "-"
    for (const LineTable& t : tables) {
        if (t.rows.empty()) continue;
        std::vector<std::string> src;
        bool have_source = read_source(t.file, o.source_dirs, src);
        auto [start, end] = function_span(src, t);
        std::map<uint32_t, const LineRow*> by_line;
        for (const LineRow& r : t.rows) by_line[r.line] = &r;
        std::string file = text::printable(t.file);
        bool heap = t.heap || std::any_of(t.rows.begin(), t.rows.end(),
                                          [](const LineRow& r) { return r.heap_increment != 0; });
        if (o.memory) {
            fmt::print(out, "Filename: {}\nFunction: {}\n\n", file, text::printable(t.function));
            std::string header = fmt::format(
                "{:>6} {:>12} {:>12}  {}{:>11}   {}", "Line #", "Mem usage", "Increment",
                heap ? fmt::format("{:>12}  ", "Heap incr.") : "", "Occurrences", "Line Contents");
            fmt::print(out, "{}\n{}\n", header, std::string(header.size(), '='));
        } else {
            // A total that holds the markers' own cost says so (lines.md).
            std::string markers =
                t.markers_in_total
                    ? fmt::format(", with the markers' own cost of {} line executions (left out "
                                  "of a run timed by CPU samples, built with -g)",
                                  text::grouped(t.markers_in_total))
                    : "";
            fmt::print(out, "Total time: {:g} s{}\nFile: {}\nFunction: {} at line {}\n\n",
                       t.total_time, markers, file, text::printable(t.function), start);
            // Sampled from outside: the counts are CPU samples, and no time is per execution.
            bool sampled = std::all_of(t.rows.begin(), t.rows.end(),
                                       [](const LineRow& r) { return r.sampled; });
            std::string header = fmt::format("{:>6} {:>9} {:>12} {:>8} {:>8}  {}", "Line #",
                                             sampled ? "Samples" : "Hits", "Time", "Per Hit",
                                             "% Time", "Line Contents");
            fmt::print(out, "{}\n{}\n", header, std::string(header.size(), '='));
        }
        if (!have_source)
            fmt::print(out, "(source file not found: {}; showing marked lines only)\n", file);
        // The whole function when its source is at hand; otherwise (or for a span that cannot
        // be one function) only the marked lines.
        bool full = have_source && end <= src.size() && end - start <= 5000;
        std::vector<uint64_t> shown;
        if (full)
            for (uint64_t l = start; l <= end; ++l) shown.push_back(l);
        else
            for (const LineRow& r : t.rows) shown.push_back(r.line);
        for (uint64_t l : shown) {
            if (l == 0) continue;
            auto it = by_line.find(uint32_t(l));
            {
                std::string text =
                    have_source && l <= src.size() ? text::printable(src[size_t(l - 1)]) : "";
                const LineRow* r = it == by_line.end() ? nullptr : it->second;
                if (!have_source && r) text = text::printable(r->mark); // as the trace has it
                if (o.memory) {
                    bool measured = r && r->memory_samples;
                    std::string heap_col;
                    if (heap)
                        heap_col = fmt::format("{:>12}  ", measured ? mib(r->heap_increment) : "");
                    bool rss = measured && r->rss_samples;
                    rss_unread |= measured && !rss;
                    if (measured)
                        fmt::print(out, "{:>6} {:>12} {:>12}  {}{:>11}   {}\n", l,
                                   rss ? mib(r->rss_last) : "-", rss ? mib(r->rss_increment) : "-",
                                   heap_col, r->memory_samples, text);
                    else
                        fmt::print(out, "{:>6} {:>12} {:>12}  {}{:>11}   {}\n", l, "", "", heap_col,
                                   "", text);
                } else if (r) {
                    double time = r->time / o.unit;
                    double pct = t.total_time > 0 ? 100.0 * r->time / t.total_time : 0;
                    std::string per_hit = r->sampled || !r->hits ? "" : num(time / double(r->hits));
                    fmt::print(out, "{:>6} {:>9} {:>12} {:>8} {:>8}  {}\n", l, r->hits, num(time),
                               per_hit, num(pct), text);
                } else {
                    fmt::print(out, "{:>6} {:>9} {:>12} {:>8} {:>8}  {}\n", l, "", "", "", "",
                               text);
                }
            }
        }
        fmt::print(out, "\n\n");
    }
    if (rss_unread)
        fmt::print(out, "Mem usage and Increment \"-\": the resident set size was not read; "
                        "PROF_LINE_RSS=1 reads it at every marked line (two preads each).\n");
}

void print_line_json(std::FILE* out, const std::vector<LineTable>& tables) {
    fmt::print(out, "{{\n  \"lines\": [");
    bool first = true;
    for (const LineTable& t : tables)
        for (const LineRow& r : t.rows) {
            fmt::print(out,
                       "{}\n    {{\"file\": \"{}\", \"line\": {}, \"function\": \"{}\", "
                       "\"kind\": \"{}\", \"hits\": {}, \"time\": {:.9f}",
                       first ? "" : ",", text::json_escape(t.file), r.line,
                       text::json_escape(t.function), r.kind, r.hits, r.time);
            if (r.sampled) fmt::print(out, ", \"sampled\": true"); // hits are CPU samples
            // A row that measured the heap only has no RSS figures: no mem_usage, increment.
            if (r.rss_samples)
                fmt::print(out, ", \"mem_usage\": {:.0f}, \"increment\": {:.0f}", r.rss_last,
                           r.rss_increment);
            if (r.memory_samples)
                fmt::print(out, ", \"heap_increment\": {:.0f}, \"occurrences\": {}",
                           r.heap_increment, r.memory_samples);
            fmt::print(out, "}}");
            first = false;
        }
    fmt::print(out, "\n  ]\n}}\n");
}

} // namespace prof::render
