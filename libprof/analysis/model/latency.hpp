// Per-call latency: for each function, the distribution of its calls' inclusive wall times
// (mean, p50, p90, p99, p99.9, max), its slowest calls (when, in which thread, the call path),
// and what made its tail slow: for the slowest 1% of its calls, the share of their time each
// direct callee held, against the same share in its other calls. Exact, from a trace whose hooks
// timed every call (PROF_TIME=traced): two replays of the traces, one for the durations and one
// for the tail's callees, through Session's activation observer.
// From a trace whose hooks counted calls (PROF_TIME=sampled or auto, format 1.13): the call
// paths whose calls lasted PROF_LATENCY_MIN or more on average had each call timed into
// log-linear buckets, so their percentiles are within 1/16 of the truth (`bound`); the mean and
// the longest call are exact. Their tail is their slowest call: the callees whose own slowest
// call lies inside it.
#pragma once

#include "analysis/engine/session.hpp"
#include "analysis/model/profile.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace prof::analysis::views {

struct SlowCall {
    uint64_t duration_ns = 0;
    uint64_t start_ns = 0; // since its trace started
    uint32_t tid = 0;
    std::string thread;            // its name, when the trace has one
    std::vector<std::string> path; // outermost first, ending with the function
};

struct TailCallee {
    std::string name, file;
    uint32_t line = 0;
    double slow_share = 0;    // of the slow calls' time, spent in calls of this callee
    double typical_share = 0; // of the other calls' time
    double slow_mean_ns = 0, typical_mean_ns = 0; // its time per call of the function
};

struct FunctionLatency {
    std::string name, file; // file without directories
    uint32_t line = 0;
    uint64_t calls = 0;   // timed: the distribution's
    uint64_t untimed = 0; // counted calls of its paths that were not timed (a counted trace)
    double bound = 0;     // the percentiles' relative error: 0 exact, 1/16 from buckets
    double mean_ns = 0;
    uint64_t total_ns = 0;
    uint64_t p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0; // ns, nearest rank
    // A 95% confidence interval of the p99, distribution-free (the calls as a sample of the
    // function's calls: the count below the p99 is binomial). p99_high is UINT64_MAX where the
    // calls are too few to bound it from above (under 368).
    uint64_t p99_low = 0, p99_high = 0;
    std::vector<SlowCall> slowest;                         // slowest first
    // The tail: the slowest 1% of the calls (at least one), from `tail_threshold_ns` up.
    uint64_t tail_calls = 0, tail_threshold_ns = 0;
    // From buckets: the tail is the slowest call alone, and a callee's time in it is its own
    // slowest call when that lies inside it ("the rest" then includes its other calls).
    bool tail_from_slowest = false;
    double tail_self_share = 0, typical_self_share = 0; // the function's own code
    std::vector<TailCallee> tail;                       // by the growth of their share
    // Log-2 histogram of the durations: bucket b counts calls of [2^b, 2^(b+1)) ns.
    std::vector<uint64_t> histogram;
};

struct LatencyReport {
    uint64_t calls = 0;
    // Some trace counted its calls (PROF_TIME=sampled or auto): only its timed paths are here,
    // and `untimed` of its functions' calls were not timed.
    bool counted = false;
    uint64_t untimed = 0;
    uint64_t latency_min_ns = 0; // PROF_LATENCY_MIN of the first counted trace (0: not known)
    std::vector<FunctionLatency> functions; // by total time, largest first
};

struct LatencyOptions {
    size_t slowest = 3; // slowest calls kept per function
    bool tail = true;   // the second replay, for the tail's callees
    // Makes the session that reads the traces (called once per replay).
    std::function<std::unique_ptr<Session>(ActivationObserver&)> open;
    // Instead of `open`: a session read already, without an observer, whose counted paths'
    // timed calls are all the report takes (no replay: traced calls are left out).
    const Session* read = nullptr;
    // One thread's calls (a profile of one thread: profreport html --thread); all by default.
    ThreadFilter thread;
};

// Throws reader::TraceError when a trace has no per-call times (see Session's refusals).
LatencyReport latency(const LatencyOptions& o);

} // namespace prof::analysis::views
