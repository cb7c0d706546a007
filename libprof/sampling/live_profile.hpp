// The samples of a running process counted as they come (profrun --top): per function, the
// CPU time of the samples whose innermost frame it is (self) and of those it is on the stack
// of (total), over the current interval and since the start; and the CPU time of each thread
// from the kernel's own count. A RecordSink beside the trace writer: the sampler delivers to
// both. Stacks are unwound and named as profrun --dump's (process_stacks.hpp), inlined
// functions included, each address named once.
#pragma once

#include "sampling/perf_sampler.hpp"
#include "sampling/process_stacks.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <sys/types.h>
#include <unordered_map>
#include <vector>

namespace prof::sampling {

struct LiveFunction {
    std::string name;  // the function, or "[module]" for code no symbol names
    std::string where; // its source file (base name), or its module
    uint64_t self_ns = 0, total_ns = 0;
};

struct LiveCounts {
    uint64_t samples = 0, ns = 0; // CPU time the samples stand for
    std::unordered_map<std::string, LiveFunction> functions;
};

struct LiveThread {
    pid_t tid = 0;
    std::string name;
    uint64_t cpu_ns = 0; // since it started (schedstat)
};

class LiveProfile : public RecordSink {
  public:
    explicit LiveProfile(pid_t pid);

    void on_sample(const Sample& s) override;
    // A new executable mapping, or an exec: the mappings are read again at the next sample (an
    // address of a new library may lie where an old one was).
    void on_mapping(const Mapping& m) override { maps_stale_ |= m.executable; }
    void on_task(const TaskEvent&) override {}
    void on_comm(const CommEvent& c) override { maps_stale_ |= c.exec; }
    void on_lost(uint64_t samples) override { lost_ += samples; }

    const LiveCounts& interval() const { return interval_; }
    const LiveCounts& cumulative() const { return cumulative_; }
    // The interval's counts start again.
    void next_interval() { interval_ = LiveCounts{}; }
    uint64_t lost() const { return lost_; }
    pid_t pid() const { return pid_; }

    // The process's threads now, with their CPU time so far.
    std::vector<LiveThread> threads() const;

  private:
    pid_t pid_;
    ProcessStacks stacks_;
    LiveCounts interval_, cumulative_;
    uint64_t lost_ = 0;
    bool maps_stale_ = false;
};

} // namespace prof::sampling
