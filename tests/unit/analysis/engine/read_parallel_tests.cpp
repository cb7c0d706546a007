// Parallel reading (analysis/engine/read_parallel.hpp): a trace's thread streams read on several
// cores give what one reader gives.
#include "unit/analysis/analysis_support.hpp"

using namespace prof;
using namespace prof::test;

namespace {

// Three threads whose chunks interleave in the file (stream 2 starts first), each calling the
// functions in its own order, with recursion, an unmatched exit, abandoned frames and frames
// still open at the end; `corrupt` puts a record no version defines in stream 3's last chunk.
std::vector<uint8_t> interleaved_streams(bool corrupt = false) {
    TraceBuilder b;
    b.chunk(0);
    overheads(b, "2.00", "1.00");
    b.chunk(2, 100);
    b.function(0x3000).function(0x1000);
    b.enter(0, 0).enter(1, 5).exit(7).enter(1, 1).exit(2);
    b.chunk(1, 110);
    b.function(0x2000).function(0x4000).function(0x1000);
    b.enter(0, 0).enter(1, 3).enter(1, 2).exit(4).exit(1).enter(2, 1).exit(9).exit(3);
    b.chunk(3, 120);
    b.function(0x4000).function(0x2000);
    b.exit(1).enter(0, 2).enter(1, 1).enter(0, 1);
    b.chunk(2, 200);
    b.enter(1, 0).exit(4).exit(6).enter(0, 1).enter(1, 2);
    b.abandon(2, 3);
    b.chunk(1, 300);
    b.enter(0, 0).enter(2, 4); // open at the end
    b.chunk(3, 400);
    if (corrupt) b.tag(format::Tag(0x3f));
    b.exit(5).exit(2).exit(1);
    b.chunk(0);
    name_functions(b, {"a", "b", "c", "d"}).end_record(500);
    return b.bytes();
}

// A profile, a call tree and the thread list as text, to compare two readings.
std::string described(analysis::Session& s) {
    std::string out;
    analysis::Profile p = s.profile();
    for (const analysis::Function& f : p.functions)
        out += f.name + " " + std::to_string(f.stats.ncalls) + " " +
               std::to_string(f.stats.pcalls) + " " + std::to_string(f.stats.tottime) + " " +
               std::to_string(f.stats.cumtime) + "\n";
    for (const analysis::Edge& e : p.edges)
        out += std::to_string(e.caller) + ">" + std::to_string(e.callee) + " " +
               std::to_string(e.stats.ncalls) + " " + std::to_string(e.stats.cumtime) + "\n";
    for (const analysis::views::CallTreeNode& n : s.call_tree({}).nodes)
        out += "node " + std::to_string(n.parent) + " " + std::to_string(n.function) + " " +
               std::to_string(n.calls) + " " + std::to_string(n.total_ns) + "\n";
    for (size_t i = 0; i < s.thread_list().size(); ++i) {
        analysis::ThreadSummary t = s.thread(i);
        out += "thread " + std::to_string(t.tid) + " " + std::to_string(t.unmatched_exits) + "\n";
    }
    const reader::TraceInfo& info = s.traces().at(0);
    out += "events " + std::to_string(s.events()) + " threads " +
           std::to_string(info.threads.size()) + " end " + std::to_string(info.end_ticks) + "\n";
    return out;
}

} // namespace

TEST_CASE("thread streams read on several cores give what one reader gives") {
    std::string path = temp_path("interleaved.trace");
    TraceBuilder::save(path, interleaved_streams());
    analysis::Session one, three;
    one.add_traces({path}, 1);
    three.add_traces({path}, 3);
    std::string expected = described(one);
    CHECK(described(three) == expected);
    // What one reader gives, checked by hand in part: the threads in order of their first
    // chunk, and stream 3's unmatched exit.
    REQUIRE(one.thread_list().size() == 3);
    CHECK(one.thread_list()[0].stream == 2);
    CHECK(one.thread_list()[1].stream == 1);
    CHECK(one.thread(2).unmatched_exits == 1);
    CHECK(stats(one.profile(), "a").ncalls == 6);
    CHECK(stats(one.profile(), "b").ncalls == 3);

    // A corrupt record in one part stops the reading with the error one reader gives.
    TraceBuilder::save(path, interleaved_streams(true));
    std::string sequential, parallel;
    try {
        analysis::Session s;
        s.add_traces({path}, 1);
    } catch (const reader::TraceError& e) {
        sequential = e.what();
    }
    try {
        analysis::Session s;
        s.add_traces({path}, 3);
    } catch (const reader::TraceError& e) {
        parallel = e.what();
    }
    CHECK(!sequential.empty());
    CHECK(parallel == sequential);
}
