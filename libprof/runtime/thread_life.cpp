// A thread's life in the runtime, off the hot path: its start on its first event (buffers,
// stream, the hooks' calibration once per process), its end (the destructor of a key made at
// start), the forking thread continued in the child, the counters flushed at the finish and the
// line sums of the threads still running then. The hooks (call_hooks.cpp) call thread_start.
#include "thread_state.hpp"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace prof::rt {

pthread_key_t g_thread_key;
std::atomic<bool> g_key_ready{false};

namespace {

// A LineStats record (format 1.1; rss_reads 1.10) of `a` at `site` for `stream` (0: the stream
// it is written in) into `out`, which has room for format::kMaxLineStatsRecord bytes. Returns
// its end. Every hit summed in `a` measured memory: its rss_samples are its hits.
PROF_NOINSTR uint8_t* line_stats_record(uint8_t* out, uint32_t stream, const prof_site* site,
                                        const LineAgg& a) {
    return format::put_line_stats(out, {stream, reinterpret_cast<uintptr_t>(site), a.hits, a.ticks,
                                        a.hits, a.rss_increment, a.rss_last, a.heap_increment,
                                        a.rss_reads});
}

// Writes what this thread's PROF_LINE sites added up since the last flush and starts the sums
// again.
PROF_NOINSTR void flush_lines(ThreadState& s, uint64_t now) {
    for (uint32_t id = 1; id < s.site_cap; ++id) {
        LineAgg& a = s.sites[id];
        if (!a.hits) continue;
        prof_site* site = site_by_id(id);
        if (!site || !ensure_bytes(s, now, format::kMaxLineStatsRecord)) break;
        s.w.cursor = line_stats_record(s.w.cursor, 0, site, a);
        commit(s.w);
        uint32_t scope_index = a.scope_index;
        a = LineAgg{};
        a.scope_index = scope_index;
    }
}

// ---- threads still running at the finish -----------------------------------------------------
// Every thread with a stream is linked here (global lock). The finish writes the line sums of
// the threads it finds, in the process stream; a thread that ends after that writes none, so no
// hit is counted twice.
ThreadState* g_live = nullptr;
bool g_lines_collected = false;

PROF_NOINSTR void live_link(ThreadState& s) {
    s.live_prev = nullptr;
    s.live_next = g_live;
    if (g_live) g_live->live_prev = &s;
    g_live = &s;
}

PROF_NOINSTR void live_unlink(ThreadState& s) {
    if (s.live_prev)
        s.live_prev->live_next = s.live_next;
    else if (g_live == &s)
        g_live = s.live_next;
    if (s.live_next) s.live_next->live_prev = s.live_prev;
    s.live_prev = s.live_next = nullptr;
}

// The rounds of key destructors this thread has been through (thread_end).
thread_local uint32_t t_key_rounds __attribute__((tls_model("initial-exec"))) = 0;

PROF_NOINSTR void thread_end(void*) {
    ThreadState& s = prof_tls;
    // Whatever the state (a thread whose recording stopped on a full disk is still linked):
    // the finish must not read this thread's memory once it is gone.
    if (s.state == kNew) return;
    // The C library runs the key destructors in rounds (at most PTHREAD_DESTRUCTOR_ITERATIONS),
    // each in the keys' order, a next round while a destructor set a value again. This key is
    // made at start, before the program's: the thread ends in the next-to-last round, so the
    // calls of the program's key destructors (one that runs twice too) are recorded. The last
    // round is left to the runtimes that end a thread there the same way (TSan's thread state
    // is gone after it, and the runtime's own code, built with TSan, would fault).
    if (++t_key_rounds < PTHREAD_DESTRUCTOR_ITERATIONS - 1 &&
        g_key_ready.load(std::memory_order_acquire) && pthread_setspecific(g_thread_key, &s) == 0)
        return;
    sampler_thread_stop(); // whatever the state too: the timer would outlive the thread
    if (s.state == kDeferred) settle(s);
    uint8_t prev = s.state;
    s.state = kBusy;
    lock_global();
    live_unlink(s);
    bool collected = g_lines_collected;
    unlock_global();
    if (prev != kActive) {
        s.state = prev;
        return;
    }
    uint64_t now = now_ticks();
    if (!collected) flush_lines(s, now);
    if (sampler_pending(true) && ensure_bytes(s, now, 2 * kSampleRoom)) sampler_flush(s, true);
    // A counting thread: its clocks at the end, which its last records may not have.
    if (s.counting) sampler_clock_record(s, now);
    if (ensure(s, now)) {
        uint8_t* p = s.w.cursor;
        if (s.dropped) {
            p = format::put_dropped(p, s.dropped);
            add_dropped(s.dropped);
            s.dropped = 0;
        }
        s.w.cursor = format::put_thread_end(p, take_delta(s.w, now));
        commit(s.w);
    }
    close_chunk(s.w);
    tree_release(s);
    if (s.frames) munmap(s.frames, size_t(s.max_depth) * sizeof(Frame));
    if (s.mask) munmap(s.table, size_t(s.mask + 1) * sizeof(Slot));
    // No site table before it is unmapped: a PROF_LINE in a signal handler reads it with no
    // other check (prof/prof.hpp's LineTimer, for which hit to time).
    uint32_t site_cap = s.site_cap;
    __atomic_store_n(&s.site_cap, 0, __ATOMIC_RELAXED);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (site_cap) munmap(s.sites, size_t(site_cap) * sizeof(LineAgg));
    forget_stacks(s, true);
    s.sites = nullptr;
    s.frames = nullptr;
    s.table = nullptr;
    s.mask = 0;
    s.state = kOff; // TLS destructors that run later are not traced
}

PROF_NOINSTR void write_thread_begin(ThreadState& s, uint64_t now) {
    char name[17] = {};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    size_t len = strnlen(name, 16);
    s.w.cursor = format::put_thread_begin(s.w.cursor, take_delta(s.w, now), s.w.tid, name, len);
    commit(s.w);
}

PROF_NOINSTR void open_stream(ThreadState& s, uint64_t now) {
    s.w = ChunkWriter{};
    s.w.kind = uint16_t(format::StreamKind::kThread);
    s.w.stream = next_stream_id();
    s.w.tid = uint32_t(syscall(SYS_gettid));
    s.w.last_ticks = now;
}

} // namespace

// First event of a thread: set up its buffers and stream. Returns with state kActive or kOff.
PROF_NOINSTR void thread_start(ThreadState& s) {
    // In one instruction: a signal handler that interrupted the caller between its look at the
    // state and here may have started the thread already (its hooks saw kNew too). Starting it
    // twice would link it twice into the live list, a cycle that the finish then walks forever.
    uint8_t expected = kNew;
    if (!__atomic_compare_exchange_n(&s.state, &expected, uint8_t(kBusy), false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // The runtime's start may call the program's own malloc (through the C library's dlsym):
    // the profiler's calls, not the program's.
    struct OwnWork {
        ThreadState& s;
        PROF_NOINSTR explicit OwnWork(ThreadState& t) : s(t) { ++s.own_work; }
        PROF_NOINSTR ~OwnWork() { --s.own_work; }
    } own(s);
    int saved = errno;
    runtime_start();
    if (!tracing_active()) {
        s.state = kOff;
        errno = saved;
        return;
    }
    s.max_depth = g_options.max_depth;
    s.frames = static_cast<Frame*>(map_anon(size_t(s.max_depth) * sizeof(Frame)));
    if (!s.frames || !grow_table(s)) {
        log(LogLevel::kError, "thread_not_traced", "reason=\"out of address space\"");
        s.state = kOff;
        errno = saved;
        return;
    }
    uint64_t now = now_ticks();
    open_stream(s, now);
    if (!open_chunk(s.w, now)) {
        s.state = kOff;
        errno = saved;
        return;
    }
    write_thread_begin(s, now);
    if (g_key_ready.load(std::memory_order_acquire)) pthread_setspecific(g_thread_key, &s);
    // Once per process (a forked child keeps its parent's figures): the hooks' own cost, and
    // the cost of a PROF_LINE (its time is measured inline in every mode).
    static std::atomic<bool> calibrated{false};
    if (g_options.calibrate && !calibrated.exchange(true)) {
        char figures[96] = {};
        calibrate_overhead(s, figures, sizeof figures);
        if (figures[0]) record_overhead(figures);
    }
    // Linked after the calibration, which saves and restores this whole state: links other
    // threads made to this one meanwhile would be lost.
    lock_global();
    live_link(s);
    unlock_global();
    // Last: the runtime's own start-up is in no sample, and the calibration's records went to a
    // scratch buffer that samples must not reach.
    sampler_thread_start(s);
    switch_clock_thread_start(s);
    if (counting_now()) begin_counting(s);
    s.state = kActive;
    errno = saved;
}

// The forking thread continues in the child with a new stream in the child's own file. Its
// open frames are entered again at the fork time so that their exits still match.
PROF_NOINSTR void thread_after_fork_child() {
    ThreadState& s = prof_tls;
    // Only this thread exists in the child (the fork handler holds the global lock): the
    // parent's other threads' line sums are not the child's, whatever this thread's state.
    g_live = nullptr;
    g_lines_collected = false;
    s.live_prev = s.live_next = nullptr;
    // The parent's timer is not the child's (timers are not inherited), nor its waiting samples.
    sampler_after_fork();
    // The fork handler settled a deferred activation in the parent; its frame is entered again
    // below with the others.
    if (s.state == kDeferred) s.state = kActive;
    if (s.state != kActive && s.state != kBusy) return;
    uint8_t prev = s.state;
    s.state = kBusy;
    if (s.w.base) munmap(s.w.base, s.w.end - s.w.base); // the parent's chunk: not ours
    unmap_retired(s.w);
    forget_runs(s);
    if (s.mask) memset(s.table, 0, size_t(s.mask + 1) * sizeof(Slot));
    s.used = 0;
    s.next_index = 0;
    s.dropped = 0; // the unrecorded deep frames (overflow) are still on the child's stack
    // Written to the parent's trace before the fork; site ids restart in the child.
    if (s.site_cap) memset(s.sites, 0, size_t(s.site_cap) * sizeof(LineAgg));
    forget_stacks(s, false); // stacks are described again in the child's file
    live_link(s);
    uint64_t now = now_ticks();
    open_stream(s, now);
    if (!open_chunk(s.w, now)) {
        s.state = kOff;
        return;
    }
    write_thread_begin(s, now);
    // The frames open at the fork are the parent's calls, continued in the child: no call of
    // the child's (ncalls counts entries; in a run of N forked children, main has one). The
    // parent's call tree counts into the parent's trace: the child counts in a tree of its own,
    // its open frames with no call. With PROF_TIME=auto the child's trace traces again until it
    // has samples of its own.
    bool counting = s.counting && counting_from_start();
    tree_release(s);
    counting_after_fork(s);
    if (counting) {
        sampler_thread_start(s); // the child's thread samples its own CPU time
        switch_clock_thread_start(s);
        if (begin_counting(s)) {
            s.state = prev;
            return;
        }
    }
    // Traced: they are entered again at the fork time, so that their exits match, and the Meta
    // record inherited_frames.<stream> says how many of the stream's first Enter records are
    // such continuations.
    uint32_t depth = s.depth;
    s.depth = 0;
    bool full = false; // no room: the thread records no more
    for (uint32_t i = 0; i < depth; ++i) {
        if (!ensure(s, now)) {
            full = true;
            break;
        }
        Frame f = s.frames[i];
        write_enter(s, f.fn, is_scope(f.site) ? kScopeMark : f.site, f.cfa, now);
        commit(s.w);
    }
    if (s.depth) {
        char key[40], value[16];
        snprintf(key, sizeof key, "inherited_frames.%u", s.w.stream);
        int n = snprintf(value, sizeof value, "%u", s.depth);
        uint8_t rec[128];
        uint8_t* end = format::put_meta(rec, key, strlen(key), value, size_t(n));
        lock_global();
        process_record(rec, size_t(end - rec));
        unlock_global();
    }
    if (full) return;
    if (!counting) {
        sampler_thread_start(s);
        switch_clock_thread_start(s);
    }
    s.state = prev;
}

PROF_NOINSTR void thread_off_after_fork() {
    ThreadState& s = prof_tls;
    sampler_after_fork();
    g_live = nullptr;
    s.live_prev = s.live_next = nullptr;
    if (s.w.base) munmap(s.w.base, size_t(s.w.end - s.w.base)); // the parent's chunk
    unmap_retired(s.w);
    s.w = ChunkWriter{};
    forget_runs(s);
    tree_release(s);
    s.state = kOff;
}

PROF_NOINSTR void thread_flush_counters(bool finish) {
    ThreadState& s = prof_tls;
    if (s.state == kDeferred) settle(s);
    if (s.state != kActive) return;
    s.state = kBusy;
    // After the finish collected every thread's sums (a fork at exit), they are written.
    if (!__atomic_load_n(&g_lines_collected, __ATOMIC_ACQUIRE)) flush_lines(s, now_ticks());
    if (sampler_pending(finish)) { // at the finish, after the thread's timer was deleted
        uint64_t now = now_ticks();
        if (ensure_bytes(s, now, 2 * kSampleRoom)) sampler_flush(s, finish);
    }
    if (finish && s.counting) sampler_clock_record(s, now_ticks()); // as in thread_end
    if (!s.dropped) {
        s.state = kActive;
        return;
    }
    uint64_t now = now_ticks();
    if (ensure(s, now)) {
        s.w.cursor = format::put_dropped(s.w.cursor, s.dropped);
        commit(s.w);
    }
    add_dropped(s.dropped);
    s.dropped = 0;
    s.state = kActive;
}

// At the finish: the line sums of threads still running (other than the caller, which flushed
// its own) go to the process stream, each naming its thread's stream. They are read while
// those threads may still add to them: hits after this point are not recorded.
PROF_NOINSTR void collect_running_lines() {
    uint8_t prev = block_thread();
    lock_global();
    g_lines_collected = true;
    for (ThreadState* t = g_live; t; t = t->live_next) {
        if (t == &prof_tls) continue;
        // The count before the table: a thread growing its table stores the new table before
        // the new count, and old tables stay mapped, so `cap` entries are always readable.
        uint32_t cap = __atomic_load_n(&t->site_cap, __ATOMIC_ACQUIRE);
        LineAgg* sites = __atomic_load_n(&t->sites, __ATOMIC_ACQUIRE);
        for (uint32_t id = 1; sites && id < cap; ++id) {
            LineAgg a;
            memcpy(&a, &sites[id], sizeof a);
            prof_site* site = site_by_id(id);
            if (!a.hits || !site) continue;
            uint8_t rec[format::kMaxLineStatsRecord];
            process_record(rec, size_t(line_stats_record(rec, t->w.stream, site, a) - rec));
        }
    }
    unlock_global();
    unblock_thread(prev);
}

PROF_NOINSTR uint8_t block_thread() {
    if (prof_tls.state == kDeferred) settle(prof_tls);
    uint8_t prev = prof_tls.state;
    prof_tls.state = kBusy;
    ++prof_tls.own_work;
    return prev;
}

PROF_NOINSTR void unblock_thread(uint8_t prev) {
    // vfork's return paths set the state with it, in the child and the parent, without a
    // block_thread of their own.
    if (prof_tls.own_work) --prof_tls.own_work;
    prof_tls.state = prev;
}

PROF_NOINSTR void create_thread_key() {
    if (pthread_key_create(&g_thread_key, thread_end) == 0)
        g_key_ready.store(true, std::memory_order_release);
}

} // namespace prof::rt
