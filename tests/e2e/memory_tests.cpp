// End to end for the memory profiler: unmodified programs under libprofmem.so, exact counts
// per site, leaks, temporaries, mismatches, fork, the application's own allocator, and one
// trace with calls and allocations together.
#include "render/memory_report.hpp"
#include "analysis/model/lines.hpp"
#include "analysis/engine/session.hpp"
#include "analysis/model/profile.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>
#include <sys/stat.h>

using namespace prof;
using prof::test::run;
using prof::test::temp_path;

namespace {

struct Totals {
    uint64_t allocations = 0, bytes = 0, temporary = 0, leaked_bytes = 0, leaked_blocks = 0;
};

// Sums the sites whose stack has a frame named `function` (or `function(...)`).
Totals sites_through(const analysis::MemoryReport& m, const std::string& function) {
    Totals t;
    for (const auto& s : m.sites) {
        bool through = false;
        for (const auto& f : s.stack)
            through |= f.name == function || f.name.rfind(function + "(", 0) == 0;
        if (!through) continue;
        t.allocations += s.allocations;
        t.bytes += s.bytes;
        t.temporary += s.temporary;
        t.leaked_bytes += s.leaked_bytes;
        t.leaked_blocks += s.leaked_blocks;
    }
    return t;
}

analysis::MemoryReport memory_of(const std::string& trace) {
    analysis::Session pb;
    pb.add_trace(trace);
    return pb.memory();
}

} // namespace

// libprofmem.so interposes malloc with LD_PRELOAD, as ASan and TSan do themselves: the memory
// profiler cannot run in a sanitizer build (cmake/sanitizers.cmake), so its tests are skipped.
#ifdef PROF_SANITIZER_BUILD
TEST_SUITE_BEGIN("memory profiler" * doctest::skip(true));
#endif

TEST_CASE("every allocation entry point from two threads: exact counts, bytes, leaks") {
    std::string trace = temp_path("alloc-pattern.trace");
    auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_ALLOC_PATTERN});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out == "pattern bytes 4410\n");
    analysis::MemoryReport m = memory_of(trace);
    REQUIRE(m.present);
    Totals t = sites_through(m, "pattern()");
    CHECK(t.allocations == 2 * 35);
    CHECK(t.bytes == 2 * 4410);
    CHECK(t.temporary == 2 * 34);
    CHECK(t.leaked_bytes == 2000);
    CHECK(t.leaked_blocks == 2);
    Totals leak = sites_through(m, "leaky()");
    CHECK(leak.leaked_bytes == 2000);
    // The mismatches, with the site that allocated.
    REQUIRE(m.mismatches.size() == 2);
    bool new_free = false, array_delete = false;
    for (const auto& mm : m.mismatches) {
        CHECK(mm.count == 1);
        CHECK(m.sites[mm.site].stack.at(0).name == "mismatches()");
        new_free |= mm.allocated_with == "new" && mm.freed_with == "free";
        array_delete |= mm.allocated_with == "new[]" && mm.freed_with == "delete";
    }
    CHECK(new_free);
    CHECK(array_delete);
    CHECK(m.allocations >= 74);
    CHECK(m.peak_heap >= 2000);
    CHECK(m.peak_rss > 0);
}

TEST_CASE("profreport --memory: summary, sections and JSON fields") {
    std::string trace = temp_path("alloc-pattern-cli.trace");
    REQUIRE(run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_ALLOC_PATTERN}).exit_code == 0);
    auto text = run({PROFREPORT, "--memory", trace});
    CHECK(text.exit_code == 0);
    CHECK(text.out.rfind("calls to allocation functions: ", 0) == 0);
    for (const char* part : {"peak heap: ", "peak RSS: ", "leaked: ", "MOST CALLS TO ALLOCATION FUNCTIONS",
                             "PEAK MEMORY CONSUMERS", "MEMORY LEAKED", "MOST TEMPORARY ALLOCATIONS",
                             "allocated with new and released with free", "at leaky()"})
        CHECK_MESSAGE(text.out.find(part) != std::string::npos, part);
    auto json = run({PROFREPORT, "--memory", "--format", "json", trace});
    for (const char* key : {"\"summary\": {\"allocations\": ", "\"frees\": ", "\"temporary_allocations\": ",
                            "\"bytes_allocated\": ", "\"peak_heap\": ", "\"peak_rss\": ", "\"leaked_bytes\": ",
                            "\"leaked_blocks\": ", "\"sites\": [", "\"stack\": [{\"name\": ", "\"peak_bytes\": "})
        CHECK_MESSAGE(json.out.find(key) != std::string::npos, key);
    auto none = run({PROFREPORT, "--memory", temp_path("alloc-pattern-cli.trace")});
    CHECK(none.exit_code == 0);
}

TEST_CASE("fork under the memory profiler: the child writes its own trace") {
    std::string trace = temp_path("alloc-fork.trace");
    auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_ALLOC_PATTERN, "fork"});
    REQUIRE(r.exit_code == 0);
    std::string child = test::child_trace(trace);
    REQUIRE(!child.empty());
    CHECK(sites_through(memory_of(child), "child_allocs()").allocations == 2);
    CHECK(sites_through(memory_of(child), "child_allocs()").bytes == 30);
    CHECK(sites_through(memory_of(trace), "child_allocs()").allocations == 0);
}

// The child's trace is a new file: a stack the parent's thread had already described must be
// described again there (it was an empty stack in the child's report).
TEST_CASE("fork: the child's allocations at the parent's call site keep their stack") {
    for (const char* unwind : {"fp", "dwarf"}) {
        CAPTURE(unwind);
        std::string trace = temp_path(std::string("short-fork-") + unwind + ".trace");
        auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_SHORT_LIVES, "fork"},
                     {{"PROF_MEM_UNWIND", unwind}});
        REQUIRE(r.exit_code == 0);
        std::string child = test::child_trace(trace);
        REQUIRE(!child.empty());
        CHECK(sites_through(memory_of(trace), "repeat_alloc").allocations == 3);
        Totals in_child = sites_through(memory_of(child), "repeat_alloc");
        CHECK(in_child.allocations == 3);
        CHECK(in_child.bytes == 300);
    }
}

// A thread's last chunk gives its unused pages back to the file system, and its memory
// profiler tables are unmapped: 300 threads that allocate once each must not take 300
// chunks (256 KiB each by default) of disk.
TEST_CASE("short-lived threads: exact counts, and no whole chunk of disk per thread") {
    std::string trace = temp_path("short-threads.trace");
    auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_SHORT_LIVES, "threads", "300"});
    REQUIRE(r.exit_code == 0);
    Totals t = sites_through(memory_of(trace), "thread_alloc");
    CHECK(t.allocations == 300);
    CHECK(t.bytes == 30000);
    CHECK(t.temporary == 300);
    struct stat st {};
    REQUIRE(stat(trace.c_str(), &st) == 0);
    uint64_t on_disk = uint64_t(st.st_blocks) * 512;
    CAPTURE(on_disk);
    CHECK(on_disk < 300ull * 32 * 1024); // was 300 x 256 KiB
}

// Code built without frame pointers may leave anything in rbp: a frame-pointer walk must keep
// only return addresses into code (it reported text, heap pointers and canaries as frames).
TEST_CASE("frame-pointer stacks: a bogus frame (rbp pointing at data) is not reported") {
#if defined(__x86_64__)
    std::string trace = temp_path("bogus-frame.trace");
    auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_SHORT_LIVES, "bogus"},
                 {{"PROF_MEM_UNWIND", "fp"}});
    REQUIRE(r.exit_code == 0);
    analysis::MemoryReport m = memory_of(trace);
    uint64_t found = 0;
    for (const auto& site : m.sites) {
        bool through = false;
        for (const auto& f : site.stack) through |= f.name == "bogus_frame_alloc";
        if (!through) continue;
        found += site.allocations;
        CHECK(site.bytes == 64);
        for (const auto& f : site.stack) {
            CAPTURE(f.name);
            CHECK(!f.module.empty()); // every frame is in a loaded object
            CHECK(f.name.find("0x2e336e6f68747970") == std::string::npos);
        }
    }
    CHECK(found == 1);
#endif
}

TEST_CASE("the application keeps its own allocator and malloc_usable_size works") {
    auto plain = run({PROF_TEST_OWN_ALLOCATOR});
    auto traced = run({PROFRUN, "--mem", "-q", "-o", temp_path("own.trace"), "--", PROF_TEST_OWN_ALLOCATOR});
    CHECK(plain.out == "reached=5 usable_ok=1\n");
    CHECK(traced.out == plain.out);
    CHECK(traced.exit_code == 0);
}

// With the call profiler, an allocation's stack is its thread's call path: from the Enter and
// Exit records, or, once the thread counts its calls (1.9), from the Position records before
// the allocations. Every site, by its named frames, the same in both.
TEST_CASE("allocation stacks from the call profiler: the same counted as traced") {
    std::map<std::vector<std::string>, std::pair<uint64_t, uint64_t>> sites[2];
    for (int counting = 0; counting < 2; ++counting) {
        std::string trace = temp_path("alloc-pattern-fi-" + std::to_string(counting) + ".trace");
        auto r =
            run({PROFRUN, "--mem", "-q", "--no-pack", "--time", counting ? "sampled" : "traced",
                 "-o", trace, "--", PROF_TEST_ALLOC_PATTERN_FI});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        analysis::Session pb;
        pb.add_trace(trace);
        CHECK(pb.profile().time.untimed_traces == uint64_t(counting));
        const analysis::MemoryReport& m = pb.memory();
        for (const auto& s : m.sites) {
            std::vector<std::string> frames;
            for (const auto& f : s.stack) frames.push_back(f.name);
            sites[counting][frames].first += s.allocations;
            sites[counting][frames].second += s.bytes;
        }
        Totals t = sites_through(m, "pattern()");
        CHECK(t.allocations == 2 * 35);
        CHECK(t.bytes == 2 * 4410);
    }
    // Stacks two frames deep from call paths (the threads' pattern() starts from code without
    // hooks), and the libstdc++ pool from before main, unwound.
    using Frames = std::vector<std::string>;
    CHECK(sites[0].count(Frames{"leaky()", "pattern()"}) == 1);
    CHECK(sites[0].count(Frames{"mismatches()", "main"}) == 1);
    CHECK(sites[0].size() == 5);
    CHECK(sites[1] == sites[0]);
}

TEST_CASE("calls and allocations in one trace: stacks from the call profiler") {
    std::string trace = temp_path("naming-mem.trace");
    REQUIRE(run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_NAMING}).exit_code == 0);
    analysis::Session pb;
    pb.add_trace(trace);
    analysis::Profile p = pb.profile();
    CHECK(p.total_calls > 50); // the call profile is there
    // std::string's heap buffer is allocated inside instrumented calls made by main.
    Totals t = sites_through(pb.memory(), "main");
    CHECK(t.allocations >= 1);
}

TEST_CASE("blocks freed by another thread are matched in time order, not file order") {
    std::string trace = temp_path("cross-thread.trace");
    REQUIRE(run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_CROSS_THREAD}).exit_code == 0);
    analysis::MemoryReport m = memory_of(trace);
    Totals t = sites_through(m, "allocate");
    CHECK(t.allocations == 1000);
    CHECK(t.leaked_blocks == 0);
    CHECK(m.unknown_frees == 0);
    CHECK(m.peak_heap >= 100000);
    // The program's 100 blocks, plus libstdc++'s emergency pool (71 KiB, live until the end)
    // and a few start-up buffers.
    CHECK(m.peak_heap < 100000 + 80 * 1024);
}

// The peak is a moment that happened: a block released by one thread before another thread
// allocates (the turn handed over through a mutex and a condition variable) is replayed before
// that allocation, whether the threads share a CPU or run on two (whose clocks are read
// apart). Each turn's 1 MiB block is the only one live then; the threads' own blocks (their
// start-up allocations, still live at the end) are the rest of the peak.
TEST_CASE("two threads taking turns with a 1 MiB block: the peak is one block, every run") {
    std::string trace = temp_path("turns.trace");
    for (std::string placement : {"together", "apart"}) {
        for (int i = 0; i < 25; ++i) {
            CAPTURE(placement);
            CAPTURE(i);
            auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_TURNS, placement});
            if (r.exit_code == 3) break; // one CPU: nothing to run apart
            REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            analysis::MemoryReport m = memory_of(trace);
            CHECK(m.allocations == 400 + m.leaked_blocks);
            CHECK(m.frees == 400);
            CHECK(m.peak_heap == (uint64_t(1) << 20) + m.leaked_bytes);
        }
    }
}

// A library opened with RTLD_DEEPBIND looks malloc and free up in its own dependencies first:
// the C library's, past the preloaded interposers. Its references are pointed back at them after
// dlopen, so its calls count exactly, whether they are bound at load (RTLD_NOW) or at their
// first call (RTLD_LAZY), and whether it is opened by path or by a bare name found through the
// program's run path (which dlopen searches for the object that called it).
TEST_CASE("a library opened with RTLD_DEEPBIND: its allocator calls are counted exactly") {
    std::string trace = temp_path("deep.trace");
    for (std::string library : {PROF_TEST_DEEP_LIB, PROF_TEST_DEEP_LIB_NAME})
        for (std::string binding : {"now", "lazy"}) {
            CAPTURE(library);
            CAPTURE(binding);
            auto r = run(
                {PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_DEEP_BIND, library, binding});
            REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            analysis::MemoryReport m = memory_of(trace);
            Totals in_library;
            for (const char* fn : {"deep_make", "deep_zeroed", "deep_grow"}) {
                Totals t = sites_through(m, fn);
                in_library.allocations += t.allocations;
                in_library.bytes += t.bytes;
                in_library.leaked_blocks += t.leaked_blocks;
                in_library.leaked_bytes += t.leaked_bytes;
            }
            // 3 malloc(1000), 2 calloc of 2000, a realloc to 3000; one 1000-byte block left.
            CHECK(in_library.allocations == 6);
            CHECK(in_library.bytes == 10000);
            CHECK(in_library.leaked_blocks == 1);
            CHECK(in_library.leaked_bytes == 1000);
            // Every free in the library matched its block, the program's own 500 bytes too.
            CHECK(m.unknown_frees == 0);
            size_t own = 0;
            for (const analysis::MemorySite& site : m.sites)
                if (!site.stack.empty() && site.stack[0].name == "main" && site.bytes == 500) {
                    ++own;
                    CHECK(site.allocations == 1);
                    CHECK(site.leaked_blocks == 0);
                }
            CHECK(own == 1);
        }
}

// pthread_getattr_np calls realloc while it holds the thread's lock: the profiler, recording
// that realloc as the thread's first allocation, must not call it again (it used to, to find
// the thread's stack, and the thread waited for itself). In both unwinding modes.
TEST_CASE("a thread whose first allocation is inside pthread_getattr_np does not deadlock") {
    for (const char* unwind : {"fp", "dwarf"}) {
        CAPTURE(unwind);
        std::string trace = temp_path(std::string("thread-attr-") + unwind + ".trace");
        auto r = run({"/usr/bin/timeout", "60", PROFRUN, "--mem", "-q", "-o", trace, "--",
                      PROF_TEST_THREAD_ATTR},
                     {{"PROF_MEM_UNWIND", unwind}});
        REQUIRE(r.exit_code == 0); // 124: timed out
        CHECK(r.out.find("thread stack: ") == 0);
        Totals t = sites_through(memory_of(trace), "worker");
        CHECK(t.allocations >= 3);
        CHECK(t.bytes >= 3000);
        CHECK(t.bytes < 3000 + 1024); // the 3 x 1000 bytes, and pthread_getattr_np's own
    }
}

// A JIT registers its code's unwind tables with __register_frame; the program throws. At the
// first search after a registration libgcc sorts the registered tables, and allocates for it
// while it holds its unwinder's lock: the DWARF unwinder must not ask libgcc about that
// allocation's stack (it waited for the lock forever), and still gives the whole stack.
TEST_CASE("an allocation libgcc makes while it holds its unwinder's lock: no deadlock, whole stack") {
    for (const char* unwind : {"fp", "dwarf"}) {
        CAPTURE(unwind);
        std::string trace = temp_path(std::string("jit-frames-") + unwind + ".trace");
        auto r = run({"/usr/bin/timeout", "60", PROFRUN, "--mem", "-q", "-o", trace, "--",
                      PROF_TEST_JIT_FRAMES},
                     {{"PROF_MEM_UNWIND", unwind}});
        REQUIRE(r.exit_code == 0); // 124: timed out
        CHECK(r.out == "caught 3\n");
        analysis::MemoryReport m = memory_of(trace);
        Totals after = sites_through(m, "jit_after");
        CHECK(after.allocations == 4);
        CHECK(after.bytes == 2800);
        if (std::string(unwind) != "dwarf") continue;
        // libgcc's allocations inside its FDE search reach back to the throw.
        Totals search = sites_through(m, "_Unwind_Find_FDE");
        if (search.allocations == 0) MESSAGE("this libgcc does not allocate while it searches");
        uint64_t complete = 0;
        for (const auto& site : m.sites) {
            bool in_search = false, from_throw = false;
            for (const auto& f : site.stack) {
                in_search |= f.name == "_Unwind_Find_FDE";
                from_throw |= f.name.rfind("jit_throw(", 0) == 0;
            }
            if (in_search && from_throw) complete += site.allocations;
        }
        CHECK(complete == search.allocations);
    }
}

// Under the memory profiler each marked line also records the growth of the thread's heap.
// The interposer measures usable sizes only once some line wants them: the program's first
// marked line (line 12, the 800,000,000-byte vector) must see its own allocation too.
TEST_CASE("heap per line under profrun --mem: the first marked line counts its allocation") {
    std::string trace = temp_path("memory-lines-mem.trace");
    auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_SAMPLE_MEMORY_LINES});
    REQUIRE(r.exit_code == 0);
    analysis::Session pb;
    pb.add_trace(trace);
    auto tables = analysis::line_tables(pb.profile());
    auto heap_of = [&](uint32_t line) {
        for (const auto& t : tables)
            for (const auto& row : t.rows)
                if (row.line == line) return row.heap_increment;
        FAIL("no row for line ", line);
        return 0.0;
    };
    double grow = heap_of(12), small = heap_of(13), shrink = heap_of(15);
    CHECK(grow >= 800000000.0); // the block's usable size: a few bytes more
    CHECK(grow < 800000000.0 + 65536);
    CHECK(small >= 8000000.0);
    CHECK(small < 8000000.0 + 65536);
    CHECK(shrink == -grow); // the same block released
}

// An unmodified program dlopens liba (alpha_work leaks 3 x 300 bytes), dlcloses it, dlopens
// libb at the same address (bravo_work leaks 5 x 500 bytes at the same code addresses). The
// preloaded memory profiler has to see the dlclose (libprof.so's wrapper comes after the C
// library in such a process) and the report has to name each stack by the object of its time.
TEST_CASE("dlclose and another library at the same address: leaks named by the object of their time") {
    for (const char* unwind : {"fp", "dwarf"}) {
        CAPTURE(unwind);
        std::string trace = temp_path(std::string("reload-mem-") + unwind + ".trace");
        auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_RELOAD_PLAIN,
                      PROF_TEST_RELOAD_MEM_A, PROF_TEST_RELOAD_MEM_B, "keep"},
                     {{"PROF_MEM_UNWIND", unwind}});
        REQUIRE(r.exit_code == 0);
        if (r.out.find("reused 1") == std::string::npos)
            MESSAGE("the loader did not map libb where liba was: " << r.out);
        analysis::MemoryReport m = memory_of(trace);
        Totals a = sites_through(m, "alpha_work"), b = sites_through(m, "bravo_work");
        CHECK(a.allocations == 3);
        CHECK(a.leaked_blocks == 3);
        CHECK(a.leaked_bytes == 900);
        CHECK(b.allocations == 5);
        CHECK(b.leaked_blocks == 5);
        CHECK(b.leaked_bytes == 2500);
    }
}

// libstdc++ is in a C program's process only for libprof.so, and allocates its exception
// emergency pool (71 KiB) at start: the profiler's memory, not the program's.
TEST_CASE("a C program that allocates nothing: no allocation, no leak from the profiler's own libraries") {
    std::string trace = temp_path("true.trace");
    REQUIRE(run({PROFRUN, "--mem", "-q", "-o", trace, "--", "/bin/true"}).exit_code == 0);
    analysis::MemoryReport m = memory_of(trace);
    CHECK(m.present); // a memory report, of nothing
    CHECK(m.allocations == 0);
    CHECK(m.frees == 0);
    CHECK(m.unknown_frees == 0);
    CHECK(m.peak_heap == 0);
    CHECK(m.leaked_bytes == 0);
    CHECK(m.peak_rss > 0);
    auto text = run({PROFREPORT, "--memory", trace});
    CHECK(text.exit_code == 0);
    CHECK(text.out.find("calls to allocation functions: 0") == 0);
}

// In a C++ program the pool is the program's own: still recorded (and released at finish).
TEST_CASE("a C++ program: libstdc++'s emergency pool is part of its heap") {
    std::string trace = temp_path("cxx-pool.trace");
    REQUIRE(run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_JIT_FRAMES}).exit_code == 0);
    analysis::MemoryReport m = memory_of(trace);
    uint64_t pool = 0;
    for (const auto& s : m.sites)
        if (!s.stack.empty() && s.stack[0].module.find("libstdc++.so") != std::string::npos &&
            s.bytes >= 64 * 1024)
            pool += s.allocations;
    CHECK(pool == 1);
    CHECK(m.leaked_bytes < 64 * 1024);
}

TEST_CASE("profreport --memory --plot: heap and RSS over time as a well-formed SVG") {
    std::string trace = temp_path("plot.trace"), svg = temp_path("plot.svg");
    REQUIRE(run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_ALLOC_PATTERN}).exit_code == 0);
    auto r = run({PROFREPORT, "--memory", "--plot", svg, trace});
    CHECK(r.exit_code == 0);
    CHECK(r.out.empty()); // the picture only, as --flamegraph
    std::string text = test::slurp(svg);
    CHECK(text.rfind("<?xml", 0) == 0);
    CHECK(text.find("heap (live blocks)") != std::string::npos);
    CHECK(text.find("<polyline") != std::string::npos);
    CHECK(text.find("</svg>") != std::string::npos);
    // With -o, the report goes there as well.
    std::string report = temp_path("plot-report.txt");
    auto both = run({PROFREPORT, "--memory", "--plot", svg, "-o", report, trace});
    CHECK(both.exit_code == 0);
    CHECK(test::slurp(report).find("peak heap:") != std::string::npos);
    auto bad = run({PROFREPORT, "--memory", "--plot", "/nonexistent-dir/p.svg", trace});
    CHECK(bad.exit_code == 1);
    CHECK(bad.err.find("cannot write /nonexistent-dir/p.svg") != std::string::npos);
}

TEST_CASE("PROF_MEM_UNWIND=dwarf: the same exact counts, deeper stacks") {
    std::string trace = temp_path("alloc-dwarf.trace");
    auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_ALLOC_PATTERN},
                 {{"PROF_MEM_UNWIND", "dwarf"}});
    REQUIRE(r.exit_code == 0);
    analysis::MemoryReport m = memory_of(trace);
    Totals t = sites_through(m, "pattern()");
    CHECK(t.allocations == 2 * 35);
    CHECK(t.bytes == 2 * 4410);
    CHECK(sites_through(m, "leaky()").leaked_bytes == 2000);
}

TEST_CASE("allocation functions keep errno: unwound stacks, DWARF stacks, shadow-stack stacks") {
    struct Variant {
        const char* name;
        const char* program;
        const char* unwind;
    };
    for (Variant v : {Variant{"fp", PROF_TEST_ERRNO_KEPT, "fp"},
                      Variant{"dwarf", PROF_TEST_ERRNO_KEPT, "dwarf"},
                      Variant{"shadow", PROF_TEST_ERRNO_KEPT_INSTRUMENTED, "fp"}}) {
        CAPTURE(v.name);
        std::string trace = temp_path(std::string("errno-") + v.name + ".trace");
        auto r = run({PROFRUN, "--mem", "--no-pack", "-q", "-o", trace, "--", v.program},
                     {{"PROF_MEM_UNWIND", v.unwind},
                      {"PROF_MEM_RSS_INTERVAL", "1"},
                      {"PROF_CHUNK_SIZE", "65536"}});
        REQUIRE(r.exit_code == 0);
        CHECK(r.out == "calls=630008 errno_changed=0\n");
        // Recorded, not passed through: 60000 + 4 * 7500 passes of three allocations and
        // three releases each (malloc, realloc, new[], calloc; realloc's old block, free,
        // delete[], free), plus each thread's first block.
        analysis::MemoryReport m = memory_of(trace);
        CHECK(sites_through(m, "allocate_at").allocations == 4 * 90000);
    }
}

TEST_CASE(
    "operator new and delete with std::align_val_t: a release of another alignment is a mismatch") {
    // Raw (format 1.4: the records' alignment field) and packed (2.1: MemAligned records).
    for (const char* packing : {"--no-pack", "--pack"}) {
        CAPTURE(packing);
        std::string trace = temp_path(std::string("aligned") + packing + ".trace");
        auto r = run({PROFRUN, "--mem", packing, "-q", "-o", trace, "--", PROF_TEST_ALIGNED_PAIRS});
        REQUIRE(r.exit_code == 0);
        CHECK(r.out == "done\n");
        auto json = run({PROFREPORT, "--memory", "--format", "json", trace});
        REQUIRE(json.exit_code == 0);
        // Only the two mismatched pairs: the matched aligned forms (plain, sized, new[] of an
        // over-aligned type) are not reported.
        size_t reported = 0;
        for (size_t at = json.out.find("\"allocated_with\""); at != std::string::npos;
             at = json.out.find("\"allocated_with\"", at + 1))
            ++reported;
        CHECK(reported == 2);
        CHECK(json.out.find("{\"allocated_with\": \"new(std::align_val_t(64))\", \"freed_with\": "
                            "\"delete\", \"count\": 3") != std::string::npos);
        CHECK(json.out.find("{\"allocated_with\": \"new\", \"freed_with\": "
                            "\"delete(std::align_val_t(32))\", \"count\": 2") != std::string::npos);
        analysis::MemoryReport m = memory_of(trace);
        CHECK(sites_through(m, "matched()").allocations == 4 + 1 + 5);
        CHECK(sites_through(m, "matched()").temporary == 4 + 1 + 5);
    }
}

#ifdef PROF_TEST_MIMALLOC_LINKED
// valgrind memcheck (--run-libc-freeres=no) on the same program: 1,002 allocs, 501 frees (502
// with realloc's), 659,500 bytes allocated, 424,750 bytes in 500 blocks in use at exit.
TEST_CASE("a program linked with mimalloc: its allocations counted exactly") {
    std::string trace = temp_path("mimalloc-linked.trace");
    auto r = run({PROFRUN, "--mem", "-q", "-o", trace, "--", PROF_TEST_MIMALLOC_LINKED});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto j = run({PROFREPORT, "--memory", "--format", "json", trace});
    REQUIRE(j.exit_code == 0);
    CHECK(j.out.find("\"summary\": {\"allocations\": 1002, \"frees\": 501, "
                     "\"temporary_allocations\": 2, \"bytes_allocated\": 659500, "
                     "\"peak_heap\": 599500,") != std::string::npos);
    CHECK(j.out.find("\"leaked_bytes\": 424750, \"leaked_blocks\": 500, \"unknown_frees\": 0}") !=
          std::string::npos);
}

// With marked lines the memory profiler asks the allocator for each block's usable size; the
// runtime's finish at exit allocates from a region of its own (operator new included), whose
// blocks mimalloc's malloc_usable_size would abort on. The counts: the program's malloc and
// free, and libstdc++'s emergency pool (72,704 bytes) with its release at exit, as memcheck.
TEST_CASE("a C++ program linked with mimalloc, with marked lines: it ends, counted exactly") {
    std::string trace = temp_path("mimalloc-marked.trace");
    auto r = run({PROFRUN, "--mem", "-q", "-f", "-o", trace, "--", PROF_TEST_MIMALLOC_MARKED});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.empty());
    auto j = run({PROFREPORT, "--memory", "--format", "json", trace});
    REQUIRE(j.exit_code == 0);
    CHECK(j.out.find("\"summary\": {\"allocations\": 2, \"frees\": 2, "
                     "\"temporary_allocations\": 1, \"bytes_allocated\": 73704, ") !=
          std::string::npos);
    CHECK(j.out.find("\"leaked_bytes\": 0, \"leaked_blocks\": 0, \"unknown_frees\": 0}") !=
          std::string::npos);
    // Its functions are named: the finish's symbol table was written.
    auto lines = run({PROFREPORT, "--lines", trace});
    CHECK(lines.out.find("Function: main() at line") != std::string::npos);
}
#endif

#ifdef PROF_SANITIZER_BUILD
TEST_SUITE_END();
#endif
