// Sampling a program from outside with perf_event_open (profrun --sample, --pid): the kernel's
// software cpu-clock event interrupts each thread of the target every `period` nanoseconds of
// its CPU time and writes a sample (the thread, the time, the user-space frame-pointer call
// chain, and, when asked, the user registers and a copy of the top of the user stack) into a
// ring buffer per CPU that this process maps. Nothing is injected into the target and nothing
// stops it: when this process dies, the kernel closes the events and the target runs on.
//
// Two ways to follow a target:
//   - launch: one event per CPU on the child with `inherit`, enabled when it calls exec, so
//     every thread and process it creates later is followed too (what `perf record -- CMD`
//     does);
//   - attach: one event per CPU on every thread the target has now, with `inherit` for the
//     threads they create later; the mappings that exist already are read from /proc.
// Records of the buffers of different CPUs are not in one time order: the caller orders them.
#pragma once

#include <cstdint>
#include <linux/perf_event.h>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace prof::sampling {

struct SamplerOptions {
    double hz = 999;             // samples per second of a thread's CPU time
    uint32_t stack_bytes = 8192; // user stack copied per sample (0: frame-pointer chains only)
    // Also the time off CPU (profrun --idle): the kernel's context-switch records for every
    // thread, and, where it allows events in the kernel, a sample at each switch out.
    bool idle = false;
    bool subprocesses = false; // launch: the processes the program starts too (ptrace only)
};

// One sample, decoded. The pointers point into the sampler's buffer until the next drain.
struct Sample {
    uint32_t pid = 0, tid = 0;
    uint64_t time_ns = 0; // CLOCK_MONOTONIC
    uint64_t period_ns = 0;
    const uint64_t* chain = nullptr; // user call chain, innermost first (the ip first)
    uint32_t chain_size = 0;
    bool regs = false; // the user registers and stack below were taken
    uint64_t ip = 0, sp = 0, bp = 0;
    const uint8_t* stack = nullptr; // the user stack from sp up
    uint64_t stack_size = 0;
    // Taken as the thread left the CPU (the context-switch event of --idle), not on its CPU
    // clock: where it blocked or was preempted, and no CPU time.
    bool switch_out = false;
};

struct Mapping {
    uint32_t pid = 0, tid = 0;
    uint64_t time_ns = 0;
    uint64_t start = 0, length = 0, offset = 0; // offset: of the mapping in the file
    bool executable = false;
    std::string path;
    std::string build_id; // raw bytes, when the kernel gave them
};

// A thread or process began (fork, clone) or ended.
struct TaskEvent {
    bool exit = false;
    uint32_t pid = 0, ppid = 0, tid = 0, ptid = 0;
    uint64_t time_ns = 0;
};

struct CommEvent {
    uint32_t pid = 0, tid = 0;
    uint64_t time_ns = 0;
    bool exec = false; // the process called exec
    std::string name;
};

// The thread left the CPU (out) or got it back (PERF_RECORD_SWITCH).
struct SwitchEvent {
    uint32_t pid = 0, tid = 0;
    uint64_t time_ns = 0;
    bool out = false;
    bool preempted = false; // out while runnable: it waits for a CPU
};

class RecordSink {
  public:
    virtual ~RecordSink() = default;
    virtual void on_sample(const Sample& s) = 0;
    virtual void on_mapping(const Mapping& m) = 0;
    virtual void on_task(const TaskEvent& t) = 0;
    virtual void on_comm(const CommEvent& c) = 0;
    virtual void on_lost(uint64_t samples) = 0;
    virtual void on_switch(const SwitchEvent&) {}
};

// What profrun reads the samples from: perf events, or the ptrace fallback.
class Sampler {
  public:
    virtual ~Sampler() = default;
    // Waits up to `timeout_ms` for records; false when interrupted.
    virtual bool wait(int timeout_ms) = 0;
    // Delivers the records there are now.
    virtual void drain(RecordSink& sink) = 0;
    // Stops sampling; the target runs on.
    virtual void disable() = 0;
    virtual uint64_t period_ns() const = 0;
    virtual uint32_t stack_bytes() const = 0;
    // Whether time in system calls is sampled too (charged to the code that made the call).
    virtual bool kernel_time() const = 0;
    // --idle: whether each switch out comes with its stack.
    virtual bool switch_stacks() const = 0;
    // Bytes of sample records read, and their count: bytes per sample.
    virtual uint64_t sample_bytes() const = 0;
    virtual uint64_t samples() const = 0;
    // Launch: the child's wait status once the sampler has reaped it (a tracer must).
    virtual std::optional<int> child_status() const { return std::nullopt; }
    virtual const char* name() const = 0; // "perf_event cpu-clock", "ptrace"
};

class PerfSampler : public Sampler {
  public:
    // Follows `child`, a process stopped before its exec (launch), from its exec on. Null with
    // `error` set when the kernel refuses (its reason and the setting that decides it).
    // `refused` (if given) says whether the kernel refused perf events as such (permissions,
    // seccomp, no support), where a fallback may run.
    static std::unique_ptr<PerfSampler> launch(pid_t child, const SamplerOptions& o,
                                               std::string& error, bool* refused = nullptr);
    // Follows every thread of the running process `pid` and the threads they create; enabled
    // at once. `threads` receives the thread ids found.
    static std::unique_ptr<PerfSampler> attach(pid_t pid, const SamplerOptions& o,
                                               std::vector<pid_t>& threads, std::string& error,
                                               bool* refused = nullptr);
    ~PerfSampler() override;
    PerfSampler(const PerfSampler&) = delete;
    PerfSampler& operator=(const PerfSampler&) = delete;

    // Waits up to `timeout_ms` for the buffers to fill a quarter; false when interrupted.
    bool wait(int timeout_ms) override;
    // Delivers every record now in the buffers, buffer by buffer (each in time order).
    void drain(RecordSink& sink) override;
    // Stops sampling (the records written so far stay readable).
    void disable() override;

    uint64_t period_ns() const override { return period_ns_; }
    uint32_t stack_bytes() const override { return stack_bytes_; }
    const char* name() const override { return "perf_event cpu-clock"; }
    // Whether samples in the kernel (system calls) are taken too (root, or paranoid <= 1);
    // otherwise only time in user space is sampled.
    bool kernel_time() const override { return kernel_; }
    // With SamplerOptions::idle: whether each switch out is sampled with its stack (root, or
    // paranoid <= 1: the event fires in the kernel); otherwise the switches are times only.
    bool switch_stacks() const override { return switch_stacks_; }
    // Bytes of sample records read so far, and their count: bytes per sample.
    uint64_t sample_bytes() const override { return sample_bytes_; }
    uint64_t samples() const override { return samples_; }

  private:
    PerfSampler() = default;
    struct Buffer;
    bool open_on(pid_t tid, bool launch, std::string& error);
    int last_errno_ = 0;
    bool open_switch_event(const perf_event_attr& clock, pid_t tid, int cpu, int buffer_fd);
    void read_buffer(Buffer& b, RecordSink& sink);

    std::vector<int> fds_;
    std::vector<std::unique_ptr<Buffer>> buffers_; // one per CPU
    uint64_t period_ns_ = 0;
    uint32_t stack_bytes_ = 0;
    bool kernel_ = true;
    bool idle_ = false, switch_stacks_ = false;
    uint64_t sample_bytes_ = 0, samples_ = 0;
    std::vector<uint8_t> scratch_; // a record that wraps around the buffer's end
};

// How the sample records of a ring are laid out: what its events were opened with.
struct RingLayout {
    bool stack = false; // user registers (bp, sp, ip) and a stack copy follow the call chain
    bool idle = false;  // --idle: samples of period 1 are switches out
};

// Counts of the cpu-clock samples a ring delivered (switch-out samples are not counted).
struct RingStats {
    uint64_t sample_bytes = 0;
    uint64_t samples = 0;
};

// Decodes the whole records of a perf ring buffer between `tail` and `head` (positions that
// only grow; the ring's `size` data bytes at `data` hold them modulo `size`) and delivers them
// to `sink`; returns the new tail. A record that wraps around the end is copied to `scratch`;
// a torn record (its header's size beyond `head`) stops the walk before it. What
// PerfSampler::drain does over each mapped buffer, separate so that it runs on bytes.
uint64_t parse_ring(const uint8_t* data, size_t size, uint64_t tail, uint64_t head,
                    const RingLayout& layout, std::vector<uint8_t>& scratch, RingStats& stats,
                    RecordSink& sink);

// The thread ids of process `pid` now (/proc/PID/task), sorted.
std::vector<pid_t> threads_of(pid_t pid);
// The arguments of process `pid` (/proc/PID/cmdline), each ended by a NUL but the last.
std::string arguments_of(pid_t pid);
// Its command line: the arguments separated by spaces.
std::string command_line_of(pid_t pid);
// The executable mappings of process `pid` now (/proc/PID/maps; time_ns left 0).
std::vector<Mapping> executable_maps(uint32_t pid);

// Where a thread blocked in the kernel left user space: the system call it is in (-1 when it
// waits outside one, as on a page fault), its user stack pointer and instruction pointer,
// from /proc/PID/task/TID/syscall ("NR ARGS... SP PC"). Nothing for a thread on a CPU
// ("running"), or without the right to read it: the right to ptrace the thread (the same
// user, and under Yama's ptrace_scope 1 a descendant). The thread is not stopped or touched.
struct BlockedRegisters {
    long syscall = -1;
    uint64_t sp = 0, pc = 0;
};
std::optional<BlockedRegisters> blocked_registers(uint32_t pid, uint32_t tid);

// Why perf_event_open failed, in a user's words: the setting that decides it and what to do.
std::string explain_perf_error(int err, pid_t target);

} // namespace prof::sampling
