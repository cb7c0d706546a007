// The differential views. Colours follow flamegraph.pl's differential mode (red grew, blue
// shrank, deeper for larger changes), with one difference: a frame whose change is within its
// uncertainty is drawn neutral, so that noise is never painted as a finding.
#include "render/diff_views.hpp"

#include "render/assets.hpp"
#include "render/durations.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace prof::render {
namespace {

std::string js(std::string_view s) {
    return text::json_quoted(text::printable(s));
}

// A finite number as JSON; infinity (something new) as null.
std::string num(double v, int precision = 9) {
    return std::isfinite(v) ? fmt::format("{:.{}f}", v, precision) : std::string("null");
}

// A mean per run, for people ("1.235 ms").
std::string human_ns(double ns) {
    return render::human_ns(uint64_t(std::llround(std::max(ns, 0.0))));
}

// "base 1.2 ms, new 2.3 ms: +91.7% +-3.0 (slower)".
std::string change_note(const DiffTreeNode& n) {
    std::string change;
    if (n.base_total <= 0)
        change = "new";
    else if (n.new_total <= 0)
        change = "gone";
    else {
        double p = 100.0 * n.change() / n.base_total;
        change = fmt::format("{:+.1f}%", p);
        if (n.uncertainty > 0)
            change += fmt::format(" +-{:.1f}", 100.0 * n.uncertainty / n.base_total);
    }
    const char* verdict = n.direction() > 0   ? "slower"
                          : n.direction() < 0 ? "faster"
                                              : "within the noise";
    return fmt::format("base {}, new {}: {} ({})", human_ns(n.base_total), human_ns(n.new_total),
                       change, verdict);
}

} // namespace

double largest_change(const DiffTree& t) {
    double largest = 0;
    for (size_t i = 1; i < t.nodes.size(); ++i)
        if (t.nodes[i].direction() != 0)
            largest = std::max(largest, std::fabs(t.nodes[i].change()));
    return largest;
}

std::string change_fill(const DiffTreeNode& n, double largest) {
    int dir = n.direction();
    if (dir == 0) return "rgb(226,226,216)";
    // From a pale tint (a change beyond the noise is always visible) to a deep one that black
    // names still read on.
    double r = largest > 0 ? std::min(1.0, std::fabs(n.change()) / largest) : 1.0;
    if (dir > 0) return fmt::format("rgb(255,{0},{0})", std::lround(205 - 165 * r));
    long v = std::lround(205 - 135 * r);
    return fmt::format("rgb({},{},255)", v, v + 40);
}

void write_diff_flamegraph(std::FILE* out, const DiffTree& t, FlameOptions o, bool base_widths) {
    // The frames as a call tree of labels, widths of the chosen side.
    CallTree tree;
    tree.nodes.resize(t.nodes.size());
    const double largest = largest_change(t);
    o.fills.resize(t.nodes.size());
    o.notes.resize(t.nodes.size());
    for (size_t i = 0; i < t.nodes.size(); ++i) {
        const DiffTreeNode& d = t.nodes[i];
        CallTreeNode& n = tree.nodes[i];
        n.parent = d.parent;
        n.label = d.name;
        n.depth = d.depth;
        n.children = d.children;
        n.calls = uint64_t(std::llround(base_widths ? d.base_calls : d.new_calls));
        n.self_ns = uint64_t(std::llround(std::max(base_widths ? d.base_self : d.new_self, 0.0)));
        o.fills[i] = change_fill(d, largest);
        o.notes[i] = change_note(d);
    }
    // Means per run are fractions of a nanosecond: each total is its rounded self plus its
    // children's totals, so that children never overflow their parent.
    for (size_t i = tree.nodes.size(); i-- > 0;) {
        CallTreeNode& n = tree.nodes[i];
        n.total_ns += n.self_ns;
        if (i) tree.nodes[n.parent].total_ns += n.total_ns;
    }
    if (o.graph_name.empty())
        o.graph_name = fmt::format("Differential {} Graph", o.icicle ? "Icicle" : "Flame");
    if (o.title.empty())
        o.title = fmt::format("{}: widths {} ({} run{}), red slower, blue faster", o.graph_name,
                              base_widths ? "base" : "new", base_widths ? t.base_runs : t.new_runs,
                              (base_widths ? t.base_runs : t.new_runs) == 1 ? "" : "s");
    write_flamegraph(out, tree, o);
}

void write_diff_folded(std::FILE* out, const DiffTree& t) {
    for (size_t i = 1; i < t.nodes.size(); ++i) {
        const DiffTreeNode& n = t.nodes[i];
        auto b = std::llround(n.base_self), x = std::llround(n.new_self);
        if (b == 0 && x == 0) continue;
        // Frames are joined with ';': one inside a name would split it (flamegraph.pl's rule).
        std::string path;
        for (size_t k = i; k != 0; k = t.nodes[k].parent) {
            std::string name = text::printable(t.nodes[k].name);
            std::replace(name.begin(), name.end(), ';', ':');
            path = name + (path.empty() ? "" : ";" + path);
        }
        fmt::print(out, "{} {} {}\n", path, b, x);
    }
}

void write_diff_html(std::FILE* out, const DiffResult& d, const std::vector<DiffEdge>& edges,
                     const DiffTree& t, const DiffOptions& o, const DiffPageOptions& page) {
    std::string title = page.title.empty() ? "diff" : page.title;
    fmt::print(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'\">\n"
        "<title>libprof diff: {0}</title>\n<style>\n{1}{2}</style>\n</head>\n<body>\n"
        "<header><h1>libprof diff: {0}</h1><div class=\"sub\" id=\"summary\"></div></header>\n"
        "<section><h2>Call tree, coloured by change</h2><div id=\"icicle-toolbar\">widths: "
        "<button id=\"widths-new\">new</button><button id=\"widths-base\">base</button>"
        "<span class=\"key slower\">slower</span><span class=\"key faster\">faster</span>"
        "<span class=\"key same\">within the noise</span></div>"
        "<div id=\"icicle-path\"></div><div id=\"icicle-info\">Click a frame to zoom and to "
        "see its function's callers and callees; hover for its change.</div>"
        "<div id=\"icicle\"></div></section>\n"
        "<section><h2>Functions</h2><div id=\"toolbar\"><input id=\"filter\" type=\"search\" "
        "placeholder=\"filter by file:line(function)\"><span class=\"muted\" id=\"legend\">"
        "</span></div>\n<div class=\"scroll\"><table id=\"ftable\"><thead></thead><tbody>"
        "</tbody></table></div><div id=\"detail\"></div></section>\n",
        text::xml_escape(title), assets::report_css, assets::diff_css);

    // The data: numbers as JSON numbers (null for a change from nothing), strings escaped.
    auto names = [](const std::vector<std::string>& v) {
        std::string s;
        for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + js(v[i]);
        return s;
    };
    fmt::print(
        out,
        "<script id=\"diff-data\" type=\"application/json\">{{\"metric\":{},"
        "\"fail_above\":{},\"base_runs\":{},\"new_runs\":{},\"spread_known\":{},"
        "\"base_traces\":[{}],\"new_traces\":[{}],\"total\":{{\"base\":{:.9f},\"new\":{:.9f},"
        "\"base_calls\":{},\"new_calls\":{},\"percent\":{},\"uncertainty\":{},"
        "\"regression\":{},\"undecided\":{}}},\n\"functions\":[",
        js(metric_name(o.metric)), o.fail_above < 0 ? "null" : num(o.fail_above, 3), d.base_runs,
        d.new_runs, d.spread_known, names(page.base_traces), names(page.new_traces),
        d.base_total.tottime, d.new_total.tottime, d.base_total.ncalls, d.new_total.ncalls,
        num(d.total_percent, 3), num(d.total_uncertainty, 3), d.total_regression,
        d.total_undecided);
    for (size_t i = 0; i < d.rows.size(); ++i) {
        const DiffRow& r = d.rows[i];
        fmt::print(out,
                   "{}\n{{\"name\":{},\"file\":{},\"line\":{},\"in_base\":{},\"in_new\":{},"
                   "\"b\":[{},{:.9f},{:.9f}],\"n\":[{},{:.9f},{:.9f}],\"change\":{},"
                   "\"percent\":{},\"pu\":{},\"regression\":{},\"undecided\":{}}}",
                   i ? "," : "", js(r.name), js(r.file), r.line, r.in_base, r.in_new, r.base.ncalls,
                   r.base.tottime, r.base.cumtime, r.next.ncalls, r.next.tottime, r.next.cumtime,
                   num(r.change), num(r.percent, 3), num(r.percent_uncertainty, 3), r.regression,
                   r.undecided);
    }
    fmt::print(out, "],\n\"edges\":[");
    for (size_t i = 0; i < edges.size(); ++i) {
        const DiffEdge& e = edges[i];
        fmt::print(
            out,
            "{}\n{{\"caller\":{},\"callee\":{},\"b\":[{},{:.9f}],\"n\":[{},{:.9f}],\"u\":{:.9f}}}",
            i ? "," : "", e.caller == SIZE_MAX ? int64_t(-1) : int64_t(e.caller), e.callee,
            e.base.ncalls, e.base.cumtime, e.next.ncalls, e.next.cumtime, e.uncertainty);
    }
    // The tree, pruned to paths of at least 1/20000 of the wider side's total (under a pixel).
    const double cut = std::max(t.root().base_total, t.root().new_total) / 20000;
    const double largest = largest_change(t);
    std::vector<int64_t> kept(t.nodes.size(), -1);
    int64_t count = 0;
    fmt::print(out, "],\n\"tree\":[");
    for (size_t i = 0; i < t.nodes.size(); ++i) { // parents precede children
        const DiffTreeNode& n = t.nodes[i];
        if (i && (kept[n.parent] < 0 || std::max(n.base_total, n.new_total) < cut)) continue;
        kept[i] = count++;
        fmt::print(
            out,
            "{}\n{{\"p\":{},\"name\":{},\"bt\":{:.0f},\"nt\":{:.0f},\"bs\":{:.0f},"
            "\"ns\":{:.0f},\"bc\":{:.1f},\"nc\":{:.1f},\"u\":{:.0f},\"dir\":{},\"fill\":{}}}",
            i ? "," : "", i ? kept[n.parent] : -1, js(n.name), n.base_total, n.new_total,
            n.base_self, n.new_self, n.base_calls, n.new_calls, n.uncertainty, n.direction(),
            js(change_fill(n, largest)));
    }
    fmt::print(out, "]}}</script>\n<script>\n{}{}</script>\n</body>\n</html>\n", assets::page_js,
               assets::diff_js);
}

} // namespace prof::render
