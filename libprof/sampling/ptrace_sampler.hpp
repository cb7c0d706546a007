// The fallback sampler, for where the kernel refuses perf events (kernel.perf_event_paranoid 3,
// a container's seccomp profile) but lets a process trace its own children or, as root or
// under Yama ptrace_scope 0, another process of its user: py-spy's way. At each tick (at most
// 100 Hz of wall time) every thread that used CPU since the last one is interrupted with
// PTRACE_INTERRUPT; its registers and the top of its stack are copied (PTRACE_GETREGS,
// process_vm_readv) and it runs on at once. A stop costs 240-320 us per thread on this kind of
// machine, so the rate is capped; each sample weighs the CPU time the thread used since the
// one before (/proc/PID/task/TID/schedstat), so the totals stay right at a low rate.
//
// The records are those of PerfSampler (a Sample per interrupted thread, mappings from
// /proc/PID/maps, threads from ptrace's clone and exit events, exec), so SampledRun writes the
// same trace. Nothing is injected. When profrun dies, the kernel detaches the threads and they
// run on; a thread is never left in a ptrace stop by this sampler, which restarts each one right
// after copying it and passes every signal through.
#pragma once

#include "sampling/perf_sampler.hpp"

#include <map>
#include <optional>
#include <set>

namespace prof::sampling {

// Why ptrace of `pid` failed with `err`, naming the setting that decides it (Yama's
// ptrace_scope) or the likely cause.
std::string explain_ptrace_error(int err, pid_t pid);

class PtraceSampler : public Sampler {
  public:
    static constexpr double kMaxHz = 100;

    // Follows `child`, a child of this process stopped before its exec (it waits for a byte on
    // a pipe): seized now, sampled from its exec on. Null with `error` set when ptrace is
    // refused.
    static std::unique_ptr<PtraceSampler> launch(pid_t child, const SamplerOptions& o,
                                                 std::string& error);
    // Seizes every thread of the running process `pid` (and the threads they create).
    static std::unique_ptr<PtraceSampler> attach(pid_t pid, const SamplerOptions& o,
                                                 std::vector<pid_t>& threads, std::string& error);
    ~PtraceSampler() override;

    bool wait(int timeout_ms) override;
    void drain(RecordSink& sink) override;
    void disable() override;
    uint64_t period_ns() const override { return period_ns_; }
    uint32_t stack_bytes() const override { return stack_bytes_; }
    bool kernel_time() const override { return true; } // schedstat counts system time too
    bool switch_stacks() const override { return false; }
    uint64_t sample_bytes() const override { return sample_bytes_; }
    uint64_t samples() const override { return samples_; }
    std::optional<int> child_status() const override { return child_status_; }
    const char* name() const override { return "ptrace"; }

  private:
    PtraceSampler() = default;
    struct Thread {
        uint32_t pid = 0;
        uint64_t cpu_ns = 0;  // schedstat at the last sample (or the seize)
        bool stopped = false; // in a ptrace stop we caused, not yet resumed
        bool named = false;
    };
    bool seize(pid_t tid, uint32_t pid, bool launch, std::string& error);
    void handle(pid_t tid, int status);
    void sample_thread(pid_t tid, Thread& t, RecordSink& sink);
    void read_maps(uint32_t pid, RecordSink& sink);
    void resume(pid_t tid, int signal);

    std::map<pid_t, Thread> threads_;
    std::set<uint32_t> processes_;
    std::map<uint32_t, std::set<std::pair<uint64_t, std::string>>> mapped_; // pid -> mappings seen
    pid_t child_ = 0;
    bool follow_forks_ = false, exec_seen_ = false, detached_ = false;
    std::optional<int> child_status_;
    uint64_t period_ns_ = 0, next_tick_ = 0;
    uint32_t stack_bytes_ = 0;
    uint64_t sample_bytes_ = 0, samples_ = 0;
    std::vector<uint8_t> stack_;
    std::vector<TaskEvent> tasks_; // clone and exit events, for the next drain
    std::vector<CommEvent> comms_;
};

} // namespace prof::sampling
