// Shared by the render unit tests: one small trace built record by record, whose every time is
// known, replayed by the engine, and a renderer's output captured as a string.
#pragma once

#include "analysis/engine/session.hpp"
#include "analysis/model/call_tree.hpp"
#include "analysis/model/profile.hpp"
#include "support/capture.hpp"
#include "support/json.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_builder.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace prof::test {

// 1 ms in the trace's ticks (1 tick = 1 ns): the times print with three decimals.
inline constexpr uint64_t kMs = 1000000;

// The names of the trace's four functions. Two of them hold what every format must escape:
// markup characters and a comma (b), the folded format's separator and quotes (c).
inline const std::string kB = "b<int>(x, y)";
inline const std::string kC = "c;\"q\"";

// Thread 1: main 0..100 ms calls a 10..40 (which calls c 20..30) and b 50..90 (which calls c
// 60..70 and 75..85). Thread 2: main 0..50 calls a 10..30. Totals: main 2 calls, 150 ms
// cumulative, 60 own; a 2, 50, 40; b 1, 40, 20; c 3, 30, 30. 150 ms in all.
inline std::string render_trace() {
    static const std::string path = [] {
        TraceBuilder b;
        b.chunk(1, 0);
        for (uint64_t f = 1; f <= 4; ++f) b.function(0x1000 * f); // main a b c
        b.enter(0, 0).enter(1, 10 * kMs).enter(3, 10 * kMs).exit(10 * kMs).exit(10 * kMs);
        b.enter(2, 10 * kMs).enter(3, 10 * kMs).exit(10 * kMs).enter(3, 5 * kMs).exit(10 * kMs);
        b.exit(5 * kMs).exit(10 * kMs);
        b.thread_end(0);
        b.chunk(2, 0);
        b.function(0x1000).function(0x2000);
        b.enter(0, 0).enter(1, 10 * kMs).exit(20 * kMs).exit(20 * kMs);
        b.thread_end(0);
        b.chunk(0).meta("exe", "/bin/app").meta("cmdline", "app --run");
        b.symbol(0x1000, "main", "/src/app.cpp", 10).symbol(0x2000, "a", "/src/app.cpp", 20);
        b.symbol(0x3000, kB, "/src/app.cpp", 30).symbol(0x4000, kC, "/src/app.cpp", 40);
        b.end_record(100 * kMs);
        std::string p = temp_path("render.trace");
        b.save(p);
        return p;
    }();
    return path;
}

// One thread, times in ns; stack 1 is work <- main, stack 2 is main alone.
//   1000 malloc 100 (s1)   freed at 1100: temporary
//   3000 malloc 50 (s1)    never freed: a leak
//   5000 malloc 400 (s2)   the peak, 450 bytes live; freed at 6000: temporary
// Site work<-main: 2 allocations, 150 bytes, 50 leaked in 1 block, 50 at the peak; site main:
// 1 allocation, 400 bytes, 400 at the peak. 550 bytes allocated in all.
inline std::string memory_trace() {
    static const std::string path = [] {
        using format::AllocKind;
        using format::FreeKind;
        const int64_t p1 = 0x10000, p3 = 0x30000, p4 = 0x40000;
        TraceBuilder b;
        b.chunk(1, 0).function(0x1000).enter(0, 0);
        b.stack(1, {0x2000, 0x1000}).stack(2, {0x1000});
        b.alloc(1000, p1, 100, 1, AllocKind::kMalloc);
        b.free(100, 0, FreeKind::kFree);
        b.alloc(1900, p3 - p1, 50, 1, AllocKind::kMalloc);
        b.alloc(2000, p4 - p3, 400, 2, AllocKind::kMalloc);
        b.free(1000, 0, FreeKind::kFree);
        b.exit(1000);
        b.thread_end(0);
        b.chunk(0).symbol(0x1000, "main", "/src/app.cpp", 3);
        b.symbol(0x2000, "work<&>", "/src/app.cpp", 9);
        b.end_record(10000);
        std::string p = temp_path("render_memory.trace");
        b.save(p);
        return p;
    }();
    return path;
}


inline std::vector<std::string> lines_of(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

inline size_t count_of(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size()))
        ++n;
    return n;
}

inline analysis::Profile render_profile() {
    analysis::Session s;
    s.add_trace(render_trace());
    return s.profile();
}

inline analysis::views::CallTree render_tree(bool split_threads = false) {
    analysis::Session s;
    s.add_trace(render_trace());
    analysis::views::CallTreeOptions o;
    o.split_threads = split_threads;
    return s.call_tree(o);
}

} // namespace prof::test
