// Parallel reading (analysis/engine/read_parallel.hpp): a trace's thread streams read on several
// cores give what one reader gives; streams to cores, parts merged, the error reported.
#include "unit/analysis/analysis_support.hpp"
#include "unit/analysis/engine/engine_support.hpp"

#include "analysis/engine/read_parallel.hpp"

#include <exception>
#include <memory>
#include <stdexcept>
#include <unordered_map>

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

TEST_CASE("read_parallel: the largest streams first, each to the core with the fewest bytes") {
    std::vector<reader::StreamExtent> streams = {
        {1, 100, 0}, {2, 300, 1}, {3, 200, 2}, {4, 50, 3}, {5, 100, 4}};
    // 2 (300) to core 0; 3 (200) to 1; 1 (100, before 5 of the same size) to 1, now 300;
    // 5 to the first of the two cores at 300, 0; 4 to 1, at 300 against 400.
    std::unordered_map<uint32_t, unsigned> expected = {{2, 0}, {3, 1}, {1, 1}, {5, 0}, {4, 1}};
    CHECK(analysis::engine::assign_streams(streams, 2) == expected);
    std::unordered_map<uint32_t, unsigned> one = {{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}};
    CHECK(analysis::engine::assign_streams(streams, 1) == one);
    // More cores than streams: one stream each, the rest idle.
    std::unordered_map<uint32_t, unsigned> wide = {{2, 0}, {3, 1}, {1, 2}, {5, 3}, {4, 4}};
    CHECK(analysis::engine::assign_streams(streams, 8) == wide);
}

TEST_CASE("read_parallel: parts merged in the order one reader meets functions and threads") {
    using analysis::engine::ThreadReplay;
    using analysis::engine::TraceFunctions;
    // Part 0 met 0x2000 at 5 and 0x1000 at 1; part 1 met 0x1000 at 2 (after part 0) and
    // 0x3000 at 3, in a sampled frame's inlined call.
    TraceFunctions f0, f1;
    f0.of(0x2000, reader::kNoModule, 5);
    f0.of(0x1000, reader::kNoModule, 1);
    f1.of(0x1000, reader::kNoModule, 2);
    f1.of(0x3000, reader::kNoModule, 3);
    f1.inlined[1] = true;
    std::vector<std::unique_ptr<ThreadReplay>> t0, t1;
    t0.push_back(std::make_unique<ThreadReplay>());
    t0[0]->seen = 4;
    t0[0]->stream = 7;
    uint32_t x = add_path(*t0[0], {1, 0}, 1, 10); // 0x1000 > 0x2000
    t0[0]->fn_map = {1, 0};
    t1.push_back(std::make_unique<ThreadReplay>());
    t1[0]->seen = 2;
    t1[0]->stream = 8;
    uint32_t y = add_path(*t1[0], {0, 1}, 1, 10); // 0x1000 > 0x3000
    t1[0]->address_fn[0x3000] = 1;

    // The trace is the second: a thread of the first is there already.
    std::vector<std::unique_ptr<ThreadReplay>> threads;
    threads.push_back(std::make_unique<ThreadReplay>());
    TraceFunctions fns;
    std::vector<analysis::engine::StreamPart> parts = {{f0, t0}, {f1, t1}};
    analysis::engine::merge_streams(parts, fns, 1, threads);

    CHECK(fns.address == std::vector<uint64_t>{0x1000, 0x3000, 0x2000});
    CHECK(fns.seen == std::vector<uint64_t>{1, 3, 5});
    CHECK(fns.inlined == std::vector<bool>{false, true, false});
    REQUIRE(threads.size() == 3);
    // Part 1's thread first: its first record came earlier in the file.
    const ThreadReplay& b = *threads[1];
    const ThreadReplay& a = *threads[2];
    CHECK(b.stream == 8);
    CHECK(a.stream == 7);
    CHECK(b.trace == 1);
    CHECK(a.trace == 1);
    CHECK(b.index == 1);
    CHECK(a.index == 2);
    // Their call paths in the merged numbers: 0x1000 > 0x3000 and 0x1000 > 0x2000.
    CHECK(b.nodes[y].function == 1);
    CHECK(b.nodes[b.nodes[y].parent].function == 0);
    CHECK(a.nodes[x].function == 2);
    CHECK(a.nodes[a.nodes[x].parent].function == 0);
    CHECK(a.fn_map.empty());
    CHECK(b.address_fn.empty());
    CHECK(t0[0] == nullptr); // taken from the parts
    CHECK(t1[0] == nullptr);
}

TEST_CASE("read_parallel: the parts' summaries merged, the process records counted once") {
    reader::TraceInfo process;
    process.minor_unknown_records = 1;
    std::vector<reader::TraceInfo> infos(2);
    infos[0].threads[1].tid = 11;
    infos[1].threads[2].tid = 12;
    infos[0].lines[{1, 0x40}].hits = 3;
    infos[1].lines[{2, 0x40}].hits = 4;
    infos[0].minor_unknown_records = 1 + 2;
    infos[1].minor_unknown_records = 1 + 4;
    infos[0].memory_records = 10;
    infos[1].memory_records = 20;
    infos[0].end_ticks = 500;
    infos[1].end_ticks = 900;
    std::vector<reader::TraceInfo> finished = infos;
    reader::TraceInfo info = analysis::engine::merge_infos(infos, process);
    REQUIRE(info.threads.size() == 2);
    CHECK(info.threads.at(1).tid == 11);
    CHECK(info.threads.at(2).tid == 12);
    CHECK(info.lines.size() == 2);
    CHECK(info.minor_unknown_records == 1 + 2 + 4);
    CHECK(info.memory_records == 30);
    CHECK(info.end_ticks == 900); // no End record: the latest time any part saw
    // With an End record every part read the same end time: the first part's stays.
    finished[0].finished = true;
    CHECK(analysis::engine::merge_infos(finished, process).end_ticks == 500);
}

TEST_CASE("read_parallel: of the parts' errors, the one earliest in the file") {
    auto error_at = [](uint64_t offset) {
        return std::make_exception_ptr(reader::TraceError("t.trace", offset, "bad record"));
    };
    auto offset_thrown = [](const std::vector<std::exception_ptr>& errors) -> uint64_t {
        try {
            analysis::engine::rethrow_first(errors);
        } catch (const reader::TraceError& e) {
            return e.offset();
        }
        return 0;
    };
    CHECK(offset_thrown({nullptr, error_at(300), error_at(100), nullptr, error_at(200)}) == 100);
    // An error without an offset (a failed read) counts only when no part met a bad record.
    auto other = std::make_exception_ptr(std::runtime_error("short read"));
    CHECK(offset_thrown({other, error_at(300)}) == 300);
    CHECK_THROWS_WITH_AS(analysis::engine::rethrow_first({nullptr, other}), "short read",
                         std::runtime_error);
    CHECK_NOTHROW(analysis::engine::rethrow_first({nullptr, nullptr}));
    CHECK_NOTHROW(analysis::engine::rethrow_first({}));
}
