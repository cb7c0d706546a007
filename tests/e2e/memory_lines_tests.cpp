// End to end: every allocation is reported at the line of its call. A stack's frames are
// return addresses; the instruction after a call is often on the next line (or, after a call
// that never returns, in the next function), so each is named one byte back, inside its call.
// tests/programs/alloc_lines.c, at -O0, -O1 and -O2: its comments give each line's bytes.
#include "analysis/engine/session.hpp"
#include "analysis/model/memory.hpp"
#include "analysis/model/profile.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace prof;
using prof::test::run;
using prof::test::temp_path;

namespace {

struct Expected {
    std::map<uint64_t, uint32_t> line_of_bytes;   // `site: BYTES`
    std::map<uint64_t, uint32_t> caller_of_bytes; // `caller of BYTES`
};

Expected read_expected() {
    Expected e;
    std::ifstream in(PROF_TEST_ALLOC_LINES_SOURCE);
    REQUIRE(in);
    std::string text;
    for (uint32_t line = 1; std::getline(in, text); ++line) {
        if (size_t at = text.find("// site: "); at != std::string::npos)
            e.line_of_bytes[std::stoull(text.substr(at + 9))] = line;
        if (size_t at = text.find("// caller of "); at != std::string::npos)
            e.caller_of_bytes[std::stoull(text.substr(at + 13))] = line;
    }
    REQUIRE(e.line_of_bytes.size() == 9);
    REQUIRE(e.caller_of_bytes.size() == 3);
    return e;
}

bool in_test_source(const analysis::MemoryFrame& f) {
    return f.file.size() >= 13 && f.file.compare(f.file.size() - 13, 13, "alloc_lines.c") == 0;
}

// The program built by GCC at each level given, then by Clang at -O0, -O1 and -O2 when the
// build found Clang (tests/programs/CMakeLists.txt).
std::vector<std::string> builds(std::vector<std::string> gcc, const std::string& name) {
#ifdef PROF_TEST_CLANG_PROGRAMS
    for (int level = 0; level <= 2; ++level)
        gcc.push_back(std::string(PROF_TEST_CLANG_PROGRAMS) + "/test_" + name + "_clang_O" +
                      std::to_string(level));
#else
    (void)name;
    MESSAGE("no Clang builds: clang was not found when the tests were configured");
#endif
    return gcc;
}

analysis::MemoryReport memory_of(const std::string& program, const std::string& unwind) {
    std::string trace = temp_path("alloc-lines.trace");
    auto r =
        run({PROFRUN, "--mem", "-q", "-o", trace, "--", program}, {{"PROF_MEM_UNWIND", unwind}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    analysis::Session session;
    session.add_trace(trace);
    return session.memory();
}

} // namespace

#ifdef PROF_SANITIZER_BUILD
TEST_SUITE_BEGIN("memory profiler" * doctest::skip(true));
#endif

TEST_CASE("every allocation at the line of its call, and every caller at its call's line") {
    const Expected expected = read_expected();
    for (const std::string& program :
         builds({PROF_TEST_ALLOC_LINES_O0, PROF_TEST_ALLOC_LINES_O1, PROF_TEST_ALLOC_LINES_O2},
                "alloc_lines"))
        for (std::string unwind : {"fp", "dwarf"}) {
            CAPTURE(program);
            CAPTURE(unwind);
            analysis::MemoryReport m = memory_of(program, unwind);
            // Each allocation of the program is one site: its bytes say which line it must be.
            std::map<uint64_t, const analysis::MemorySite*> by_bytes;
            for (const analysis::MemorySite& s : m.sites)
                if (!s.stack.empty() && in_test_source(s.stack[0])) {
                    CAPTURE(s.stack[0].line);
                    CHECK(s.allocations == 1);
                    CHECK(by_bytes.emplace(s.bytes, &s).second);
                }
            CHECK(by_bytes.size() == expected.line_of_bytes.size());
            for (const auto& [bytes, line] : expected.line_of_bytes) {
                CAPTURE(bytes);
                auto it = by_bytes.find(bytes);
                REQUIRE(it != by_bytes.end());
                CHECK(it->second->stack[0].line == line);
            }
            // The call below: main's calls, the last of them to a function that never returns.
            for (const auto& [bytes, line] : expected.caller_of_bytes) {
                CAPTURE(bytes);
                auto it = by_bytes.find(bytes);
                REQUIRE(it != by_bytes.end());
                const auto& stack = it->second->stack;
                REQUIRE(stack.size() >= 2);
                CHECK(stack[1].name == "main");
                CHECK(stack[1].line == line);
            }
        }
}

TEST_CASE("functions inlined at an allocation are frames of their own, each at its own line") {
    // The lines the stacks must name, from the program's `line: NAME` comments.
    std::map<std::string, uint32_t> line;
    {
        std::ifstream in(PROF_TEST_INLINED_ALLOCS_SOURCE);
        REQUIRE(in);
        std::string text;
        for (uint32_t n = 1; std::getline(in, text); ++n)
            if (size_t at = text.find("// line: "); at != std::string::npos)
                line[text.substr(at + 9)] = n;
        REQUIRE(line.size() == 7);
    }
    struct Frame {
        const char* name;
        uint32_t line;
        bool inlined;
    };
    const std::map<uint64_t, std::vector<Frame>> expected = {
        {100,
         {{"allocate_something", line["site"], true},
          {"foo", line["foo 100"], false},
          {"main", line["main foo"], false}}},
        {200,
         {{"allocate_something", line["site"], true},
          {"bar", line["bar 200"], false},
          {"main", line["main bar"], false}}},
        {300,
         {{"allocate_something", line["site"], true},
          {"allocate_through", line["through"], true},
          {"bar", line["bar 300"], false},
          {"main", line["main bar"], false}}},
    };
    for (const std::string& program :
         builds({PROF_TEST_INLINED_ALLOCS_O0, PROF_TEST_INLINED_ALLOCS_O2}, "inlined_allocs")) {
        CAPTURE(program);
        analysis::MemoryReport m = memory_of(program, "fp");
        size_t seen = 0;
        for (const analysis::MemorySite& s : m.sites) {
            auto want = expected.find(s.bytes);
            if (want == expected.end() || s.stack.empty() ||
                s.stack[0].file.find("inlined_allocs.c") == std::string::npos)
                continue;
            ++seen;
            CAPTURE(s.bytes);
            CHECK(s.allocations == 1);
            REQUIRE(s.stack.size() >= want->second.size());
            for (size_t k = 0; k < want->second.size(); ++k) {
                CAPTURE(k);
                CHECK(s.stack[k].name == want->second[k].name);
                CHECK(s.stack[k].line == want->second[k].line);
                CHECK(s.stack[k].inlined == want->second[k].inlined);
            }
        }
        CHECK(seen == expected.size());
        // The views rank an inlined function as a function: allocate_something holds all three
        // allocations, allocate_through the one made through it.
        analysis::views::CallTree tree =
            analysis::views::memory_call_tree(m, analysis::views::MemoryWeight::kAllocations);
        std::map<std::string, uint64_t> calls;
        for (const analysis::views::CallTreeNode& n : tree.nodes)
            if (&n != &tree.nodes[0]) calls[tree.name(n)] += n.calls;
        CHECK(calls["allocate_something"] == 3);
        CHECK(calls["allocate_through"] == 1);
        CHECK(calls["bar"] == 2);
        CHECK(calls["foo"] == 1);
    }
}
