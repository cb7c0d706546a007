// The replay engine: the one place where a trace's events become calls, call paths and times.
// Every view consumes it: the pstats table, callers and callees, line tables, the memory
// report, the call tree and its flame graphs and exports, the HTML report, the timelines and
// diffs. A Session reads each trace once, front to back, and keeps per thread a calling
// context tree (one node per call path) with exact call counts and times; the profile, the
// call tree and the memory report are all derived from it, so they cannot disagree.
//
// Call-stack semantics (one definition for every view):
//   - an Exit closes the innermost open frame; one with no open frame is counted
//     (ThreadSummary::unmatched_exits) and otherwise ignored;
//   - Abandon closes that many frames at its time (longjmp, exceptions through uninstrumented
//     code); ThreadEnd closes all; frames still open when the trace ends close then;
//   - a ScopeRun (format 1.3) is `count` leaf activations of one scope, one after the other;
//   - within a thread time never goes back: an event older than the previous one is taken at
//     the previous one's time;
//   - an address that several objects occupied in turn (dlclose, then dlopen of another) is a
//     function per object, chosen by the time of each call.
//
// The time model (TimeModel below): each thread has its own clock, the trace's tick counter
// less the profiler's own cost measured when the program started (compensation, as cProfile
// does; off with `compensate = false`). Between two events of a thread the elapsed ticks go to
// the frame on top, less what the hooks cost in that interval: after an enter the callee's
// share of a call's cost (overhead_in), after an exit or a scope run the caller's share
// (overhead_out per call), and the runtime's own pauses (Pause records); an interval never goes
// below zero. Every activation's time is its span on this clock, so a callee's time lies inside
// its caller's and self times add up to the total exactly.
//
// Sampled time (TimeSource::kSampled, and kAuto for a trace with enough samples): per-call hooks
// inflate small functions however well their average cost is subtracted, so time on CPU comes
// from CPU samples (format 1.5 Sample records) instead, as gprof does, and counts stay exact.
// A sample stands for the thread's CPU time since the one before it and goes to the frame open
// where the runtime took it (its place in the stream). The time between two samples less
// their CPU time was spent off CPU (sleeping, blocked, preempted) in the span's long intervals
// between events (over 20 us on the hooks' clock): the CPU time the short intervals leave is
// spread over the long ones up to a common level, and the rest of each is its frame's time off
// CPU. Samples that landed in the profiler are left out. A scope run keeps the time it
// measured; a thread never sampled (too short) keeps the hooks' times. Each node's own time
// is summed up to its ancestors, so a callee's time still lies inside its caller's. A sample
// that names the instruction it interrupted (1.9) and lies in another instrumented function
// than its frame's (that function's prologue or epilogue, outside its hooks) goes to that
// function called from its frame, as it would in a profile of the uninstrumented program.
//
// Counting threads (format 1.9: PROF_TIME=sampled, or auto once the run had samples enough)
// have no call records after their Counting record: their calls are counts per call tree node
// (CallNode, CallCounts), which join the thread's call paths. Every Sample record there names
// its node and carries the thread's clocks: the wall time since the previous one less the CPU
// time between them was off CPU in that node; a sample weighs the CPU time since the last
// sample charged.
#pragma once

#include "analysis/model/call_tree.hpp"
#include "analysis/model/profile.hpp"
#include "reader/trace_reader.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace prof::analysis {

// Where a long read is: the tool decides whether and how to show it.
struct Progress {
    const std::string* path = nullptr; // the trace being read
    uint64_t events = 0;               // read so far, all traces
    double fraction = -1;              // of this trace, by time; -1 when unknown
};
using ProgressFn = std::function<void(const Progress&)>;

// Receives every activation as the replay opens and closes it, in each thread's order (the
// timelines). Times are nanoseconds since the trace started, on the thread's clock.
class ActivationObserver {
  public:
    virtual ~ActivationObserver() = default;
    // `thread` indexes Session::thread_list() (it grows as threads appear), and is the stream
    // `which` names; `function` indexes the trace's functions (Session::function_address).
    virtual void thread_started(size_t /*thread*/, const ThreadFilter& /*which*/) {}
    // A frame opened at `enter_ns`; `count` > 1 for a scope run, which opens once for all its
    // activations and closes after their summed time; 0 for a frame a forked child inherited
    // open, whose call began in the parent (ncalls does not count it either).
    virtual void opened(size_t thread, uint32_t function, uint64_t enter_ns, uint64_t count) = 0;
    // The innermost open frame of the thread closed.
    virtual void closed(size_t thread, uint64_t exit_ns) = 0;
    // The thread began counting its calls without a clock (observer_takes_counted): its frames
    // open now close when it ends, at no time of their own, and no activation follows.
    virtual void counting_began(size_t /*thread*/) {}
    // A trace was read to its end (all its frames closed).
    virtual void trace_done(size_t /*trace*/) {}
};

struct SessionOptions {
    bool compensate = true; // subtract the runtime's measured cost (profreport --no-compensation)
    bool memory = true;     // replay allocation records (the memory report)
    ProgressFn progress;    // called every few million events
    ActivationObserver* observer = nullptr;
    // What the observer is for, in the refusal of a trace without every call's time ("a
    // timeline needs"), and what to do then.
    std::string observer_needs = "a timeline needs";
    std::string observer_hint = "record with PROF_TIME=traced, or export speedscope without "
                                "--from, --to or --min-duration: the call tree with the "
                                "samples' times";
    // The observer also takes traces whose threads count their calls: it sees none of those
    // threads' counted calls, whose timed ones are in Session::call_latencies (format 1.13).
    bool observer_takes_counted = false;
    TimeSource time = TimeSource::kAuto; // profreport --time
    Clock clock = Clock::kWall;          // profreport --clock
    // Sampled traces: functions inlined at a sampled address are frames of their own (format
    // 1.8 Location records); false: the physical frames only (profreport --no-inline).
    bool inlined = true;
};

// 1.13: the timed calls of a counted call path (PROF_TIME=sampled or auto: the paths whose calls
// lasted PROF_LATENCY_MIN or more on average), as its CallLatency record has them.
struct CallPathLatency {
    size_t thread = 0; // Session::thread_list() index
    size_t trace = 0;
    std::vector<uint32_t> path; // the trace's functions, outermost first, ending with the callee
    uint64_t calls = 0;         // timed
    uint64_t path_calls = 0;    // every call of the path (counted)
    double sum_ns = 0, max_ns = 0;
    double max_start_ns = 0; // when the longest began, since the trace started
    // buckets[b] counts durations of [latency_bucket_low(b), latency_bucket_low(b + 1)) ticks
    // (format::latency_bucket), the last one every longer one too.
    double ns_per_tick = 1;
    std::vector<uint32_t> buckets;
};

class Session {
  public:
    explicit Session(SessionOptions o = {});
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Reads one trace, once (throws reader::TraceError). Several traces merge like pstats'
    // Stats.add: functions by what names them, call paths by their functions.
    const reader::TraceInfo& add_trace(const std::string& path);
    // Reads several traces, up to `jobs` at once (0: one per core; one at a time with an
    // observer), with the same result as add_trace on each in order. The first trace, in that
    // order, that cannot be read throws. A single trace has its thread streams read on up to
    // `jobs` cores instead, merged as one reader would have met them (not a trace of the
    // memory profiler, whose allocations are matched in one time order across threads).
    void add_traces(const std::vector<std::string>& paths, unsigned jobs = 0);

    const std::vector<reader::TraceInfo>& traces() const;
    // Every thread read so far, in order of appearance.
    std::vector<ThreadFilter> thread_list() const;
    ThreadSummary thread(size_t index) const;
    // The thread with this kernel thread id, from the traces' thread records.
    std::optional<ThreadFilter> find_thread(uint32_t tid) const;

    // cProfile's numbers, per function and per caller -> callee edge, of the threads `filter`
    // selects (all by default).
    Profile profile(const ThreadFilter& filter = {}) const;
    // The calling context tree with exact nanosecond totals.
    views::CallTree call_tree(const views::CallTreeOptions& o = {}) const;
    // How the times of the threads `filter` selects were obtained (samples or the hooks).
    TimeBasis time_basis(const ThreadFilter& filter = {}) const;
    // Allocations of every trace read so far (all threads).
    const MemoryReport& memory() const;

    // Every counted call path's timed calls, by thread in order of appearance.
    std::vector<CallPathLatency> call_latencies() const;

    // The runtime address and object of a trace's function (ActivationObserver::opened).
    uint64_t function_address(size_t trace, uint32_t function) const;
    size_t function_module(size_t trace, uint32_t function) const;
    // The trace being read (in ActivationObserver callbacks) or read last.
    size_t current_trace() const;
    const reader::TraceInfo& trace_info(size_t trace) const;

    // Events replayed so far (enter, exit and two per scope-run activation).
    uint64_t events() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace prof::analysis
