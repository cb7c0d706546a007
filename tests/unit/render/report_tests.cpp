// render/report: the pstats table, callers and callees, CSV and JSON of a trace whose every
// time is known (render_support.hpp), names escaped for each format.
#include "unit/render/render_support.hpp"

#include "render/report.hpp"

using namespace prof;
using namespace prof::test;

TEST_CASE("pstats table: the header's totals and one row per function by cumulative time") {
    analysis::Profile p = render_profile();
    std::string out = capture([&](std::FILE* f) { render::print_table(f, p, {}); });
    CHECK(out == "         8 function calls in 0.150 seconds\n"
                 "\n"
                 "   Ordered by: cumulative time\n"
                 "\n"
                 "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)\n"
                 "        2    0.060    0.030    0.150    0.075 app.cpp:10(main)\n"
                 "        2    0.040    0.020    0.050    0.025 app.cpp:20(a)\n"
                 "        1    0.020    0.020    0.040    0.040 app.cpp:30(b<int>(x, y))\n"
                 "        3    0.030    0.010    0.030    0.010 app.cpp:40(c;\"q\")\n"
                 "\n");
}

TEST_CASE("pstats callers and callees: one line per edge, times of the edge") {
    analysis::Profile p = render_profile();
    std::string callers = capture([&](std::FILE* f) { render::print_callers(f, p, {}, false); });
    std::vector<std::string> l = lines_of(callers);
    REQUIRE(l.size() == 10);
    CHECK(l[4] == "app.cpp:10(main)         <-          2    0.060    0.150  <thread start>");
    CHECK(l[7] == "app.cpp:40(c;\"q\")        <-          2    0.020    0.020  "
                  "app.cpp:30(b<int>(x, y))");
    CHECK(l[8] == "                                     1    0.010    0.010  app.cpp:20(a)");
    std::string callees = capture([&](std::FILE* f) { render::print_callers(f, p, {}, true); });
    l = lines_of(callees);
    REQUIRE(l.size() == 10);
    CHECK(l[4] == "app.cpp:10(main)         ->          2    0.040    0.050  app.cpp:20(a)");
    CHECK(l[5] == "                                     1    0.020    0.040  "
                  "app.cpp:30(b<int>(x, y))");
    CHECK(l[8] == "app.cpp:40(c;\"q\")        ->");
}

TEST_CASE("pstats CSV: exact times in seconds, names quoted as RFC 4180 wants") {
    analysis::Profile p = render_profile();
    std::string out = capture([&](std::FILE* f) { render::print_csv(f, p, {}); });
    CHECK(
        out ==
        "ncalls,primitive_calls,tottime,tottime_percall,cumtime,cumtime_percall,name,file,line,"
        "module,symbol\n"
        "2,2,0.060000000,0.030000000,0.150000000,0.075000000,main,/src/app.cpp,10,,\n"
        "2,2,0.040000000,0.020000000,0.050000000,0.025000000,a,/src/app.cpp,20,,\n"
        "1,1,0.020000000,0.020000000,0.040000000,0.040000000,\"b<int>(x, y)\",/src/app.cpp,30,,\n"
        "3,3,0.030000000,0.010000000,0.030000000,0.010000000,\"c;\"\"q\"\"\",/src/app.cpp,40,,\n");
}

TEST_CASE("pstats JSON parses and holds the totals, every function and thread") {
    analysis::Profile p = render_profile();
    std::string out = capture([&](std::FILE* f) { render::print_json(f, p, {}); });
    // Markup characters never appear raw in a string, so the document can sit in HTML.
    CHECK(out.find("b\\u003cint\\u003e(x, y)") != std::string::npos);
    Json j = parse_json(out);
    CHECK(j["total_calls"].integer() == 8);
    CHECK(j["primitive_calls"].integer() == 8);
    CHECK(j["total_time"].text == "0.150000000");
    CHECK(j["sort"].text == "cumulative time");
    REQUIRE(j["traces"].size() == 1);
    CHECK(j["traces"][0]["path"].text == render_trace());
    CHECK(j["traces"][0]["exe"].text == "/bin/app");
    CHECK(j["traces"][0]["cmdline"].text == "app --run");
    CHECK(j["traces"][0]["pid"].integer() == 42);
    CHECK(j["traces"][0]["finished"].boolean);
    CHECK(j["traces"][0]["incomplete"].kind == Json::kNull);
    const Json& fns = j["functions"];
    REQUIRE(fns.size() == 4);
    const char* names[] = {"main", "a", kB.c_str(), kC.c_str()};
    const unsigned long long ncalls[] = {2, 2, 1, 3};
    const char* tottime[] = {"0.060000000", "0.040000000", "0.020000000", "0.030000000"};
    const char* cumtime[] = {"0.150000000", "0.050000000", "0.040000000", "0.030000000"};
    double own = 0;
    for (size_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        CHECK(fns[i]["name"].text == names[i]);
        CHECK(fns[i]["ncalls"].integer() == ncalls[i]);
        CHECK(fns[i]["primitive_calls"].integer() == ncalls[i]);
        CHECK(fns[i]["tottime"].text == tottime[i]);
        CHECK(fns[i]["cumtime"].text == cumtime[i]);
        CHECK(fns[i]["line"].integer() == 10 * (i + 1));
        CHECK(fns[i]["address"].text == "0x" + std::to_string(i + 1) + "000");
        own += fns[i]["tottime"].number;
    }
    CHECK(own == doctest::Approx(0.150));
    const Json& threads = j["threads"];
    REQUIRE(threads.size() == 2);
    CHECK(threads[0]["tid"].integer() == 1001);
    CHECK(threads[0]["events"].integer() == 12);
    CHECK(threads[1]["tid"].integer() == 1002);
    CHECK(threads[1]["events"].integer() == 4);
}

// A traced run whose hooks' measured cost was most of what its clock read: the header and the
// JSON say how far the times left move with that cost (the engine's share: session_tests.cpp).
TEST_CASE("the header and JSON name a traced time that is mostly the hooks' subtracted cost") {
    analysis::Profile p = render_profile();
    p.time.traced_traces = 1;
    p.time.traced_raw_seconds = 0.4;
    p.time.traced_removed_seconds = 0.3; // 75%: a tenth of it moves the 0.1 s left by 30%
    p.time.traced_calls = 10000000;      // 30 ns per call
    std::string table = capture([&](std::FILE* f) { render::print_table(f, p, {}); });
    CHECK(table.find("   uncertain: the profiler's cost subtracted (30.0 ns per call, its hooks' "
                     "cost measured at the start) was 75% of the traced time, so the times left "
                     "are a small difference of large numbers: a tenth more or less of that cost "
                     "moves them by 30% (the trace has no CPU samples to time it by)\n") !=
          std::string::npos);
    // With a few samples, too few to time it by; all of it subtracted: no measure at all.
    p.time.too_few = 12;
    p.time.traced_removed_seconds = 0.4;
    CHECK(capture([&](std::FILE* f) { render::print_table(f, p, {}); })
              .find("was 100% of the traced time, so the times left are a small difference of "
                    "large numbers: nothing is left of the time, and the times shown are no "
                    "measure (a run long enough for 100 CPU samples is timed by them)\n") !=
          std::string::npos);
    p.time.too_few = 0;
    p.time.traced_removed_seconds = 0.3;
    Json j = parse_json(capture([&](std::FILE* f) { render::print_json(f, p, {}); }));
    CHECK(j["uncertain"]["traced_cost_share"].text == "0.7500");
    CHECK(j["uncertain"]["traced_cost_seconds_per_call"].text == "0.000000030000");
    // Under half: no line, no key.
    p.time.traced_removed_seconds = 0.19;
    CHECK(capture([&](std::FILE* f) { render::print_table(f, p, {}); }).find("uncertain") ==
          std::string::npos);
    CHECK(capture([&](std::FILE* f) { render::print_json(f, p, {}); }).find("uncertain") ==
          std::string::npos);
}

// The names GCC 12's -finstrument-functions-exclude-function-list matches (a substring of the
// qualified name without parameters; a class template's arguments as GCC prints them).
TEST_CASE("GCC exclusion names: qualified without parameters, or left out when the list cannot "
          "hold them") {
    using render::gcc_exclusion_name;
    CHECK(gcc_exclusion_name("snappy::internal::FindMatchLength(char const*, char const*)") ==
          "snappy::internal::FindMatchLength");
    CHECK(gcc_exclusion_name("snappy::SnappyArrayWriter::Produced() const") ==
          "snappy::SnappyArrayWriter::Produced");
    CHECK(
        gcc_exclusion_name("snappy::(anonymous namespace)::UnalignedCopy64(void const*, void*)") ==
        "UnalignedCopy64");
    CHECK(gcc_exclusion_name("GetCostStat") == "GetCostStat");
    CHECK(gcc_exclusion_name("n::V<int>::get(int)") == "n::V<int>::get");
    // A function template's own arguments are cut; the return type goes.
    CHECK(gcc_exclusion_name("void snappy::SnappyDecompressor::DecompressAllTags<snappy::"
                             "SnappyArrayWriter>(snappy::SnappyArrayWriter*)") ==
          "snappy::SnappyDecompressor::DecompressAllTags");
    // Commas or spaces in a scope's template arguments: the last part when it is long enough.
    CHECK(gcc_exclusion_name("std::vector<int, std::allocator<int> >::_M_realloc_insert(int&&)") ==
          "_M_realloc_insert");
    CHECK(gcc_exclusion_name("std::vector<int, std::allocator<int> >::size() const").empty());
    CHECK(gcc_exclusion_name("odd::operator<(odd::V, odd::V)").empty());
    CHECK(gcc_exclusion_name("main::{lambda(int)#1}::operator()(int) const").empty());
}

// A run whose hooks took more CPU than the program: the header names the functions called the
// most that take less per call than the hooks cost, as GCC's flag, and the JSON has the flag's
// list. render_profile: main 2 calls 60 ms own, a 2 and 40, b<int> 1 and 20, c 3 and 30; with
// 10 calls and 0.3 s of hooks (30 ms a call), main is no tiny function, c's name none GCC holds,
// and "a" would leave out main too (GCC matches substrings): b alone.
TEST_CASE("the header hints at GCC's exclusion list when the hooks cost more than the program") {
    analysis::Profile p = render_profile();
    p.time.sampled_traces = 1;
    p.time.samples = 100;
    p.time.cpu_seconds = 0.45;
    p.time.own_seconds = 0.3;
    p.total_calls = 10;
    std::string table = capture([&](std::FILE* f) { render::print_table(f, p, {}); });
    CHECK(
        table.find("   hint: the hooks took 0.300 s of CPU against the program's 0.150 s, and 10% "
                   "of the calls were to 1 function that takes less per call than the hooks "
                   "cost (30000000.0 ns); built with GCC, "
                   "-finstrument-functions-exclude-function-list=b leaves its hooks out "
                   "(its time goes to its callers); Clang's "
                   "-finstrument-functions-after-inlining leaves none in inlined code\n") !=
        std::string::npos);
    Json j = parse_json(capture([&](std::FILE* f) { render::print_json(f, p, {}); }));
    CHECK(j["costly_hooks"]["gcc_exclude_function_list"].text == "b");
    CHECK(j["costly_hooks"]["calls_share"].text == "0.1000");
    // Hooks cheaper than the program: no hint.
    p.time.own_seconds = 0.2;
    p.time.cpu_seconds = 0.45;
    CHECK(capture([&](std::FILE* f) { render::print_table(f, p, {}); }).find("hint:") ==
          std::string::npos);
    CHECK(capture([&](std::FILE* f) { render::print_json(f, p, {}); }).find("costly_hooks") ==
          std::string::npos);
}

TEST_CASE("per-thread documents: JSON wraps each thread's fields, CSV adds a tid column") {
    analysis::ThreadSummary t1, t2;
    t1.tid = 7, t1.stream = 1, t1.name = "w<1>";
    t2.tid = 8, t2.stream = 2;
    std::vector<render::ThreadDocument> docs = {{t1, "{\n  \"x\": 1\n}\n"}, {t2, "{\n}\n"}};
    Json j =
        parse_json(capture([&](std::FILE* f) { render::print_thread_documents(f, docs, "json"); }));
    REQUIRE(j["threads"].size() == 2);
    CHECK(j["threads"][0]["tid"].integer() == 7);
    CHECK(j["threads"][0]["name"].text == "w<1>");
    CHECK(j["threads"][0]["x"].integer() == 1);
    CHECK(j["threads"][1]["tid"].integer() == 8);
    CHECK(j["threads"][1].size() == 4); // tid, stream, trace, name: no fields of its own
    docs = {{t1, "h1,h2\n1,2\n"}, {t2, "h1,h2\n3,4\n"}};
    CHECK(capture([&](std::FILE* f) { render::print_thread_documents(f, docs, "csv"); }) ==
          "tid,h1,h2\n7,1,2\n8,3,4\n");
}
