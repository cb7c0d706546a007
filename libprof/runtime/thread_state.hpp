// Per-thread state of the runtime, shared by the call hooks (call_hooks.cpp) and the memory
// recorder (memory.cpp). Internal; the hot-path contract of runtime.hpp applies.
#pragma once

#include "runtime.hpp"

#include <prof/prof.h>
#include <prof/prof_thread.h>

#include <cstddef>

namespace prof::rt {

constexpr uintptr_t kSameStack = 64u << 20;
constexpr uint32_t kInitialTable = 1024; // slots; grows x4 while more than half full
constexpr uint32_t kMaxTable = 1u << 22;
constexpr uint32_t kExitSearch = 64; // frames searched for an exit whose CFA moved (alloca)

// kDeferred: active, and the innermost frame is a scope activation joining a run (format 1.3
// ScopeRun, prof/prof.hpp) whose Enter record is not written yet. Whatever the thread records
// next first settles it (writes that Enter); PROF_LINE's inline counters, which write no
// record, take kDeferred as kActive (kDeferred & 3 == kActive).
enum : uint8_t { kNew = 0, kActive = 1, kBusy = 2, kOff = 3, kDeferred = 5 };

// The `site` of a frame opened by PROF_SCOPE/PROF_FUNCTION/a C region: never a return address.
constexpr uintptr_t kScopeMark = 1;

// The per-thread state is declared in <prof/prof_thread.h>: the macros' inline fast paths read
// and write part of it.
using Frame = ::prof_frame;
using LineAgg = ::prof_site_counts;
using ThreadState = ::prof_thread;

static_assert(kActive == PROF_DETAIL_THREAD_ACTIVE && kBusy == PROF_DETAIL_THREAD_BUSY);
static_assert(kDeferred == PROF_DETAIL_THREAD_DEFERRED && (kDeferred & 3) == kActive);
static_assert(uint8_t(format::Tag::kScopeRun) == PROF_DETAIL_TAG_SCOPE_RUN);
static_assert(uint8_t(format::Tag::kLineCounts) == PROF_DETAIL_TAG_LINE_COUNTS);
static_assert(kScopeMark == PROF_DETAIL_SCOPE_MARK);
static_assert(uint8_t(format::Tag::kEnter) == PROF_DETAIL_TAG_ENTER);
static_assert(uint8_t(format::Tag::kExit) == PROF_DETAIL_TAG_EXIT);
static_assert(sizeof(format::ChunkHeader) == PROF_DETAIL_CHUNK_HEADER);
static_assert(offsetof(format::ChunkHeader, used) == PROF_DETAIL_CHUNK_USED);
static_assert(3 * format::kMaxEventRecord == PROF_DETAIL_RECORD_ROOM);

} // namespace prof::rt

struct prof_slot {
    uintptr_t address; // 0 = empty
    uint32_t index;    // stream-local function index
    uint32_t excluded; // runtime filter said no
};

namespace prof::rt {

using Slot = ::prof_slot;

// First event of a thread: set up its buffers and stream. Returns with state kActive or kOff.
void thread_start(ThreadState& s);
// Opens the thread's next chunk for an event (call_hooks.cpp); `now` moves past the runtime's
// own time (a Pause record says how much).
bool refill_event(ThreadState& s, uint64_t& now);
// Makes room for `n` bytes in the thread's chunk (opens the next one when needed).
PROF_NOINSTR inline bool ensure_bytes(ThreadState& s, uint64_t& now, size_t n) {
    if (PROF_LIKELY(s.w.end - s.w.cursor >= ptrdiff_t(n))) return true;
    return refill_event(s, now);
}
// Writes the Enter record of the activation a kDeferred thread has open; the state is then
// kActive. Called by every path of the runtime that finds the state kDeferred, before it
// records anything.
void settle(ThreadState& s);
// Forgets the run and leaf positions of the thread's chunk (a new chunk may be mapped at the
// same address).
PROF_NOINSTR inline void forget_runs(ThreadState& s) {
    s.run_end = nullptr;
    s.leaf_end = nullptr;
}

// ---- CPU-time sampling (sampler.cpp) ---------------------------------------------------------
// Chooses the signal and installs its handler; at start, before the trace file is made.
void sampler_init();
int sampler_signal(); // 0 when not sampling
// The Meta `sample_clock`: what signals the samples (`cpu-clock` or `thread_cputime`).
const char* sampler_clock();
// Arms the calling thread's timer and writes its first Sample record; the thread is busy and
// its stream open (thread_start, a forked child).
void sampler_thread_start(ThreadState& s);
void sampler_thread_stop(); // the calling thread's timer is deleted
void sampler_after_fork();  // a forked child forgets its parent's timer and samples
bool sampler_thread_armed(); // the calling thread's timer runs
// Samples that found no room in the chunk wait; the runtime writes them (the thread busy, with
// format::kMaxSampleRecord bytes of room) before anything else it writes. The `last` records
// of a thread whose timer is deleted (twice the room) also carry the samples of the profiler
// that no record has reported yet.
bool sampler_pending(bool last);
void sampler_flush(ThreadState& s, bool last);

// ---- PROF_TIME=sampled: the clock read after switches only (switch_clock.cpp) -------------
// The kernel's struct rseq_cs: the critical section whose address the hooks keep in the
// thread's rseq area, and that the kernel clears when the thread was off CPU.
struct alignas(32) SwitchSection {
    uint32_t version, flags;
    uint64_t start_ip, post_commit_offset, abort_ip;
};
extern SwitchSection g_switch_section __attribute__((visibility("hidden")));
// Whether the C library registers rseq for threads and the kernel clears the word after a
// switch: at start, with the options. Null when it does; otherwise why not, and the hooks read
// the clock per call.
const char* switch_clock_init();
bool switch_clock_on();
// The calling thread's `switch_word` (null: the clock per call), when its stream opens, after
// its sampling timer is armed: a thread without samples keeps the clock per call.
void switch_clock_thread_start(ThreadState& s);
// The hooks' time: the clock, or, in PROF_TIME=sampled while the thread has not been off CPU
// (nor signalled) since the clock was last read, the time of its last record (the next
// sample says how much CPU time the events between took).
PROF_NOINSTR inline uint64_t hook_ticks(ThreadState& s) {
    uint64_t* word = s.switch_word;
    if (PROF_LIKELY(!word)) return now_ticks();
    const uint64_t mark = reinterpret_cast<uintptr_t>(&g_switch_section);
    if (PROF_LIKELY(__atomic_load_n(word, __ATOMIC_RELAXED) == mark)) return s.w.last_ticks;
    __atomic_store_n(word, mark, __ATOMIC_RELAXED);
    s.switch_read = 1;
    return now_ticks();
}
// After such a reading, before the hook's own record: the thread's clocks at `now` (a Sample
// of count 0), which end the span whose time off CPU lies in the interval up to `now`.
void sampler_clock_record(ThreadState& s, uint64_t now);

// Set while this thread runs the calibration: its functions are not noted for the symbol table.
extern thread_local bool t_calibrating __attribute__((tls_model("initial-exec")));

// Resident set size now (one pread of /proc/self/statm), 0 if unknown.
uint64_t rss_bytes_now();
// Measures the hooks' own cost with this thread's events diverted (calibration.cpp); writes
// "in out line" tick counts to `out`.
void calibrate_overhead(ThreadState& s, char* out, size_t cap);

} // namespace prof::rt
