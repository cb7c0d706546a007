// End to end: every allocation is reported at the line of its call. A stack's frames are
// return addresses; the instruction after a call is often on the next line (or, after a call
// that never returns, in the next function), so each is named one byte back, inside its call.
// tests/programs/alloc_lines.c, at -O0, -O1 and -O2: its comments give each line's bytes.
#include "analysis/engine/session.hpp"
#include "analysis/model/profile.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <string>

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

} // namespace

#ifdef PROF_SANITIZER_BUILD
TEST_SUITE_BEGIN("memory profiler" * doctest::skip(true));
#endif

TEST_CASE("every allocation at the line of its call, and every caller at its call's line") {
    const Expected expected = read_expected();
    for (std::string program :
         {PROF_TEST_ALLOC_LINES_O0, PROF_TEST_ALLOC_LINES_O1, PROF_TEST_ALLOC_LINES_O2})
        for (std::string unwind : {"fp", "dwarf"}) {
            CAPTURE(program);
            CAPTURE(unwind);
            std::string trace = temp_path("alloc-lines.trace");
            auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", program},
                         {{"PROF_MEM_UNWIND", unwind}});
            REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            analysis::Session session;
            session.add_trace(trace);
            analysis::MemoryReport m = session.memory();
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
