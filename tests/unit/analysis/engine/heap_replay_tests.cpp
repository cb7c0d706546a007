// The heap replay (analysis/engine/heap_replay.hpp) driven directly, record by record: live
// blocks, frees, reallocs, mismatched releases, leaks, the peak and the sites, exact to the byte.
#include "unit/analysis/analysis_support.hpp"
#include "unit/analysis/engine/engine_support.hpp"

#include "analysis/engine/heap_replay.hpp"

#include <cmath>

using namespace prof;
using namespace prof::test;
using format::AllocKind;
using format::FreeKind;

namespace {

// One trace of functions main (0x1000) and work (0x2000), 1 tick per ns; Stack record 1 is
// work called from main, 2 is main alone.
struct Heap {
    reader::TraceInfo info = named_trace_info({"main", "work"});
    reader::AddressHistory history{info};
    analysis::engine::TraceFunctions fns = trace_functions(2);
    analysis::engine::ThreadReplay t; // stream 1
    analysis::engine::HeapReplay heap;

    Heap() {
        heap.begin_trace(0, history, fns);
        heap.on_stack(t, 1, {0x2000, 0x1000});
        heap.on_stack(t, 2, {0x1000});
    }
    void alloc(uint64_t ticks, uint64_t ptr, uint64_t size, uint32_t stack,
               AllocKind kind = AllocKind::kMalloc, uint64_t alignment = 0) {
        heap.on_alloc(t, 1, ticks, ptr, size, stack, kind, alignment);
    }
    void free(uint64_t ticks, uint64_t ptr, FreeKind kind = FreeKind::kFree,
              uint64_t alignment = 0) {
        heap.on_free(t, 1, ticks, ptr, kind, alignment);
    }
    // The end of the trace, its sites named.
    const analysis::MemoryReport& finish() {
        heap.finish_memory(info);
        analysis::FunctionResolver resolver;
        heap.merge_sites({info}, resolver);
        return heap.memory;
    }
};

// The site whose stack names these functions, innermost first.
const analysis::MemorySite& site(const analysis::MemoryReport& m,
                                 const std::vector<std::string>& names) {
    for (const analysis::MemorySite& s : m.sites) {
        std::vector<std::string> stack;
        for (const analysis::MemoryFrame& f : s.stack) stack.push_back(f.name);
        if (stack == names) return s;
    }
    std::string wanted;
    for (const std::string& n : names) wanted += " " + n;
    FAIL("no site" << wanted);
    return m.sites.front();
}

void check_site(const analysis::MemorySite& s, uint64_t allocations, uint64_t bytes,
                uint64_t temporary, uint64_t peak_bytes, uint64_t leaked_bytes,
                uint64_t leaked_blocks) {
    CHECK(s.allocations == allocations);
    CHECK(s.bytes == bytes);
    CHECK(s.temporary == temporary);
    CHECK(s.peak_bytes == peak_bytes);
    CHECK(s.leaked_bytes == leaked_bytes);
    CHECK(s.leaked_blocks == leaked_blocks);
}

} // namespace

TEST_CASE("heap replay: allocations, frees, the peak and the leaks, exact per site") {
    Heap h;
    h.alloc(1000, 0x10000, 100, 1); // work: freed right after, temporary
    h.free(1100, 0x10000);
    h.alloc(2000, 0x20000, 200, 2); // main
    h.alloc(3000, 0x30000, 50, 1);  // work: never freed
    h.free(4000, 0x20000);
    h.alloc(5000, 0x40000, 400, 2); // main: 450 bytes live, the peak; temporary
    h.free(6000, 0x40000);
    h.free(7000, 0x99999); // never allocated
    const analysis::MemoryReport& m = h.finish();
    CHECK(m.present);
    CHECK(m.allocations == 4);
    CHECK(m.frees == 4);
    CHECK(m.bytes_allocated == 750);
    CHECK(m.temporary == 2);
    CHECK(m.peak_heap == 450);
    CHECK(m.peak_heap_time == 5e-6);
    CHECK(m.leaked_bytes == 50);
    CHECK(m.leaked_blocks == 1);
    CHECK(m.unknown_frees == 1);
    CHECK(m.late_events == 0);
    CHECK(m.mismatches.empty());
    REQUIRE(m.sites.size() == 2);
    check_site(site(m, {"work", "main"}), 2, 150, 1, 50, 50, 1);
    check_site(site(m, {"main"}), 2, 600, 1, 400, 0, 0);
    CHECK(site(m, {"main"}).stack[0].file == "/src/app.cpp");
    CHECK(site(m, {"main"}).stack[0].line == 10);
    // One point per change of the heap: the live bytes, the larger of before and after.
    std::vector<std::pair<double, double>> timeline = {
        {1000e-9, 100}, {1100e-9, 100}, {2000e-9, 200}, {3000e-9, 250},
        {4000e-9, 250}, {5000e-9, 450}, {6000e-9, 450}};
    CHECK(m.heap_timeline == timeline);
}

TEST_CASE("heap replay: realloc moves a block, releases that do not match are counted") {
    Heap h;
    h.alloc(1000, 0x10000, 100, 1);
    h.heap.on_realloc(h.t, 1, 2000, 0x10000, 0x20000, 300, 1); // of the latest: temporary
    h.alloc(3000, 0x30000, 64, 1, AllocKind::kNew);
    h.heap.on_realloc(h.t, 1, 4000, 0x30000, 0x40000, 128, 1); // realloc of a new block
    h.free(5000, 0x20000);
    h.alloc(6000, 0x50000, 10, 1);
    h.free(7000, 0x50000, FreeKind::kDelete);          // delete of a malloc block
    h.heap.on_realloc(h.t, 1, 8000, 0, 0x60000, 5, 1); // realloc(nullptr): an allocation only
    const analysis::MemoryReport& m = h.finish();
    CHECK(m.allocations == 6); // each realloc allocates
    CHECK(m.frees == 2);       // a realloc's release is no free
    CHECK(m.bytes_allocated == 100 + 300 + 64 + 128 + 10 + 5);
    CHECK(m.temporary == 3); // 0x10000 and 0x30000 moved, 0x50000 freed, each the latest
    // 100; 300 after the move; 364; 428 after the second move (both at 4000 ns).
    CHECK(m.peak_heap == 428);
    CHECK(m.peak_heap_time == 4000e-9);
    CHECK(m.leaked_bytes == 128 + 5);
    CHECK(m.leaked_blocks == 2);
    CHECK(m.unknown_frees == 0);
    REQUIRE(m.mismatches.size() == 2);
    CHECK(m.mismatches[0].allocated_with == "new");
    CHECK(m.mismatches[0].freed_with == "realloc");
    CHECK(m.mismatches[0].count == 1);
    CHECK(m.mismatches[1].allocated_with == "malloc");
    CHECK(m.mismatches[1].freed_with == "delete");
    CHECK(m.mismatches[1].count == 1);
    REQUIRE(m.sites.size() == 1);
    check_site(m.sites[0], 6, 607, 3, 428, 133, 2);
}

TEST_CASE("heap replay: operator new forms match their delete, alignment included") {
    Heap h;
    h.alloc(1000, 0x10000, 64, 1, AllocKind::kNew, 64);
    h.free(1100, 0x10000, FreeKind::kDelete, 64); // the same alignment: matched
    h.alloc(2000, 0x20000, 64, 1, AllocKind::kNew, 64);
    h.free(2100, 0x20000, FreeKind::kDelete); // no alignment: mismatched
    h.alloc(3000, 0x30000, 32, 2, AllocKind::kNewArray);
    h.free(3100, 0x30000, FreeKind::kDeleteArray);
    h.alloc(4000, 0x40000, 32, 2, AllocKind::kNewArray);
    h.free(4100, 0x40000, FreeKind::kDelete);
    h.alloc(4200, 0x41000, 32, 2, AllocKind::kNewArray);
    h.free(4300, 0x41000, FreeKind::kDelete); // the same pair again: counted, not listed again
    h.alloc(5000, 0x50000, 128, 2, AllocKind::kAligned);
    h.free(5100, 0x50000, FreeKind::kFree);
    const analysis::MemoryReport& m = h.finish();
    CHECK(m.allocations == 6);
    CHECK(m.frees == 6);
    CHECK(m.leaked_blocks == 0);
    CHECK(m.peak_heap == 128);
    REQUIRE(m.mismatches.size() == 2);
    CHECK(m.mismatches[0].allocated_with == "new(std::align_val_t(64))");
    CHECK(m.mismatches[0].freed_with == "delete");
    CHECK(m.mismatches[0].count == 1);
    CHECK(m.sites[m.mismatches[0].site].stack.size() == 2); // work <- main
    CHECK(m.mismatches[1].allocated_with == "new[]");
    CHECK(m.mismatches[1].freed_with == "delete");
    CHECK(m.mismatches[1].count == 2);
    CHECK(m.sites[m.mismatches[1].site].stack.size() == 1); // main
}

TEST_CASE("heap replay: a block freed by another thread earlier in the file, in time order") {
    Heap h;
    analysis::engine::ThreadReplay other; // stream 2
    // Stream 2's free at 2000 ns is read before stream 1's allocation at 1000 ns.
    h.heap.on_free(other, 2, 2000, 0x10000, FreeKind::kFree, 0);
    h.alloc(1000, 0x10000, 100, 2);
    h.alloc(3000, 0x20000, 30, 2);
    const analysis::MemoryReport& m = h.finish();
    CHECK(m.allocations == 2);
    CHECK(m.frees == 1);
    CHECK(m.unknown_frees == 0);
    CHECK(m.leaked_bytes == 30);
    CHECK(m.leaked_blocks == 1);
    CHECK(m.peak_heap == 100);
    CHECK(m.peak_heap_time == 1000e-9);
    CHECK(m.temporary == 0); // the free was another thread's
    std::vector<std::pair<double, double>> timeline = {
        {1000e-9, 100}, {2000e-9, 100}, {3000e-9, 30}};
    CHECK(m.heap_timeline == timeline);
}

TEST_CASE("heap replay: a site without a Stack record is the thread's open frames") {
    Heap h;
    // Another object's code at 0x5000 is also named main, at the same file and line.
    h.info.symbols[0x5000] = reader::Symbol{"main", "", "/src/app.cpp", 10, reader::kNoModule};
    h.heap.on_stack(h.t, 3, {0x5000});
    uint32_t main = h.t.child(0, 0), work = h.t.child(main, 1);
    h.t.stack = {{main, 0}, {work, 0}};
    h.alloc(1000, 0x10000, 10, 0); // work <- main, as Stack record 1 says
    h.alloc(2000, 0x20000, 20, 1);
    h.t.stack.pop_back();
    h.alloc(3000, 0x30000, 40, 0); // main
    h.alloc(4000, 0x40000, 80, 3); // main, at another address
    // A counting thread (format 1.9) allocates at its Position's call path.
    h.t.stack.clear();
    h.t.counting = true;
    h.t.position = work;
    h.alloc(5000, 0x50000, 160, 0);
    const analysis::MemoryReport& m = h.finish();
    REQUIRE(m.sites.size() == 2);
    check_site(site(m, {"work", "main"}), 3, 190, 0, 190, 190, 3);
    check_site(site(m, {"main"}), 2, 120, 0, 120, 120, 2);
    CHECK(m.peak_heap == 310);
}

TEST_CASE("heap replay: resident set size from the records and the trace's peak_rss") {
    Heap h;
    h.heap.on_rss(1, 3000, 4096); // at an allocation of thread 1
    // The runtime's timer, in the process stream: read later, earlier in time (the timeline is
    // in time order).
    h.heap.on_rss(0, 1000, 8192);
    h.info.meta["peak_rss"] = "6000";
    const analysis::MemoryReport& m = h.finish();
    CHECK(m.present);
    CHECK(m.peak_rss == 8192);
    std::vector<std::pair<double, double>> rss = {{1000e-9, 8192}, {3000e-9, 4096}};
    CHECK(m.rss_timeline == rss);
    REQUIRE(m.timeline.size() == 2);
    CHECK(m.timeline[0].rss == 8192);
    CHECK(m.timeline[1].rss == 4096);
    CHECK(m.allocations == 0);
    CHECK(m.heap_timeline.empty());

    Heap meta_only;
    meta_only.info.meta["peak_rss"] = "6000";
    CHECK_FALSE(meta_only.finish().present); // not a trace of the memory profiler
    CHECK(meta_only.heap.memory.peak_rss == 0);
    Heap profiled;
    profiled.info.meta["memory_profiler"] = "1";
    profiled.info.meta["peak_rss"] = "6000";
    CHECK(profiled.finish().present);
    CHECK(profiled.heap.memory.peak_rss == 6000);
}

TEST_CASE("heap replay: a trace read apart taken over, the higher peak kept") {
    Heap first; // trace 0, read here
    first.alloc(1000, 0x10000, 100, 1);
    first.finish();
    Heap second; // trace 1, read by a session of its own (its sites not named there)
    second.alloc(2000, 0x10000, 300, 2);
    second.free(3000, 0x10000);
    second.alloc(4000, 0x20000, 50, 1);
    second.heap.finish_memory(second.info);

    first.heap.absorb(second.heap, 1);
    analysis::FunctionResolver resolver;
    first.heap.merge_sites({first.info, second.info}, resolver);
    const analysis::MemoryReport& m = first.heap.memory;
    CHECK(m.allocations == 3);
    CHECK(m.frees == 1);
    CHECK(m.temporary == 1);
    CHECK(m.bytes_allocated == 450);
    CHECK(m.leaked_bytes == 150);
    CHECK(m.leaked_blocks == 2);
    // The second trace's peak is the higher: the sites' bytes at the peak are its own.
    CHECK(m.peak_heap == 300);
    CHECK(m.peak_heap_time == 2000e-9);
    REQUIRE(m.sites.size() == 2);
    check_site(site(m, {"work", "main"}), 2, 150, 0, 0, 150, 2);
    check_site(site(m, {"main"}), 1, 300, 1, 300, 0, 0);
    std::vector<std::pair<double, double>> timeline = {
        {1000e-9, 100}, {2000e-9, 300}, {3000e-9, 300}, {4000e-9, 50}};
    CHECK(m.heap_timeline == timeline);
}

TEST_CASE("heap replay: each RSS reading is paired with the heap live at its moment") {
    Heap h;
    h.heap.on_rss(0, 500, 1000); // the timer, before any allocation
    // At an allocation: its Rss record comes before its Alloc record, at the same tick (ties
    // replay in file order), so it has the heap before the allocation.
    h.heap.on_rss(1, 1000, 2000);
    h.alloc(1000, 0x10000, 100, 1);
    h.alloc(2000, 0x20000, 300, 2);
    h.heap.on_rss(0, 2500, 3000); // the timer between allocations
    h.heap.on_rss(0, 2600, 3500);
    h.free(3000, 0x10000);
    h.heap.on_rss(0, 3500, 2500);
    h.info.header.pid = 42;
    const analysis::MemoryReport& m = h.finish();
    std::vector<uint64_t> ticks, heap, rss;
    for (const analysis::MemoryPoint& p : m.timeline) {
        ticks.push_back(uint64_t(std::llround(p.t * 1e9)));
        heap.push_back(p.heap);
        rss.push_back(p.rss);
        CHECK(p.pid == 42);
    }
    CHECK(ticks == std::vector<uint64_t>{500, 1000, 2500, 2600, 3500});
    CHECK(heap == std::vector<uint64_t>{0, 0, 400, 400, 300});
    CHECK(rss == std::vector<uint64_t>{1000, 2000, 3000, 3500, 2500});
    CHECK(m.peak_rss == 3500);
    CHECK(m.rss_timeline.size() == m.timeline.size());
}

TEST_CASE("heap replay: a long timeline keeps at most 4000 points and every peak of RSS") {
    Heap h;
    // 10,000 readings of a slow saw, with one spike: the spike and the highest reading of
    // every group the points stand for are kept.
    constexpr uint64_t kReadings = 10000, kSpike = 6789;
    for (uint64_t i = 0; i < kReadings; ++i)
        h.heap.on_rss(0, 1000 + i * 10, i == kSpike ? 1000000 : 4096 + (i % 100));
    const analysis::MemoryReport& m = h.finish();
    CHECK(m.timeline.size() <= analysis::MemoryReport::kMaxTimelinePoints);
    CHECK(m.timeline.size() >= analysis::MemoryReport::kMaxTimelinePoints / 2);
    bool spike = false;
    for (size_t i = 0; i < m.timeline.size(); ++i) {
        spike |= m.timeline[i].rss == 1000000;
        if (i) CHECK(m.timeline[i].t > m.timeline[i - 1].t);
    }
    CHECK(spike);
    CHECK(m.peak_rss == 1000000);
}
