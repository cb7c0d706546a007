// render/memory_report: the memory report as text and JSON, and its plot, for a trace whose
// every allocation is known (render_support.hpp).
#include "unit/render/render_support.hpp"

#include "render/memory_report.hpp"

using namespace prof;
using namespace prof::test;

TEST_CASE("memory report text: summary and each section with its stacks") {
    analysis::Session s;
    s.add_trace(memory_trace());
    std::string out = capture([&](std::FILE* f) { render::print_memory(f, s.memory(), {}); });
    CHECK(out.find("bytes allocated: 550 B\n"
                   "peak heap: 450 B at 0.000 s   peak RSS: n/a   leaked: 50 B in 1 block\n") !=
          std::string::npos);
    CHECK(out.find("MOST CALLS TO ALLOCATION FUNCTIONS\n"
                   "  2 calls, 150 B allocated\n"
                   "      at work<&> (app.cpp:9)\n"
                   "         main (app.cpp:3)\n"
                   "  1 call, 400 B allocated\n"
                   "      at main (app.cpp:3)\n") != std::string::npos);
    CHECK(out.find("PEAK MEMORY CONSUMERS\n"
                   "  400 B live at the peak (1 call)\n") != std::string::npos);
    CHECK(out.find("MEMORY LEAKED\n"
                   "  50 B leaked in 1 block\n"
                   "      at work<&> (app.cpp:9)\n") != std::string::npos);
    CHECK(out.find("MOST TEMPORARY ALLOCATIONS\n"
                   "  1 temporary of 2 calls\n") != std::string::npos);
    render::MemoryOptions o;
    o.limit = 1;
    o.depth = 1;
    out = capture([&](std::FILE* f) { render::print_memory(f, s.memory(), o); });
    CHECK(count_of(out, "  2 calls, 150 B allocated\n      at work<&> (app.cpp:9)\n"
                        "         ... 1 more frames\n") == 1);
    CHECK(count_of(out, "1 call, 400 B allocated") == 0);
}

TEST_CASE("memory report JSON parses and holds the summary and every site") {
    analysis::Session s;
    s.add_trace(memory_trace());
    std::string out = capture([&](std::FILE* f) { render::print_memory_json(f, s.memory(), {}); });
    CHECK(out.find("work\\u003c\\u0026\\u003e") != std::string::npos);
    Json j = parse_json(out);
    const Json& sum = j["summary"];
    CHECK(sum["allocations"].integer() == 3);
    CHECK(sum["frees"].integer() == 2);
    CHECK(sum["temporary_allocations"].integer() == 2);
    CHECK(sum["bytes_allocated"].integer() == 550);
    CHECK(sum["peak_heap"].integer() == 450);
    CHECK(sum["leaked_bytes"].integer() == 50);
    CHECK(sum["leaked_blocks"].integer() == 1);
    CHECK(j["mismatches"].size() == 0);
    const Json& sites = j["sites"];
    REQUIRE(sites.size() == 2);
    CHECK(sites[0]["stack"].size() == 2);
    CHECK(sites[0]["stack"][0]["name"].text == "work<&>");
    CHECK(sites[0]["stack"][1]["name"].text == "main");
    CHECK(sites[0]["stack"][0]["line"].integer() == 9);
    uint64_t bytes = 0, peak = 0, allocations = 0;
    for (const Json& site : sites.items) {
        bytes += site["bytes"].integer();
        peak += site["peak_bytes"].integer();
        allocations += site["allocations"].integer();
    }
    CHECK(bytes == 550);
    CHECK(peak == 450);
    CHECK(allocations == 3);
}

TEST_CASE("memory plot: a self-contained SVG with its title escaped") {
    analysis::Session s;
    s.add_trace(memory_trace());
    std::string svg =
        capture([&](std::FILE* f) { render::write_memory_plot(f, s.memory(), "m<1> & \"x\""); });
    CHECK(svg.find("<svg") != std::string::npos);
    CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
    CHECK(svg.find(">m&lt;1&gt; &amp; &quot;x&quot;</text>") != std::string::npos);
}
