// The flame graph: one <g> per call path with its exact offset and width in nanoseconds
// (data-o, data-n), so that the inline script can zoom without rounding. Layout and controls
// follow flamegraph.pl (hover details, click to zoom, Ctrl-F / "Search" to highlight with a
// regular expression, Escape to reset); the script, assets/flamegraph.js (embedded at build
// time), is our own, not copied.
#include "render/assets.hpp"
#include "render/model.hpp"
#include "render/render.hpp"

#include "reader/trace_reader.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace prof::render {

namespace {

constexpr int kFrameHeight = 16;
constexpr int kPad = 10;
constexpr int kTop = 36;
constexpr int kBottom = 34;
constexpr double kCharWidth = 12 * 0.59;

uint32_t hash(std::string_view s, uint32_t seed) {
    uint32_t h = 2166136261u ^ seed;
    for (unsigned char c : s) h = (h ^ c) * 16777619u;
    return h;
}

// flamegraph.pl's "hot" palette for functions, "aqua" for scopes and regions, "mem" for
// allocation flame graphs, grey for the root and thread frames: stable per name.
std::string color(const CallTree& t, const CallTreeNode& n, bool memory) {
    if (n.function == kNoFunction) return "rgb(200,200,200)";
    const std::string& name = t.name(n);
    double v1 = (hash(name, 1) % 1000) / 1000.0, v2 = (hash(name, 2) % 1000) / 1000.0,
           v3 = (hash(name, 3) % 1000) / 1000.0;
    if (memory) return fmt::format("rgb({},{},{})", 0, int(190 + 50 * v2), int(210 * v1));
    if (t.functions[n.function].kind != "function")
        return fmt::format("rgb({},{},{})", int(50 + 60 * v1), int(165 + 55 * v2),
                           int(165 + 55 * v3));
    return fmt::format("rgb({},{},{})", int(205 + 50 * v3), int(230 * v1), int(55 * v2));
}

// UTF-8 aware cut to at most `chars` characters, with ".." when cut.
std::string fit(const std::string& s, double width) {
    int chars = int((width - 6) / kCharWidth);
    if (chars < 3) return {};
    size_t count = 0;
    for (unsigned char c : s) count += (c & 0xC0) != 0x80;
    if (count <= size_t(chars)) return s;
    std::string out;
    size_t kept = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        unsigned char c = s[i];
        if ((c & 0xC0) != 0x80 && kept++ == size_t(chars - 2)) break;
        out += char(c);
    }
    return out + "..";
}

} // namespace

void write_flamegraph(std::FILE* out, const CallTree& t, const FlameOptions& o) {
    const CallTreeNode& root = t.root();
    double scale = root.total_ns ? (o.width - 2.0 * kPad) / double(root.total_ns) : 0;
    // Lay out depth-first: children by name (as flamegraph.pl does, so that equal frames of
    // different threads or traces sit side by side), keeping only frames wide enough to see.
    struct Placed {
        size_t node;
        uint64_t offset;
    };
    std::vector<Placed> placed;
    std::vector<Placed> todo{{0, 0}};
    uint32_t max_depth = 0;
    while (!todo.empty()) {
        Placed p = todo.back();
        todo.pop_back();
        const CallTreeNode& n = t.nodes[p.node];
        if (p.node != 0 && n.total_ns * scale < o.min_width) continue;
        placed.push_back(p);
        max_depth = std::max(max_depth, n.depth);
        std::vector<size_t> kids = n.children;
        std::sort(kids.begin(), kids.end(), [&](size_t a, size_t b) {
            const std::string &x = t.name(t.nodes[a]), &y = t.name(t.nodes[b]);
            return x != y ? x < y : a < b;
        });
        uint64_t off = p.offset;
        std::vector<Placed> next;
        for (size_t c : kids) {
            next.push_back({c, off});
            off += t.nodes[c].total_ns;
        }
        for (auto it = next.rbegin(); it != next.rend(); ++it) todo.push_back(*it);
    }
    int height = kTop + int(max_depth + 1) * kFrameHeight + kBottom;
    const bool memory = o.unit != "ns";
    std::string title = o.title;
    if (title.empty()) {
        title = !o.graph_name.empty() ? o.graph_name : o.icicle ? "Icicle Graph" : "Flame Graph";
        if (!t.traces.empty())
            if (auto exe = t.traces.front().meta.find("exe"); exe != t.traces.front().meta.end())
                title += ": " + text::printable(exe->second.substr(exe->second.rfind('/') + 1));
    }
    fmt::print(out,
               "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
               "<svg version=\"1.1\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
               "xmlns=\"http://www.w3.org/2000/svg\" data-icicle=\"{2}\" data-unit=\"{10}\" "
               "data-count=\"{11}\">\n"
               "<!-- Flame graph by libprof profreport. Widths are exact {12} of each call "
               "path; frames under {3} px are left out. -->\n"
               "<style>\n"
               "text {{ font-family: Verdana, sans-serif; font-size: 12px; fill: #000; }}\n"
               "#title {{ text-anchor: middle; font-size: 17px; }}\n"
               "#search, #unzoom {{ cursor: pointer; }} #search.on {{ fill: rgb(230,0,230); }}\n"
               "g.f {{ cursor: pointer; }} g.f:hover rect {{ stroke: #000; stroke-width: 0.5; }}\n"
               "g.f text {{ pointer-events: none; }} .hide {{ display: none; }} .parent {{ "
               "opacity: 0.5; }}\n"
               "</style>\n<script type=\"text/ecmascript\"><![CDATA[\n{4}]]></script>\n"
               "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"rgb(248,248,240)\"/>\n"
               "<text id=\"title\" x=\"{5}\" y=\"24\">{6}</text>\n"
               "<text id=\"unzoom\" class=\"hide\" x=\"{7}\" y=\"24\">Reset Zoom</text>\n"
               "<text id=\"search\" x=\"{8}\" y=\"24\">Search</text>\n"
               "<text id=\"details\" x=\"{7}\" y=\"{9}\"> </text>\n"
               "<text id=\"matched\" x=\"{8}\" y=\"{9}\"> </text>\n<g id=\"frames\">\n",
               o.width, height, o.icicle ? 1 : 0, o.min_width, assets::flamegraph_js, o.width / 2,
               text::xml_escape(title), kPad, o.width - kPad - 100, height - 12,
               text::xml_escape(o.unit), text::xml_escape(o.count_label),
               memory ? "sums of " + text::xml_escape(o.unit) + " over the allocation sites"
                      : std::string("nanoseconds"));
    for (const Placed& p : placed) {
        const CallTreeNode& n = t.nodes[p.node];
        double x = kPad + p.offset * scale, w = n.total_ns * scale;
        int y = o.icicle ? kTop + int(n.depth) * kFrameHeight
                         : height - kBottom - int(n.depth + 1) * kFrameHeight;
        std::string name = text::printable(t.name(n));
        double percent = root.total_ns ? 100.0 * n.total_ns / root.total_ns : 0;
        fmt::print(out,
                   "<g class=\"f\" data-o=\"{}\" data-n=\"{}\" data-d=\"{}\" data-c=\"{}\">"
                   "<title>{}\n{} {}, {:.2f}%, {} {}{}</title>"
                   "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" "
                   "rx=\"2\" ry=\"2\"/>"
                   "<text x=\"{:.2f}\" y=\"{}\">{}</text></g>\n",
                   p.offset, n.total_ns, n.depth, n.calls, text::xml_escape(name), n.total_ns,
                   text::xml_escape(o.unit), percent, n.calls, text::xml_escape(o.count_label),
                   p.node < o.notes.size() ? "\n" + text::xml_escape(o.notes[p.node]) : "", x, y, w,
                   kFrameHeight - 1,
                   p.node < o.fills.size() ? o.fills[p.node] : color(t, n, memory), x + 3, y + 11,
                   text::xml_escape(fit(name, w)));
    }
    fmt::print(out, "</g>\n</svg>\n");
}

// ---- allocation flame graphs ------------------------------------------------------------------

void write_memory_flamegraph(std::FILE* out, const MemoryReport& m, MemoryWeight w,
                             const std::vector<reader::TraceInfo>& traces, FlameOptions o) {
    CallTree t = memory_call_tree(m, w);
    t.traces = traces;
    o.unit = w == MemoryWeight::kAllocations ? "allocations" : "bytes";
    o.count_label = w == MemoryWeight::kLeaked ? "blocks" : "allocations";
    const char* what = w == MemoryWeight::kAllocations ? "allocations"
                       : w == MemoryWeight::kLeaked    ? "leaked bytes"
                       : w == MemoryWeight::kPeak      ? "bytes live at the peak"
                                                       : "bytes allocated";
    if (o.graph_name.empty())
        o.graph_name = fmt::format("Allocation {} Graph ({})", o.icicle ? "Icicle" : "Flame", what);
    write_flamegraph(out, t, o);
}

} // namespace prof::render
