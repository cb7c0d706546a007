// Measures the runtime's own cost per call at start, as cProfile's calibration does, so that
// profreport can subtract it: the instrumented loop of calibration_instrumented.cpp runs with
// the calling thread's events going to a scratch buffer instead of the trace, against the same
// loop built without instrumentation. Results go to the trace as Meta records:
//   overhead_in_ticks   hook time inside a callee's own interval (its tottime grows by this)
//   overhead_out_ticks  hook time a call adds to its caller, outside the callee's interval
//   line_overhead_ticks what a PROF_LINE measures around an empty statement
#include "thread_state.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sys/mman.h>

namespace prof::rt {

void calibration_tree(int depth);

namespace {

__attribute__((noinline)) PROF_NOINSTR void plain_leaf() { __asm__ volatile(""); }

__attribute__((noinline)) PROF_NOINSTR void plain_tree(int depth) {
    if (depth == 0) {
        plain_leaf();
        return;
    }
    plain_tree(depth - 1);
    plain_tree(depth - 1);
}

constexpr int kDepth = 10;
constexpr int kCalls = (1 << (kDepth + 1)) - 1 + (1 << kDepth); // tree calls plus the leaves
constexpr int kRounds = 7;
constexpr size_t kScratch = 1u << 20;

// Durations of the leaf calls in a scratch buffer: the dt of each Exit that directly follows an
// Enter (a call that made no call itself).
PROF_NOINSTR double mean_leaf_ticks(const uint8_t* p, const uint8_t* end) {
    uint64_t sum = 0, n = 0;
    uint8_t prev = 0;
    auto uleb = [&]() {
        uint64_t v = 0;
        for (unsigned shift = 0; p < end && shift < 64; shift += 7) {
            uint8_t b = *p++;
            v |= uint64_t(b & 0x7f) << shift;
            if (!(b & 0x80)) break;
        }
        return v;
    };
    while (p < end) {
        uint8_t tag = *p++;
        if (tag == uint8_t(format::Tag::kFunction)) p += 8;
        else if (tag == uint8_t(format::Tag::kEnter)) uleb(), uleb();
        else if (tag == uint8_t(format::Tag::kExit)) {
            uint64_t dt = uleb();
            if (prev == uint8_t(format::Tag::kEnter)) sum += dt, ++n;
        } else break;
        if (tag != uint8_t(format::Tag::kFunction)) prev = tag;
    }
    return n ? double(sum) / double(n) : 0;
}

double median(double* v, int n) {
    std::sort(v, v + n);
    return v[n / 2];
}

} // namespace

// Runs on a thread whose state is set up (thread_start), before its first event is written.
PROF_NOINSTR void calibrate_overhead(ThreadState& s, char* out, size_t cap) {
    void* m = mmap(nullptr, kScratch, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void* t = mmap(nullptr, 4096 * sizeof(uint64_t) * 2, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || t == MAP_FAILED) return;
    ThreadState saved = s;
    t_calibrating = true;
    double in[kRounds], total[kRounds], line[kRounds];
    for (int r = 0; r < kRounds; ++r) {
        // A private writer and function table: nothing of this reaches the trace.
        s.w = ChunkWriter{};
        s.w.base = static_cast<uint8_t*>(m);
        s.w.cursor = s.w.base + sizeof(format::ChunkHeader);
        s.w.end = s.w.base + kScratch;
        s.w.last_ticks = now_ticks();
        s.w.seq = UINT32_MAX; // no PROF_LINE counter record is in this chunk (prof/prof.hpp)
        s.table = static_cast<Slot*>(t);
        memset(s.table, 0, 1024 * sizeof(Slot));
        s.mask = 1023;
        s.used = s.next_index = 0;
        s.state = kActive;
        uint64_t t0 = now_ticks();
        calibration_tree(kDepth);
        uint64_t t1 = now_ticks();
        s.state = kBusy;
        in[r] = mean_leaf_ticks(s.w.base + sizeof(format::ChunkHeader), s.w.cursor);
        uint64_t t2 = now_ticks();
        plain_tree(kDepth);
        uint64_t t3 = now_ticks();
        total[r] = (double(t1 - t0) - double(t3 - t2)) / kCalls;
        uint64_t sum = 0;
        for (int i = 0; i < kCalls; ++i) {
            uint64_t a = now_ticks();
            uint64_t b = now_ticks();
            sum += b - a;
        }
        line[r] = double(sum) / kCalls;
    }
    s = saved;
    t_calibrating = false;
    munmap(m, kScratch);
    munmap(t, 4096 * sizeof(uint64_t) * 2);
    double cin = median(in, kRounds), ctotal = median(total, kRounds);
    double cout = std::max(0.0, ctotal - cin);
    snprintf(out, cap, "%.2f %.2f %.2f", cin, cout, median(line, kRounds));
}

} // namespace prof::rt
