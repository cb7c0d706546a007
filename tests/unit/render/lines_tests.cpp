// render/lines: line_profiler's and memory_profiler's tables and the lines' JSON, from line
// tables given directly (the model is tested in unit/analysis/lines_tests.cpp).
#include "unit/render/render_support.hpp"

#include "render/lines.hpp"

#include <fstream>

using namespace prof;
using namespace prof::test;

namespace {

// work() of a six-line source file: line 3 hit 4 times in 30 ms, line 4 once in 10 ms; the
// function's total 40 ms.
analysis::LineTable work_table(const std::string& file) {
    analysis::LineTable t;
    t.file = file;
    t.function = "work()";
    t.total_time = 0.040;
    analysis::LineRow a;
    a.line = 3, a.hits = 4, a.time = 0.030, a.kind = "line", a.mark = "PROF_LINE(step())";
    analysis::LineRow b;
    b.line = 4, b.hits = 1, b.time = 0.010, b.kind = "line", b.mark = "PROF_LINE(<end>)";
    t.rows = {a, b};
    return t;
}

std::string source_file() {
    std::string path = temp_path("render-lines.cpp");
    std::ofstream(path) << "#include \"prof.hpp\"\n"
                           "void work() {\n"
                           "    PROF_LINE(step());\n"
                           "    PROF_LINE(end());\n"
                           "}\n"
                           "int main() { work(); }\n";
    return path;
}

} // namespace

TEST_CASE("line_profiler's table: the function's lines, hits, times, per hit and shares") {
    std::string file = source_file();
    render::LineOptions o;
    o.unit = 1e-6;
    std::string out =
        capture([&](std::FILE* f) { render::print_line_tables(f, {work_table(file)}, o); });
    std::vector<std::string> l = lines_of(out);
    REQUIRE(l.size() >= 10);
    CHECK(l[0] == "Timer unit: 1e-06 s");
    CHECK(out.find("Total time: 0.04 s\nFile: " + file + "\nFunction: work() at line 2\n") !=
          std::string::npos);
    // Every line of the function, the unmarked ones without figures.
    CHECK(out.find("Line #      Hits         Time  Per Hit   % Time  Line Contents\n") !=
          std::string::npos);
    CHECK(out.find("\n     2                                           void work() {\n") !=
          std::string::npos);
    CHECK(out.find("\n     3         4      30000.0   7500.0     75.0      PROF_LINE(step());\n") !=
          std::string::npos);
    CHECK(out.find("\n     4         1      10000.0  10000.0     25.0      PROF_LINE(end());\n") !=
          std::string::npos);
    CHECK(out.find("\n     5                                           }\n") != std::string::npos);
    CHECK(out.find("(source file not found") == std::string::npos);
}

TEST_CASE("line_profiler's table without the source: the marked lines as the trace has them") {
    std::string out = capture([&](std::FILE* f) {
        render::print_line_tables(f, {work_table("/nonexistent/app.cpp")}, {});
    });
    CHECK(out.find("(source file not found: /nonexistent/app.cpp; showing marked lines only)") !=
          std::string::npos);
    CHECK(out.find("PROF_LINE(step())") != std::string::npos);
    CHECK(out.find("PROF_LINE(&lt;end&gt;)") == std::string::npos); // text, not markup
    CHECK(count_of(out, "PROF_LINE(") == 2);
}

TEST_CASE("memory_profiler's table: usage, increment, heap increment and occurrences") {
    std::string file = source_file();
    analysis::LineTable t = work_table(file);
    t.heap = true;
    t.rows[0].memory_samples = 4;
    t.rows[0].rss_samples = 4;
    t.rows[0].rss_last = 3 * 1048576.0;
    t.rows[0].rss_increment = 2 * 1048576.0;
    t.rows[0].heap_increment = 1048576.0;
    render::LineOptions o;
    o.memory = true;
    std::string out = capture([&](std::FILE* f) { render::print_line_tables(f, {t}, o); });
    CHECK(out.find("Timer unit") == std::string::npos);
    CHECK(out.find("Filename: " + file + "\nFunction: work()\n") != std::string::npos);
    CHECK(out.find("Line #    Mem usage    Increment    Heap incr.  Occurrences   Line Contents") !=
          std::string::npos);
    CHECK(out.find("\n     3      3.0 MiB      2.0 MiB       1.0 MiB            4       "
                   "PROF_LINE(step());\n") != std::string::npos);
    CHECK(out.find("PROF_LINE_RSS=1") == std::string::npos); // every row read the RSS

    // A row that measured the heap and did not read the RSS (the default under profrun --mem):
    // "-" for usage and increment, its heap increment and occurrences, and one note after the
    // tables saying how to read the RSS.
    t.rows[1].memory_samples = 1;
    t.rows[1].heap_increment = 2 * 1048576.0;
    out = capture([&](std::FILE* f) { render::print_line_tables(f, {t}, o); });
    CHECK(out.find("\n     4            -            -       2.0 MiB            1       "
                   "PROF_LINE(end());\n") != std::string::npos);
    CHECK(count_of(out, "PROF_LINE_RSS=1 reads it") == 1);
}

TEST_CASE("lines JSON: one object per row, memory fields only where measured") {
    analysis::LineTable t = work_table("/src/\"q\".cpp");
    t.rows[1].memory_samples = 1;
    t.rows[1].rss_samples = 1;
    t.rows[1].rss_last = 4096;
    t.rows[1].rss_increment = 4096;
    t.rows[1].heap_increment = 100;
    std::string out = capture([&](std::FILE* f) { render::print_line_json(f, {t}); });
    Json doc = parse_json(out);
    const Json& rows = doc["lines"];
    REQUIRE(rows.items.size() == 2);
    CHECK(rows.items[0]["file"].text == "/src/\"q\".cpp");
    CHECK(rows.items[0]["line"].integer() == 3);
    CHECK(rows.items[0]["hits"].integer() == 4);
    CHECK(rows.items[0]["time"].number == doctest::Approx(0.030));
    CHECK(rows.items[0]["kind"].text == "line");
    CHECK_FALSE(rows.items[0].has("mem_usage"));
    CHECK(rows.items[1]["mem_usage"].integer() == 4096);
    CHECK(rows.items[1]["increment"].integer() == 4096);
    CHECK(rows.items[1]["heap_increment"].integer() == 100);
    CHECK(rows.items[1]["occurrences"].integer() == 1);

    // Heap measured, RSS not read: no mem_usage or increment, which would read as "no growth".
    t.rows[1].rss_samples = 0;
    doc = parse_json(capture([&](std::FILE* f) { render::print_line_json(f, {t}); }));
    const Json& heap_only = doc["lines"].items[1];
    CHECK_FALSE(heap_only.has("mem_usage"));
    CHECK_FALSE(heap_only.has("increment"));
    CHECK(heap_only["heap_increment"].integer() == 100);
    CHECK(heap_only["occurrences"].integer() == 1);
}
