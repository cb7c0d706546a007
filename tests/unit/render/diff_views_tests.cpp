// render/diff_views: the differential flame graph, the folded "stack base new" lines and the
// HTML diff's data, over call trees whose every time is known.
#include "unit/render/render_support.hpp"

#include "analysis/model/diff_tree.hpp"
#include "render/diff_views.hpp"

#include <cstdlib>

using namespace prof;
using namespace prof::test;
using namespace prof::render;

namespace {

// all -> main -> slow, fast, noisy (ns, means per run): slow 20 -> 70, fast 50 -> 30 (each
// +-5), noisy 30 -> 35 +-10; main's self 0 -> 15.
DiffTree hand_tree() {
    DiffTree t;
    auto add = [&](size_t parent, const std::string& name, double b, double n, double u) {
        DiffTreeNode node;
        node.parent = parent;
        node.name = name;
        node.depth = parent == SIZE_MAX ? 0 : t.nodes[parent].depth + 1;
        node.base_total = node.base_self = b;
        node.new_total = node.new_self = n;
        node.base_calls = node.new_calls = 1;
        node.uncertainty = u;
        if (parent != SIZE_MAX) t.nodes[parent].children.push_back(t.nodes.size());
        t.nodes.push_back(node);
    };
    add(SIZE_MAX, "all", 100, 150, 0);
    add(0, "main", 100, 150, 0);
    add(1, "slow", 20, 70, 5);
    add(1, "fast", 50, 30, 5);
    add(1, kB, 30, 35, 10);
    t.nodes[0].base_self = t.nodes[0].new_self = 0;
    t.nodes[1].base_self = 0;
    t.nodes[1].new_self = 15;
    return t;
}

// The value of attribute `name` of the frame whose title starts with `frame`.
std::string frame_attribute(const std::string& svg, const std::string& frame,
                            const std::string& name) {
    size_t title = svg.find("<title>" + frame + "\n");
    if (title == std::string::npos) return "";
    size_t g = svg.rfind("<g class=\"f\"", title);
    size_t end = svg.find("</g>", title);
    size_t at = svg.find(" " + name + "=\"", g);
    if (at == std::string::npos || at > end) return "";
    at += name.size() + 3;
    return svg.substr(at, svg.find('"', at) - at);
}

} // namespace

TEST_CASE("differential flame graph: widths of one side, red slower, blue faster, noise neutral") {
    DiffTree t = hand_tree();
    std::string svg = capture([&](std::FILE* f) { write_diff_flamegraph(f, t, {}, false); });
    CHECK(svg.find("Differential Flame Graph: widths new (1 run), red slower, blue faster") !=
          std::string::npos);
    CHECK(frame_attribute(svg, "all", "data-n") == "150");
    CHECK(frame_attribute(svg, "slow", "data-n") == "70");
    CHECK(frame_attribute(svg, "fast", "data-n") == "30");
    // The largest change beyond the noise (50) is the deepest colour; fast's 20 two fifths of it.
    CHECK(frame_attribute(svg, "slow", "fill") == "rgb(255,40,40)");
    CHECK(frame_attribute(svg, "main", "fill") == "rgb(255,40,40)");
    CHECK(frame_attribute(svg, "fast", "fill") == "rgb(151,191,255)");
    CHECK(frame_attribute(svg, "b&lt;int&gt;(x, y)", "fill") == "rgb(226,226,216)");
    CHECK(svg.find("base 20 ns, new 70 ns: +250.0% +-25.0 (slower)") != std::string::npos);
    CHECK(svg.find("base 30 ns, new 35 ns: +16.7% +-33.3 (within the noise)") != std::string::npos);
    CHECK(count_of(svg, "b<int>") == 0);

    std::string base = capture([&](std::FILE* f) { write_diff_flamegraph(f, t, {}, true); });
    CHECK(frame_attribute(base, "all", "data-n") == "100");
    CHECK(frame_attribute(base, "slow", "data-n") == "20");
    CHECK(frame_attribute(base, "fast", "data-n") == "50");
    CHECK(frame_attribute(base, "fast", "fill") == "rgb(151,191,255)");
}

TEST_CASE("diff folded: one line per call path with self time, base and new") {
    std::string folded = capture([&](std::FILE* f) { write_diff_folded(f, hand_tree()); });
    CHECK(folded == "main 0 15\nmain;slow 20 70\nmain;fast 50 30\nmain;b<int>(x, y) 30 35\n");
    // From a trace's tree on both sides: the same self times, ';' in a name replaced.
    analysis::Profile p = render_profile();
    CallTree tree = render_tree();
    DiffTree same = analysis::views::diff_call_trees({tree}, {p}, {tree}, {p});
    std::string lines = capture([&](std::FILE* f) { write_diff_folded(f, same); });
    CHECK(lines == "main 60000000 60000000\nmain;a 40000000 40000000\n"
                   "main;a;c:\"q\" 10000000 10000000\nmain;b<int>(x, y) 20000000 20000000\n"
                   "main;b<int>(x, y);c:\"q\" 20000000 20000000\n");
    for (const DiffTreeNode& n : same.nodes) CHECK(n.direction() == 0);
}

TEST_CASE("HTML diff: both sides' data as JSON in a script element, markup escaped") {
    analysis::Profile p = render_profile();
    CallTree tree = render_tree();
    DiffTree t = analysis::views::diff_call_trees({tree}, {p}, {tree}, {p});
    DiffOptions o;
    o.fail_above = 10;
    DiffResult d = analysis::views::diff_runs({p}, {p}, o);
    auto edges = analysis::views::diff_edges(d, {p}, {p});
    DiffPageOptions page;
    page.title = "a <b> & c";
    page.base_traces = {"x.trace"};
    page.new_traces = {"y.trace"};
    std::string html = capture([&](std::FILE* f) { write_diff_html(f, d, edges, t, o, page); });
    CHECK(html.find("<title>libprof diff: a &lt;b&gt; &amp; c</title>") != std::string::npos);
    const std::string open = "<script id=\"diff-data\" type=\"application/json\">";
    size_t at = html.find(open);
    REQUIRE(at != std::string::npos);
    at += open.size();
    std::string data = html.substr(at, html.find("</script>", at) - at);
    CHECK(data.find('<') == std::string::npos);
    Json j = parse_json(data);
    CHECK(j["metric"].text == "cumtime");
    CHECK(j["base_traces"][0].text == "x.trace");
    CHECK(j["total"]["base"].text == "0.150000000");
    CHECK(j["total"]["percent"].text == "0.000");
    REQUIRE(j["functions"].size() == 4);
    CHECK(j["edges"].size() == edges.size());
    CHECK(edges.size() == p.edges.size());
    const Json& nodes = j["tree"];
    REQUIRE(nodes.size() == 6);
    CHECK(nodes[0]["name"].text == "all");
    CHECK(nodes[0]["bt"].integer() == 150 * kMs);
    for (const Json& n : nodes.items) CHECK(n["dir"].integer() == 0);
}
