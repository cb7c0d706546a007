// The trace file: creation, chunk reservation, the process stream, finish, fork and vfork.
//
// Every chunk is mapped MAP_SHARED from the file, so what a thread has written is in the page
// cache the moment it is written: a process killed by SIGKILL or the OOM killer loses nothing
// it had recorded. File space is reserved with fallocate before a chunk is mapped, so a full
// disk shows up as a failed reservation (tracing stops, the application runs on) instead of a
// SIGBUS in the middle of the application.
#include "thread_state.hpp"

#include <prof/trace_framing.hpp>
#include <prof/version.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern "C" {
// glibc: registers a thread_local destructor of the object `dso` (thread exit or exit()).
int __cxa_thread_atexit_impl(void (*fn)(void*), void* obj, void* dso);
extern void* __dso_handle;
}

// Read inline by the line macros (prof/prof.hpp); set once at start.
extern "C" {
__attribute__((visibility("default"))) int prof_clock_is_tsc = 0;
// PROF_LINE_MEM_HEAP (set by prof_mem_activate) | PROF_LINE_MEM_RSS (PROF_LINE_RSS=1).
__attribute__((visibility("default"))) int prof_line_rss_enabled = 0;
// The PROF_LINE fast path (rdtsc and the thread's counters inline) applies: the clock is the
// TSC and lines measure no memory.
__attribute__((visibility("default"))) int prof_line_fast = 0;
// Consecutive leaf activations of a scope join one ScopeRun record (PROF_SCOPE_RUNS, default on).
__attribute__((visibility("default"))) int prof_scope_runs = 0;
}

namespace prof::rt {

bool g_use_tsc = false;

namespace {

#if defined(MADV_POPULATE_WRITE)
constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kPopulateWrite = 23; // Linux 5.14; older headers do not name it
#endif

// Bytes of a stream's first chunk provided at once (the rest page by page as it fills).
constexpr size_t kFirstChunkPopulate = 16u << 10;

using format::ChunkHeader;
using format::FileHeader;

struct Global {
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int fd = -1;
    bool active = false;   // chunks may be opened
    bool finished = false; // finish() ran in this process
    // The finish has begun: the RSS timer writes no more (what follows is the runtime's work).
    bool rss_stopped = false;
    uint32_t chunk_size = 0;
    uint32_t next_chunk = 0; // chunks reserved so far
    uint64_t file_size = 0;  // bytes reserved on disk
    std::atomic<uint32_t> next_stream{1};
    ChunkWriter process{}; // stream 0
    uint64_t start_ticks = 0, start_mono = 0, start_real = 0;
    uint32_t ppid = 0;
    // The process the runtime belongs to, from its start or the last fork: a vfork child runs
    // in this memory with another pid and no fork handler.
    uint32_t pid = 0;
    // A vfork child called exit(): it ran (and used up) the parent's exit handlers, ours too.
    std::atomic<bool> finish_taken_by_child{false};
    char overhead[96] = {}; // calibration figures, repeated in a forked child's trace
    char stop_reason[128] = {}; // why tracing stopped before the end, if it did
    dev_t file_dev = 0; // identity of the trace file, to notice a program that closed our
    ino_t file_ino = 0; // descriptor (daemons close every fd) and reused its number
    uint64_t start_ticks_per_second = 0; // from a short calibration when the runtime starts
    bool started = false; // a file was created in this process (finish has work to do)
    std::atomic<uint64_t> dropped{0}; // events threads could not record
    // When the first thread began counting without a clock (FileHeader::counting_ticks).
    std::atomic<uint64_t> counting_ticks{0};
    char path[4096 + 64] = {};  // the file this process writes
    char base_path[4096] = {};  // PROF_OUT or its default, before per-process suffixes
};

// constinit: the library constructor runs before dynamic initialisers would.
constinit Global g;


// Reserves file space up to `size` bytes. Grows in steps of 8 chunks to keep the number of
// calls low; finish() trims the unused tail.
PROF_NOINSTR bool reserve_file(uint64_t size) {
    if (size <= g.file_size) return true;
    uint64_t want = size + 7ull * g.chunk_size;
    int rc = fallocate(g.fd, 0, off_t(g.file_size), off_t(want - g.file_size));
    if (rc != 0 && errno == ENOSPC) { // nearly full: take just what this chunk needs
        want = size;
        rc = fallocate(g.fd, 0, off_t(g.file_size), off_t(want - g.file_size));
    }
    if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) {
        // No fallocate on this file system: a sparse file still works, but a full disk would
        // then surface as SIGBUS on a write. Documented in docs/configuration.md.
        rc = ftruncate(g.fd, off_t(want));
    }
    if (rc != 0) {
        char shown[256];
        snprintf(g.stop_reason, sizeof g.stop_reason, "cannot reserve file space: %s", strerror(errno));
        log(LogLevel::kError, "trace_stopped",
            "path=\"%s\" reason=\"cannot reserve file space\" error=\"%s\"",
            log_safe(g.path, shown, sizeof shown), strerror(errno));
        g.active = false;
        return false;
    }
    g.file_size = want;
    return true;
}

void write_meta(const char* key, const char* value, size_t vlen);

PROF_NOINSTR bool open_chunk_locked(ChunkWriter& w, uint64_t now) {
    if (!g.active) return false;
    struct stat st;
    if (fstat(g.fd, &st) != 0 || st.st_dev != g.file_dev || st.st_ino != g.file_ino) {
        char shown[256];
        log(LogLevel::kError, "trace_stopped",
            "path=\"%s\" reason=\"the program closed the trace file descriptor\"",
            log_safe(g.path, shown, sizeof shown));
        g.active = false;
        g.fd = -1;
        // No finish can be written without the descriptor; the process stream's chunk is still
        // mapped, so the reason goes there while it has room (readers then report why the
        // trace ends early), with what a finish would have said about the memory profiler.
        snprintf(g.stop_reason, sizeof g.stop_reason,
                 "the program closed the trace file descriptor");
        if (&w != &g.process) {
            write_meta("stopped_early", g.stop_reason, strlen(g.stop_reason));
            if (g_memory_active) write_meta("memory_profiler", "1", 1);
        }
        return false;
    }
    uint64_t off = format::chunk_offset(g.chunk_size, g.next_chunk);
    if (!reserve_file(off + g.chunk_size)) return false;
    void* m = mmap(nullptr, g.chunk_size, PROT_READ | PROT_WRITE, MAP_SHARED, g.fd, off_t(off));
    // Fault the chunk in writable now, in one call: otherwise every page of a shared file
    // mapping traps on its first write (the file system's page_mkwrite), one trap per 4 KiB of
    // records on the hot path. Kernels before 5.14 lack it: then the pages are read in at least.
    // A stream's first chunk only in part: a short-lived thread (one per request in a server)
    // writes a few hundred bytes, and providing all of its pages cost 0.7 ms per thread.
    size_t populate =
        w.seq == 0 ? std::min<size_t>(g.chunk_size, kFirstChunkPopulate) : g.chunk_size;
    if (m != MAP_FAILED && madvise(m, populate, kPopulateWrite) != 0)
        madvise(m, populate, MADV_WILLNEED);
    if (m == MAP_FAILED) {
        char shown[256];
        snprintf(g.stop_reason, sizeof g.stop_reason, "cannot map a chunk: %s", strerror(errno));
        log(LogLevel::kError, "trace_stopped", "path=\"%s\" reason=\"mmap failed\" error=\"%s\"",
            log_safe(g.path, shown, sizeof shown), strerror(errno));
        g.active = false;
        return false;
    }
    ++g.next_chunk;
    auto* h = static_cast<ChunkHeader*>(m);
    uint64_t sync_ticks = now_ticks();
    format::fill_chunk_header(*h, format::StreamKind(w.kind), w.stream, w.seq++, 0, w.tid,
                              w.last_ticks ? w.last_ticks : now, sync_ticks, monotonic_ns());
    // The magic goes last: a chunk with a magic has a complete header.
    __atomic_store_n(&h->magic, format::kChunkMagic, __ATOMIC_RELEASE);
    w.base = static_cast<uint8_t*>(m);
    w.cursor = w.base + sizeof(ChunkHeader);
    w.end = w.base + g.chunk_size;
    w.last_ticks = h->base_ticks;
    w.last_ptr = 0;
    return true;
}

PROF_NOINSTR void write_file_header(uint32_t flags, uint64_t end_ticks = 0, uint64_t end_mono = 0) {
    FileHeader h;
    // ppid: the one at start (a reparented process keeps its real parent).
    format::start_file_header(h, g.chunk_size,
                              g_use_tsc ? format::ClockKind::kTsc : format::ClockKind::kMonotonic,
                              uint32_t(getpid()), g.ppid);
    h.start_ticks = g.start_ticks;
    h.start_mono_ns = g.start_mono;
    h.start_real_ns = g.start_real;
    // The clock rate: calibrated at start, refined over the whole run at finish.
    h.ticks_per_second = g.start_ticks_per_second;
    if (flags & format::kFileFinished) {
        format::finish_file_header(h, end_ticks, end_mono, g.next_chunk);
        h.counting_ticks = g.counting_ticks.load(std::memory_order_relaxed);
        if (g_use_tsc) {
            uint64_t dt = end_ticks - g.start_ticks, dns = end_mono - g.start_mono;
            if (dns > 10000000) h.ticks_per_second = uint64_t(double(dt) * 1e9 / double(dns));
        }
    }
    ssize_t r = pwrite(g.fd, &h, sizeof h, 0);
    (void)r;
}

// Whether the trace at `path` is still being written (no finished flag): then it belongs to a
// live process of the same run, such as the parent of a spawned child or the previous image of
// an exec chain, and a file of our own next to it is the expected outcome. A finished trace is
// a stale one from an earlier run, worth a warning.
PROF_NOINSTR bool being_written(const char* path) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    FileHeader h;
    bool ok = pread(fd, &h, sizeof h, 0) == ssize_t(sizeof h) && format::header_magic_ok(h);
    close(fd);
    return ok && !(h.flags & format::kFileFinished);
}

// Creates the trace file without following a symlink planted at its path and without
// replacing an existing trace (unless PROF_FORCE=1). When the path is taken, tries
// `<path>.<pid>` and then `<path>.<pid>.<n>`, so a forked or exec'd process keeps its own.
PROF_NOINSTR int create_file(const char* base, bool try_base) {
    int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    if (try_base) {
        snprintf(g.path, sizeof g.path, "%s", base);
        if (g_options.force) unlink(g.path);
        int fd = open(g.path, flags, 0600);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    // A run's file names hold the pid already: another image of the same process (exec)
    // takes `<dir>/<program>.<pid>.<n>.trace`.
    size_t len = strlen(base);
    bool run_name = !g_options.out_given && g_options.run_dir[0] && len > 6 &&
                    strcmp(base + len - 6, ".trace") == 0;
    for (int n = 0; n < 100; ++n) {
        if (run_name)
            snprintf(g.path, sizeof g.path, "%.*s.%d.trace", int(len - 6), base, n + 1);
        else if (n == 0)
            snprintf(g.path, sizeof g.path, "%s.%d", base, int(getpid()));
        else
            snprintf(g.path, sizeof g.path, "%s.%d.%d", base, int(getpid()), n);
        int fd = open(g.path, flags, 0600);
        if (fd >= 0 || errno != EEXIST) {
            if (fd >= 0 && try_base) {
                char a[256], b[256];
                log_safe(base, a, sizeof a);
                log_safe(g.path, b, sizeof b);
                if (being_written(base))
                    log(LogLevel::kInfo, "output_exists", "path=\"%s\" writing=\"%s\" "
                        "reason=\"a related process is writing it\"", a, b);
                else
                    log(LogLevel::kWarn, "output_exists",
                        "path=\"%s\" writing=\"%s\" hint=\"set PROF_FORCE=1 to replace it\"", a, b);
            }
            return fd;
        }
    }
    errno = EEXIST;
    return -1;
}

// CLOCK_REALTIME and the trace clock (and CLOCK_MONOTONIC) at one moment: the readings between
// two of CLOCK_REALTIME that came within 20 us of each other (a preemption between them would
// put milliseconds between the clocks), the realtime their middle; the last try otherwise.
PROF_NOINSTR void read_clock_pair(uint64_t& real, uint64_t& ticks, uint64_t* mono) {
    for (int attempt = 0; attempt < 10; ++attempt) {
        uint64_t before = realtime_ns();
        ticks = now_ticks();
        if (mono) *mono = monotonic_ns();
        uint64_t after = realtime_ns();
        real = before + (after - before) / 2;
        if (after - before < 20000) return;
    }
}

// The program's name as its run files carry it: argv[0]'s last component. The C library sets
// program_invocation_short_name in its initializer; a start before it (a hook in a
// .preinit_array function) reads argv[0] from /proc/self/cmdline.
PROF_NOINSTR const char* program_name() {
    if (program_invocation_short_name && program_invocation_short_name[0])
        return program_invocation_short_name;
    static char name[256];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "prof";
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return "prof";
    buf[n] = '\0'; // argv[0] ends at its own NUL, or here
    const char* slash = strrchr(buf, '/');
    const char* last = slash ? slash + 1 : buf;
    if (!*last) return "prof";
    size_t len = strnlen(last, sizeof name - 1); // a longer name is cut, as the kernel's comm
    memcpy(name, last, len);
    name[len] = '\0';
    return name;
}

// The trace's path: PROF_OUT; else in a run's directory (PROF_RUN_DIR),
// `<dir>/<program>.<pid>.trace`; else `prof.<pid>.trace`.
PROF_NOINSTR void choose_base_path() {
    int pid = int(getpid());
    if (g_options.out_given) {
        snprintf(g.base_path, sizeof g.base_path, "%s", g_options.out);
        return;
    }
    if (g_options.run_dir[0]) {
        const char* program = program_name();
        int n = snprintf(g.base_path, sizeof g.base_path, "%s/%s.%d.trace", g_options.run_dir,
                         program, pid);
        if (n < int(sizeof g.base_path)) return; // else (a path of over 4 KiB) the default
    }
    snprintf(g.base_path, sizeof g.base_path, "prof.%d.trace", pid);
}

PROF_NOINSTR void write_meta(const char* key, const char* value, size_t vlen) {
    if (vlen > format::kMaxString) vlen = format::kMaxString;
    uint8_t rec[format::kMaxString + 64 + 32];
    uint8_t* p = format::put_meta(rec, key, strlen(key), value, vlen);
    process_record(rec, size_t(p - rec));
}

PROF_NOINSTR bool choose_clock() {
#if defined(__x86_64__)
    if (!strcmp(g_options.clock, "monotonic")) return false;
    unsigned a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000007u), "c"(0));
    bool invariant = (d >> 8) & 1;
    if (!invariant && strcmp(g_options.clock, "tsc") != 0) {
        log(LogLevel::kInfo, "clock", "kind=monotonic reason=\"no invariant TSC\"");
        return false;
    }
    return true;
#else
    return false;
#endif
}

// The tick rate measured against CLOCK_MONOTONIC over about a millisecond, so that a trace whose
// process is killed early still converts ticks to seconds well (the rate is refined over the
// whole run when the writer finishes).
// The tick counter against CLOCK_MONOTONIC over 1 ms (within 1%). Each end is a tick reading
// between two clock readings under 10 us apart: a preemption between a tick and a clock reading (ten
// milliseconds on a loaded machine) would otherwise skew the rate of a process too short to be
// refined at its finish by 50x (measured).
PROF_NOINSTR void read_tick_pair(uint64_t& ticks, uint64_t& ns) {
    for (int attempt = 0; attempt < 100; ++attempt) {
        uint64_t before = monotonic_ns();
        ticks = now_ticks();
        uint64_t after = monotonic_ns();
        ns = before + (after - before) / 2;
        if (after - before < 10000) return;
    }
}

PROF_NOINSTR uint64_t calibrate() {
    if (!g_use_tsc) return 1000000000u;
    uint64_t t0, n0, t1, n1;
    read_tick_pair(t0, n0);
    do read_tick_pair(t1, n1);
    while (n1 - n0 < 1000000);
    return uint64_t(double(t1 - t0) * 1e9 / double(n1 - n0));
}

PROF_NOINSTR bool start_file(const char* base, bool try_base) {
    g.fd = create_file(base, try_base);
    if (g.fd < 0) {
        char shown[256];
        log(LogLevel::kError, "trace_disabled", "path=\"%s\" error=\"%s\"",
            log_safe(base, shown, sizeof shown), strerror(errno));
        return false;
    }
    g.ppid = uint32_t(getppid());
    struct stat st;
    if (fstat(g.fd, &st) == 0) g.file_dev = st.st_dev, g.file_ino = st.st_ino;
    g.next_chunk = 0;
    g.file_size = 0;
    g.counting_ticks.store(0, std::memory_order_relaxed);
    g.next_stream.store(1, std::memory_order_relaxed);
    g.process = ChunkWriter{};
    g.process.kind = uint16_t(format::StreamKind::kProcess);
    g.rss_stopped = false;
    read_clock_pair(g.start_real, g.start_ticks, &g.start_mono);
    if (!g.start_ticks_per_second) g.start_ticks_per_second = calibrate();
    if (!reserve_file(format::kHeaderSize)) return false;
    write_file_header(0);
    g.started = true;
    g.active = true;
    write_process_meta(g.overhead);
    scan_modules();
    char shown[256];
    log(LogLevel::kInfo, "trace_started", "path=\"%s\" clock=%s chunk_size=%u",
        log_safe(g.path, shown, sizeof shown), g_use_tsc ? "tsc" : "monotonic", g.chunk_size);
    return true;
}

// Before fork: what the forking thread aggregated (line sums, drop counts) goes to the
// parent's trace, then the lock is held so the child inherits consistent state.
// The forking thread's hooks are blocked while the lock is held: a signal handler that runs
// instrumented code around fork() must not try to take it again.
thread_local uint8_t t_fork_state __attribute__((tls_model("initial-exec")));

PROF_NOINSTR void fork_prepare() {
    thread_flush_counters();
    t_fork_state = block_thread();
    pthread_mutex_lock(&g.lock);
}
PROF_NOINSTR void fork_parent() {
    pthread_mutex_unlock(&g.lock);
    unblock_thread(t_fork_state);
}

// The child continues with a file of its own, named `<PROF_OUT>.<pid>`; it must never write
// into the chunks it inherited from the parent's mapping.
PROF_NOINSTR void fork_child() {
    g.pid = uint32_t(getpid());
    // This thread took the lock in fork_prepare and is the child's only thread: it releases
    // it (re-initializing a held mutex is undefined, and thread checkers see it still held).
    pthread_mutex_unlock(&g.lock);
    modules_after_fork();
    sites_after_fork();
    g.started = false;
    g.dropped.store(0, std::memory_order_relaxed);
    bool was_active = g.active && !g.finished;
    if (g.process.base) munmap(g.process.base, g.chunk_size);
    if (g.fd >= 0) close(g.fd);
    g.fd = -1;
    g.active = false;
    bool ok = false;
    if (was_active) {
        pthread_mutex_lock(&g.lock);
        // In a run's directory the child's file is named by its own pid; else it is the
        // parent's path with the pid appended.
        bool own_name = !g_options.out_given && g_options.run_dir[0];
        if (own_name) choose_base_path();
        ok = start_file(g.base_path, own_name);
        pthread_mutex_unlock(&g.lock);
    }
    // Before this thread records again: the timer's thread is made with recording blocked.
    rss_after_fork_child();
    unblock_thread(t_fork_state);
    // Without a file of its own the child must not touch the parent's chunk: off for good.
    if (ok) thread_after_fork_child();
    else thread_off_after_fork();
}

} // namespace

// Lock-free: a thread's hook calls it where the thread begins counting.
PROF_NOINSTR void note_counting_began(uint64_t ticks) {
    uint64_t none = 0;
    g.counting_ticks.compare_exchange_strong(none, ticks ? ticks : 1, std::memory_order_relaxed);
}

PROF_NOINSTR void lock_global() { pthread_mutex_lock(&g.lock); }
PROF_NOINSTR void unlock_global() { pthread_mutex_unlock(&g.lock); }
PROF_NOINSTR bool try_lock_global() { return pthread_mutex_trylock(&g.lock) == 0; }
PROF_NOINSTR void meta_record(const char* key, const char* value, size_t len) {
    write_meta(key, value, len);
}
PROF_NOINSTR bool tracing_active() { return g.active; }
PROF_NOINSTR uint32_t next_stream_id() {
    return g.next_stream.fetch_add(1, std::memory_order_relaxed);
}

// A chunk that holds records the stream adds to in place (CallCounts) stays mapped until the
// stream ends. If the list of them cannot grow, the chunk stays mapped all the same (until the
// process ends): the stream's counts point into it.
PROF_NOINSTR void keep_chunk(ChunkWriter& w, uint8_t* chunk) {
    if (w.kept_count == w.kept_cap) {
        uint32_t cap = w.kept_cap ? 2 * w.kept_cap : 16;
        auto* kept = static_cast<uint8_t**>(map_anon(size_t(cap) * sizeof(uint8_t*)));
        if (!kept) return;
        if (w.kept_cap) {
            memcpy(kept, w.kept, size_t(w.kept_count) * sizeof(uint8_t*));
            munmap(w.kept, size_t(w.kept_cap) * sizeof(uint8_t*));
        }
        w.kept = kept;
        w.kept_cap = cap;
    }
    w.kept[w.kept_count++] = chunk;
}

PROF_NOINSTR bool open_chunk(ChunkWriter& w, uint64_t now) {
    uint8_t* old = w.base;
    bool keep = w.keep && old;
    lock_global();
    bool ok = open_chunk_locked(w, now);
    unlock_global();
    w.keep = 0;
    if (keep) {
        keep_chunk(w, old);
    } else {
        // The retired chunk stays in the page cache; unmapping it only drops our view of it.
        // The two last retired ones stay mapped (see prof_chunk_writer::retired).
        if (w.retired[1]) munmap(w.retired[1], g.chunk_size);
        w.retired[1] = w.retired[0];
        w.retired[0] = old;
    }
    if (!ok) w.base = w.cursor = w.end = nullptr;
    return ok;
}

// A thread's last chunk: the pages after its records go back to the file system (a hole in
// the file, read as zeros; readers stop at `used`), so that a program that starts thousands of
// short threads does not fill the disk with empty chunk tails. Through the mapping, not the
// descriptor: the program may have closed our descriptor and reused its number.
PROF_NOINSTR void unmap_retired(ChunkWriter& w) {
    for (uint8_t*& r : w.retired) {
        if (r) munmap(r, g.chunk_size);
        r = nullptr;
    }
    for (uint32_t i = 0; i < w.kept_count; ++i) munmap(w.kept[i], g.chunk_size);
    if (w.kept_cap) munmap(w.kept, size_t(w.kept_cap) * sizeof(uint8_t*));
    w.kept = nullptr;
    w.kept_count = w.kept_cap = 0;
    w.keep = 0;
}

PROF_NOINSTR void close_chunk(ChunkWriter& w) {
    if (w.base) {
        size_t used = size_t(w.cursor - w.base), page = size_t(sysconf(_SC_PAGESIZE));
        size_t keep = (used + page - 1) / page * page;
        if (keep < g.chunk_size) madvise(w.base + keep, g.chunk_size - keep, MADV_REMOVE);
        munmap(w.base, g.chunk_size);
    }
    unmap_retired(w);
    w.base = w.cursor = w.end = nullptr;
}

// The RSS timer's reading (rss_timer.cpp) in the process stream, timed as a thread stream's
// records are: `dt` from the chunk's previous Rss record, or from its base_ticks (the process
// writer's last_ticks is advanced by these records only). The clock is read under the lock
// and after the chunk is opened, so the records of the stream are in time order and none is
// older than its chunk's opening (trace-format.md, section 5).
PROF_NOINSTR bool process_rss_record(uint64_t bytes) {
    ChunkWriter& w = g.process;
    constexpr size_t kRoom = 1 + 1 + 2 * format::kMaxUleb + format::kLebScratch;
    lock_global();
    bool ok = g.active && !g.finished && !g.rss_stopped;
    if (ok && (!w.base || size_t(w.end - w.cursor) < kRoom)) {
        uint8_t* old = w.base;
        ok = open_chunk_locked(w, now_ticks());
        if (ok && old) munmap(old, g.chunk_size);
    }
    if (ok) {
        w.cursor = format::put_rss(w.cursor, take_delta(w, now_ticks()), bytes);
        commit(w);
    }
    unlock_global();
    return ok;
}

PROF_NOINSTR bool process_record(const uint8_t* rec, size_t n) {
    ChunkWriter& w = g.process;
    if (n > g.chunk_size - sizeof(ChunkHeader)) return false;
    if (!w.base || size_t(w.end - w.cursor) < n) {
        uint8_t* old = w.base;
        if (!open_chunk_locked(w, now_ticks())) return false;
        if (old) munmap(old, g.chunk_size);
    }
    memcpy(w.cursor, rec, n);
    w.cursor += n;
    commit(w);
    return true;
}

// Starts tracing. Runs from the library constructor, or earlier from the first hook when an
// instrumented constructor of another library runs before ours.
PROF_NOINSTR void runtime_start() {
    static bool started = false;
    lock_global();
    if (started) {
        unlock_global();
        return;
    }
    started = true;
    int saved = errno;
    // The C library's wait family, looked up now rather than in a signal handler; the
    // interposers call it whether or not tracing is on.
    children_start();
    child_environment_start();
    g.pid = uint32_t(getpid());
    read_options();
    // Before the early returns: a child started with an environment of its own gets the
    // run's settings, PROF_DISABLE among them.
    if (!g_options.secure) carry_start_environment(start_environ());
    if (g_options.secure) {
        log(LogLevel::kWarn, "trace_disabled", "reason=\"setuid or setgid program\"");
        errno = saved;
        unlock_global();
        return;
    }
    if (g_options.disabled) {
        log(LogLevel::kInfo, "trace_disabled", "reason=PROF_DISABLE");
        errno = saved;
        unlock_global();
        return;
    }
    g_use_tsc = choose_clock();
    prof_clock_is_tsc = g_use_tsc ? 1 : 0;
    // The memory profiler's bit may be set already (its library's constructor); the RSS, two
    // preads per line (about 2 us), only when asked for.
    if (g_options.line_rss)
        __atomic_fetch_or(&prof_line_rss_enabled, PROF_LINE_MEM_RSS, __ATOMIC_RELAXED);
    prof_line_fast = prof_clock_is_tsc && !prof_line_rss_enabled;
    line_clock_init();
    prof_scope_runs = g_options.scope_runs ? 1 : 0;
    g.chunk_size = g_options.chunk_size;
    sampler_init();               // before the file: its Meta records name the signal
    // Counting calls without a clock needs samples to time them and the switch word for the
    // time off CPU (switch_clock.cpp).
    if (g_options.time_mode != kTimeTraced) {
        const char* why = !sampler_signal() && !kCountWithoutSamples
                              ? "no CPU samples (PROF_SAMPLE_HZ=0, or sampling off)"
                              : switch_clock_init();
        if (why && g_options.time_mode == kTimeSampled)
            log(LogLevel::kWarn, "time_sampled_off", "reason=\"%s\" using=traced", why);
        else if (why)
            log(LogLevel::kInfo, "time_traced", "reason=\"%s\"", why);
    }
    choose_base_path();
    start_file(g.base_path, true);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    errno = saved;
    unlock_global();
    // Usually the memory profiler says it is loaded later (its library's constructor runs
    // after ours, and starts the timer then); an instrumented constructor that ran first may
    // have started the runtime after it.
    rss_timer_start();
}

// Ends the trace: symbol table, end record, final header, unused tail trimmed. Threads still
// running keep writing into the chunks they hold (those are inside the file), but cannot
// open new ones.
PROF_NOINSTR void runtime_finish() {
    // A vfork child that calls exit() runs the destructors in the parent's memory: finishing
    // here would end the parent's trace (and truncate its file) under the running parent.
    if (g.pid && uint32_t(getpid()) != g.pid) {
        g.finish_taken_by_child.store(true, std::memory_order_relaxed);
        return;
    }
    // The finish is the runtime's own work: this thread's samples end here (those that no
    // record has reported yet are written with its counters, below). Other threads keep
    // sampling into the chunks they hold until the process ends. The RSS timer writes no more
    // from here (it checks under the lock, so no reading lands in the finish's own work).
    sampler_thread_stop();
    lock_global();
    g.rss_stopped = true;
    unlock_global();
    // From here this thread's allocations (libdw's, the dynamic loader's, the symbol table's)
    // stay out of the program's heap, when libprofmem.so is loaded (memory_preload.cpp).
    struct FinishAllocations {
        PROF_NOINSTR FinishAllocations() {
            if (g_mem_finish_begin) g_mem_finish_begin();
        }
        PROF_NOINSTR ~FinishAllocations() {
            if (g_mem_finish_end) g_mem_finish_end();
        }
    } finish_allocations;
    int saved = errno;
    if (g_memory_active) {
        // libstdc++ keeps an emergency exception pool for the life of the process; release it
        // (and its record) now, as heaptrack does, so that it is not reported as a leak.
        using Freeres = void (*)();
        if (auto freeres = reinterpret_cast<Freeres>(dlsym(RTLD_DEFAULT, "_ZN9__gnu_cxx9__freeresEv")))
            freeres();
    }
    thread_flush_counters(true);
    collect_running_lines();
    // The traced program ends here: what follows is the runtime's own work (its memory too:
    // the peak resident set size is read before symbolization).
    uint64_t end_ticks = 0, end_mono = 0, end_real = 0;
    read_clock_pair(end_real, end_ticks, &end_mono);
    char clock_end[48];
    int clock_end_len = snprintf(clock_end, sizeof clock_end, "%llu %llu",
                                 (unsigned long long)end_real, (unsigned long long)end_ticks);
    char peak_rss[32];
    int peak_rss_len = 0;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        peak_rss_len = snprintf(peak_rss, sizeof peak_rss, "%llu", (unsigned long long)ru.ru_maxrss * 1024ull);
    uint8_t prev = block_thread();
    lock_global();
    // Also after tracing stopped early (a full disk): whatever still fits is written. Not if
    // the program closed our descriptor and reused its number for a file of its own.
    struct stat st;
    if (g.fd >= 0 &&
        (fstat(g.fd, &st) != 0 || st.st_dev != g.file_dev || st.st_ino != g.file_ino)) {
        g.fd = -1;
        if (g.started && !g.finished && g.active) {
            char shown[256];
            log(LogLevel::kError, "trace_stopped",
                "path=\"%s\" reason=\"the program closed the trace file descriptor\" "
                "hint=\"the trace ends at the program's last recorded event, without a symbol "
                "table\"",
                log_safe(g.path, shown, sizeof shown));
            g.active = false;
            // The process stream's chunk is still mapped: the reason goes there (see
            // open_chunk_locked); the header's finished flag needs the descriptor.
            snprintf(g.stop_reason, sizeof g.stop_reason,
                     "the program closed the trace file descriptor");
            write_meta("stopped_early", g.stop_reason, strlen(g.stop_reason));
            if (peak_rss_len) write_meta("peak_rss", peak_rss, size_t(peak_rss_len));
            if (g_memory_active) write_meta("memory_profiler", "1", 1);
        }
    }
    if (!g.started || g.finished || g.fd < 0) {
        unlock_global();
        unblock_thread(prev);
        errno = saved;
        return;
    }
    // After an early stop (a full disk) no chunk can be opened: the end record is written
    // only if the process stream's chunk still has room, with why recording stopped.
    bool stopped_early = !g.active;
    if (stopped_early && g.stop_reason[0]) write_meta("stopped_early", g.stop_reason, strlen(g.stop_reason));
    unlock_global();
    // Names are resolved without our lock: the resolvers take the dynamic loader's lock,
    // which a thread inside dlopen holds while it may need ours.
    if (g_options.symbols && !stopped_early) write_symbols();
    lock_global();
    if (peak_rss_len) write_meta("peak_rss", peak_rss, size_t(peak_rss_len));
    write_meta("clock_end", clock_end, size_t(clock_end_len));
    // Says the memory profiler ran, for a program that allocated nothing (no memory records).
    if (g_memory_active) write_meta("memory_profiler", "1", 1);
    uint64_t tps = g.start_ticks_per_second;
    if (g_use_tsc && end_mono - g.start_mono > 10000000)
        tps = uint64_t(double(end_ticks - g.start_ticks) * 1e9 / double(end_mono - g.start_mono));
    uint8_t rec[64];
    uint8_t* p = format::put_end(rec, end_ticks, end_mono, tps,
                                 g.next_stream.load(std::memory_order_relaxed) - 1,
                                 g.dropped.load(std::memory_order_relaxed));
    process_record(rec, size_t(p - rec));
    g.finished = true;
    g.active = false;
    // Trimmed before the header says finished: a reader maps a finished trace, and pages of a
    // mapping past a later end would raise SIGBUS in it (it copies an unfinished one).
    uint64_t size = format::chunk_offset(g.chunk_size, g.next_chunk);
    char shown[256];
    log_safe(g.path, shown, sizeof shown);
    if (ftruncate(g.fd, off_t(size)) != 0)
        log(LogLevel::kWarn, "trim_failed", "path=\"%s\" error=\"%s\"", shown, strerror(errno));
    write_file_header(format::kFileFinished, end_ticks, end_mono);
    log(LogLevel::kInfo, "trace_written", "path=\"%s\" bytes=%llu chunks=%u dropped=%llu", shown,
        (unsigned long long)size, g.next_chunk,
        (unsigned long long)g.dropped.load(std::memory_order_relaxed));
    unlock_global();
    unblock_thread(prev);
    errno = saved;
}

PROF_NOINSTR const char* trace_path() { return g.path; }

// The parent side of a vfork whose child called exit(): the child has run this process's exit
// handlers, including the dynamic loader's destructor pass (which marks every object finished,
// so ours will not be called again), and has closed the list to new atexit handlers. What exit
// still runs first is the calling thread's list of thread_local destructors, which accepts new
// entries: the finish goes there. Only for the main thread, which normally ends the process;
// another thread's list would also run when that thread ends, finishing the trace too early.
PROF_NOINSTR void finish_from_tls_dtor(void*) {
    runtime_finish();
}

PROF_NOINSTR void vfork_child_exited(int child) {
    if (!g.finish_taken_by_child.exchange(false, std::memory_order_relaxed)) return;
    bool registered = syscall(SYS_gettid) == getpid() &&
                      __cxa_thread_atexit_impl(finish_from_tls_dtor, nullptr, &__dso_handle) == 0;
    log(LogLevel::kWarn, "vfork_child_exit",
        "child=%d finish=%s hint=\"the vfork child called exit(), which ran this process's exit "
        "handlers\"",
        child, registered ? "\"when this thread exits the process\"" : "lost");
}

PROF_NOINSTR void record_overhead(const char* figures) {
    lock_global();
    if (write_overhead_meta(figures)) snprintf(g.overhead, sizeof g.overhead, "%s", figures);
    unlock_global();
}

PROF_NOINSTR void add_dropped(uint64_t n) { g.dropped.fetch_add(n, std::memory_order_relaxed); }

PROF_NOINSTR uint64_t ticks_per_ms() {
    if (!g_use_tsc) return 1000000;
    uint64_t dt = now_ticks() - g.start_ticks, dns = monotonic_ns() - g.start_mono;
    // Until a millisecond has passed the ratio is too coarse: assume 3 GHz.
    return dns >= 1000000 ? uint64_t(double(dt) * 1e6 / double(dns)) : 3000000;
}

} // namespace prof::rt

// ---- vfork ---------------------------------------------------------------------------------
// A vfork child runs in the parent's memory, on the calling thread's stack and thread-local
// storage, until it calls exec or _exit, and no fork handler runs for it. Left alone, the
// calls it makes would be recorded in the parent's thread stream as the parent's own: wrong
// counts, the parent's shadow stack changed under it, chunks opened in its name. libprof.so
// therefore interposes vfork (x86-64): the child's thread records nothing (state kOff, which
// every hook and the memory profiler honour, so the hot path needs no check), and the parent
// gets its state back when the child has left. A C wrapper cannot do this, since the child
// would return through the wrapper's frame and clobber it before the parent uses it: the
// wrapper below jumps to the real vfork with its own return point in place of the caller's,
// which it keeps in thread-local storage (shared with the child, which only reads it).
#if defined(__x86_64__)
namespace prof::rt {
namespace {

constexpr uint32_t kVforkNesting = 16; // a vfork child calling vfork again, and so on

struct VforkCalls {
    uintptr_t ret[kVforkNesting]; // the callers' return addresses
    uint8_t state[kVforkNesting]; // their threads' states at the call
    uint32_t depth;
};
thread_local VforkCalls t_vfork __attribute__((tls_model("initial-exec")));

// With a shadow stack, a return to the caller through another return point faults: then the
// call is passed through untouched.
PROF_NOINSTR bool shadow_stack_active() {
    uint64_t ssp = 0;
    __asm__ volatile("rdsspq %0" : "+r"(ssp)); // a no-op, leaving 0, without shadow stacks
    return ssp != 0;
}

} // namespace
} // namespace prof::rt

struct VforkPlan {
    uintptr_t real;      // the C library's vfork
    uintptr_t intercept; // nonzero: return through prof_vfork_returned
};

// Called by vfork below, in the parent, before the real call.
extern "C" PROF_NOINSTR PROF_HIDDEN __attribute__((used)) VforkPlan
prof_vfork_enter(uintptr_t ret) {
    using namespace prof::rt;
    static std::atomic<uintptr_t> real_vfork{0};
    uintptr_t real = real_vfork.load(std::memory_order_acquire);
    if (!real) {
        int saved = errno;
        real = reinterpret_cast<uintptr_t>(dlsym(RTLD_NEXT, "vfork"));
        // POSIX allows vfork to be fork; with glibc, dlsym does not fail here.
        if (!real) real = reinterpret_cast<uintptr_t>(&fork);
        real_vfork.store(real, std::memory_order_release);
        errno = saved;
    }
    VforkCalls& v = t_vfork;
    if (v.depth == kVforkNesting || shadow_stack_active()) return VforkPlan{real, 0};
    v.ret[v.depth] = ret;
    v.state[v.depth] = block_thread(); // the thread's state, which the parent gets back
    unblock_thread(v.state[v.depth]);
    ++v.depth;
    return VforkPlan{real, 1};
}

// Called in the child (result 0) and, once the child has left, in the parent; returns where
// the caller of vfork continues.
extern "C" PROF_NOINSTR PROF_HIDDEN __attribute__((used)) uintptr_t prof_vfork_return(int result) {
    using namespace prof::rt;
    VforkCalls& v = t_vfork;
    uint32_t top = v.depth - 1;
    uintptr_t ret = v.ret[top];
    if (result == 0) {
        // The parent pops the entry: the child's writes to this memory are the parent's too.
        unblock_thread(kOff);
        return ret;
    }
    int saved = errno; // a failed vfork's
    unblock_thread(v.state[top]);
    v.depth = top;
    if (result > 0) {
        log(LogLevel::kDebug, "vfork_child_not_traced", "child=%d", result);
        vfork_child_exited(result);
    }
    errno = saved;
    return ret;
}

// Exported from libprof.so, ahead of the C library. The stack is aligned to 16 bytes at each
// call; %rax (the result) is kept across the call in the return path.
__asm__(R"(
    .pushsection .text
    .globl vfork
    .type vfork, @function
    .p2align 4
vfork:
    .cfi_startproc
    endbr64
    movq (%rsp), %rdi
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call prof_vfork_enter
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    testq %rdx, %rdx
    jz 1f
    leaq prof_vfork_returned(%rip), %rcx
    movq %rcx, (%rsp)
1:
    jmpq *%rax
    .cfi_endproc
    .size vfork, .-vfork

    .type prof_vfork_returned, @function
    .p2align 4
prof_vfork_returned:
    .cfi_startproc
    .cfi_undefined rip
    endbr64
    pushq %rax
    subq $8, %rsp
    movl %eax, %edi
    call prof_vfork_return
    movq %rax, %rcx
    addq $8, %rsp
    popq %rax
    pushq %rcx
    ret
    .cfi_endproc
    .size prof_vfork_returned, .-prof_vfork_returned
    .popsection
)");
#endif
