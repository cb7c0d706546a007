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
// visible after it) and adds its time to the line's hits, aggregated per thread in the
// process. PROF_SCOPE(name) and PROF_FUNCTION() are timed per activation and appear in
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

// Trace format records written inline: unsigned LEB128 and the time delta of a timed record.
PROF_DETAIL_NOINSTR inline uint8_t* put_uleb(uint8_t* p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = uint8_t(v | 0x80);
        v >>= 7;
    }
    *p++ = uint8_t(v);
    return p;
}

PROF_DETAIL_NOINSTR inline uint64_t take_delta(prof_chunk_writer& w, uint64_t now) {
    uint64_t dt = now > w.last_ticks ? now - w.last_ticks : 0;
    if (now > w.last_ticks) w.last_ticks = now;
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

extern "C" int prof_line_fast; // set by the runtime: TSC clock, no RSS sampling per line

// Times one execution of a PROF_LINE statement: stopped right after the statement, or when
// the statement leaves the block (return, break, an exception).
class LineTimer {
public:
    PROF_DETAIL_NOINSTR explicit LineTimer(prof_site* site) : site_(site) {
#if defined(__x86_64__)
        fast_ = __builtin_expect(prof_line_fast, 1);
        if (fast_) {
            start_ = __rdtsc();
            return;
        }
#endif
        if (__builtin_expect(prof_line_rss_enabled, 0)) {
            rss_ = prof_rss_bytes() + 1;
            heap_ = prof_heap_bytes();
        }
        start_ = ticks();
    }
    PROF_DETAIL_NOINSTR void stop() {
        if (!site_) return; // first: the destructor's call after stop() then costs nothing
#if defined(__x86_64__)
        if (fast_) {
            // The common case: add the hit to this thread's counters of the site. The library
            // takes the thread's first hit of the site (id or table missing) and the hits of a
            // thread that records nothing (stopped, or a vfork child sharing our memory).
            unsigned long long end = __rdtsc();
            prof_thread& t = prof_tls;
            unsigned id = __atomic_load_n(&site_->id, __ATOMIC_RELAXED);
            if (__builtin_expect(t.state == PROF_DETAIL_THREAD_ACTIVE && id && id < t.site_cap,
                                 1)) {
                prof_site_counts& c = t.sites[id];
                ++c.hits;
                c.ticks += end > start_ ? end - start_ : 0;
            } else {
                prof_line_record(site_, start_, end);
            }
            site_ = nullptr;
            return;
        }
#endif
        unsigned long long end = ticks();
        if (rss_ != 0) prof_line_record_mem(site_, start_, end, rss_ - 1, prof_rss_bytes(), heap_);
        else prof_line_record(site_, start_, end);
        site_ = nullptr;
    }
    PROF_DETAIL_NOINSTR ~LineTimer() { stop(); }
    LineTimer(const LineTimer&) = delete;
    LineTimer& operator=(const LineTimer&) = delete;

private:
    prof_site* site_;
    bool fast_ = false;
    unsigned long long start_ = 0;
    unsigned long long rss_ = 0;
    long long heap_ = 0;
};

// Times the rest of the enclosing block: an Enter record now and an Exit record at the end of
// the block, written inline into the thread's chunk when the common case allows (the site has a
// function index in this thread's stream, the shadow stack and the chunk have room).
class ScopeTimer {
public:
    PROF_DETAIL_NOINSTR explicit ScopeTimer(prof_site* site) : site_(site), cfa_(stack_level()) {
        prof_thread& t = prof_tls;
        if (__builtin_expect(begin(t), 1)) {
            unsigned id = __atomic_load_n(&site->id, __ATOMIC_RELAXED);
            uint32_t index = id < t.site_cap ? t.sites[id].scope_index : 0; // index + 1
            if (__builtin_expect(index != 0 && t.depth < t.max_depth, 1)) {
                unsigned long long now = ticks();
                t.frames[t.depth++] = prof_frame{reinterpret_cast<uintptr_t>(site),
                                                 PROF_DETAIL_SCOPE_MARK, cfa_};
                uint8_t* p = t.w.cursor;
                *p++ = PROF_DETAIL_TAG_ENTER;
                p = put_uleb(p, index - 1);
                p = put_uleb(p, take_delta(t.w, now));
                publish(t, p);
                return;
            }
            end(t);
        }
        prof_scope_enter_at(site, cfa_);
    }
    PROF_DETAIL_NOINSTR ~ScopeTimer() {
        prof_thread& t = prof_tls;
        if (__builtin_expect(begin(t), 1)) {
            if (__builtin_expect(t.depth && !t.overflow, 1)) {
                const prof_frame& f = t.frames[t.depth - 1];
                if (__builtin_expect(f.fn == reinterpret_cast<uintptr_t>(site_) &&
                                         f.site == PROF_DETAIL_SCOPE_MARK && f.cfa == cfa_,
                                     1)) {
                    unsigned long long now = ticks();
                    --t.depth;
                    uint8_t* p = t.w.cursor;
                    *p++ = PROF_DETAIL_TAG_EXIT;
                    p = put_uleb(p, take_delta(t.w, now));
                    publish(t, p);
                    return;
                }
            }
            end(t);
        }
        prof_scope_exit_at(site_, cfa_); // not the innermost frame (longjmp, alloca), or no room
    }
    ScopeTimer(const ScopeTimer&) = delete;
    ScopeTimer& operator=(const ScopeTimer&) = delete;

private:
    prof_site* site_;
    uintptr_t cfa_;
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
