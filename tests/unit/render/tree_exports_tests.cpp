// render/tree_exports: collapsed stacks, callgrind and the terminal tree of the call tree of a
// trace whose every time is known (render_support.hpp).
#include "unit/render/render_support.hpp"

#include "render/render.hpp"

#include <cstdlib>

using namespace prof;
using namespace prof::test;
using namespace prof::render;

TEST_CASE("collapsed stacks: a line per call path with own time, summing to the total") {
    CallTree t = render_tree();
    std::string out = capture([&](std::FILE* f) { write_collapsed(f, t); });
    // ';' in a name would split a frame: it becomes ':'.
    CHECK(out == "main 60000000\n"
                 "main;a 40000000\n"
                 "main;a;c:\"q\" 10000000\n"
                 "main;b<int>(x, y) 20000000\n"
                 "main;b<int>(x, y);c:\"q\" 20000000\n");
    uint64_t sum = 0;
    for (const std::string& line : lines_of(out))
        sum += std::strtoull(line.substr(line.rfind(' ') + 1).c_str(), nullptr, 10);
    CHECK(sum == 150 * kMs);
    CHECK(sum == t.root().total_ns);
}

TEST_CASE("callgrind: self cost per function, calls and inclusive cost per edge, totals") {
    CallTree t = render_tree();
    std::string out = capture([&](std::FILE* f) { write_callgrind(f, t); });
    std::vector<std::string> l = lines_of(out);
    REQUIRE(l.size() > 10);
    CHECK(l[0] == "# callgrind format");
    CHECK(l[3] == "pid: 42");
    CHECK(l[4] == "cmd: app --run");
    CHECK(l[8] == "summary: 150000000");
    CHECK(l.back() == "totals: 150000000");
    // Sum the cost lines: after fn= the function's own cost, after calls= the edge's inclusive
    // cost (not part of the total).
    uint64_t self = 0, inclusive = 0, calls = 0;
    for (size_t i = 1; i < l.size(); ++i) {
        if (l[i - 1].rfind("fn=", 0) == 0)
            self += std::strtoull(l[i].substr(l[i].find(' ') + 1).c_str(), nullptr, 10);
        if (l[i - 1].rfind("calls=", 0) == 0) {
            inclusive += std::strtoull(l[i].substr(l[i].find(' ') + 1).c_str(), nullptr, 10);
            calls += std::strtoull(l[i - 1].c_str() + 6, nullptr, 10);
        }
    }
    CHECK(self == 150 * kMs);
    CHECK(inclusive == (50 + 40 + 10 + 20) * kMs); // main->a, main->b, a->c, b->c
    CHECK(calls == 2 + 1 + 1 + 2);
    // Names compressed: each function named once, then referred to by its number.
    CHECK(count_of(out, "fn=(1) main\n") == 1);
    CHECK(count_of(out, "cfn=(3) c;\"q\"\n") == 1);
    CHECK(count_of(out, "cfn=(3)\n") == 1);
    CHECK(count_of(out, "fl=(1) /src/app.cpp\n") == 1);
}

TEST_CASE("terminal tree: uftrace's columns, children by total time") {
    CallTree t = render_tree();
    std::string out = capture([&](std::FILE* f) { print_tree(f, t, {}); });
    CHECK(out == "# Call tree: 8 calls in 150.000 ms on 2 threads\n"
                 "#\n"
                 "#  TOTAL TIME    SELF TIME       CALLS  FUNCTION\n"
                 "   150.000 ms    60.000 ms           2  main\n"
                 "    50.000 ms    40.000 ms           2  +-a\n"
                 "    10.000 ms    10.000 ms           1  | +-c;\"q\"\n"
                 "    40.000 ms    20.000 ms           1  +-b<int>(x, y)\n"
                 "    20.000 ms    20.000 ms           2    +-c;\"q\"\n");
    TreeOptions o;
    o.max_depth = 2;
    out = capture([&](std::FILE* f) { print_tree(f, t, o); });
    CHECK(out.find("(showing depth <= 2)") != std::string::npos);
    CHECK(count_of(out, "c;\"q\"") == 0);
    CHECK(count_of(out, "+-") == 2);
}

TEST_CASE("tree CSV: one row per call path, self times summing to the total") {
    CallTree t = render_tree();
    TreeOptions o;
    o.csv = true;
    std::string out = capture([&](std::FILE* f) { print_tree(f, t, o); });
    CHECK(out == "id,parent,depth,calls,total_ns,self_ns,percent,name,file,line\n"
                 "1,0,1,2,150000000,60000000,100.0000,main,/src/app.cpp,10\n"
                 "2,1,2,2,50000000,40000000,33.3333,a,/src/app.cpp,20\n"
                 "3,2,3,1,10000000,10000000,6.6667,\"c;\"\"q\"\"\",/src/app.cpp,40\n"
                 "4,1,2,1,40000000,20000000,26.6667,\"b<int>(x, y)\",/src/app.cpp,30\n"
                 "5,4,3,2,20000000,20000000,13.3333,\"c;\"\"q\"\"\",/src/app.cpp,40\n");
}

TEST_CASE("callers CSV: one row per edge, the thread start as a caller") {
    analysis::Profile p = render_profile();
    std::string out = capture([&](std::FILE* f) { print_callers_csv(f, p, "", false); });
    CHECK(out == "function,function_file,function_line,caller,other_file,other_line,ncalls,"
                 "primitive_calls,tottime,cumtime\n"
                 "main,/src/app.cpp,10,<thread start>,,0,2,2,0.060000000,0.150000000\n"
                 "a,/src/app.cpp,20,main,/src/app.cpp,10,2,2,0.040000000,0.050000000\n"
                 "\"b<int>(x, y)\",/src/app.cpp,30,main,/src/app.cpp,10,1,1,0.020000000,"
                 "0.040000000\n"
                 "\"c;\"\"q\"\"\",/src/app.cpp,40,a,/src/app.cpp,20,1,1,0.010000000,0.010000000\n"
                 "\"c;\"\"q\"\"\",/src/app.cpp,40,\"b<int>(x, y)\",/src/app.cpp,30,2,2,0.020000000,"
                 "0.020000000\n");
    out = capture([&](std::FILE* f) { print_callers_csv(f, p, "main", true); });
    CHECK(lines_of(out).size() == 3); // header, main -> a, main -> b
}
