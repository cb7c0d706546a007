// The traces of a sampled run (profrun --sample, --pid): the perf_event records of the target
// (perf_sampler.hpp), put in time order, become one trace per process in the format every view
// reads (docs/trace-format.md, 1.7): Module records from the mappings, a stream per thread
// with its name, the call stack of every sample (Stack and StackSample records), and at the
// end Symbol and Location records from the binaries on disk. Call stacks come from the copy of
// the user stack, unwound with the binaries' .eh_frame (stack_unwinder.hpp), and from the
// kernel's frame-pointer chain where that copy ends or cannot be unwound.
#pragma once

#include "sampling/perf_sampler.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace prof::sampling {

struct RunDescription {
    std::string output;     // the main process's trace; a child's is output.PID
    // In a run's directory (profrun -d): a child's trace is run_dir/run_name.PID.trace, and
    // every trace names the run (Meta run).
    std::string run_dir, run_name, run_id;
    bool subprocesses = false;
    std::string exe, cmdline, cwd;
    std::string argv; // the arguments separated by NULs (Meta argv); cmdline: by spaces
    uint32_t pid = 0, ppid = 0;
    double hz = 0;
    uint32_t stack_bytes = 0;
    bool kernel = false; // samples in system calls are taken too (charged to their callers)
    // --idle: the time off CPU too, with the stacks of the switches ("switch") or read from
    // /proc while the threads wait ("proc"); empty: CPU time only.
    std::string idle;
    std::string how; // "launch" or "attach"
    std::string sampler = "perf_event cpu-clock"; // or "ptrace"
};

// What happened, for profrun's messages.
struct RunSummary {
    std::vector<std::string> traces; // written, the main process's first
    uint64_t samples = 0, lost = 0;
    uint64_t dwarf_stacks = 0;    // stacks unwound from the stack copy to their end
    uint64_t spliced_stacks = 0;  // ... of which completed with the frame-pointer chain
    uint64_t fp_stacks = 0;       // stacks from the frame-pointer chain alone
    // --idle: stretches off CPU written, their time, and the time of those with no stack to
    // charge (a thread that left the CPU before its first sample)
    uint64_t off_cpu_stretches = 0, off_cpu_ns = 0, unplaced_off_cpu_ns = 0;
    // ... of which charged to the thread's last CPU sample (no stack of the switch, and none
    // read while it waited), and the stacks of waiting threads read from /proc
    uint64_t approximate_off_cpu_ns = 0, snapshots = 0;
    uint64_t sample_bytes = 0;    // perf_event record bytes read
    uint64_t trace_bytes = 0;     // of the traces' files
    std::vector<std::string> warnings; // one line each (a replaced binary, ...)
};

class SampledRun : public RecordSink {
  public:
    explicit SampledRun(RunDescription d);
    ~SampledRun() override;

    // Creates the main trace file; false with `error` set when it cannot be written.
    bool start(std::string& error);
    // The mappings and thread names of an attached process that exist already (/proc).
    void add_existing(uint32_t pid, const std::vector<pid_t>& threads);
    // The records delivered since the last call, in time order.
    void process();
    // Writes the rest of every trace: symbols, locations, the end record.
    RunSummary finish(uint64_t sample_bytes);

    void on_sample(const Sample& s) override;
    void on_mapping(const Mapping& m) override;
    void on_task(const TaskEvent& t) override;
    void on_comm(const CommEvent& c) override;
    void on_lost(uint64_t samples) override;
    void on_switch(const SwitchEvent& e) override;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace prof::sampling
