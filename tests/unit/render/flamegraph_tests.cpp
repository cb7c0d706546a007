// render/flamegraph and render/html_report: the flame graph's frames and the HTML report's data,
// over the call tree of a trace whose every time is known (render_support.hpp).
#include "unit/render/render_support.hpp"

#include "render/render.hpp"

#include <cstdlib>

using namespace prof;
using namespace prof::test;
using namespace prof::render;

namespace {

// The value of attribute `name` in each frame group (`<g class="f" ...>`), in order.
std::vector<uint64_t> frame_attribute(const std::string& svg, const std::string& name) {
    std::vector<uint64_t> out;
    for (size_t at = svg.find("<g class=\"f\""); at != std::string::npos;
         at = svg.find("<g class=\"f\"", at + 1)) {
        size_t v = svg.find(" " + name + "=\"", at) + name.size() + 3;
        out.push_back(std::strtoull(svg.c_str() + v, nullptr, 10));
    }
    return out;
}

} // namespace

TEST_CASE("flame graph: a frame per call path, widths the paths' exact totals") {
    CallTree t = render_tree();
    std::string svg = capture([&](std::FILE* f) { write_flamegraph(f, t, {}); });
    CHECK(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n<svg ", 0) == 0);
    CHECK(svg.substr(svg.size() - 12) == "</g>\n</svg>\n");
    CHECK(svg.find("<text id=\"title\" x=\"600\" y=\"24\">Flame Graph: app</text>") !=
          std::string::npos);
    // The root, main, a, a's c, b, b's c: children by name, so a before b.
    CHECK(frame_attribute(svg, "data-n") ==
          std::vector<uint64_t>{150 * kMs, 150 * kMs, 50 * kMs, 10 * kMs, 40 * kMs, 20 * kMs});
    CHECK(frame_attribute(svg, "data-o") == std::vector<uint64_t>{0, 0, 0, 0, 50 * kMs, 50 * kMs});
    CHECK(frame_attribute(svg, "data-d") == std::vector<uint64_t>{0, 1, 2, 3, 2, 3});
    CHECK(frame_attribute(svg, "data-c") == std::vector<uint64_t>{0, 2, 2, 1, 1, 2});
    // Names as XML: never a raw '<' or '"' from a trace.
    CHECK(count_of(svg, "<title>b&lt;int&gt;(x, y)\n") == 1);
    CHECK(count_of(svg, "<title>c;&quot;q&quot;\n") == 2);
    CHECK(count_of(svg, "b<int>") == 0);
    // Each group closes.
    CHECK(count_of(svg, "<g ") == 7); // the frames' group and one per frame
    CHECK(count_of(svg, "</g>") == 7);
}

TEST_CASE("flame graph: frames narrower than the minimum width are left out with their children") {
    CallTree t = render_tree();
    FlameOptions o;
    o.width = 170; // 150 px for 150 ms: 1 px per ms
    o.min_width = 15;
    o.title = "T<1>";
    std::string svg = capture([&](std::FILE* f) { write_flamegraph(f, t, o); });
    CHECK(frame_attribute(svg, "data-n") ==
          std::vector<uint64_t>{150 * kMs, 150 * kMs, 50 * kMs, 40 * kMs, 20 * kMs});
    CHECK(svg.find(">T&lt;1&gt;</text>") != std::string::npos);
}

TEST_CASE("HTML report: the profile's data as JSON in a script element, markup escaped") {
    analysis::Profile p = render_profile();
    CallTree t = render_tree();
    HtmlOptions o;
    o.title = "a <b> & c";
    std::string html = capture([&](std::FILE* f) { write_html(f, p, t, {}, o); });
    CHECK(html.rfind("<!DOCTYPE html>\n", 0) == 0);
    CHECK(html.find("<title>libprof: a &lt;b&gt; &amp; c</title>") != std::string::npos);
    const std::string open = "<script id=\"profile-data\" type=\"application/json\">";
    size_t at = html.find(open);
    REQUIRE(at != std::string::npos);
    at += open.size();
    size_t end = html.find("</script>", at);
    REQUIRE(end != std::string::npos);
    std::string data = html.substr(at, end - at);
    // Nothing in the data can end the element early.
    CHECK(data.find('<') == std::string::npos);
    Json j = parse_json(data);
    CHECK(j["total_calls"].integer() == 8);
    CHECK(j["total_time"].text == "0.150000000");
    CHECK(j["threads"].integer() == 2);
    REQUIRE(j["functions"].size() == 4);
    CHECK(j["functions"][2]["name"].text == kB);
    CHECK(j["functions"][2]["file"].text == "app.cpp");
    CHECK(j["functions"][3]["name"].text == kC);
    CHECK(j["functions"][3]["ncalls"].integer() == 3);
    CHECK(j["edges"].size() == p.edges.size());
    const Json& nodes = j["tree"]["nodes"];
    REQUIRE(nodes.size() == 6);
    uint64_t self = 0;
    for (const Json& n : nodes.items) self += n["s"].integer();
    CHECK(self == 150 * kMs);
    CHECK(nodes[0]["t"].integer() == 150 * kMs);
    CHECK(nodes[0]["l"].text == "all");
    CHECK(j["memory"].kind == Json::kNull);
}
