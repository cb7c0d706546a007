// Reader: valid traces round-trip; damaged ones give a TraceError with an offset or a partial
// read that says it is partial — never a crash, a hang or a silently wrong result.
#include "analysis/engine/session.hpp"
#include "analysis/model/profile.hpp"
#include "pack/trace_packer.hpp"
#include "reader/elf_symbols.hpp"
#include "reader/run_manifest.hpp"
#include "reader/trace_reader.hpp"
#include "render/memory_report.hpp"
#include "support/approx.hpp"
#include "support/capture.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_builder.hpp"

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <link.h>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace prof;
using prof::test::TraceBuilder;

namespace {

struct CountingSink : reader::EventSink {
    uint64_t functions = 0, enters = 0, exits = 0, abandoned = 0, runs = 0, run_calls = 0;
    void on_function(uint32_t, uint32_t, uint64_t) override { ++functions; }
    void on_enter(uint32_t, uint32_t, uint64_t) override { ++enters; }
    void on_enter_address(uint32_t, uint64_t, uint64_t) override { ++enters; }
    void on_exit(uint32_t, uint64_t) override { ++exits; }
    void on_abandon(uint32_t, uint32_t n, uint64_t) override { abandoned += n; }
    void on_scope_run(uint32_t, uint32_t, uint64_t, uint64_t count, uint64_t) override {
        ++runs;
        run_calls += count;
    }
};

// main (0x1000) calls work (0x2000) twice; each call lasts 100 ticks (= ns here).
TraceBuilder small_trace() {
    TraceBuilder b;
    b.chunk(1, 1000).function(0x1000).function(0x2000);
    b.enter(0, 0).enter(1, 10).exit(100).enter(1, 50).exit(100).exit(40);
    b.thread_end(0);
    b.chunk(0).symbol(0x1000, "main", "/src/app.cpp", 3).symbol(0x2000, "work(int)", "/src/app.cpp", 9);
    b.end_record(1300);
    return b;
}

// A sized record's payload, to be cut or damaged: `ulebs`, then `u64s` little-endian.
std::vector<uint8_t> payload(std::initializer_list<uint64_t> ulebs,
                             std::initializer_list<uint64_t> u64s) {
    std::vector<uint8_t> out(ulebs.size() * format::kMaxUleb + u64s.size() * 8);
    uint8_t* p = out.data();
    for (uint64_t v : ulebs) p = format::put_uleb(p, v);
    for (uint64_t v : u64s) p = format::put_u64(p, v);
    out.resize(size_t(p - out.data()));
    return out;
}

// A ScopeRun record (1.3): `count` leaf activations of `fn` from `dt` on, `ticks` together.
std::vector<uint8_t> scope_run(uint64_t dt, uint64_t fn, uint64_t count, uint64_t ticks) {
    return payload({dt, fn}, {count, ticks});
}

// small_trace() with the records of format 1.3 in main's stream: a run of three scope
// activations and the counts of a marked line.
TraceBuilder aligned_trace(uint64_t bad_alignment); // format 1.4 alignment fields, below

TraceBuilder small_trace_1_3() {
    TraceBuilder b;
    b.chunk(1, 1000).function(0x1000).function(0x2000).function(0x3000);
    b.enter(0, 0).enter(1, 10).exit(100).enter(1, 50).exit(100);
    b.scope_run(5, 2, 3, 30);
    b.line_counts(0x4000, 1000, 5000);
    b.exit(40);
    b.thread_end(0);
    b.chunk(0).symbol(0x1000, "main", "/src/app.cpp", 3).symbol(0x2000, "work(int)", "/src/app.cpp", 9);
    b.end_record(1400);
    return b;
}

// Format 1.5: main (0x1000) calls work (0x2000), with CPU-time samples: the first at arming
// (count 0), two in work (the second standing for two samples, one of them in the profiler),
// one in main after work returns. Times in ns.
TraceBuilder sampled_trace() {
    TraceBuilder b;
    b.chunk(1, 1000).function(0x1000).function(0x2000);
    b.sample(0, 500000, 0, 0, 0);           // t 1000: armed, CPU clock 0.5 ms
    b.enter(0, 10).enter(1, 10);            // t 1010, 1020
    b.sample(4000, 4500000, 0, 0, 1);       // t 5020, in work: 4 ms
    b.sample(8000, 12700000, 200000, 1, 2); // t 13020, in work: 8.2 ms, 0.2 of it the profiler's
    b.exit(100);                            // t 13120
    b.sample(3000, 16000000, 0, 0, 1);      // t 16120, in main: 3.3 ms
    b.exit(80);                             // t 16200
    b.thread_end(0);
    b.chunk(0).meta("sample_signal", "64").meta("sample_hz", "1000");
    b.meta("sample_clock", "thread_cputime");
    b.symbol(0x1000, "main", "/src/app.cpp", 3).symbol(0x2000, "work(int)", "/src/app.cpp", 9);
    b.end_record(20000);
    return b;
}

// Format 1.9: main (0x1000) traced until it calls work (0x2000) once, then counting: the open
// frame main is node 1, work called from it node 2 (3 more calls), work's helper (0x3000) node 3
// (5 calls); samples name their nodes. Times in ns.
TraceBuilder counted_trace() {
    TraceBuilder b;
    b.chunk(1, 1000).function(0x1000).function(0x2000);
    b.sample(0, 500000, 0, 0, 0);             // t 1000: armed
    b.enter(0, 10);                           // t 1010: main
    b.counting(990, 1000000);                 // t 2000: counting from here, CPU clock 1 ms
    b.call_counts(1, {0, 3});                 // nodes 1-2
    b.call_node(1, 0, 0);                     // main, its Enter counted it
    b.call_node(2, 1, 1);                     // main > work
    b.node_sample(3000, 4000000, 0, 0, 1, 2); // t 5000 in work
    b.function(0x3000);
    b.call_counts(3, {5});
    b.call_node(3, 2, 2); // main > work > helper
    b.position(3);
    b.node_sample(1000, 4500000, 0, 0, 0, 1);      // t 6000 clocks after a switch, in main
    b.node_sample(4000, 7000000, 100000, 1, 1, 3); // t 10000 in helper
    b.thread_end(500);
    b.chunk(0)
        .symbol(0x1000, "main", "/src/app.cpp", 3)
        .symbol(0x2000, "work(int)", "/src/app.cpp", 9);
    b.symbol(0x3000, "helper()", "/src/app.cpp", 20);
    b.end_record(11000);
    return b;
}

std::string error_of(const std::string& path) {
    try {
        CountingSink sink;
        reader::TraceReader(path).read(sink);
    } catch (const reader::TraceError& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("a valid trace reads back with exact counts and times") {
    std::string path = test::temp_path("small.trace");
    small_trace().save(path);
    CountingSink sink;
    reader::TraceReader r(path);
    const reader::TraceInfo& info = r.read(sink);
    CHECK(info.finished);
    CHECK_FALSE(info.incomplete);
    CHECK(sink.functions == 2);
    CHECK(sink.enters == 3);
    CHECK(sink.exits == 3);
    CHECK(info.symbols.at(0x2000).name == "work(int)");
    CHECK(info.ticks_per_second == test::approx(1e9));

    analysis::Session pb;
    pb.add_trace(path);
    analysis::Profile p = pb.profile();
    REQUIRE(p.functions.size() == 2);
    auto work = p.match("work");
    REQUIRE(work.size() == 1);
    const analysis::Stats& ws = p.functions[work[0]].stats;
    CHECK(ws.ncalls == 2);
    CHECK(ws.pcalls == 2);
    CHECK(ws.tottime == test::approx(200e-9));
    CHECK(ws.cumtime == test::approx(200e-9));
    const analysis::Stats& ms = p.functions[p.match("main")[0]].stats;
    CHECK(ms.cumtime == test::approx(300e-9));
    CHECK(ms.tottime == test::approx(100e-9));
    CHECK(p.total_calls == 3);
    CHECK(p.total_time == test::approx(300e-9));
}

// A trace read while its process runs ends with space the writer reserved; the writer trims it
// when it finishes. Reading the trace across that trim must not crash (pages of a mapping past
// the file's new end raise SIGBUS): an unfinished trace is read as it was when opened.
TEST_CASE("a trace its writer trims while it is being read is read whole, without SIGBUS") {
    std::string path = test::temp_path("live.trace");
    TraceBuilder b = small_trace();
    b.header().flags &= ~format::kFileFinished;
    std::vector<uint8_t> bytes = b.bytes();
    size_t written = bytes.size();
    bytes.resize(written + 8 * format::kMinChunkSize); // reserved, not yet written
    TraceBuilder::save(path, bytes);
    CountingSink sink;
    reader::TraceReader r(path);
    REQUIRE(truncate(path.c_str(), off_t(written)) == 0); // the writer finishes
    const reader::TraceInfo& info = r.read(sink);
    CHECK(info.symbols.at(0x2000).name == "work(int)");
    CHECK(sink.enters == 3);
    CHECK(sink.exits == 3);
}

TEST_CASE("a file refused at its header leaves no descriptor or mapping behind") {
    std::string newer_path = test::temp_path("refused.trace");
    TraceBuilder newer = small_trace();
    newer.header().major = format::kPackedMajor + 1; // refused after it is opened and mapped
    newer.save(newer_path);
    auto open_files = [] {
        return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                             std::filesystem::directory_iterator{});
    };
    auto before = open_files();
    for (int i = 0; i < 100; ++i)
        CHECK(error_of(newer_path).find("is not supported") != std::string::npos);
    CHECK(open_files() == before);
}

TEST_CASE("clear errors for files that are not usable traces") {
    std::string missing = test::temp_path("missing.trace");
    CHECK(error_of(missing).find("cannot open") != std::string::npos);

    std::string empty = test::temp_path("empty.trace");
    TraceBuilder::save(empty, {});
    CHECK(error_of(empty).find("empty file") != std::string::npos);

    std::string text = test::temp_path("text.trace");
    TraceBuilder::save(text, std::vector<uint8_t>(5000, 'x'));
    CHECK(error_of(text).find("not a libprof trace") != std::string::npos);

    TraceBuilder newer = small_trace();
    newer.header().major = format::kPackedMajor + 1;
    newer.header().minor = 3;
    std::string newer_path = test::temp_path("newer.trace");
    newer.save(newer_path);
    std::string msg = error_of(newer_path);
    CHECK(msg.find("version 3.3") != std::string::npos);
    CHECK(msg.find("reads version 1.x (and 2.x, packed); upgrade libprof") != std::string::npos);
    // Version 2 is the packed form: its flag and its major go together.
    TraceBuilder unflagged = small_trace();
    unflagged.header().major = format::kPackedMajor;
    unflagged.save(newer_path);
    CHECK(error_of(newer_path).find("a version 2 file without the packed flag") != std::string::npos);
    TraceBuilder flagged = small_trace();
    flagged.header().flags |= format::kFilePacked;
    flagged.save(newer_path);
    CHECK(error_of(newer_path).find("a version 1 file with the packed flag") != std::string::npos);
}

TEST_CASE("a chunk length larger than the chunk is corruption with its offset") {
    auto bytes = small_trace().bytes();
    uint32_t huge = 0xfffffff0;
    std::memcpy(bytes.data() + format::kHeaderSize + offsetof(format::ChunkHeader, used), &huge, 4);
    std::string path = test::temp_path("huge.trace");
    TraceBuilder::save(path, bytes);
    std::string msg = error_of(path);
    CHECK(msg.find(fmt::format("corrupt trace at byte {}", format::kHeaderSize + 16)) !=
          std::string::npos);
}

TEST_CASE("an undefined function index is corruption, not a crash") {
    TraceBuilder b;
    b.chunk(1, 0).function(0x1).enter(7, 0);
    b.chunk(0).end_record(1);
    std::string path = test::temp_path("undef.trace");
    b.save(path);
    CHECK(error_of(path).find("undefined function 7") != std::string::npos);
}

TEST_CASE("records of a newer minor version are skipped by their length") {
    TraceBuilder b;
    b.chunk(1, 0).function(0x1).enter(0, 0);
    b.u8(0x7e).uleb(3).u8(1).u8(2).u8(3); // a sized record this reader does not know
    b.exit(10);
    b.chunk(0).end_record(10);
    std::string path = test::temp_path("minor.trace");
    b.save(path);
    CountingSink sink;
    reader::TraceReader r(path);
    const reader::TraceInfo& info = r.read(sink);
    CHECK(sink.exits == 1);
    CHECK(info.minor_unknown_records == 1);
}

TEST_CASE("the 1.3 variant of the small trace reads back whole") {
    std::string path = test::temp_path("small-1.3.trace");
    small_trace_1_3().save(path);
    CountingSink sink;
    reader::TraceReader r(path);
    const reader::TraceInfo& info = r.read(sink);
    CHECK(info.finished);
    CHECK_FALSE(info.incomplete);
    CHECK(sink.enters == 3);
    CHECK(sink.exits == 3);
    CHECK(sink.run_calls == 3);
    CHECK(info.lines.at({1, 0x4000}).hits == 1000);
}

// Every minor version of 1 stays readable: the records of each are read the same under every
// later header. Each trace holds what its version added (1.0: Abandon, 1.2: Pause, 1.3:
// ScopeRun and LineCounts), under each header from its own minor to today's.
TEST_CASE("every released 1.x version reads the same under each later minor's header") {
    struct Released {
        uint16_t minor;
        TraceBuilder trace;
        uint64_t enters, exits, abandoned, run_calls;
    };
    TraceBuilder unwinding; // 1.0: a frame left by longjmp
    unwinding.chunk(1, 1000).function(0x1000).function(0x2000);
    unwinding.enter(0, 0).enter(1, 10).enter(1, 10).abandon(2, 30).exit(40);
    unwinding.thread_end(0);
    unwinding.chunk(0).symbol(0x1000, "main", "/src/app.cpp", 3).end_record(1200);
    TraceBuilder paused; // 1.2: the runtime's time in a chunk refill
    paused.chunk(1, 1000).function(0x1000).enter(0, 0).pause(25).exit(100).thread_end(0);
    paused.chunk(0).end_record(1200);
    std::vector<Released> released;
    released.push_back({0, small_trace(), 3, 3, 0, 0});
    released.push_back({0, unwinding, 3, 1, 2, 0});
    released.push_back({2, paused, 1, 1, 0, 0});
    released.push_back({3, small_trace_1_3(), 3, 3, 0, 3});
    std::string path = test::temp_path("released.trace");
    for (Released& v : released) {
        for (uint16_t minor = v.minor; minor <= format::kMinor; ++minor) {
            CAPTURE(v.minor);
            CAPTURE(minor);
            v.trace.header().minor = minor;
            v.trace.save(path);
            CountingSink sink;
            reader::TraceReader r(path);
            const reader::TraceInfo& info = r.read(sink);
            CHECK(info.finished);
            CHECK_FALSE(info.incomplete);
            CHECK(info.minor_unknown_records == 0);
            CHECK(sink.enters == v.enters);
            CHECK(sink.exits == v.exits);
            CHECK(sink.abandoned == v.abandoned);
            CHECK(sink.run_calls == v.run_calls);
        }
    }
}

TEST_CASE("a trace cut at any byte reads partially or fails cleanly") {
    for (const TraceBuilder& source :
         {small_trace(), small_trace_1_3(), aligned_trace(0), sampled_trace(), counted_trace()}) {
        auto full = source.bytes();
        // Bytes after the last record of the last chunk are padding: a cut there loses nothing.
        format::ChunkHeader last{};
        size_t last_at = full.size() - format::kMinChunkSize;
        std::memcpy(&last, full.data() + last_at, sizeof last);
        size_t data_end = last_at + sizeof last + last.used;
        std::string path = test::temp_path("cut.trace");
        size_t partial_reads = 0, errors = 0;
        for (size_t n = 0; n < data_end; n += (n < 5000 ? 1 : 61)) {
            TraceBuilder::save(path, std::vector<uint8_t>(full.begin(), full.begin() + long(n)));
            CountingSink sink;
            try {
                reader::TraceReader r(path);
                const reader::TraceInfo& info = r.read(sink);
                CHECK_MESSAGE(info.incomplete, "cut at ", n, " read as complete");
                CHECK(sink.exits <= sink.enters);
                ++partial_reads;
            } catch (const reader::TraceError& e) {
                CHECK(std::string(e.what()).find(path) == 0);
                ++errors;
            }
        }
        CHECK(partial_reads > 0);
        CHECK(errors > 0);
    }
}

TEST_CASE("every single flipped byte gives a result or a TraceError") {
    for (const TraceBuilder& source :
         {small_trace(), small_trace_1_3(), aligned_trace(0), sampled_trace(), counted_trace()}) {
        auto full = source.bytes();
        std::string path = test::temp_path("flip.trace");
        size_t errors = 0;
        // The header, and each chunk's header and records (the rest of a chunk is padding).
        std::vector<size_t> positions;
        for (size_t i = 0; i < format::kHeaderSize; i += 13) positions.push_back(i);
        for (size_t c = format::kHeaderSize; c < full.size(); c += format::kMinChunkSize)
            for (size_t i = c; i < c + 256; ++i) positions.push_back(i);
        for (size_t i : positions) {
            auto bytes = full;
            bytes[i] ^= 0xff;
            TraceBuilder::save(path, bytes);
            try {
                analysis::Session pb;
                pb.add_trace(path);
                (void)pb.profile();
            } catch (const reader::TraceError&) {
                ++errors;
            }
        }
        CHECK(errors > 0);
    }
}

namespace {

// The profile of the trace at `path` with overhead compensation, and without.
std::pair<analysis::Profile, analysis::Profile> compensated_and_raw(const std::string& path) {
    analysis::Session on, off({.compensate = false});
    on.add_trace(path);
    off.add_trace(path);
    return {on.profile(), off.profile()};
}

analysis::Stats stats(const analysis::Profile& p, const char* name) {
    return p.functions[p.match(name)[0]].stats;
}

} // namespace

TEST_CASE("a scope run reads as the activations it stands for, compensation included") {
    // The trace of the compensation test above, with work's three activations as one run: it
    // starts at 20 and its activations took 300 ticks together; main exits at 380. A run's
    // activations are timed by the macros' inline path: each is compensated by the cost of a
    // pair of clock reads (line_overhead, 7 ticks), not by the hooks' overhead_in.
    TraceBuilder b;
    b.chunk(0).meta("overhead_in_ticks", "10.00");
    b.meta("overhead_out_ticks", "5.00");
    b.meta("line_overhead_ticks", "7.00");
    b.chunk(1, 0).function(0x1000).function(0x2000);
    b.enter(0, 0).scope_run(20, 1, 3, 300).exit(360);
    b.chunk(0).end_record(380);
    std::string path = test::temp_path("run.trace");
    b.save(path);

    CountingSink sink;
    reader::TraceReader r(path);
    const reader::TraceInfo& info = r.read(sink);
    CHECK(sink.runs == 1);
    CHECK(sink.run_calls == 3);
    CHECK(info.threads.at(1).events == 2 + 2 * 3);

    auto [p, raw] = compensated_and_raw(path);
    // Raw: as the three Enter/Exit pairs of the compensation test.
    CHECK(stats(raw, "0x2000").ncalls == 3);
    CHECK(stats(raw, "0x2000").tottime == test::approx(300e-9));
    CHECK(stats(raw, "0x1000").tottime == test::approx(80e-9));
    CHECK(stats(raw, "0x1000").cumtime == test::approx(380e-9));
    // Compensated: work 300 - 3 x 7; main own 80 - 10 - 3 x 5, total 55 + 279.
    CHECK(stats(p, "0x2000").tottime == test::approx(279e-9));
    CHECK(stats(p, "0x2000").cumtime == test::approx(279e-9));
    CHECK(stats(p, "0x1000").tottime == test::approx(55e-9));
    CHECK(stats(p, "0x1000").cumtime == test::approx(334e-9));
    CHECK(p.total_calls == 4);
}

TEST_CASE("malformed scope runs are corruption") {
    auto build = [](std::vector<uint8_t> payload) {
        TraceBuilder b;
        b.chunk(1, 0).function(0x1000);
        b.sized(format::Tag::kScopeRun, payload);
        b.chunk(0).end_record(100);
        return b;
    };
    std::string path = test::temp_path("bad-run.trace");
    build(scope_run(0, 1, 2, 10)).save(path); // function 1 is not defined
    CHECK(error_of(path).find("scope run of undefined function 1") != std::string::npos);
    build(scope_run(0, 0, 0, 10)).save(path);
    CHECK(error_of(path).find("scope run of no activation") != std::string::npos);
    std::vector<uint8_t> cut = scope_run(0, 0, 2, 10);
    cut.resize(cut.size() - 3); // the ticks field cut short within its length
    build(cut).save(path);
    CHECK(error_of(path).find("malformed scope run record") != std::string::npos);
}

// LineStats of the memory layer: hits that measured memory (rss_samples), and since 1.10 those
// of them that read the RSS (rss_reads) after heap_increment; before, every one of them read it.
TEST_CASE("LineStats' rss_reads (1.10): read when present, all memory hits when absent") {
    // stream 0, site, hits, ticks, rss_samples, rss_increment, rss_last: byte by byte.
    auto stats = [](uint64_t site, uint64_t hits, uint64_t samples, uint8_t increment,
                    uint8_t last) {
        std::vector<uint8_t> p = {0};
        for (int i = 0; i < 8; ++i) p.push_back(uint8_t(site >> (8 * i)));
        for (uint8_t v : {uint8_t(hits), uint8_t(40), uint8_t(samples), increment, last})
            p.push_back(v);
        return p;
    };
    std::vector<uint8_t> v1_1 = stats(0x5000, 4, 4, 0x7f, 100); // increment -1
    std::vector<uint8_t> v1_9 = stats(0x5100, 3, 3, 8, 50);
    v1_9.push_back(0x10); // heap_increment 16
    std::vector<uint8_t> heap_only = stats(0x5200, 5, 5, 0, 0);
    heap_only.insert(heap_only.end(), {0x80, 0x01, 0}); // heap_increment 128, rss_reads 0
    std::vector<uint8_t> some_read = stats(0x5300, 6, 6, 12, 90);
    some_read.insert(some_read.end(), {0x7c, 2}); // heap_increment -4, rss_reads 2
    std::vector<uint8_t> later = some_read;       // a later minor's appended field, unknown
    later[1] = 0x00;
    later[2] = 0x54;
    later.push_back(0x2a);
    // The codec's record is the 1.10 one, byte for byte.
    uint8_t rec[format::kMaxLineStatsRecord];
    uint8_t* end = format::put_line_stats(rec, {0, 0x5200, 5, 40, 5, 0, 0, 128, 0});
    CHECK(std::vector<uint8_t>(rec + 2, end) == heap_only);
    CHECK(rec[1] == heap_only.size());

    TraceBuilder b;
    b.chunk(1, 0);
    for (const auto* p : {&v1_1, &v1_9, &heap_only, &some_read, &later})
        b.sized(format::Tag::kLineStats, *p);
    b.chunk(0).end_record(100);
    std::string path = test::temp_path("line-stats-reads.trace");
    b.save(path);
    CountingSink sink;
    reader::TraceReader r(path);
    const reader::TraceInfo& info = r.read(sink);
    CHECK(info.minor_unknown_records == 0);
    const reader::LineStats& a = info.lines.at({1, 0x5000});
    CHECK(a.rss_samples == 4);
    CHECK(a.rss_reads == 4);
    CHECK(a.rss_increment == -1);
    CHECK(a.rss_last == 100);
    CHECK(a.heap_increment == 0);
    const reader::LineStats& c = info.lines.at({1, 0x5100});
    CHECK(c.rss_reads == 3);
    CHECK(c.heap_increment == 16);
    const reader::LineStats& h = info.lines.at({1, 0x5200});
    CHECK(h.hits == 5);
    CHECK(h.rss_samples == 5);
    CHECK(h.rss_reads == 0);
    CHECK(h.rss_increment == 0);
    CHECK(h.heap_increment == 128);
    const reader::LineStats& s = info.lines.at({1, 0x5300});
    CHECK(s.rss_samples == 6);
    CHECK(s.rss_reads == 2);
    CHECK(s.rss_increment == 12);
    CHECK(s.rss_last == 90);
    CHECK(s.heap_increment == -4);
    const reader::LineStats& l = info.lines.at({1, 0x5400});
    CHECK(l.rss_reads == 2);
    CHECK(l.heap_increment == -4);

    // More reads than hits that measured memory: corruption.
    std::vector<uint8_t> bad = stats(0x5500, 2, 2, 0, 0);
    bad.insert(bad.end(), {0, 3});
    TraceBuilder wrong;
    wrong.chunk(1, 0).sized(format::Tag::kLineStats, bad);
    wrong.chunk(0).end_record(100);
    wrong.save(path);
    CHECK(error_of(path).find("malformed line statistics record") != std::string::npos);
}

TEST_CASE("LineCounts records add up with LineStats per stream and site") {
    TraceBuilder b;
    b.chunk(1, 0);
    // LineStats: stream 0 (this one), site 0x5000, 10 hits, 100 ticks, no RSS.
    std::vector<uint8_t> stats = {0};
    for (int i = 0; i < 8; ++i) stats.push_back(uint8_t(uint64_t(0x5000) >> (8 * i)));
    for (uint8_t v : {10, 100, 0, 0, 0, 0}) stats.push_back(v);
    b.sized(format::Tag::kLineStats, stats);
    b.line_counts(0x5000, 1000000, 3000000);
    b.line_counts(0x5000, 5, 50);
    b.line_counts(0x6000, 7, 70);
    b.chunk(2, 0);
    b.line_counts(0x5000, 1, 1);
    b.chunk(0).end_record(100);
    std::string path = test::temp_path("line-counts.trace");
    b.save(path);
    CountingSink sink;
    reader::TraceReader r(path);
    const reader::TraceInfo& info = r.read(sink);
    REQUIRE(info.lines.count({1, 0x5000}) == 1);
    CHECK(info.lines.at({1, 0x5000}).hits == 1000015);
    CHECK(info.lines.at({1, 0x5000}).ticks == 3000150);
    CHECK(info.lines.at({1, 0x6000}).hits == 7);
    CHECK(info.lines.at({2, 0x5000}).hits == 1);
    CHECK(info.lines.at({2, 0x5000}).ticks == 1);

    TraceBuilder bad;
    bad.chunk(1, 0).sized(format::Tag::kLineCounts, payload({}, {0x5000, 1}));
    bad.chunk(0).end_record(100);
    bad.save(path);
    CHECK(error_of(path).find("malformed line counts record") != std::string::npos);
}

namespace {

TraceBuilder& module(TraceBuilder& b, uint64_t ticks, uint64_t start, uint64_t end,
                     const std::string& path) {
    return b.tag(format::Tag::kModule).u64(ticks).u64(start).u64(start).u64(end).str(path).str("");
}

TraceBuilder& unload(TraceBuilder& b, uint64_t ticks, uint64_t start, uint64_t end) {
    return b.tag(format::Tag::kUnload).uleb(32).u64(ticks).u64(start).u64(start).u64(end);
}

} // namespace

// liba.so is unloaded at 2000 and libb.so mapped at its addresses; the runtime recorded libb.so
// only at 5000, after its first call (2500), and the thread kept the function index it had for
// liba.so's function at that address. The thread chunk comes first in the file, before the
// Unload record that separates the two.
TEST_CASE("an address reused by another object: names and calls follow the object of the time") {
    TraceBuilder b;
    b.chunk(1, 1000).function(0x10100);
    b.enter(0, 0).exit(10).enter(0, 490).exit(10);    // 1000, 1500: liba.so
    b.enter(0, 990).exit(10).enter(0, 3490).exit(10); // 2500, 6000: libb.so
    b.chunk(0);
    b.module(500, 0x10000, 0x20000, "/lib/liba.so").symbol(0x10100, "alpha_work", "", 0);
    b.unload(2000, 0x10000, 0x20000);
    b.module(5000, 0x10000, 0x20000, "/lib/libb.so").symbol(0x10100, "bravo_work", "b.cpp", 7);
    b.end_record(7000);
    std::string path = test::temp_path("reused.trace");
    b.save(path);

    CountingSink sink;
    reader::TraceReader r(path);
    const reader::TraceInfo& info = r.read(sink);
    CHECK(info.minor_unknown_records == 0);
    REQUIRE(info.modules.size() == 2);
    CHECK(info.modules[0].unload_ticks == 2000);
    CHECK(info.modules[1].unload_ticks == UINT64_MAX);
    CHECK(info.module_index_at(0x10100, 1000) == 0);
    CHECK(info.module_index_at(0x10100, 2500) == 1); // before libb.so's record, after the unload
    CHECK(info.module_index_at(0x10100) == 1);
    CHECK(info.symbol_at(0x10100, 0)->name == "alpha_work");
    CHECK(info.symbol_at(0x10100, 1)->name == "bravo_work");
    CHECK(info.symbols.at(0x10100).name == "bravo_work"); // the object loaded there last
    reader::AddressHistory history(info);
    CHECK(history.reused(0x10000));
    CHECK(history.reused(0x1ffff));
    CHECK_FALSE(history.reused(0x20000));
    CHECK_FALSE(history.reused(0xffff));
    CHECK(history.module_at(0x10100, 1000) == 0);
    CHECK(history.module_at(0x10100, 2500) == 1);
    CHECK(history.module_at(0x10100, 9000) == 1);

    analysis::Session pb;
    pb.add_trace(path);
    analysis::Profile p = pb.profile();
    REQUIRE(p.functions.size() == 2);
    for (const auto& f : p.functions) {
        CAPTURE(f.name);
        CHECK(f.stats.ncalls == 2);
        CHECK(f.module == (f.name == "alpha_work" ? "/lib/liba.so" : "/lib/libb.so"));
    }
    CHECK(p.match("bravo_work").size() == 1);
    CHECK(p.functions[p.match("bravo_work")[0]].line == 7);
}

TEST_CASE("unload records: malformed is corruption, in a thread stream it is skipped") {
    TraceBuilder bad;
    bad.chunk(0);
    bad.module(0, 0x10000, 0x20000, "/lib/liba.so");
    bad.tag(format::Tag::kUnload).uleb(8).u64(5);
    bad.end_record(10);
    std::string bad_path = test::temp_path("unload-bad.trace");
    bad.save(bad_path);
    CHECK(error_of(bad_path).find("malformed unload record") != std::string::npos);

    TraceBuilder odd;
    odd.chunk(1, 0).function(0x10100).enter(0, 0);
    odd.unload(5, 0x10000, 0x20000).exit(10);
    odd.chunk(0);
    odd.module(0, 0x10000, 0x20000, "/lib/liba.so").end_record(10);
    std::string odd_path = test::temp_path("unload-thread.trace");
    odd.save(odd_path);
    CountingSink sink;
    reader::TraceReader r(odd_path);
    const reader::TraceInfo& info = r.read(sink);
    CHECK(info.minor_unknown_records == 1);
    CHECK(info.modules.at(0).unload_ticks == UINT64_MAX);
}

// 120,000 allocations by thread 1, each freed 500 ns later by thread 2 (every 1000th never),
// and thread 2's own temporaries in between, over 108 chunks. Each chunk of frees lies in the
// file before the chunk of the allocations it frees, as it does when thread 2's chunk was
// opened first: the report has to hold those frees back until their allocations are read,
// while it replays in batches (its memory bounded by the live blocks, not the trace). Checked:
// the exact counts, bytes, leaks and peak of a direct replay.
TEST_CASE("memory records replayed in batches: frees before their allocations in the file") {
    constexpr uint64_t kBlocks = 120000, kT0 = 1000000;
    auto t_alloc = [](uint64_t i) { return kT0 + i * 1000; };
    auto ptr_of = [](uint64_t i) { return 0x10000000 + i * 64; };
    auto size_of = [](uint64_t i) { return 16 + i % 7; };
    auto leaked = [](uint64_t i) { return i % 1000 == 7; };
    struct Ev {
        uint64_t t, ptr, size; // size 0: a free
    };
    auto append = [](TraceBuilder& b, const std::vector<Ev>& evs, uint64_t& last_t) {
        uint64_t prev_t = last_t, prev_ptr = 0;
        for (const Ev& e : evs) {
            auto delta = int64_t(e.ptr - prev_ptr);
            if (e.size)
                b.alloc(e.t - prev_t, delta, e.size, 0, format::AllocKind::kMalloc);
            else
                b.free(e.t - prev_t, delta, format::FreeKind::kFree);
            prev_t = e.t, prev_ptr = e.ptr;
        }
        REQUIRE(b.chunk_bytes() < format::kMinChunkSize - sizeof(format::ChunkHeader));
        last_t = prev_t;
    };

    TraceBuilder b;
    std::vector<std::pair<uint64_t, int64_t>> changes; // (time, heap delta) for the replay
    uint64_t last1 = kT0, last2 = kT0, bytes = 0, leaked_bytes = 0, leaked_blocks = 0, own = 0;
    // Uneven chunks, so that batches end after chunks of either thread.
    for (uint64_t k = 0, first = 0; first < kBlocks; ++k) {
        uint64_t end = std::min(kBlocks, first + 1200 + (k % 4) * 700);
        std::vector<Ev> frees, allocs;
        for (uint64_t i = first; i < end; ++i) {
            allocs.push_back({t_alloc(i), ptr_of(i), size_of(i)});
            bytes += size_of(i);
            changes.emplace_back(t_alloc(i), int64_t(size_of(i)));
            if (leaked(i)) {
                leaked_bytes += size_of(i), ++leaked_blocks;
            } else {
                frees.push_back({t_alloc(i) + 500, ptr_of(i), 0});
                changes.emplace_back(t_alloc(i) + 500, -int64_t(size_of(i)));
            }
            if (i % 2 == 0) { // thread 2's own temporary block
                frees.push_back({t_alloc(i) + 700, 0x70000000, 8});
                frees.push_back({t_alloc(i) + 800, 0x70000000, 0});
                changes.emplace_back(t_alloc(i) + 700, 8);
                changes.emplace_back(t_alloc(i) + 800, -8);
                bytes += 8, ++own;
            }
        }
        b.chunk(2, last2, t_alloc(first) - 10); // opened just before thread 1's
        append(b, frees, last2);
        b.chunk(1, last1, t_alloc(first) - 5);
        append(b, allocs, last1);
        first = end;
    }
    b.chunk(0, 0, last2 + 1).end_record(last2 + 1000);
    std::string path = test::temp_path("memory_batches.trace");
    b.save(path);

    std::sort(changes.begin(), changes.end());
    int64_t live = 0, peak = 0;
    for (auto& [t, d] : changes) peak = std::max(peak, live += d);

    analysis::Session pb;
    pb.add_trace(path);
    const analysis::MemoryReport& m = pb.memory();
    CHECK(m.allocations == kBlocks + own);
    CHECK(m.frees == kBlocks - leaked_blocks + own);
    CHECK(m.unknown_frees == 0);
    CHECK(m.late_events == 0);
    CHECK(m.bytes_allocated == bytes);
    CHECK(m.leaked_blocks == leaked_blocks);
    CHECK(m.leaked_bytes == leaked_bytes);
    CHECK(m.peak_heap == uint64_t(peak));
    CHECK(m.temporary == own); // thread 1's blocks are freed by another thread
    REQUIRE(m.sites.size() == 1);
    CHECK(m.sites[0].peak_bytes == uint64_t(peak));
    CHECK(m.heap_timeline.size() >= 2000);
    CHECK(m.heap_timeline.size() <= 4001);
}

namespace {

// The payload of a memory record: `fields` as uleb, or sleb where `signed_at` says so.
std::vector<uint8_t> memory_payload(std::initializer_list<int64_t> fields,
                                    std::initializer_list<size_t> signed_at = {}) {
    std::vector<uint8_t> out(fields.size() * format::kMaxUleb);
    uint8_t* p = out.data();
    size_t i = 0;
    for (int64_t v : fields) {
        bool is_signed = std::find(signed_at.begin(), signed_at.end(), i++) != signed_at.end();
        p = is_signed ? format::put_sleb(p, v) : format::put_uleb(p, uint64_t(v));
    }
    out.resize(size_t(p - out.data()));
    return out;
}

// Two threads, with every case of matching a release to its block: a temporary, a realloc, a
// pointer the trace never allocated, a block freed by the other thread, and a pointer that
// thread hands out again and the first thread frees (its own record of that pointer is stale).
// Times in ns; pointer deltas restart in every chunk.
TraceBuilder memory_trace() {
    using format::Tag;
    const int64_t p1 = 0x10000, p2 = 0x20000, p3 = 0x30000, unknown = 0xdead0;
    TraceBuilder b;
    b.chunk(1, 0).function(0x1000).enter(0, 0);
    b.sized(Tag::kAlloc, memory_payload({10000, p1, 100, 0, 1}, {1}));      // t 10000
    b.sized(Tag::kAlloc, memory_payload({10000, p2 - p1, 200, 0, 3}, {1})); // t 20000, new
    b.sized(Tag::kFree, memory_payload({10000, 0, 2}, {1}));                // temporary
    b.sized(Tag::kRealloc, memory_payload({10000, p1 - p2, p3 - p1, 300, 0}, {1, 2})); // t 40000
    b.sized(Tag::kFree, memory_payload({5000, unknown - p3, 1}, {1}));                 // t 45000
    b.chunk(2, 50000);
    b.sized(Tag::kFree, memory_payload({10000, p3, 1}, {1}));        // t 60000
    b.sized(Tag::kAlloc, memory_payload({5000, 0, 400, 0, 1}, {1})); // t 65000, p3
    b.chunk(1, 70000);
    b.sized(Tag::kAlloc, memory_payload({5000, p1, 500, 0, 1}, {1})); // t 75000, leaks
    b.sized(Tag::kFree, memory_payload({5000, p3 - p1, 1}, {1}));     // t 80000
    b.exit(10000);
    b.chunk(0).symbol(0x1000, "main", "/src/app.cpp", 3);
    b.end_record(100000);
    return b;
}

// Format 1.4's `alignment` of Alloc and Free (see the test below), and a stray MemAligned;
// with `bad_alignment`, a Free whose alignment is that (corrupt unless a power of two).
TraceBuilder aligned_trace(uint64_t bad_alignment) {
    using format::Tag;
    const int64_t p1 = 0x10000, p2 = 0x20000, p3 = 0x30000, p4 = 0x40000;
    TraceBuilder b;
    b.chunk(1, 0).function(0x1000).enter(0, 0);
    // new(std::align_val_t(64)) released by plain delete: a mismatch.
    b.sized(Tag::kAlloc, memory_payload({1000, p1, 100, 0, 3, 64}, {1}));
    b.sized(Tag::kFree, memory_payload({1000, 0, 2}, {1}));
    // new[](std::align_val_t(128)) released by delete[](std::align_val_t(128)): matched.
    b.sized(Tag::kAlloc, memory_payload({1000, p2 - p1, 200, 0, 4, 128}, {1}));
    b.sized(Tag::kFree, memory_payload({1000, 0, 3, 128}, {1}));
    // An alignment on malloc and free, which have none: ignored, matched.
    b.sized(Tag::kAlloc, memory_payload({1000, p3 - p2, 300, 0, 1, 64}, {1}));
    b.sized(Tag::kFree, memory_payload({1000, 0, 1, 32}, {1}));
    // A MemAligned record (packed files only) in a trace as written means nothing, and
    // packing must not give it a meaning: plain new and delete, matched.
    b.sized(Tag::kMemAligned, memory_payload({4096}));
    b.sized(Tag::kAlloc, memory_payload({1000, p4 - p3, 400, 0, 3}, {1}));
    b.sized(Tag::kFree, memory_payload({1000, 0, 2}, {1}));
    if (bad_alignment)
        b.sized(Tag::kFree, memory_payload({1000, 0, 2, int64_t(bad_alignment)}, {1}));
    b.exit(1000);
    b.chunk(0).symbol(0x1000, "main", "/src/app.cpp", 3);
    b.end_record(100000);
    return b;
}

std::string memory_json(const std::string& path) {
    analysis::Session pb;
    pb.add_trace(path);
    return test::capture([&](std::FILE* out) { render::print_memory_json(out, pb.memory(), {}); });
}

} // namespace

TEST_CASE("packed traces: each release matched to its block, the same report") {
    std::string raw = test::temp_path("memory.trace"), packed = raw + ".packed";
    memory_trace().save(raw);
    analysis::Session pb;
    pb.add_trace(raw);
    analysis::MemoryReport m = pb.memory();
    auto check_counts = [](const analysis::MemoryReport& r) {
        CHECK(r.allocations == 5);
        CHECK(r.frees == 4);
        CHECK(r.unknown_frees == 1);
        CHECK(r.temporary == 1);
        CHECK(r.peak_heap == 900);
        CHECK(r.leaked_blocks == 1);
        CHECK(r.leaked_bytes == 500);
    };
    check_counts(m);

    pack::PackResult r = pack::pack_trace(raw, packed, {9, true});
    CHECK(r.memory_records == 9);
    CHECK(r.remote_frees == 2); // the realloc'd block, and the block of the reused pointer
    CHECK(r.time_shift == 0);
    CHECK(memory_json(packed) == memory_json(raw));

    // Times to 2^11 ns here: every event above is a multiple of 5000 ns apart, so the order
    // and with it the whole report but the peak's time are the same.
    r = pack::pack_trace(raw, packed, {});
    CHECK(r.time_shift == 11);
    analysis::Session rounded;
    rounded.add_trace(packed);
    analysis::MemoryReport mr = rounded.memory();
    check_counts(mr);
    CHECK(mr.peak_heap_time <= m.peak_heap_time);
    CHECK(mr.peak_heap_time > m.peak_heap_time - 2048e-9);
    // The call's times stay exact.
    auto exact_calls = [](const std::string& path) {
        analysis::Session b;
        b.add_trace(path);
        return b.profile().functions.at(0).stats.cumtime;
    };
    CHECK(exact_calls(packed) == exact_calls(raw));
}

// Format 1.4's `alignment` of Alloc and Free, raw and packed (2.1: MemAligned records).
TEST_CASE("aligned operator new and delete: mismatches by alignment, kept when packed") {
    std::string raw = test::temp_path("aligned.trace"), packed = raw + ".packed";
    aligned_trace(0).save(raw);
    auto check = [](const analysis::MemoryReport& m) {
        CHECK(m.allocations == 4);
        CHECK(m.frees == 4);
        REQUIRE(m.mismatches.size() == 1);
        CHECK(m.mismatches[0].allocated_with == "new(std::align_val_t(64))");
        CHECK(m.mismatches[0].freed_with == "delete");
        CHECK(m.mismatches[0].count == 1);
    };
    analysis::Session pb;
    pb.add_trace(raw);
    check(pb.memory());
    pack::PackResult r = pack::pack_trace(raw, packed, {9, true});
    CHECK(r.memory_records == 8);
    analysis::Session pp;
    pp.add_trace(packed);
    check(pp.memory());
    CHECK(memory_json(packed) == memory_json(raw));
    // An alignment that is not a power of two is a corrupt record.
    std::string bad = test::temp_path("aligned-bad.trace");
    aligned_trace(48).save(bad);
    CHECK(error_of(bad).find("malformed record 0x43") != std::string::npos);
}

TEST_CASE("packed traces: a release by another thread stays after its allocation") {
    // Thread 1 allocates at 4099 ns, thread 2 frees the block at 4100 ns. With times in units
    // of 2048 ns, each rounded down from its stream's previous record, the allocation would
    // read 4096 and the release 2047 + 2048 = 4095: first, and of no block.
    using format::Tag;
    TraceBuilder b;
    b.chunk(1, 0).sized(Tag::kAlloc, memory_payload({4099, 0x5000, 100, 0, 1}, {1}));
    b.chunk(2, 2047).sized(Tag::kFree, memory_payload({2053, 0x5000, 1}, {1}));
    b.chunk(0).end_record(10000);
    std::string raw = test::temp_path("handoff.trace"), packed = raw + ".packed";
    b.save(raw);
    pack::PackResult r = pack::pack_trace(raw, packed, {});
    CHECK(r.time_shift == 11);
    CHECK(r.remote_frees == 1);
    analysis::Session pb;
    pb.add_trace(packed);
    analysis::MemoryReport m = pb.memory();
    CHECK(m.allocations == 1);
    CHECK(m.frees == 1);
    CHECK(m.unknown_frees == 0);
    CHECK(m.leaked_blocks == 0);
    CHECK(m.peak_heap == 100);
}

TEST_CASE("packed traces: a chunk whose records fill it to the last byte") {
    TraceBuilder b;
    b.chunk(1, 0).function(0x1000);
    for (int i = 0; i < 13092; ++i) b.enter(0, 1).exit(1);
    b.enter(0, 1);
    REQUIRE(b.chunk_bytes() == format::kMinChunkSize - sizeof(format::ChunkHeader));
    b.chunk(0).end_record(100000);
    std::string raw = test::temp_path("full-chunk.trace"), packed = raw + ".packed";
    b.save(raw);
    pack::pack_trace(raw, packed, {});
    CountingSink sink;
    reader::TraceReader r(packed);
    const reader::TraceInfo& info = r.read(sink);
    CHECK_FALSE(info.incomplete);
    CHECK(sink.enters == 13093);
    CHECK(sink.exits == 13092);
}

TEST_CASE("a packed trace cut at any byte or with any byte flipped: a partial read or an error") {
    for (const TraceBuilder& source : {memory_trace(), small_trace_1_3(), aligned_trace(0)}) {
        std::string raw = test::temp_path("pack-source.trace"), packed = raw + ".packed";
        source.save(raw);
        pack::pack_trace(raw, packed, {});
        std::string text = test::slurp(packed);
        std::vector<uint8_t> full(text.begin(), text.end());
        std::string path = test::temp_path("pack-damaged.trace");
        size_t partial_reads = 0, errors = 0;
        for (size_t n = 0; n < full.size(); ++n) {
            TraceBuilder::save(path, std::vector<uint8_t>(full.begin(), full.begin() + long(n)));
            try {
                analysis::Session pb;
                pb.add_trace(path);
                analysis::Profile p = pb.profile();
                CHECK_MESSAGE(p.traces.at(0).incomplete, "cut at ", n, " read as complete");
                ++partial_reads;
            } catch (const reader::TraceError& e) {
                CHECK(std::string(e.what()).find(path) == 0);
                ++errors;
            }
        }
        CHECK(partial_reads > 0);
        CHECK(errors > 0);
        errors = 0;
        for (size_t i = 0; i < full.size(); ++i) {
            auto bytes = full;
            bytes[i] ^= 0xff;
            TraceBuilder::save(path, bytes);
            try {
                analysis::Session pb;
                pb.add_trace(path);
                (void)pb.profile();
                (void)pb.memory();
            } catch (const reader::TraceError&) {
                ++errors;
            }
        }
        CHECK(errors > 0);
    }
}

namespace {

// Every call and sample of a trace in the order the sink gets them.
struct SampleSink : CountingSink {
    std::vector<std::string> order;
    std::vector<reader::SampleRecord> samples;
    void on_calls(uint32_t stream, const reader::CallRecord* r, size_t n) override {
        for (size_t i = 0; i < n; ++i)
            order.push_back(r[i].exit ? fmt::format("exit@{}", r[i].ticks)
                                      : fmt::format("enter {}@{}", r[i].fn, r[i].ticks));
        reader::EventSink::on_calls(stream, r, n);
    }
    void on_sample(uint32_t stream, const reader::SampleRecord& s) override {
        CHECK(stream == 1);
        order.push_back(fmt::format("sample {}@{}", s.count, s.ticks));
        samples.push_back(s);
    }
};

} // namespace

TEST_CASE("Sample records (1.5): in stream order among the calls, timed in their chain") {
    std::string path = test::temp_path("sampled.trace");
    sampled_trace().save(path);
    SampleSink sink;
    reader::TraceReader r(path);
    const reader::TraceInfo& info = r.read(sink);
    CHECK(info.finished);
    CHECK(info.minor_unknown_records == 0);
    // The calls before a sample reach the sink before it, and its dt counts in the times after.
    CHECK(sink.order == std::vector<std::string>{"sample 0@1000", "enter 0@1010", "enter 1@1020",
                                                 "sample 1@5020", "sample 2@13020", "exit@13120",
                                                 "sample 1@16120", "exit@16200"});
    REQUIRE(sink.samples.size() == 4);
    const reader::SampleRecord& s = sink.samples[2];
    CHECK(s.cpu_ns == 12700000);
    CHECK(s.own_ns == 200000);
    CHECK(s.own_count == 1);
    CHECK(s.count == 2);
    CHECK(info.samples == 4);
    CHECK(info.own_samples == 1);
    CHECK(info.sample_hz == 1000);
    CHECK(info.meta.at("sample_clock") == "thread_cputime");
    // The call profile is that of the same calls without samples.
    analysis::Session pb;
    pb.add_trace(path);
    analysis::Profile p = pb.profile();
    CHECK(stats(p, "work").cumtime == test::approx(12100e-9));
    CHECK(stats(p, "main").cumtime == test::approx(15190e-9));
}

TEST_CASE("malformed Sample records are corruption at their offset, elsewhere they are unknown") {
    auto build = [](std::vector<uint8_t> payload, size_t* at) {
        TraceBuilder b;
        b.chunk(1, 0).function(0x1000).enter(0, 0);
        *at = format::kHeaderSize + sizeof(format::ChunkHeader) + b.chunk_bytes();
        b.sized(format::Tag::kSample, payload).exit(10);
        b.chunk(0).end_record(100);
        return b;
    };
    std::string path = test::temp_path("bad-sample.trace");
    size_t at = 0;
    build(payload({10, 20, 0, 0}, {}), &at).save(path); // ends before `count`
    CHECK(error_of(path) ==
          fmt::format("{}: corrupt trace at byte {}: malformed record 0x4c", path, at));
    build(payload({10, 20, 0, 0, uint64_t(1) << 32}, {}), &at).save(path); // count over 32 bits
    CHECK(error_of(path).find(fmt::format("at byte {}: malformed record 0x4c", at)) !=
          std::string::npos);
    build(payload({10, 20, 0, uint64_t(1) << 32, 1}, {}), &at).save(path); // own_count too
    CHECK(error_of(path).find("malformed record 0x4c") != std::string::npos);
    // Fields appended by a later minor version are ignored.
    build(payload({10, 20, 0, 0, 1, 77}, {}), &at).save(path);
    CHECK(error_of(path) == "");

    // The writer puts them in thread streams only: in the process stream, an unknown record.
    TraceBuilder b;
    b.chunk(1, 0).function(0x1000).enter(0, 0).exit(10);
    b.chunk(0).sample(0, 1, 0, 0, 1).end_record(100);
    b.save(path);
    SampleSink sink;
    reader::TraceReader r(path);
    const reader::TraceInfo& info = r.read(sink);
    CHECK(info.minor_unknown_records == 1);
    CHECK(info.samples == 0);
    CHECK(sink.samples.empty());
}

TEST_CASE("packed traces keep Sample records and their exact times (2.2)") {
    // An allocation right before a sample: packed, the allocation's time is rounded down and
    // the remainder carried into the next timed record, the sample, which stays exact.
    using format::Tag;
    TraceBuilder b;
    b.chunk(1, 0).function(0x1000).enter(0, 0);
    b.sample(0, 100, 0, 0, 0);
    b.sized(Tag::kAlloc, memory_payload({4099, 0x5000, 100, 0, 1}, {1})); // t 4099
    b.sample(1000, 4000000, 0, 0, 1);                                     // t 5099
    b.sized(Tag::kFree, memory_payload({3001, 0, 1}, {1}));               // t 8100
    b.sample(7, 8000000, 5000, 1, 1);                                     // t 8107
    b.exit(3);                                                            // t 8110
    b.chunk(0).end_record(10000);
    std::string raw = test::temp_path("sampled-mem.trace"), packed = raw + ".packed";
    b.save(raw);
    pack::PackResult r = pack::pack_trace(raw, packed, {});
    CHECK(r.time_shift == 11);
    SampleSink a, p;
    reader::TraceReader(raw).read(a);
    reader::TraceReader packed_reader(packed);
    const reader::TraceInfo& info = packed_reader.read(p);
    CHECK(info.header.major == format::kPackedMajor);
    CHECK(info.header.minor == format::kPackedMinor);
    CHECK(info.samples == 2);
    CHECK(p.order == a.order);
    CHECK(p.order == std::vector<std::string>{"enter 0@0", "sample 0@0", "sample 1@5099",
                                              "sample 1@8107", "exit@8110"});
}

TEST_CASE("OffCpu records (1.8): wall time at their stacks, no hits, corruption at their offset") {
    // main (0x1000) calls wait (0x2000): a 3 ms CPU sample in main, 50 ms off CPU in wait.
    auto build = [](bool bad, size_t* at) {
        TraceBuilder b;
        b.chunk(1, 0).stack(1, {0x1010}).stack(2, {0x2010, 0x100f}).stack_sample(100, 1, 3000000);
        if (at) *at = format::kHeaderSize + sizeof(format::ChunkHeader) + b.chunk_bytes();
        b.off_cpu(50000000, bad ? 0 : 2, 50000000);
        b.chunk(0)
            .meta("sampler", "perf_event cpu-clock")
            .meta("sample_hz", "999")
            .meta("sample_idle", "switch")
            .meta("off_cpu_approximate_ns", "0")
            .symbol(0x1000, "main", "m.c", 1)
            .symbol(0x2000, "wait", "m.c", 9)
            .location(0x1010, 0x1000, "m.c", 2)
            .location(0x100f, 0x1000, "m.c", 3)
            .location(0x2010, 0x2000, "m.c", 10)
            .end_record(60000000);
        return b;
    };
    std::string path = test::temp_path("off-cpu.trace");
    build(false, nullptr).save(path);
    analysis::Session s;
    s.add_trace(path);
    analysis::Profile p = s.profile();
    CHECK(p.time.idle_traces == 1);
    CHECK(p.time.off_cpu_records == 1);
    CHECK(p.time.off_cpu_seconds == test::approx(0.05));
    CHECK(p.time.samples == 1);
    CHECK(stats(p, "wait").tottime == test::approx(0.05));
    CHECK(stats(p, "wait").cumtime == test::approx(0.05));
    CHECK(stats(p, "main").tottime == test::approx(0.003));
    CHECK(stats(p, "main").cumtime == test::approx(0.053));
    SampleSink sink;
    reader::TraceReader r(path);
    const reader::TraceInfo& info = r.read(sink);
    CHECK(info.off_cpu_records == 1);
    CHECK(info.off_cpu_ns == 50000000);

    size_t at = 0;
    build(true, &at).save(path);
    CHECK(error_of(path) == fmt::format("{}: corrupt trace at byte {}: malformed record 0x4f", path, at));
}

TEST_CASE("Location records (1.8) with inlined calls: frames of their own, at their lines") {
    // host (0x1000) has step (id 2^63) inlined at m.c:5, and step has leaf (id 2^63 + 1)
    // inlined at m.c:12; the sampled address is in leaf, at m.c:20.
    const uint64_t step = uint64_t(1) << 63, leaf = step + 1;
    std::string file = "m.c";
    TraceBuilder b;
    b.chunk(1, 0).stack(1, {0x1010}).stack_sample(100, 1, 2000000).stack(2, {0x1020}).stack_sample(100, 2, 1000000);
    b.chunk(0)
        .meta("sampler", "perf_event cpu-clock")
        .meta("sample_hz", "999")
        .symbol(0x1000, "host", "m.c", 1)
        .symbol(step, "step", "m.c", 10)
        .symbol(leaf, "leaf", "m.c", 19)
        .location(0x1010, 0x1000, "m.c", 20,
                  {{step, file.data(), file.size(), 5}, {leaf, file.data(), file.size(), 12}})
        .location(0x1020, 0x1000, "m.c", 7)
        .end_record(60000000);
    std::string path = test::temp_path("inlined.trace");
    b.save(path);
    analysis::Session s;
    s.add_trace(path);
    analysis::Profile p = s.profile();
    CHECK(stats(p, "leaf").tottime == test::approx(0.002));
    CHECK(stats(p, "step").cumtime == test::approx(0.002));
    CHECK(stats(p, "step").tottime == 0);
    CHECK(stats(p, "host").cumtime == test::approx(0.003));
    CHECK(stats(p, "host").tottime == test::approx(0.001));
    // Physical frames only: host has it all.
    analysis::SessionOptions o;
    o.inlined = false;
    analysis::Session flat(o);
    flat.add_trace(path);
    analysis::Profile q = flat.profile();
    CHECK(stats(q, "host").tottime == test::approx(0.003));
    CHECK(q.match("leaf").empty());

    // An inlined call naming no function is corruption.
    TraceBuilder bad;
    bad.chunk(0).location(0x1010, 0x1000, "m.c", 20, {{0, file.data(), file.size(), 5}}).end_record(10);
    bad.save(path);
    CHECK(error_of(path).find("malformed location record") != std::string::npos);
}

// PLT stubs get the names binutils gives them (objdump -d labels each `<puts@plt>`): the test
// binary itself and the C++ library it loads, whose stubs lie in .plt (and .plt.sec, .plt.got
// where the linker made them). Every stub objdump names, with its address, and no other.
TEST_CASE("PLT stubs are named as objdump names them") {
    REQUIRE_MESSAGE(test::run({"/usr/bin/objdump", "--version"}).exit_code == 0,
                    "objdump (binutils) is needed");
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    REQUIRE(n > 0);
    self[n] = 0;
    // The C++ library this process loaded, wherever the system keeps it.
    std::string cxx;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
            std::string name = info->dlpi_name ? info->dlpi_name : "";
            if (name.find("/libstdc++.so") == std::string::npos) return 0;
            *static_cast<std::string*>(out) = name;
            return 1;
        },
        &cxx);
    REQUIRE_MESSAGE(!cxx.empty(), "the test binary loads libstdc++");
    for (std::string path : {std::string(self), cxx}) {
        CAPTURE(path);
        reader::ElfSymbols elf(path);
        REQUIRE(elf.ok());
        std::set<std::pair<uint64_t, std::string>> ours, theirs;
        for (const auto& e : elf.entries())
            if (e.name.ends_with("@plt")) ours.emplace(e.start, e.name);
        test::RunResult d = test::run(
            {"/usr/bin/objdump", "-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got", path});
        std::istringstream lines(d.out);
        for (std::string line; std::getline(lines, line);) {
            // "0000000000001030 <puts@plt>:"
            size_t open = line.find(" <"), close = line.rfind(">:");
            if (open == std::string::npos || close == std::string::npos || close < open ||
                line.compare(close - 4, 4, "@plt") != 0)
                continue;
            theirs.emplace(std::stoull(line.substr(0, open), nullptr, 16),
                           line.substr(open + 2, close - open - 2));
        }
        CHECK(theirs.size() > 0);
        CHECK(ours == theirs);
        // And a sampled address inside a stub finds it.
        if (!ours.empty()) {
            const reader::ElfSymbols::Entry* e = elf.find(ours.begin()->first + 4);
            REQUIRE(e);
            CHECK(e->name == ours.begin()->second);
        }
    }
}

namespace {

// Every record of a counting thread, in order, as text.
struct TreeSink : CountingSink {
    std::vector<std::string> order;
    void on_calls(uint32_t stream, const reader::CallRecord* r, size_t n) override {
        for (size_t i = 0; i < n; ++i)
            order.push_back(r[i].exit ? fmt::format("exit@{}", r[i].ticks)
                                      : fmt::format("enter {}@{}", r[i].fn, r[i].ticks));
        reader::EventSink::on_calls(stream, r, n);
    }
    void on_sample(uint32_t, const reader::SampleRecord& s) override {
        order.push_back(s.at_node ? fmt::format("sample {}@{} cpu {} own {} node {}", s.count,
                                                s.ticks, s.cpu_ns, s.own_ns, s.node)
                                  : fmt::format("sample {}@{}", s.count, s.ticks));
    }
    void on_counting(uint32_t, uint64_t ticks, uint64_t cpu_ns) override {
        order.push_back(fmt::format("counting@{} cpu {}", ticks, cpu_ns));
    }
    void on_call_node(uint32_t, uint32_t node, uint32_t parent, uint32_t fn) override {
        order.push_back(fmt::format("node {} = {} + {}", node, parent, fn));
    }
    void on_call_counts(uint32_t, uint32_t first, const std::vector<uint64_t>& calls) override {
        order.push_back(fmt::format("counts {}: {}", first, fmt::join(calls, " ")));
    }
    void on_position(uint32_t, uint32_t node) override {
        order.push_back(fmt::format("position {}", node));
    }
};

} // namespace

TEST_CASE("a counting thread's call tree records (1.9) read in order, their samples at a node") {
    std::string path = test::temp_path("counted.trace");
    counted_trace().save(path);
    TreeSink sink;
    reader::TraceReader r(path);
    const reader::TraceInfo& info = r.read(sink);
    CHECK(info.finished);
    CHECK(info.minor_unknown_records == 0);
    CHECK(sink.order == std::vector<std::string>{"sample 0@1000", "enter 0@1010",
                                                 "counting@2000 cpu 1000000", "counts 1: 0 3",
                                                 "node 1 = 0 + 0", "node 2 = 1 + 1",
                                                 "sample 1@5000 cpu 4000000 own 0 node 2",
                                                 "counts 3: 5", "node 3 = 2 + 2", "position 3",
                                                 "sample 0@6000 cpu 4500000 own 0 node 1",
                                                 "sample 1@10000 cpu 7000000 own 100000 node 3"});
    const reader::Thread& t = info.threads.at(1);
    CHECK(t.counting);
    CHECK(t.events == 1 + 2 * (3 + 5)); // main's Enter, two per counted call
    CHECK(t.samples == 2);
    CHECK(info.samples == 2);
    CHECK(info.own_samples == 1);
}

// A CallLatency record is updated in place: a process killed in the middle of an update leaves
// it torn (its longest call counted before the sum), and its unfinished trace is still read,
// with the longest call within what the record adds up to. A finished trace's is corruption
// (the next test case).
TEST_CASE(
    "a torn CallLatency record of a killed process's trace is read, its longest call clamped") {
    struct LatencySink : CountingSink {
        std::vector<reader::CallLatencyRecord> records;
        void on_call_latency(uint32_t, uint32_t, const reader::CallLatencyRecord& r) override {
            records.push_back(r);
        }
    };
    TraceBuilder b;
    b.header().flags = 0; // not finished: the process was killed
    b.chunk(1, 0).function(0x1000).counting(0, 0).call_node(1, 0, 0);
    b.call_latency(1, 3, 40, 50, 900, {0, 3});
    std::string path = test::temp_path("torn-latency.trace");
    b.save(path);
    LatencySink sink;
    reader::TraceReader r(path);
    const reader::TraceInfo& info = r.read(sink);
    CHECK(info.incomplete);
    REQUIRE(sink.records.size() == 1);
    CHECK(sink.records[0].calls == 3);
    CHECK(sink.records[0].sum_ticks == 40);
    CHECK(sink.records[0].max_ticks == 40);
    CHECK(sink.records[0].max_end_ticks == 900);
}

TEST_CASE("a counting thread's records that break its rules are errors with their offset") {
    using format::Tag;
    struct Case {
        const char* what;
        std::function<void(TraceBuilder&)> records; // after two functions are defined
        const char* error;
    };
    std::vector<Case> cases = {
        {"a node before counting", [](TraceBuilder& b) { b.call_node(1, 0, 0); },
         "does not count its calls"},
        {"counting twice", [](TraceBuilder& b) { b.counting(0, 0).counting(0, 0); },
         "begins counting its calls twice"},
        {"an Enter after counting", [](TraceBuilder& b) { b.counting(0, 0).enter(0, 1); },
         "after stream 1 began counting"},
        {"an Exit after counting", [](TraceBuilder& b) { b.enter(0, 0).counting(0, 0).exit(1); },
         "after stream 1 began counting"},
        {"an Abandon after counting", [](TraceBuilder& b) { b.counting(0, 0).abandon(1, 0); },
         "after stream 1 began counting"},
        {"nodes out of order", [](TraceBuilder& b) { b.counting(0, 0).call_node(2, 0, 0); },
         "node 2 of stream 1 follows node 0"},
        {"a node its own parent", [](TraceBuilder& b) { b.counting(0, 0).call_node(1, 1, 0); },
         "has parent 1, not an earlier node"},
        {"a node of an undefined function",
         [](TraceBuilder& b) { b.counting(0, 0).call_node(1, 0, 2); }, "undefined function 2"},
        {"counts that skip nodes", [](TraceBuilder& b) { b.counting(0, 0).call_counts(2, {1}); },
         "do not follow those of nodes up to 0"},
        {"counts that overlap",
         [](TraceBuilder& b) { b.counting(0, 0).call_counts(1, {1}).call_counts(1, {1}); },
         "do not follow"},
        {"a sample in an undefined node",
         [](TraceBuilder& b) { b.counting(0, 0).node_sample(0, 1, 0, 0, 1, 1); },
         "sample in undefined call tree node 1"},
        {"a position in an undefined node",
         [](TraceBuilder& b) { b.counting(0, 0).call_node(1, 0, 0).position(2); },
         "position in undefined call tree node 2"},
        {"two latency records of one node",
         [](TraceBuilder& b) {
             b.counting(0, 0).call_node(1, 0, 0).call_latency(1, 1, 10, 10, 50, {0, 1});
             b.call_latency(1, 1, 10, 10, 50, {0, 1});
         },
         "second call latency record of call tree node 1 of stream 1"},
        {"a latency record of an undefined node",
         [](TraceBuilder& b) {
             b.counting(0, 0).call_latency(1, 1, 10, 10, 50, {0, 1});
         },
         "call latency of undefined call tree node 1"},
        {"a longest call longer than all the calls",
         [](TraceBuilder& b) {
             b.counting(0, 0).call_node(1, 0, 0).call_latency(1, 2, 10, 20, 50, {0, 2});
         },
         "holds a longest call that is not among its calls"},
        {"a longest call that ended before it began",
         [](TraceBuilder& b) {
             b.counting(0, 0).call_node(1, 0, 0).call_latency(1, 2, 30, 20, 5, {0, 2});
         },
         "holds a longest call that is not among its calls"},
        {"a counting thread's sample without its node",
         [](TraceBuilder& b) { b.counting(0, 0).sample(0, 1, 0, 0, 1); }, "malformed record"},
        {"a block of counts cut short",
         [](TraceBuilder& b) {
             b.counting(0, 0).sized(Tag::kCallCounts, payload({1, 2, 0}, {7}));
         },
         "malformed record"},
        {"a block of counts padded by more than 15 bytes",
         [](TraceBuilder& b) {
             b.counting(0, 0).sized(Tag::kCallCounts, payload({1, 1, 16}, {0, 0, 7}));
         },
         "malformed record"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.what);
        TraceBuilder b;
        b.chunk(1, 0).function(0x1000).function(0x2000);
        c.records(b);
        b.thread_end(0);
        b.chunk(0).end_record(100);
        std::string path = test::temp_path("counted-bad.trace");
        b.save(path);
        std::string error = error_of(path);
        CAPTURE(error);
        CHECK(error.find(c.error) != std::string::npos);
        // At the record, in stream 1's chunk (its records from byte 4096 + 64 on).
        size_t at = error.find("corrupt trace at byte ");
        REQUIRE(at != std::string::npos);
        uint64_t offset = std::stoull(error.substr(at + 22));
        CHECK(offset >= 4160);
        CHECK(offset < 4160 + 200);
    }
}

TEST_CASE("packed counting traces keep their call tree records and times (2.3)") {
    std::string raw = test::temp_path("counted-pack.trace"), packed = raw + ".packed";
    counted_trace().save(raw);
    pack::pack_trace(raw, packed, {});
    TreeSink a, p;
    reader::TraceReader(raw).read(a);
    reader::TraceReader packed_reader(packed);
    const reader::TraceInfo& info = packed_reader.read(p);
    CHECK(info.header.major == format::kPackedMajor);
    CHECK(info.header.minor == format::kPackedMinor);
    CHECK(p.order == a.order);
    CHECK(info.threads.at(1).events == 17);
}

// A run's statuses from its parents' records of the children they reaped: the last image of an
// exec chain takes it (the one that exec'd did not end), a pid reused takes the latest parent
// to start before it, and a status profrun knew stays.
TEST_CASE("run processes: exit statuses settled from the parents' reaped children") {
    auto process = [](uint32_t pid, uint32_t ppid, uint64_t start) {
        reader::RunProcess p;
        p.pid = pid;
        p.ppid = ppid;
        p.host = "h";
        p.start_utc_ns = start;
        return p;
    };
    std::vector<reader::RunProcess> ps;
    ps.push_back(process(10, 1, 100)); // the shell, profrun's child
    ps.back().exit_code = 0;
    ps.back().reaped = {{11, "signal 13"}, {12, "exit 3"}, {13, "exit 0"}};
    ps.push_back(process(11, 10, 110)); // sh, exec'd into...
    ps.push_back(process(11, 10, 120)); // ...yes, killed by SIGPIPE
    ps.push_back(process(12, 10, 130)); // exit 3
    ps.push_back(process(13, 10, 140)); // its status known already: kept
    ps.back().exit_code = 7;
    ps.push_back(process(14, 10, 150)); // never reaped (still running)
    ps.push_back(process(20, 1, 90));   // another process with pid 20 earlier...
    ps.back().reaped = {{21, "exit 1"}};
    ps.push_back(process(20, 1, 160)); // ...and the later one, 21's parent
    ps.back().reaped = {{21, "exit 2"}};
    ps.push_back(process(21, 20, 170));
    reader::settle_exit_statuses(ps);
    CHECK_FALSE(ps[1].signal); // exec'd
    CHECK_FALSE(ps[1].exit_code);
    CHECK(ps[2].signal == 13);
    CHECK_FALSE(ps[2].exit_code);
    CHECK(ps[3].exit_code == 3);
    CHECK(ps[4].exit_code == 7);
    CHECK_FALSE(ps[5].exit_code);
    CHECK_FALSE(ps[5].signal);
    CHECK(ps[8].exit_code == 2);
}
