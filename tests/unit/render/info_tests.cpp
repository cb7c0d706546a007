// render/info: what profreport --info says about a trace built record by record.
#include "unit/render/render_support.hpp"

#include "render/info.hpp"

using namespace prof;
using namespace prof::test;

TEST_CASE("info: the trace's format, process, clock, state, symbols and threads") {
    analysis::Profile p = render_profile();
    std::string out = capture([&](std::FILE* f) { render::print_info(f, p); });
    CHECK(out == "trace:     " + render_trace() +
                     "\n"
                     "format:    1.13  (200704 bytes, 3 chunks of 64 KiB)\n"
                     "process:   pid 42 (parent 0)  app --run\n"
                     "clock:     monotonic at 1.000000 GHz\n"
                     "state:     complete\n"
                     "symbols:   4   modules: 0\n"
                     "thread:    1 tid 1001 '' 12 events\n"
                     "thread:    2 tid 1002 '' 4 events\n"
                     "\n");
    CHECK(render::no_lines_text(p) ==
          "No marked lines in this trace: mark code with PROF_LINE, PROF_SCOPE or "
          "PROF_FUNCTION (see <prof/prof.hpp>).");
}
