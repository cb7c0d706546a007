// Per-thread state of the runtime, shared by the call hooks (call_hooks.cpp) and the memory
// recorder (memory.cpp). Internal; the hot-path contract of runtime.hpp applies.
#pragma once

#include "runtime.hpp"

#include <prof/prof.h>

namespace prof::rt {

constexpr uintptr_t kSameStack = 64u << 20;
constexpr uint32_t kInitialTable = 1024; // slots; grows x4 while more than half full
constexpr uint32_t kMaxTable = 1u << 22;
constexpr uint32_t kExitSearch = 64; // frames searched for an exit whose CFA moved (alloca)

enum : uint8_t { kNew = 0, kActive = 1, kBusy = 2, kOff = 3 };

// The `site` of a frame opened by PROF_SCOPE/PROF_FUNCTION/a C region: never a return address.
constexpr uintptr_t kScopeMark = 1;

// What a thread's PROF_LINE executions of one site add up to, until written out.
struct LineAgg {
    uint64_t hits, ticks;
    uint64_t rss_samples, rss_last;
    int64_t rss_increment;
    int64_t heap_increment; // usable heap bytes, summed over the sampled hits
};

struct Frame {
    uintptr_t fn;
    uintptr_t site; // return address into the caller
    uintptr_t cfa;  // the enter hook's canonical frame address
};

struct Slot {
    uintptr_t address; // 0 = empty
    uint32_t index;    // stream-local function index
    uint32_t excluded; // runtime filter said no
};

struct ThreadState {
    ChunkWriter w;
    Frame* frames;
    uint32_t depth;
    uint32_t max_depth;
    Slot* table;
    uint32_t mask; // table size - 1, or 0 before the table exists
    uint32_t used;
    uint32_t next_index;
    uint64_t dropped;  // events not recorded (depth limit); reported at thread end
    uint32_t overflow; // frames entered beyond max_depth and not yet exited
    uintptr_t overflow_cfa; // CFA of the outermost of those frames
    LineAgg* lines;    // by site id
    uint32_t lines_cap;
    // Memory profiler (memory.cpp): deduplicated unwound stacks of this stream.
    uint64_t* stack_keys; // hash of the return addresses, 0 = empty slot
    uint32_t* stack_ids;
    uint32_t stack_mask;
    uint32_t stack_count;
    uintptr_t stack_top;  // highest address of this thread's stack, bounds the unwinder
    uint64_t next_rss_ticks;
    int64_t heap_bytes; // usable bytes allocated minus released by this thread (memory profiler)
    uint8_t state;
};


// Zero-initialised, no constructor, no destructor: no TLS init call on the hot path.
extern thread_local ThreadState t_state __attribute__((tls_model("initial-exec")));

// First event of a thread: set up its buffers and stream. Returns with state kActive or kOff.
void thread_start(ThreadState& s);
// Makes room for `n` bytes in the thread's chunk (opens the next one when needed).
bool ensure_bytes(ThreadState& s, uint64_t now, size_t n);
PROF_NOINSTR inline uint8_t* put_sleb(uint8_t* p, int64_t v) {
    for (;;) {
        uint8_t b = uint8_t(v & 0x7f);
        v >>= 7;
        bool done = (v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40));
        *p++ = done ? b : uint8_t(b | 0x80);
        if (done) return p;
    }
}

// Resident set size now (one pread of /proc/self/statm), 0 if unknown.
uint64_t rss_bytes_now();
// Measures the hooks' own cost with this thread's events diverted (calibration.cpp); writes
// "in out line" tick counts to `out`.
void calibrate_overhead(ThreadState& s, char* out, size_t cap);

} // namespace prof::rt
