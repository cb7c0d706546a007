// The memory report (MemoryReport, from the replay engine): allocations, frees, the peak, leaks,
// temporaries and mismatched releases, per allocation site.
#include "unit/analysis/analysis_support.hpp"
#include "support/capture.hpp"

#include "analysis/model/diff.hpp"
#include "render/memory_report.hpp"
#include "render/render.hpp"

#include <cstdio>
#include <cstdlib>
#include <functional>

using namespace prof;
using namespace prof::test;

namespace {

void put_uleb(std::vector<uint8_t>& p, uint64_t v) {
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        p.push_back(b | (v ? 0x80 : 0));
    } while (v);
}
void put_sleb(std::vector<uint8_t>& p, int64_t v) {
    for (;;) {
        uint8_t b = v & 0x7f;
        v >>= 7;
        bool done = (v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40));
        p.push_back(done ? b : b | 0x80);
        if (done) return;
    }
}

// Writes one thread's memory records with their time and pointer deltas.
struct MemoryWriter {
    TraceBuilder& b;
    uint64_t t = 0;
    int64_t ptr = 0;
    void alloc(uint64_t at, int64_t p, uint64_t size, uint64_t stack, format::AllocKind kind) {
        std::vector<uint8_t> r;
        put_uleb(r, at - t);
        put_sleb(r, p - ptr);
        put_uleb(r, size);
        put_uleb(r, stack);
        r.push_back(uint8_t(kind));
        b.sized(format::Tag::kAlloc, r);
        t = at, ptr = p;
    }
    void free(uint64_t at, int64_t p, format::FreeKind kind) {
        std::vector<uint8_t> r;
        put_uleb(r, at - t);
        put_sleb(r, p - ptr);
        r.push_back(uint8_t(kind));
        b.sized(format::Tag::kFree, r);
        t = at, ptr = p;
    }
    void stack(uint64_t id, std::vector<uint64_t> pcs) {
        std::vector<uint8_t> r;
        put_uleb(r, id);
        put_uleb(r, pcs.size());
        for (uint64_t pc : pcs)
            for (int i = 0; i < 8; ++i) r.push_back(uint8_t(pc >> (8 * i)));
        b.sized(format::Tag::kStack, r);
    }
};


// One thread, times in ns; stack 1 is work <- main, stack 2 is main alone.
//   1000 malloc 100 (s1)   freed at 1100 by free: temporary
//   2000 new[] 200 (s2)    freed at 4000 by delete: a mismatch
//   3000 malloc 50 (s1)    never freed: a leak
//   5000 malloc 400 (s2)   the peak, 450 bytes live; freed at 6000: temporary
//   7000 free of a pointer never allocated
std::string memory_trace() {
    using format::AllocKind;
    using format::FreeKind;
    const int64_t p1 = 0x10000, p2 = 0x20000, p3 = 0x30000, p4 = 0x40000;
    TraceBuilder b;
    b.chunk(1, 0).function(0x1000).enter(0, 0);
    MemoryWriter w{b};
    w.stack(1, {0x2000, 0x1000});
    w.stack(2, {0x1000});
    w.alloc(1000, p1, 100, 1, AllocKind::kMalloc);
    w.free(1100, p1, FreeKind::kFree);
    w.alloc(2000, p2, 200, 2, AllocKind::kNewArray);
    w.alloc(3000, p3, 50, 1, AllocKind::kMalloc);
    w.free(4000, p2, FreeKind::kDelete);
    w.alloc(5000, p4, 400, 2, AllocKind::kMalloc);
    w.free(6000, p4, FreeKind::kFree);
    w.free(7000, 0xdead0, FreeKind::kFree);
    b.exit(1000);
    b.chunk(0);
    b.symbol(0x1000, "main", "/src/app.cpp", 3).symbol(0x2000, "work", "/src/app.cpp", 9);
    b.end_record(10000);
    return save_trace(b, "memory_report.trace");
}

std::string fmt_stack(const std::vector<std::string>& s) {
    std::string out;
    for (const std::string& f : s) out += f + ";";
    return out;
}

const analysis::MemorySite& site(const analysis::MemoryReport& m, size_t frames) {
    for (const analysis::MemorySite& s : m.sites)
        if (s.stack.size() == frames) return s;
    FAIL("no site of " << frames << " frames");
    return m.sites.front();
}

} // namespace

TEST_CASE("memory report: counts, bytes, peak, leaks, temporaries, unknown frees") {
    analysis::Session s;
    s.add_trace(memory_trace());
    const analysis::MemoryReport& m = s.memory();
    CHECK(m.present);
    CHECK(m.allocations == 4);
    CHECK(m.frees == 4);
    CHECK(m.unknown_frees == 1);
    CHECK(m.bytes_allocated == 750);
    CHECK(m.temporary == 2);
    CHECK(m.peak_heap == 450);
    CHECK(m.peak_heap_time == approx(5000e-9));
    CHECK(m.leaked_bytes == 50);
    CHECK(m.leaked_blocks == 1);
    CHECK(m.late_events == 0);
}

TEST_CASE("memory report: per site, named by its frames, a mismatch at its site") {
    analysis::Session s;
    s.add_trace(memory_trace());
    const analysis::MemoryReport& m = s.memory();
    REQUIRE(m.sites.size() == 2);
    const analysis::MemorySite& in_work = site(m, 2);
    CHECK(in_work.stack[0].name == "work");
    CHECK(in_work.stack[1].name == "main");
    CHECK(in_work.allocations == 2);
    CHECK(in_work.bytes == 150);
    CHECK(in_work.temporary == 1);
    CHECK(in_work.peak_bytes == 50);
    CHECK(in_work.leaked_bytes == 50);
    CHECK(in_work.leaked_blocks == 1);
    const analysis::MemorySite& in_main = site(m, 1);
    CHECK(in_main.stack[0].name == "main");
    CHECK(in_main.allocations == 2);
    CHECK(in_main.bytes == 600);
    CHECK(in_main.temporary == 1);
    CHECK(in_main.peak_bytes == 400);
    CHECK(in_main.leaked_bytes == 0);

    REQUIRE(m.mismatches.size() == 1);
    CHECK(m.mismatches[0].allocated_with == "new[]");
    CHECK(m.mismatches[0].freed_with == "delete");
    CHECK(m.mismatches[0].count == 1);
    CHECK(&m.sites.at(m.mismatches[0].site) == &in_main);

    // The heap over time reaches the peak.
    REQUIRE_FALSE(m.heap_timeline.empty());
    double top = 0;
    for (const auto& [t, bytes] : m.heap_timeline) top = std::max(top, bytes);
    CHECK(top == 450);
}

// The trace of memory_trace with its records after 3000 ns in a chunk of their own, opened at
// 3500 ns and cut short (a copy interrupted inside it): the blocks live at the cut (the new[]
// block of 200 bytes, freed after it, and the leak of 50) are of unknown fate, and nothing is
// counted as leaked. A second thread's chunk, opened before and read whole, allocates at
// 5000 ns, after the time up to which the file holds the run: that is left out (its release
// could have been in the chunk cut off).
TEST_CASE("memory report: blocks live where a trace is cut short are unknown, not leaked") {
    using format::AllocKind;
    using format::FreeKind;
    const int64_t p1 = 0x10000, p2 = 0x20000, p3 = 0x30000;
    TraceBuilder b;
    b.chunk(0);
    b.symbol(0x1000, "main", "/src/app.cpp", 3).symbol(0x2000, "work", "/src/app.cpp", 9);
    b.end_record(10000);
    b.chunk(1, 0, 1).function(0x1000).enter(0, 0);
    MemoryWriter w{b};
    w.stack(1, {0x2000, 0x1000});
    w.stack(2, {0x1000});
    w.alloc(1000, p1, 100, 1, AllocKind::kMalloc);
    w.free(1100, p1, FreeKind::kFree);
    w.alloc(2000, p2, 200, 2, AllocKind::kNewArray);
    w.alloc(3000, p3, 50, 1, AllocKind::kMalloc);
    b.chunk(2, 0, 2);
    MemoryWriter other{b};
    other.stack(1, {0x1000});
    other.alloc(5000, 0x50000, 1000, 1, AllocKind::kMalloc);
    b.chunk(1, 3000, 3500);
    MemoryWriter later{b, 3000};
    later.free(4000, p2, FreeKind::kDelete);
    b.exit(6000);
    std::vector<uint8_t> whole = b.bytes();
    std::string path = temp_path("memory-cut.trace");
    // Cut inside the last chunk's first record (the free at 4000 ns).
    const size_t last_chunk = format::kHeaderSize + 3 * format::kMinChunkSize;
    TraceBuilder::save(
        path, std::vector<uint8_t>(whole.begin(), whole.begin() + long(last_chunk + 64 + 2)));
    analysis::Session s;
    s.add_trace(path);
    const analysis::MemoryReport& m = s.memory();
    CHECK(s.traces().at(0).partial);
    CHECK(s.traces().at(0).read_up_to_ticks == 3500);
    CHECK(m.partial);
    CHECK(m.allocations == 3);
    CHECK(m.frees == 1);
    CHECK(m.leaked_bytes == 0);
    CHECK(m.leaked_blocks == 0);
    CHECK(m.unknown_bytes == 250);
    CHECK(m.unknown_blocks == 2);
    CHECK(site(m, 2).unknown_bytes == 50);
    CHECK(site(m, 2).unknown_blocks == 1);
    CHECK(site(m, 1).unknown_bytes == 200);
    CHECK(site(m, 2).leaked_blocks == 0);
    // Rendered: the summary says how much is of unknown fate, and the sites that hold it.
    std::string text = capture([&](std::FILE* f) { render::print_memory(f, m, {}); });
    CHECK(text.find("leaked: 0 B in 0 blocks   unknown: 250 B in 2 blocks (live where the "
                    "trace is cut)\n") != std::string::npos);
    CHECK(text.find("FATE UNKNOWN (LIVE WHERE THE TRACE IS CUT)\n  200 B of unknown fate in 1 "
                    "block\n") != std::string::npos);
    std::string json = capture([&](std::FILE* f) { render::print_memory_json(f, m, {}); });
    CHECK(json.find("\"unknown_frees\": 0, \"partial\": true, \"unknown_bytes\": 250, "
                    "\"unknown_blocks\": 2}") != std::string::npos);

    // The whole file: the leaks are leaks, and no field of a cut trace appears.
    std::string whole_path = temp_path("memory-whole.trace");
    TraceBuilder::save(whole_path, whole);
    analysis::Session ws;
    ws.add_trace(whole_path);
    CHECK_FALSE(ws.memory().partial);
    CHECK(ws.memory().leaked_blocks == 2);
    CHECK(ws.memory().allocations == 4);
    CHECK(ws.memory().unknown_blocks == 0);
    std::string whole_json =
        capture([&](std::FILE* f) { render::print_memory_json(f, ws.memory(), {}); });
    CHECK(whole_json.find("unknown_blocks") == std::string::npos);
    std::string whole_text =
        capture([&](std::FILE* f) { render::print_memory(f, ws.memory(), {}); });
    CHECK(whole_text.find("unknown") == std::string::npos);
}

// The runtime's RSS timer (format 1.11): Rss records in the process stream, timed from their
// chunk's base_ticks (the Meta records between them take no part in the chain), the first
// chunk ahead of the thread records they span. Each reading gets the heap live at its moment.
TEST_CASE("memory report: the RSS timer's readings in the process stream, with the heap") {
    using format::AllocKind;
    TraceBuilder b;
    b.chunk(0, 500, 500).meta("memory_profiler", "1").rss(100, 4096); // 600 ns
    b.meta("exe", "/bin/app").rss(400, 8192);                         // 1000 ns
    b.chunk(1, 0, 700).function(0x1000).enter(0, 0);
    MemoryWriter w{b};
    w.alloc(900, 0x10000, 100, 0, AllocKind::kMalloc);
    w.alloc(1500, 0x20000, 300, 0, AllocKind::kMalloc);
    w.free(2500, 0x10000, format::FreeKind::kFree);
    b.exit(1000);
    // The process stream's next chunk: from its previous Rss record's time on.
    b.chunk(0, 1000, 3000).rss(1000, 12288).rss(1000, 8192); // 2000, 3000 ns
    b.symbol(0x1000, "main", "/src/app.cpp", 3).end_record(10000);
    std::string path = save_trace(b, "memory_rss_timer.trace");
    analysis::Session s;
    s.add_trace(path);
    CHECK(s.traces().at(0).minor_unknown_records == 0);
    const analysis::MemoryReport& m = s.memory();
    std::vector<double> t;
    std::vector<uint64_t> heap, rss;
    for (const analysis::MemoryPoint& p : m.timeline) {
        t.push_back(p.t);
        heap.push_back(p.heap);
        rss.push_back(p.rss);
    }
    REQUIRE(t.size() == 4);
    CHECK(t[0] == approx(600e-9));
    CHECK(t[1] == approx(1000e-9));
    CHECK(t[2] == approx(2000e-9));
    CHECK(t[3] == approx(3000e-9));
    CHECK(heap == std::vector<uint64_t>{0, 100, 400, 300});
    CHECK(rss == std::vector<uint64_t>{4096, 8192, 12288, 8192});
    CHECK(m.peak_rss == 12288);
    CHECK(m.allocations == 2); // the readings change no other figure
    CHECK(m.peak_heap == 400);
    CHECK(s.profile().threads.size() == 1);
    // JSON: the points in order, without a pid (one process).
    std::string json = capture([&](std::FILE* f) { render::print_memory_json(f, m, {}); });
    CHECK(json.find("\"timeline\": [\n    {\"t\": 0.000001, \"heap\": 0, \"rss\": 4096},\n"
                    "    {\"t\": 0.000001, \"heap\": 100, \"rss\": 8192},\n    {\"t\": 0.000002, "
                    "\"heap\": 400, \"rss\": 12288},\n    {\"t\": 0.000003, \"heap\": 300, "
                    "\"rss\": 8192}\n  ]\n}\n") != std::string::npos);
}

TEST_CASE("memory report: off in the session's options, no allocation replayed") {
    analysis::Session s(analysis::SessionOptions{true, false, {}, nullptr});
    s.add_trace(memory_trace());
    CHECK(s.memory().allocations == 0);
    CHECK(s.profile().functions.size() == 1);
}

TEST_CASE("memory diff: sites matched by their frames, per run") {
    analysis::Session a, b;
    a.add_trace(memory_trace());
    b.add_trace(memory_trace());
    b.add_trace(memory_trace());
    analysis::views::MemoryDiffOptions o;
    o.fail_above = 0;
    analysis::views::MemoryDiffResult d =
        analysis::views::diff_memory({a.memory()}, {b.memory()}, o);
    // The second set read the same run twice into one report: twice the numbers.
    CHECK(d.base_total.allocations == 4);
    CHECK(d.base_total.bytes == 750);
    CHECK(d.new_total.bytes == 1500);
    REQUIRE(d.rows.size() == 2);
    CHECK(d.failed());
    INFO(fmt_stack(d.rows[0].stack));
    CHECK(d.rows[0].stack == std::vector<std::string>{"main"}); // +600 bytes, the largest
    CHECK(d.rows[0].change == 600);

    d = analysis::views::diff_memory({a.memory()}, {a.memory()}, o);
    CHECK_FALSE(d.failed());
    CHECK(d.rows.at(0).change == 0);
}
