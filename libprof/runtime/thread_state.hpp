// Per-thread state of the runtime, shared by the call hooks (call_hooks.cpp) and the memory
// recorder (memory.cpp). Internal; the hot-path contract of runtime.hpp applies.
#pragma once

#include "runtime.hpp"

#include <prof/prof.h>
#include <prof/prof_thread.h>

#include <cstddef>
#include <pthread.h>

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
// The same in a counting thread (PROF_TIME=sampled): the macros' inline paths, which write an
// Exit record for a scope frame of theirs, leave such a frame to the runtime.
constexpr uintptr_t kCountedScopeMark = 3;
PROF_NOINSTR inline bool is_scope(uintptr_t site) {
    return site == kScopeMark || site == kCountedScopeMark;
}

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

// A node of a counting thread's call tree (call_tree.cpp): one call path, by function. One
// cache line: a call from this path to one of the two children entered last (the usual case:
// a loop calling one function, or two in turn) reads no other.
struct prof_tree_child {
    uintptr_t fn;    // 0: none yet
    uint64_t* calls; // the child's count; null for a function the runtime filter excludes
    uint32_t node;   // the child's index
    uint32_t timed;  // its calls are timed (node_timed): the hooks then call tree_time_enter
};
struct alignas(64) prof_tree_node {
    prof_tree_child recent[2]; // the children entered last, the latest first
    uint64_t* calls; // its count, in a CallCounts record of the trace (a scratch word for an
                     // excluded function's)
    uint32_t id;     // its number in the trace's CallNode records; 0: the root, or a function
                     // that the runtime filter excludes (never in the trace, never entered)
    uint32_t parent; // index of the parent node
};
static_assert(sizeof(prof_tree_node) == 64, "a node is one cache line");

// (parent node, function) -> node, open addressing (call_tree.cpp).
struct prof_path_slot {
    uintptr_t fn; // 0: empty
    uint32_t parent;
    uint32_t node;
};

namespace prof::rt {

using Slot = ::prof_slot;
using TreeNode = ::prof_tree_node;
using TreeChild = ::prof_tree_child;
using PathSlot = ::prof_path_slot;

// The home slot of (parent, fn) in a table of paths of mask + 1 slots.
PROF_NOINSTR inline uint32_t path_slot(uintptr_t fn, uint32_t parent, uint32_t mask) {
    return uint32_t(((uint64_t(fn) ^ (uint64_t(parent) << 40)) * 0x9E3779B97F4A7C15ull) >> 40) &
           mask;
}

// The function table of the hooks (call_hooks.cpp): the slot of `a`, defined (a Function
// record, the runtime filter) when new; null when the table is full. `site`: a scope's.
Slot* function_slot(ThreadState& s, uintptr_t a, prof_site* site);
const Slot* find_function(const ThreadState& s, uintptr_t a); // without defining it

// The hooks' side of the function table and the records (call_hooks.cpp), for a thread's
// start and the fork child (thread_life.cpp): the table grown (false: out of address space),
// and an Enter record of `a` called from `site` with `cfa`.
bool grow_table(ThreadState& s);
void write_enter(ThreadState& s, uintptr_t a, uintptr_t site, uintptr_t cfa, uint64_t now);

// ---- a thread's life (thread_life.cpp) -------------------------------------------------------
// First event of a thread: set up its buffers and stream. Returns with state kActive or kOff.
void thread_start(ThreadState& s);
// The key whose destructor ends a thread's stream (created at start, before the program's).
extern pthread_key_t g_thread_key;
extern std::atomic<bool> g_key_ready;

// Opens the thread's next chunk for an event (call_hooks.cpp); `now` moves past the runtime's
// own time (a Pause record says how much).
bool refill_event(ThreadState& s, uint64_t& now);
// Makes room for `n` bytes in the thread's chunk (opens the next one when needed).
PROF_NOINSTR inline bool ensure_bytes(ThreadState& s, uint64_t& now, size_t n) {
    if (PROF_LIKELY(s.w.end - s.w.cursor >= ptrdiff_t(n))) return true;
    return refill_event(s, now);
}
// Room for an event's records; `now` moves past the runtime's own time when a chunk is opened.
PROF_NOINSTR inline bool ensure(ThreadState& s, uint64_t& now) {
    return ensure_bytes(s, now, 3 * format::kMaxEventRecord);
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
// kSampleRoom bytes of room) before anything else it writes. The `last` records
// of a thread whose timer is deleted (twice the room) also carry the samples of the profiler
// that no record has reported yet.
bool sampler_pending(bool last);
// The room a Sample record takes with the Waited record before it (format 1.11).
inline constexpr uint32_t kSampleRoom = format::kMaxWaitedRecord + format::kMaxSampleRecord;
void sampler_flush(ThreadState& s, bool last);

// ---- counting threads: calls in a call tree (call_tree.cpp, format 1.9) ----------------------
// A counting thread's hooks write no record per call: each keeps the thread's call tree, a node
// per call path, and adds the call to its node's count in place in the trace (CallCounts
// records, whose chunks stay mapped). A new path (the slow path) writes its CallNode record;
// samples and the clocks read after a switch name the node the thread is in. Times come from
// the samples (analysis/engine/session.hpp, "counting threads").
constexpr uint32_t kNoNode = UINT32_MAX;
// A sanitizer build's sampler is off (the sanitizer's runtime keeps sigaction to itself): it
// counts calls all the same, so that the sanitizers check the counting hooks too; its counting
// traces have no CPU time (only the time off CPU the switch word gives).
#ifdef PROF_SANITIZER_BUILD
constexpr bool kCountWithoutSamples = true;
#else
constexpr bool kCountWithoutSamples = false;
#endif
// The thread begins counting (busy, its stream open, its timer armed, `switch_area` set): a
// Counting record and the nodes of the frames it has open, with no call: their Enter records
// counted them, or, in a forked child's new trace, they are the parent's calls, continued.
// False when it cannot.
bool begin_counting(ThreadState& s);
// Before libprof.so's constructor: whether the call at `site` comes from a library libprof.so
// brought that the program does not need (own_dependencies.cpp); the calls being ignored so,
// nested, on this thread.
bool call_from_our_dependency(uintptr_t site);
extern thread_local uint32_t t_dependency_calls __attribute__((tls_model("initial-exec")));
// The node of call path `parent` + `a` (a scope's site when `site` is a scope mark), made when
// new: kNoNode when none can be (no room, the tree is full). The thread is busy.
uint32_t tree_child(ThreadState& s, uint32_t parent, uintptr_t a, uintptr_t site);
// ---- 1.13: latency distributions of counted calls (call_tree.cpp) ---------------------------
// A counting thread times the calls of the paths whose calls last PROF_LATENCY_MIN or more on
// average, into a CallLatency record per path (log-linear buckets, updated in place like the
// counts). Every path is probed first: its first kProbeCalls calls are timed, and the path is
// timed from then on, those calls included, as soon as they add up to kProbeCalls times the
// threshold (a path called once for long is timed); a path whose probe did not is probed again
// later (latency_probe_due), so that a path whose calls grow longer is found, and a timed path
// whose mean falls under the threshold stops (checked at each power of two of its calls), so
// that the cost stays bounded. A timed call costs two clock reads; every other call a test of
// its count.
constexpr uint32_t kProbeCalls = 8;
struct NodeLatency {
    format::LatencyCounts* counts;                  // its CallLatency record, once timed
    uint64_t probe_ticks, probe_max, probe_max_end; // the current probe's calls
    uint16_t probe_buckets[kProbeCalls];
    uint32_t probes;  // calls of the current probe ended
    uint32_t started; // and begun: a probe whose calls keep being left (longjmp) gives up
    uint32_t state;   // NodeLatencyState
};
// Done: it was timed until its mean fell under the threshold; its record keeps those calls.
enum NodeLatencyState : uint32_t {
    kLatencyProbing = 0,
    kLatencyTimed = 1,
    kLatencyUntimed = 2,
    kLatencyDone = 3,
};
// The thread's states by node index; null when the thread times nothing.
extern thread_local NodeLatency* t_node_latency __attribute__((tls_model("initial-exec")));
PROF_NOINSTR inline uint32_t node_timed(uint32_t node) {
    return t_node_latency && t_node_latency[node].state <= kLatencyTimed;
}
// Whether the n-th call of an untimed path begins a probe: n a power of two, and past 65536
// 17 times in every 65536 calls (n less its lowest set bit a multiple of 65536). One test.
PROF_NOINSTR inline bool latency_probe_due(uint64_t n) {
    return ((n & (n - 1)) & 0xffff) == 0;
}
// Frame `d` of the thread (pushed, busy) is a call of a timed path, or of a path whose probe is
// due: it is timed from now.
void tree_time_enter(ThreadState& s, uint32_t d);
// Frame `d` (timed) returns now: its duration joins its path's.
void tree_time_exit(ThreadState& s, uint32_t d);

// Child `c` of node `parent`, of function `fn`, was just entered: the latest of the parent's
// recent children.
PROF_NOINSTR inline void note_recent_child(ThreadState& s, uint32_t parent, uint32_t c,
                                           uintptr_t fn) {
    TreeNode& p = s.tree_nodes[parent];
    if (p.recent[0].fn == fn) return;
    const TreeNode& n = s.tree_nodes[c];
    p.recent[1] = p.recent[0];
    p.recent[0] = TreeChild{fn, n.id ? n.calls : nullptr, c, node_timed(c)};
}
// The trace's number of the node the thread is in (0: no frame open).
PROF_NOINSTR inline uint32_t tree_position(const ThreadState& s) {
    return s.depth ? s.tree_nodes[s.frames[s.depth - 1].node].id : 0;
}
// Before a record of `stack` 0 (the memory profiler's): a Position record, when the node the
// thread is in is not the one the last Position named. The thread is busy, with room made
// for format::kMaxPositionRecord bytes.
void tree_note_position(ThreadState& s);
// The clocks after a switch (a Sample record of count 0 in the thread's node): the first hook
// after the kernel cleared the thread's switch word, before it changes the node.
void tree_clock_record(ThreadState& s);
// The thread's tree is given up (its end; a forked child, whose trace is another).
void tree_release(ThreadState& s);
// Whether every thread counts from its start (PROF_TIME=sampled).
bool counting_from_start();
// Whether a thread that starts now counts from its start (PROF_TIME=sampled; PROF_TIME=auto
// once the process has samples enough).
bool counting_now();
// PROF_TIME=auto: a sample of the thread (from its signal handler); once the process has
// PROF_COUNT_AFTER of them, the thread's next hook begins counting (`count_soon`).
void note_sample_for_counting(ThreadState& s);
// A forked child: its trace has no samples yet; the forking thread traces again (auto).
void counting_after_fork(ThreadState& s);

// ---- the switch word: time off CPU without a clock per call (switch_clock.cpp) -------------
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
// The calling thread's `switch_area` (null: none), when its stream opens, after its sampling
// timer is armed: a thread without samples keeps the clock per call.
void switch_clock_thread_start(ThreadState& s);
// The mark the hooks keep in a counting thread's switch word.
PROF_NOINSTR inline uint64_t switch_mark() {
    return reinterpret_cast<uintptr_t>(&g_switch_section);
}
// Whether the thread may have been off CPU (or signalled) since the mark was stored; the mark
// is stored again, before the caller reads the clocks.
PROF_NOINSTR inline bool switched(ThreadState& s) {
    if (PROF_LIKELY(__atomic_load_n(s.switch_word, __ATOMIC_RELAXED) == switch_mark()))
        return false;
    __atomic_store_n(s.switch_word, switch_mark(), __ATOMIC_RELAXED);
    return true;
}
// The thread's clocks now, a Sample record of count 0 (in the thread's node when counting),
// with room made for it: the end of its last span (its end, the process's finish).
void sampler_clock_record(ThreadState& s, uint64_t now);
// The CPU clock of the calling thread (CLOCK_THREAD_CPUTIME_ID), in ns.
uint64_t thread_cpu_ns();

// Set while this thread runs the calibration: its functions are not noted for the symbol table.
extern thread_local bool t_calibrating __attribute__((tls_model("initial-exec")));

// Resident set size now (one pread of /proc/self/statm), 0 if unknown.
uint64_t rss_bytes_now();
// Measures the hooks' own cost with this thread's events diverted (calibration.cpp); writes
// "in out line" tick counts to `out`.
void calibrate_overhead(ThreadState& s, char* out, size_t cap);

} // namespace prof::rt
