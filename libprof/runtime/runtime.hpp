// Internal interface of the libprof runtime: the writer, clock, options and logging that the
// hooks use. Nothing here is public API.
//
// Hot-path contract (every file under runtime/ keeps it):
//  - no allocation through the application's allocator, no iostream, no fmt, no exceptions;
//  - no lock on the common path: a thread writes only its own mapped chunk; the global lock is
//    taken only to open a chunk, define a new function or module, and at start and finish;
//  - every function is excluded from instrumentation (the library is built without
//    -finstrument-functions and PROF_NOINSTR marks what could be inlined into user code);
//  - re-entry is blocked per thread (ThreadState::state), and errno is preserved around
//    every system call made from a hook.
#pragma once

#include <prof/prof_thread.h>
#include <prof/record_codec.hpp>
#include <prof/trace_format.hpp>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <ctime>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define PROF_NOINSTR __attribute__((no_instrument_function))
#define PROF_HIDDEN __attribute__((visibility("hidden")))
#define PROF_LIKELY(x) __builtin_expect(!!(x), 1)
#define PROF_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace prof::rt {

// ---- clock -------------------------------------------------------------------------------
extern bool g_use_tsc;
extern bool g_memory_active; // libprofmem.so is loaded (memory.cpp)
// libprofmem.so's part in the finish (prof_mem_set_finish_hooks), or nulls (memory.cpp).
extern void (*g_mem_finish_begin)();
extern void (*g_mem_finish_end)();

PROF_NOINSTR inline uint64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

PROF_NOINSTR inline uint64_t realtime_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

PROF_NOINSTR inline uint64_t now_ticks() {
#if defined(__x86_64__)
    if (PROF_LIKELY(g_use_tsc)) return __rdtsc();
#endif
    return monotonic_ns();
}

// ---- options (read once at start; docs/configuration.md lists them) --------------------------
enum class LogLevel : int { kQuiet = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4 };

struct Options {
    char out[4096];               // PROF_OUT
    bool out_given;               // PROF_OUT was set
    char run_dir[4096];           // PROF_RUN_DIR: a run's directory (profrun -d)
    bool disabled;                // PROF_DISABLE=1
    bool force;                   // PROF_FORCE=1: replace an existing file at PROF_OUT
    uint32_t chunk_size;          // PROF_CHUNK_SIZE
    uint32_t max_depth;           // PROF_MAX_DEPTH: shadow stack frames per thread
    LogLevel log_level;           // PROF_LOG
    bool log_json;                // PROF_LOG_FORMAT=json
    bool symbols;                 // PROF_SYMBOLS=0 skips the symbol table at exit
    char exclude[1024];           // PROF_EXCLUDE: comma-separated globs on symbol names
    char exclude_modules[1024];   // PROF_EXCLUDE_MODULES: comma-separated path substrings
    char clock[16];               // PROF_CLOCK: tsc | monotonic
    bool secure;                  // setuid/setgid: tracing is off, the environment ignored
    bool line_rss;                // PROF_LINE_RSS=1: PROF_LINE also samples the resident set size
    uint32_t line_clock_every;    // PROF_LINE_CLOCK_EVERY: a short line's hits per timed hit
    bool calibrate;               // PROF_CALIBRATE=0 skips measuring the hooks' cost at start
    bool scope_runs;              // PROF_SCOPE_RUNS=0: every scope activation its own Enter/Exit
    uint32_t mem_rss_interval_ms; // PROF_MEM_RSS_INTERVAL: the RSS timer's period, and the least
                                  // interval between a thread's readings at its allocations
    bool mem_unwind_dwarf;        // PROF_MEM_UNWIND=dwarf (default fp: frame pointers)
    uint32_t sample_hz;           // PROF_SAMPLE_HZ: samples per second of a thread's CPU time
    uint8_t sample_timer;         // PROF_SAMPLE_TIMER: 0 auto, 1 perf, 2 posix (sampler.cpp)
    uint32_t time_mode;           // PROF_TIME: TimeMode (call_tree.cpp)
    uint32_t count_after;         // PROF_COUNT_AFTER: samples before PROF_TIME=auto counts
    uint32_t latency_min_ns;      // PROF_LATENCY_MIN: a counted path's mean call to be timed
};
extern Options g_options;
// PROF_TIME: when the hooks stop reading the clock per call and count calls in a call tree.
enum TimeMode : uint32_t { kTimeAuto = 0, kTimeTraced = 1, kTimeSampled = 2 };
void read_options();
// What needs `environ` itself once the C library has set it, for a start that came before
// (a hook in a .preinit_array function): called by the library's constructor.
void options_after_environ();
// The environment the process started with: `environ`, or, when the runtime started before the
// C library set it, the one read_options read from /proc/self/environ (null if none could be
// read). start_env(NAME) is the value of one of its variables, or null.
const char* const* start_environ();
const char* start_env(const char* name);

// ---- logging: one key=value line (or JSON line) per message, on stderr ----------------------
// `fields` is a printf format producing `key=value key=value`; values with spaces are quoted
// by the caller. JSON mode converts the same pairs.
void log(LogLevel level, const char* event, const char* fields, ...)
    __attribute__((format(printf, 3, 4)));
// Copies `s` for use inside a quoted log value: quotes, backslashes and control characters
// become '?', and long values are cut. Returns `buf`.
const char* log_safe(const char* s, char* buf, size_t cap);

// ---- writer --------------------------------------------------------------------------------
// A chunk being filled by one stream (declared in <prof/prof_thread.h>: the macros' fast paths
// write thread chunks too). Only its owner touches it (the process stream's owner is whoever
// holds the global lock). Plain data so that it can live in zero-initialised thread-local storage.
using ChunkWriter = ::prof_chunk_writer;

// Opens the next chunk of `w`'s stream (retiring the current one). False when tracing has
// stopped or the file cannot grow: the caller drops the event.
bool open_chunk(ChunkWriter& w, uint64_t now);
void close_chunk(ChunkWriter& w);
void unmap_retired(ChunkWriter& w); // the stream's retired chunks that are still mapped

PROF_NOINSTR inline void commit(ChunkWriter& w) {
    auto* h = reinterpret_cast<format::ChunkHeader*>(w.base);
    // A release store: the record bytes are in the file before `used` says they are.
    __atomic_store_n(&h->used, uint32_t(w.cursor - w.base - sizeof(format::ChunkHeader)),
                     __ATOMIC_RELEASE);
}

// Records are encoded by <prof/record_codec.hpp> (format::put_enter, put_alloc, ...), straight
// into the chunk at `w.cursor` once the room is made.

// Delta since the previous timed record; never negative (a clock that steps back by a few
// ticks across cores reads as zero).
// The clock moving forward is the common case: the hint keeps it the straight path where the
// delta is computed before the record's first byte is stored.
PROF_NOINSTR inline uint64_t take_delta(ChunkWriter& w, uint64_t now) {
    if (PROF_UNLIKELY(now <= w.last_ticks)) return 0;
    uint64_t dt = now - w.last_ticks;
    w.last_ticks = now;
    return dt;
}

// Zero-filled private memory of the runtime's own, never the application's allocator; null when
// the address space is exhausted. Pages are committed when first touched (MAP_NORESERVE).
void* map_anon(size_t bytes);

// Process stream (stream 0): callers hold the global lock.
void lock_global();
void unlock_global();
// False when another thread, or this one, holds it (a signal handler).
bool try_lock_global();
// One Meta record, the lock held.
void meta_record(const char* key, const char* value, size_t len);
bool process_record(const uint8_t* rec, size_t n); // appends one whole record
// One reading of the RSS timer: an Rss record of the process stream (format 1.11), taking the
// lock. False once nothing more may be written there: the finish has begun, or tracing stopped.
bool process_rss_record(uint64_t bytes);
bool tracing_active();
uint32_t next_stream_id();

// ---- functions and modules (slow path, global lock held) -----------------------------------
// Records that `address` was seen; returns false if it must not be traced (runtime filter).
bool note_function(uintptr_t address);
// Records a return address of an unwound stack, to be symbolized at finish.
void note_code_address(uintptr_t address);
void scan_modules();
void modules_after_fork(); // the child's trace needs its own module records

// Function symbols of an ELF file, for the name filter and for naming the functions of an
// object about to be unloaded (symbol_index.cpp).
void* symbol_index_build(const char* path);
const char* symbol_index_lookup(const void* index, uint64_t vaddr);
void symbol_index_free(void* index); // null is fine
size_t symbol_index_build_id(const void* index, uint8_t* out); // 64-byte `out`; 0: none

// Symbol table for every function seen, written at finish (symbols.cpp). Called without the
// global lock (it takes it per record).
void write_symbols();
// One Symbol record (takes the global lock); strings are cut to the record's limits.
void write_symbol_record(uintptr_t address, const char* name, const char* symbol,
                         const char* file, size_t line);
uint32_t function_count();
void for_each_function(void (*fn)(uintptr_t, void*), void* arg);

// Lifetime (trace_writer.cpp).
void runtime_start();  // idempotent; the library constructor or the first hook calls it
void runtime_finish(); // library destructor
// The rest of the library constructor's start (library.cpp): the key whose destructor ends a
// thread's stream (thread_life.cpp), the real longjmp family looked up before any signal
// handler needs it (call_hooks.cpp), and the profiler's dependencies' calls counted as its own
// from then on (own_dependencies.cpp).
void create_thread_key();
void resolve_longjmp();
void note_library_started();
void vfork_child_exited(int child); // after a vfork child has left (trace_writer.cpp)
// The RSS timer (rss_timer.cpp): started once the memory profiler is loaded and tracing runs,
// unless PROF_MEM_RSS_INTERVAL is 0 (idempotent); in a fork child, the child's own statm
// descriptor and timer.
void rss_timer_start();
void rss_after_fork_child();
// The wait family's interposers (children.cpp): the C library's functions looked up (again
// from the library's constructor, for those a start before the C library's initializer missed).
void children_start();
// The interposers of the calls that start a program with an envp of the caller's
// (child_environment.cpp): the C library's functions looked up, and what the run's children
// must carry copied from the environment the process started with.
void child_environment_start();
void carry_start_environment(const char* const* env);
// A function of the C library (the reference implementations the interposers call), found in
// libc.so.6 itself, else after libprof.so in the search order; null if none (children.cpp).
void* c_library_function(const char* name);
// The same, kept in `slot` once found (the interposers' real functions: looked up when the
// runtime starts, or at the first call before it).
template <typename Fn>
PROF_NOINSTR Fn c_library_function(std::atomic<Fn>& slot, const char* name) {
    Fn fn = slot.load(std::memory_order_acquire);
    if (fn) return fn;
    fn = reinterpret_cast<Fn>(c_library_function(name));
    if (fn) slot.store(fn, std::memory_order_release);
    return fn;
}
const char* trace_path();
void record_overhead(const char* figures); // Meta records of the calibration
void add_dropped(uint64_t n); // events a thread could not record, for the End record
uint64_t ticks_per_ms();      // clock rate so far (from the start and now)
// PROF_TIME=auto: a thread began counting at `ticks` (FileHeader::counting_ticks).
void note_counting_began(uint64_t ticks);

// ---- marked sites (sites.cpp) ---------------------------------------------------------------
} // namespace prof::rt
struct prof_site;
namespace prof::rt {
uint32_t register_site(prof_site* site); // takes the global lock on first use of a site
prof_site* site_by_id(uint32_t id);
void sites_after_fork();
// Which PROF_LINE hits read the clock (line_clock.cpp): PROF_LINE_CLOCK_EVERY and the length
// of a short hit, set at start once the clock is chosen.
void line_clock_init();
// The process's Meta records at the start of its trace (process_meta.cpp), the lock held;
// `overhead`: the calibration's figures a forked child repeats from its parent (or "").
void write_process_meta(const char* overhead);
// The calibration's figures ("in out line" ticks per event, calibration.cpp) as Meta records;
// false (nothing written) when they do not parse. The lock held.
bool write_overhead_meta(const char* figures);

// ---- thread side (thread_life.cpp) ---------------------------------------------------------
// Records the calling thread's drop count and line sums (before fork, and at the `finish`).
void thread_flush_counters(bool finish = false);
void collect_running_lines(); // at the finish: line sums of the threads still running
void thread_after_fork_child();
void thread_off_after_fork(); // the child writes no trace: this thread records nothing more
// The memory profiler's per-thread stack table (memory.cpp): reset (fork child) or unmapped.
void forget_stacks(::prof_thread& s, bool release);
// Blocks the calling thread's hooks (code the runtime calls that might be instrumented, such
// as an application's operator new during symbolization) and restores them.
uint8_t block_thread();
void unblock_thread(uint8_t previous);

} // namespace prof::rt
