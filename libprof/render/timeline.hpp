// Timelines for trace viewers, written while the trace streams by (memory does not grow with
// events): Chrome Trace Event JSON (Perfetto UI, chrome://tracing) and speedscope's evented
// profiles. Each activation becomes a complete event ("X") or an open/close pair, nested per
// thread, in exact nanoseconds since the trace started.
#pragma once

#include "render/model.hpp"

#include "analysis/engine/session.hpp"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace prof::render {

struct TimelineOptions {
    uint64_t from_ns = 0; // keep activations overlapping [from, to], clipped to it
    uint64_t to_ns = UINT64_MAX;
    uint64_t min_duration_ns = 0;        // drop shorter activations (and so their callees)
    uint32_t tid = 0;                    // only this kernel thread id; 0 = all
    bool compensate = true;              // the engine's time model (session.hpp)
    TimeSource time = TimeSource::kAuto; // profreport --time
    Clock clock = Clock::kWall;          // profreport --clock: cpu only for sampled profiles
    ProgressFn progress;                 // while the traces are read
    // Chrome: a trace with allocation records (profrun --mem) also gets its heap and resident
    // set size over time as counter events ("ph":"C", named "heap" and "RSS", args {"bytes"}),
    // from the MemoryReport's timelines; those are per process, so --thread keeps them.
    bool memory_counters = true;
};

struct TimelineResult {
    uint64_t events = 0;  // complete events, or open/close pairs
    uint64_t bytes = 0;   // written
    uint64_t threads = 0; // with at least one event
    uint64_t counters = 0; // chrome: heap and RSS counter events
    // The other views' times come from the traces' samples (the timeline's are the hooks').
    bool sampled_time = false;
    // speedscope: timed by samples, and no time window asked for: the threads' call trees
    // were written as sampled profiles instead of timelines.
    bool sampled_profiles = false;
    // The partial_warning (report.hpp) of each trace whose file is cut short.
    std::vector<std::string> partial;
};

// Above these, browser viewers struggle or fail to load the file: the tool warns.
inline constexpr uint64_t kTimelineWarnEvents = 2'000'000;
inline constexpr uint64_t kTimelineWarnBytes = 200ull << 20;

// Both read the traces themselves, once, as observers of the replay engine (throw
// reader::TraceError), and throw std::runtime_error when a temporary file cannot be made.
// Activations are on each thread's clock (session.hpp: the profiler's cost left out, unless
// `compensate` is off), so their durations are the other views' times when those are traced.
// Timed by samples, speedscope gets each thread's call tree as a sampled profile instead (one
// sample per call path, weighted by its own time), so that its totals are the table's.
TimelineResult write_chrome_trace(std::FILE* out, const std::vector<std::string>& traces,
                                  const TimelineOptions& o);
TimelineResult write_speedscope(std::FILE* out, const std::vector<std::string>& traces,
                                const TimelineOptions& o);

} // namespace prof::render
