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

// Times one execution of a PROF_LINE statement: stopped right after the statement, or when
// the statement leaves the block (return, break, an exception).
class LineTimer {
public:
    PROF_DETAIL_NOINSTR explicit LineTimer(prof_site* site) : site_(site) {
        if (__builtin_expect(prof_line_rss_enabled, 0)) {
            rss_ = prof_rss_bytes() + 1;
            heap_ = prof_heap_bytes();
        }
        start_ = ticks();
    }
    PROF_DETAIL_NOINSTR void stop() {
        if (!site_) return; // first: the destructor's call after stop() then costs nothing
        unsigned long long end = ticks();
        if (__builtin_expect(rss_ != 0, 0))
            prof_line_record_mem(site_, start_, end, rss_ - 1, prof_rss_bytes(), heap_);
        else prof_line_record(site_, start_, end);
        site_ = nullptr;
    }
    PROF_DETAIL_NOINSTR ~LineTimer() { stop(); }
    LineTimer(const LineTimer&) = delete;
    LineTimer& operator=(const LineTimer&) = delete;

private:
    prof_site* site_;
    unsigned long long start_ = 0;
    unsigned long long rss_ = 0;
    long long heap_ = 0;
};

// Times the rest of the enclosing block.
class ScopeTimer {
public:
    PROF_DETAIL_NOINSTR explicit ScopeTimer(prof_site* site) : site_(site) { prof_scope_enter(site); }
    PROF_DETAIL_NOINSTR ~ScopeTimer() { prof_scope_exit(site_); }
    ScopeTimer(const ScopeTimer&) = delete;
    ScopeTimer& operator=(const ScopeTimer&) = delete;

private:
    prof_site* site_;
};

} // namespace detail
} // namespace prof

#define PROF_DETAIL_CAT2(a, b) a##b
#define PROF_DETAIL_CAT(a, b) PROF_DETAIL_CAT2(a, b)
#define PROF_DETAIL_SITE(n, kind, label)                                                    \
    static constinit prof_site PROF_DETAIL_CAT(prof_site_, n) {                             \
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
