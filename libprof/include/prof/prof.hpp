// libprof for C++: the line/scope macros, line_profiler's view of marked code.
//
//   #include <prof/prof.hpp>
//   double work(std::vector<double>& v) {
//       PROF_FUNCTION();                                  // times the whole function
//       PROF_LINE(auto s = std::accumulate(v.begin(), v.end(), 0.0)); // times this statement
//       for (auto& x : v) { PROF_LINE(x = std::sqrt(x) * s); }
//       { PROF_SCOPE("normalise"); /* ... */ }            // times the rest of the block
//       return s;
//   }
//
// PROF_LINE(statement) runs the statement in the enclosing scope (a declaration stays
// visible after it) and adds its time to the line's hits, counted per thread in place in the
// trace file. PROF_SCOPE(name) and PROF_FUNCTION() are timed per activation and appear in
// profreport's function table and call tree. Each macro expands to several statements: after
// an unbraced `if`/`for`, put it in braces. With -DPROF_DISABLE the macros compile to the
// bare statement or to nothing. Link with prof::prof.
#pragma once

#include <prof/prof.h>
#include <prof/prof_thread.h>

#include <stdint.h>

#if !defined(PROF_DISABLE)
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

// The helpers below run inside the user's code, which may be built with
// -finstrument-functions: they must not be traced themselves, or a scope would be opened
// inside its constructor's frame and closed when that frame returns.
#define PROF_DETAIL_NOINSTR __attribute__((no_instrument_function, always_inline))

namespace prof {
namespace detail {

extern "C" int prof_clock_is_tsc; // set by the runtime: the trace clock is rdtsc

PROF_DETAIL_NOINSTR inline unsigned long long ticks() {
#if defined(__x86_64__)
    if (__builtin_expect(prof_clock_is_tsc, 1)) return __rdtsc();
#endif
    return prof_ticks();
}

// The stack level of the code around a scope: what a call made from here would see as its
// canonical frame address, so that the library's out-of-line paths agree with the inline ones.
PROF_DETAIL_NOINSTR inline uintptr_t stack_level() {
#if defined(__x86_64__)
    uintptr_t sp;
    __asm__ volatile("mov %%rsp, %0" : "=r"(sp));
    return sp;
#else
    return reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
#endif
}

// The trace records written inline, and the unsigned LEB128 they use: a copy of the encoders of
// libprof's record codec (format/prof/record_codec.hpp, which is not installed), which a unit
// test holds byte for byte to this one (tests/unit/record_codec_tests.cpp).
PROF_DETAIL_NOINSTR inline uint8_t* put_uleb(uint8_t* p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = uint8_t(v | 0x80);
        v >>= 7;
    }
    *p++ = uint8_t(v);
    return p;
}

PROF_DETAIL_NOINSTR inline uint8_t* put_u64(uint8_t* p, uint64_t v) {
    __builtin_memcpy(p, &v, 8);
    return p + 8;
}

// Enter: uleb fn, uleb dt.
PROF_DETAIL_NOINSTR inline uint8_t* put_enter(uint8_t* p, uint64_t fn, uint64_t dt) {
    *p++ = PROF_DETAIL_TAG_ENTER;
    p = put_uleb(p, fn);
    return put_uleb(p, dt);
}

// Exit: uleb dt.
PROF_DETAIL_NOINSTR inline uint8_t* put_exit(uint8_t* p, uint64_t dt) {
    *p++ = PROF_DETAIL_TAG_EXIT;
    return put_uleb(p, dt);
}

// ScopeRun, a sized record: uleb length, then uleb dt, uleb fn, u64 count, u64 ticks (its last
// 16 bytes, added to in place).
PROF_DETAIL_NOINSTR inline uint8_t* put_scope_run(uint8_t* p, uint64_t dt, uint64_t fn,
                                                  uint64_t count, uint64_t ticks) {
    uint8_t* q = put_uleb(put_uleb(p + 2, dt), fn);
    p[0] = PROF_DETAIL_TAG_SCOPE_RUN;
    p[1] = uint8_t(q + 16 - (p + 2)); // under 128: a one-byte length
    return put_u64(put_u64(q, count), ticks);
}

// The time delta of a timed record, as the library's (runtime.hpp): never negative, and the
// clock moving forward is the likely case.
PROF_DETAIL_NOINSTR inline uint64_t take_delta(prof_chunk_writer& w, uint64_t now) {
    if (__builtin_expect(now <= w.last_ticks, 0)) return 0;
    uint64_t dt = now - w.last_ticks;
    w.last_ticks = now;
    return dt;
}

// Publishes the records written so far: a reader of the file (or of a crashed process's
// trace) sees them once `used` covers them.
PROF_DETAIL_NOINSTR inline void commit(prof_chunk_writer& w) {
    __atomic_store_n(reinterpret_cast<uint32_t*>(w.base + PROF_DETAIL_CHUNK_USED),
                     uint32_t(w.cursor - w.base - PROF_DETAIL_CHUNK_HEADER), __ATOMIC_RELEASE);
}

// Claims the thread's chunk for an inline record: the thread must be active (not inside a
// hook that a signal interrupted, not stopped), and it is marked busy before the room is
// checked, so that a signal handler's records cannot fill the chunk between the check and the
// write. end() hands the thread back.
PROF_DETAIL_NOINSTR inline bool begin(prof_thread& t) {
    if (t.state != PROF_DETAIL_THREAD_ACTIVE) return false;
    t.state = PROF_DETAIL_THREAD_BUSY;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (__builtin_expect(t.w.end - t.w.cursor >= PROF_DETAIL_RECORD_ROOM, 1)) return true;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t.state = PROF_DETAIL_THREAD_ACTIVE;
    return false;
}

PROF_DETAIL_NOINSTR inline void end(prof_thread& t) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t.state = PROF_DETAIL_THREAD_ACTIVE;
}

// The records written up to `p` join the chunk, and the thread is handed back.
PROF_DETAIL_NOINSTR inline void publish(prof_thread& t, uint8_t* p) {
    t.w.cursor = p;
    commit(t.w);
    end(t);
}

extern "C" int prof_line_fast; // set by the runtime: TSC clock, no memory measured per line

// The size of the thread's site table, before the table itself is read (see grow_lines).
PROF_DETAIL_NOINSTR inline uint32_t site_cap(const prof_thread& t) {
    return __atomic_load_n(&t.site_cap, __ATOMIC_ACQUIRE);
}

// Unaligned u64 fields of records updated in place in the chunk (LineCounts, ScopeRun).
PROF_DETAIL_NOINSTR inline uint64_t load_u64(const uint8_t* p) {
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
    return v;
}
PROF_DETAIL_NOINSTR inline void store_u64(uint8_t* p, uint64_t v) {
    put_u64(p, v);
}

// Whether a hit of the site `c` may be added in place to its LineCounts record: the thread is
// ACTIVE, or DEFERRED (a scope run is open: its Enter waits; this writes no record), and the
// record is in its current chunk.
PROF_DETAIL_NOINSTR inline bool counted_in_place(const prof_thread& t, const prof_site_counts& c) {
    return (t.state & 3) == PROF_DETAIL_THREAD_ACTIVE && c.counter_seq == t.w.seq;
}

// Times one execution of a PROF_LINE statement: stopped right after the statement, or when
// the statement leaves the block (return, break, an exception).
//
// The two clock reads cost about 20 ns in a VM, more than a short statement: a site whose timed
// hits are short (under ten clock reads, prof_line_short_ticks) has its clock read around one
// hit in PROF_LINE_CLOCK_EVERY, chosen at random (prof_line_plan), and the timed hit's duration
// counted that many times. Every hit is counted. The sum of the times is then an estimate whose
// expectation is the sum of every hit's time, as if all were timed (each hit's chance of being
// timed is set before it runs), at a few ns per hit.
class LineTimer {
public:
    PROF_DETAIL_NOINSTR explicit LineTimer(prof_site* site) : site_(site) {
#if defined(__x86_64__)
        fast_ = __builtin_expect(prof_line_fast, 1);
        if (fast_) {
            prof_thread& t = prof_tls;
            unsigned id = __atomic_load_n(&site->id, __ATOMIC_RELAXED);
            // Acquire: the table is read after its size (a signal handler's grow_lines sets the
            // size to 0, then the table, then the size). A table replaced meanwhile stays
            // mapped (its decrement is then lost: one more untimed hit, a negligible bias).
            if (__builtin_expect(id != 0 && id < site_cap(t), 1)) {
                prof_site_counts& c = t.sites[id];
                if (c.clock_skip) {
                    --c.clock_skip;
                    // An untimed hit is counted now, in place, when the thread's record of the
                    // site is in its current chunk: then nothing is left to do at its end (one
                    // look at the thread and the site instead of two: the common case's cost).
                    if (__builtin_expect(counted_in_place(t, c), 1)) {
                        store_u64(c.counter, load_u64(c.counter) + 1);
                        site_ = nullptr;
                        return;
                    }
                    weight_ = 0;
                    return;
                }
                weight_ = c.clock_extra + 1;
            }
            start_ = __rdtsc();
            return;
        }
#endif
        mem_ = prof_line_rss_enabled;
        if (__builtin_expect(mem_, 0)) {
            if (mem_ & PROF_LINE_MEM_RSS) rss_ = prof_rss_bytes();
            if (mem_ & PROF_LINE_MEM_HEAP) heap_ = prof_heap_bytes();
        }
        start_ = ticks();
    }
    PROF_DETAIL_NOINSTR void stop() {
        if (!site_) return; // first: the destructor's call after stop() then costs nothing
#if defined(__x86_64__)
        if (fast_) {
            // A timed hit (an untimed one was counted at the start): add it to the site's
            // LineCounts record in the thread's current chunk, in place. The library takes the
            // thread's first hit of the site in a chunk (it writes that record), and the hits
            // of a thread that records nothing (stopped, or a vfork child sharing our memory).
            unsigned long long end = weight_ ? __rdtsc() : 0;
            prof_thread& t = prof_tls;
            unsigned id = __atomic_load_n(&site_->id, __ATOMIC_RELAXED);
            if (__builtin_expect(id && id < site_cap(t) && counted_in_place(t, t.sites[id]), 1)) {
                prof_site_counts& c = t.sites[id];
                uint8_t* f = c.counter;
                store_u64(f, load_u64(f) + 1);
                if (weight_) {
                    unsigned long long dt = end > start_ ? end - start_ : 0;
                    store_u64(f + 8, load_u64(f + 8) + dt * weight_);
                    prof_line_timed(&c, dt, weight_);
                }
            } else {
                prof_line_record_weighted(site_, start_, end, weight_);
            }
            site_ = nullptr;
            return;
        }
#endif
        unsigned long long end = ticks();
        if (__builtin_expect(mem_, 0)) {
            if (!(mem_ & PROF_LINE_MEM_RSS))
                prof_line_record_heap(site_, start_, end, heap_);
            else if (mem_ & PROF_LINE_MEM_HEAP)
                prof_line_record_mem(site_, start_, end, rss_, prof_rss_bytes(), heap_);
            else
                prof_line_record_rss(site_, start_, end, rss_, prof_rss_bytes());
        } else {
            prof_line_record(site_, start_, end);
        }
        site_ = nullptr;
    }
    PROF_DETAIL_NOINSTR ~LineTimer() { stop(); }
    LineTimer(const LineTimer&) = delete;
    LineTimer& operator=(const LineTimer&) = delete;

private:
    prof_site* site_;
    bool fast_ = false;
    unsigned weight_ = 1; // the hits this one's duration stands for; 0: not timed
    int mem_ = 0;         // prof_line_rss_enabled when the line started
    unsigned long long start_ = 0;
    unsigned long long rss_ = 0;
    long long heap_ = 0;
};

extern "C" int prof_scope_runs; // set by the runtime: merge runs of leaf activations (1.3)

// Turns the Enter/Exit pair of the latest leaf activation (the last records of the chunk) into
// a ScopeRun record of one activation, which the next activations of the scope at the same
// depth then join. The pair is first taken back out of `used`: a reader of a process killed
// meanwhile sees the records before it, never a half-written run.
PROF_DETAIL_NOINSTR inline void start_run(prof_thread& t) {
    uint8_t* p = t.leaf_pos;
    t.w.cursor = p;
    commit(t.w);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    p = put_scope_run(p, t.leaf_start - t.leaf_prev_ticks, t.leaf_key >> 32, 1, t.leaf_ticks);
    t.run_fields = p - 16;
    t.w.last_ticks = t.leaf_start;
    t.run_end = p;
    t.run_key = t.leaf_key;
    t.leaf_end = nullptr;
    t.w.cursor = p;
    commit(t.w);
}

// Times the rest of the enclosing block. The common case is written inline: an Enter record
// now and an Exit record at the end of the block, when the site has a function index in this
// thread's stream and the shadow stack and the chunk have room. An activation that follows a
// leaf activation of the same scope at the same depth, with no record between them, joins
// their ScopeRun record instead (format 1.3): it is timed alone and its count and time are
// added to the record in place, so a scope in a hot loop costs no trace bytes per hit. While
// it is open the thread's state is DEFERRED: anything else the thread records first writes
// its Enter record (the library settles it), and it then ends with an Exit like any other.
class ScopeTimer {
public:
    PROF_DETAIL_NOINSTR explicit ScopeTimer(prof_site* site) : site_(site), cfa_(stack_level()) {
        prof_thread& t = prof_tls;
        if (__builtin_expect(begin(t), 1)) {
            unsigned id = __atomic_load_n(&site->id, __ATOMIC_RELAXED);
            uint32_t index = id < site_cap(t) ? t.sites[id].scope_index : 0; // index + 1
            if (__builtin_expect(index != 0 && t.depth < t.max_depth, 1)) {
                uint32_t parent = t.depth;
                t.frames[t.depth++] = prof_frame{reinterpret_cast<uintptr_t>(site),
                                                 PROF_DETAIL_SCOPE_MARK, cfa_, 0, 0};
                uint8_t* p = t.w.cursor;
                if (prof_scope_runs) {
                    uint64_t key = uint64_t(index - 1) << 32 | parent;
                    bool run = p == t.run_end && key == t.run_key;
                    if (run || (p == t.leaf_end && key == t.leaf_key)) {
                        if (!run) start_run(t);
                        // Joining the run: timed or not as a PROF_LINE's hit (LineTimer), so a
                        // short scope in a hot loop reads the clock around one activation in
                        // PROF_LINE_CLOCK_EVERY. Untimed, its start is unknown (0): the library
                        // reads the clock if it has to settle it.
                        prof_site_counts& c = t.sites[id];
                        counts_ = &c;
                        if (c.clock_skip) {
                            --c.clock_skip;
                            weight_ = 0;
                            join(t, 0);
                            return;
                        }
                        weight_ = c.clock_extra + 1;
                        join(t, ticks());
                        return;
                    }
                    t.leaf_pos = p;
                    t.leaf_prev_ticks = t.w.last_ticks;
                    t.leaf_key = key | 0xffffffffu;
                }
                p = put_enter(p, index - 1, take_delta(t.w, ticks()));
                t.leaf_end = p;
                publish(t, p);
                return;
            }
            end(t);
        }
        prof_scope_enter_at(site, cfa_);
    }
    PROF_DETAIL_NOINSTR ~ScopeTimer() {
        prof_thread& t = prof_tls;
        if (t.state == PROF_DETAIL_THREAD_DEFERRED) {
            t.state = PROF_DETAIL_THREAD_BUSY;
            __atomic_signal_fence(__ATOMIC_SEQ_CST);
            // Still this activation's run, nothing written since it joined: a signal handler
            // that recorded something between the state's load and the store above settled it
            // (wrote its Enter), and may have left a run of its own as the last record.
            bool joined = t.w.cursor == joined_ && t.run_end == joined_ && t.w.seq == joined_seq_;
            if (__builtin_expect(joined && is_top(t), 1)) {
                --t.depth;
                uint8_t* f = t.run_fields;
                store_u64(f, load_u64(f) + 1);
                if (weight_) {
                    unsigned long long now = ticks();
                    unsigned long long dt = now > t.defer_ticks ? now - t.defer_ticks : 0;
                    // Never more than the run's span so far (it starts at the chain's last
                    // time): readers lay the activations out within it, and a long activation
                    // counted 16 times would push the thread's clock past its next record.
                    uint64_t sum = load_u64(f + 8) + dt * weight_;
                    uint64_t span = now > t.w.last_ticks ? now - t.w.last_ticks : 0;
                    store_u64(f + 8, sum < span ? sum : span);
                    prof_line_timed(counts_, dt, weight_);
                }
                end(t);
                return;
            }
            settled();
            __atomic_signal_fence(__ATOMIC_SEQ_CST);
            // The library settles it first, if it still needs settling.
            t.state = joined ? PROF_DETAIL_THREAD_DEFERRED : PROF_DETAIL_THREAD_ACTIVE;
        } else {
            settled();
            if (__builtin_expect(begin(t), 1)) {
                if (__builtin_expect(t.depth && !t.overflow && is_top(t), 1)) {
                    unsigned long long now = ticks();
                    --t.depth;
                    uint8_t* p = t.w.cursor;
                    // A leaf: its Enter is the last record (never true with PROF_SCOPE_RUNS=0).
                    bool leaf = p == t.leaf_end && uint32_t(t.leaf_key) == 0xffffffffu;
                    if (leaf) {
                        t.leaf_start = t.w.last_ticks;
                        t.leaf_ticks = now > t.leaf_start ? now - t.leaf_start : 0;
                        t.leaf_key = (t.leaf_key & ~uint64_t(0xffffffffu)) | t.depth;
                    }
                    p = put_exit(p, take_delta(t.w, now));
                    if (leaf) t.leaf_end = p;
                    publish(t, p);
                    return;
                }
                end(t);
            }
        }
        prof_scope_exit_at(site_, cfa_); // not the innermost frame (longjmp, alloca), or no room
    }
    ScopeTimer(const ScopeTimer&) = delete;
    ScopeTimer& operator=(const ScopeTimer&) = delete;

  private:
    // An activation that joined a run and was settled (something was recorded inside it) ends
    // with an Exit, timed from its Enter, for itself alone: one drawn to stand for several
    // leaves the next activation timed for itself alone too, not at that weight.
    PROF_DETAIL_NOINSTR void settled() {
        if (__builtin_expect(weight_ > 1, 0) && counts_) counts_->clock_extra = 0;
    }
    PROF_DETAIL_NOINSTR bool is_top(const prof_thread& t) const {
        const prof_frame& f = t.frames[t.depth - 1];
        return f.fn == reinterpret_cast<uintptr_t>(site_) && f.site == PROF_DETAIL_SCOPE_MARK &&
               f.cfa == cfa_;
    }
    PROF_DETAIL_NOINSTR void join(prof_thread& t, unsigned long long now) {
        t.defer_ticks = now;
        joined_ = t.run_end;
        joined_seq_ = t.w.seq;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        t.state = PROF_DETAIL_THREAD_DEFERRED;
    }

    prof_site* site_;
    uintptr_t cfa_;
    uint8_t* joined_ = nullptr; // the run this activation joined (its end then), and its chunk
    uint32_t joined_seq_ = 0;
    unsigned weight_ = 1;                // joined: the activations its time stands for; 0: none
    prof_site_counts* counts_ = nullptr; // joined: its site's counts (which one is timed next)
};

} // namespace detail
} // namespace prof

// The site is constant data, initialised before any code runs (constinit says so in C++20;
// earlier standards give the same constant initialisation to this literal initializer).
#if defined(__cpp_constinit)
#define PROF_DETAIL_CONSTINIT constinit
#else
#define PROF_DETAIL_CONSTINIT
#endif

#define PROF_DETAIL_CAT2(a, b) a##b
#define PROF_DETAIL_CAT(a, b) PROF_DETAIL_CAT2(a, b)
#define PROF_DETAIL_SITE(n, kind, label)                                                    \
    static PROF_DETAIL_CONSTINIT prof_site PROF_DETAIL_CAT(prof_site_, n) {                 \
        __FILE__, __PRETTY_FUNCTION__, label, __LINE__, kind, 0                             \
    }

#define PROF_LINE(...) PROF_DETAIL_LINE(__COUNTER__, __VA_ARGS__)
#define PROF_DETAIL_LINE(n, ...)                                                            \
    PROF_DETAIL_SITE(n, 1, #__VA_ARGS__);                                                   \
    ::prof::detail::LineTimer PROF_DETAIL_CAT(prof_line_, n)(&PROF_DETAIL_CAT(prof_site_, n)); \
    __VA_ARGS__;                                                                            \
    PROF_DETAIL_CAT(prof_line_, n).stop()

#define PROF_SCOPE(name) PROF_DETAIL_SCOPE(__COUNTER__, 2, name)
#define PROF_FUNCTION() PROF_DETAIL_SCOPE(__COUNTER__, 3, nullptr)
#define PROF_DETAIL_SCOPE(n, kind, label)                                                   \
    PROF_DETAIL_SITE(n, kind, label);                                                       \
    ::prof::detail::ScopeTimer PROF_DETAIL_CAT(prof_scope_, n)(&PROF_DETAIL_CAT(prof_site_, n))

#else // PROF_DISABLE: zero cost, no reference to the library

#define PROF_LINE(...) __VA_ARGS__
#define PROF_SCOPE(name) static_cast<void>(0)
#define PROF_FUNCTION() static_cast<void>(0)

#endif
