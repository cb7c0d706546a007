// profrun --sample and --pid: a program sampled from outside (libprof/sampling), launched or
// attached to.
#include "profrun/sampled.hpp"

#include "profrun/passed_signals.hpp"

#include "sampling/perf_sampler.hpp"
#include "sampling/ptrace_sampler.hpp"
#include "sampling/sampled_run.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <optional>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace prof::tools {
namespace {

using sampling::PerfSampler;
using sampling::PtraceSampler;
using sampling::Sampler;
using sampling::RunSummary;
using sampling::SampledRun;

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

std::string read_link(const std::string& path) {
    char buf[4096];
    ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

// The state letter and parent of a process, from /proc/PID/stat; false when there is none.
bool stat_of(pid_t pid, char& state, pid_t& ppid, unsigned& flags) {
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string line;
    if (!std::getline(in, line)) return false;
    size_t close = line.rfind(')'); // the command may hold spaces and parentheses
    if (close == std::string::npos || close + 2 >= line.size()) return false;
    std::istringstream rest(line.substr(close + 2));
    long parent = 0;
    std::string skip;
    rest >> state >> parent;
    for (int i = 0; i < 4; ++i) rest >> skip; // pgrp session tty_nr tpgid
    rest >> flags;
    ppid = pid_t(parent);
    return bool(rest);
}

// One event per thread and CPU: a process of many threads needs many descriptors.
void raise_file_limit() {
    rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

void report(const SampleOptions& o, const RunSummary& s, Sampler& sampler, const ToolLog& log) {
    for (const std::string& w : s.warnings) log.warn(w);
    if (s.lost)
        log.warn(fmt::format("{} samples were lost: the buffers filled faster than profrun read "
                             "them (lower --rate or --stack-bytes)",
                             s.lost));
    if (o.quiet) return;
    double per_sample = sampler.samples() ? double(sampler.sample_bytes()) / double(sampler.samples()) : 0;
    log.info(fmt::format("{} samples at {:.0f} Hz of {}, {:.0f} bytes each from the kernel; "
                         "stacks: {} unwound from their stack copy ({} completed by frame "
                         "pointers), {} from frame pointers only",
                         s.samples, 1e9 / double(sampler.period_ns()),
                         sampler.kernel_time()
                             ? "CPU time (user and system)"
                             : "user CPU time (time in system calls needs root or "
                               "kernel.perf_event_paranoid <= 1)",
                         per_sample, s.dwarf_stacks, s.spliced_stacks, s.fp_stacks));
    if (o.idle)
        log.info(fmt::format(
            "{:.3f} s off CPU in {} stretches, charged to {}{}{}", double(s.off_cpu_ns) / 1e9,
            s.off_cpu_stretches,
            sampler.switch_stacks() ? "the stacks the threads left the CPU with"
                                    : "the stacks read from /proc while the threads waited (the "
                                      "stacks of the switches need root or "
                                      "kernel.perf_event_paranoid <= 1)",
            s.approximate_off_cpu_ns
                ? fmt::format("; {:.3f} s at the thread's last CPU sample (too short to read)",
                              double(s.approximate_off_cpu_ns) / 1e9)
                : std::string(),
            s.unplaced_off_cpu_ns
                ? fmt::format("; {:.3f} s before a thread's first sample not charged",
                              double(s.unplaced_off_cpu_ns) / 1e9)
                : std::string()));
    if (s.traces.empty()) return;
    log.info(fmt::format("trace written to {}; read it with: profreport {}", s.traces[0],
                         s.traces[0]));
    if (s.traces.size() > 1)
        log.info(fmt::format("{} more from the run's other processes: {}", s.traces.size() - 1,
                             fmt::join(s.traces.begin() + 1, s.traces.end(), ", ")));
}

// The records to the trace writer (when a trace is written) and to --top's counts (when it
// runs).
class Tee : public sampling::RecordSink {
  public:
    Tee(sampling::RecordSink* a, sampling::RecordSink* b) : a_(a), b_(b) {}
    void on_sample(const sampling::Sample& s) override {
        if (a_) a_->on_sample(s);
        if (b_) b_->on_sample(s);
    }
    void on_mapping(const sampling::Mapping& m) override {
        if (a_) a_->on_mapping(m);
        if (b_) b_->on_mapping(m);
    }
    void on_task(const sampling::TaskEvent& t) override {
        if (a_) a_->on_task(t);
        if (b_) b_->on_task(t);
    }
    void on_comm(const sampling::CommEvent& c) override {
        if (a_) a_->on_comm(c);
        if (b_) b_->on_comm(c);
    }
    void on_lost(uint64_t n) override {
        if (a_) a_->on_lost(n);
        if (b_) b_->on_lost(n);
    }
    void on_switch(const sampling::SwitchEvent& e) override {
        if (a_) a_->on_switch(e);
        if (b_) b_->on_switch(e);
    }

  private:
    sampling::RecordSink *a_, *b_;
};

sampling::SamplerOptions sampler_options(const SampleOptions& o) {
    sampling::SamplerOptions so;
    so.hz = o.rate;
    so.stack_bytes = o.stack_bytes;
    so.idle = o.idle;
    so.subprocesses = o.subprocesses;
    return so;
}

// The perf events sampler, or where the kernel refuses them (and --sampler allows) the ptrace
// fallback, said in one line once it runs. Null with `error` set when neither can run: then
// one error says why both could not (never a promise of ptrace followed by its refusal).
template <class PerfOpen, class PtraceOpen>
std::unique_ptr<Sampler> open_sampler(const SampleOptions& o, const ToolLog& log,
                                      std::string& error, PerfOpen perf, PtraceOpen ptrace) {
    if (o.sampler != "ptrace") {
        bool refused = false;
        std::unique_ptr<Sampler> s = perf(refused);
        if (s || !refused || o.sampler == "perf") return s;
        if (o.idle) {
            error += "; --idle needs perf events (the ptrace fallback cannot see switches)";
            return nullptr;
        }
        std::string perf_refusal = std::move(error);
        error.clear();
        std::unique_ptr<Sampler> fallback = ptrace();
        if (!fallback) {
            error = fmt::format("{}; and the ptrace fallback: {}", perf_refusal, error);
            return nullptr;
        }
        if (!o.quiet)
            log.warn(fmt::format("{}: sampling with ptrace instead, at {:.0f} Hz (each sample "
                                 "stops the thread for about 0.3 ms)",
                                 perf_refusal, std::min(o.rate, PtraceSampler::kMaxHz)));
        return fallback;
    } else if (o.idle) {
        error = "--idle needs perf events (--sampler perf or auto)";
        return nullptr;
    }
    return ptrace();
}

} // namespace

int run_sampled(const SampleOptions& o, const ToolLog& log) {
    raise_file_limit();
    int go[2];
    if (pipe2(go, O_CLOEXEC) != 0) {
        log.error(fmt::format("cannot start {}: {}", o.command[0], std::strerror(errno)));
        return 1;
    }
    PassedOnSignals signals;
    pid_t child = fork();
    if (child < 0) {
        signals.started(-1);
        log.error(fmt::format("cannot start {}: {}", o.command[0], std::strerror(errno)));
        return 1;
    }
    if (child == 0) {
        signals.in_child();
        if (o.stdin_null) {
            int null = open("/dev/null", O_RDONLY);
            if (null >= 0) dup2(null, STDIN_FILENO);
        }
        // Waits until the events are open (they start at the exec), or profrun gave up.
        close(go[1]);
        char c;
        if (read(go[0], &c, 1) != 1) _exit(127);
        std::vector<char*> argv;
        for (const std::string& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        log.error(fmt::format("cannot run {}: {}", o.command[0], std::strerror(errno)));
        _exit(127);
    }
    close(go[0]);
    signals.started(child);
    auto abandon = [&](const std::string& why) {
        log.error(why);
        close(go[1]);
        int st;
        while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
        }
        signals.reaped();
        return 1;
    };
    std::string error;
    sampling::SamplerOptions so = sampler_options(o);
    std::unique_ptr<Sampler> sampler = open_sampler(
        o, log, error,
        [&](bool& refused) -> std::unique_ptr<Sampler> {
            return PerfSampler::launch(child, so, error, &refused);
        },
        [&]() -> std::unique_ptr<Sampler> { return PtraceSampler::launch(child, so, error); });
    if (!sampler)
        return abandon(fmt::format("cannot sample {}: {}", o.command[0], error));
    sampling::RunDescription d;
    d.output = o.output;
    if (!o.run_dir.empty()) {
        std::string name = o.command[0].substr(o.command[0].rfind('/') + 1);
        d.output = fmt::format("{}/{}.{}.trace", o.run_dir, name, child);
        d.run_dir = o.run_dir;
        d.run_name = name;
        d.run_id = o.run_id;
    }
    if (o.launched) *o.launched = child;
    d.subprocesses = o.subprocesses;
    char real[4096];
    d.exe = realpath(o.program.c_str(), real) ? std::string(real) : o.program;
    for (const std::string& a : o.command) {
        d.argv += (d.cmdline.empty() ? std::string() : std::string(1, '\0')) + a;
        d.cmdline += (d.cmdline.empty() ? "" : " ") + a;
    }
    d.cwd = read_link("/proc/self/cwd");
    d.pid = uint32_t(child);
    d.ppid = uint32_t(getpid());
    d.hz = 1e9 / double(sampler->period_ns());
    d.sampler = sampler->name();
    d.stack_bytes = sampler->stack_bytes();
    d.kernel = sampler->kernel_time();
    if (o.idle) d.idle = sampler->switch_stacks() ? "switch" : "proc";
    d.how = "launch";
    std::optional<SampledRun> run;
    if (!o.output.empty()) {
        run.emplace(d);
        if (!run->start(error)) return abandon(error);
    }
    Tee records(run ? &*run : nullptr, o.live);

    // The terminal's Ctrl-C reaches the program directly; profrun waits to report its end.
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGQUIT, SIG_IGN);
    if (write(go[1], "x", 1) != 1) return abandon("cannot start the program");
    close(go[1]);
    int status = 0;
    // Without stacks of the switches, the threads waiting are read from /proc: often.
    const int poll_ms = o.idle && !sampler->switch_stacks() ? 10 : 100;
    bool sampling = true;
    for (;;) {
        sampler->wait(poll_ms);
        sampler->drain(records);
        if (run) run->process();
        if (sampling && o.refresh && !o.refresh(child)) {
            // --top quit: the program runs to its end unsampled.
            sampling = false;
            sampler->disable();
        }
        // A tracer (the ptrace sampler) reaps the child itself.
        if (std::optional<int> st = sampler->child_status()) {
            status = *st;
            break;
        }
        if (std::string(sampler->name()) == "ptrace") continue;
        pid_t r = waitpid(child, &status, WNOHANG);
        if (r == child || (r < 0 && errno != EINTR)) break;
    }
    signals.reaped();
    sampler->drain(records);
    RunSummary s;
    if (run) s = run->finish(sampler->sample_bytes());
    if (o.wait_status) *o.wait_status = status;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (WIFSIGNALED(status) && !o.quiet)
        log.warn(fmt::format("{} was killed by signal {} ({})", o.command[0], WTERMSIG(status),
                             strsignal(WTERMSIG(status))));
    if (run) report(o, s, *sampler, log);
    return code;
}

std::optional<std::string> check_attachable(pid_t pid) {
    char state = 0;
    pid_t ppid = 0;
    unsigned flags = 0;
    if (pid <= 0 || !stat_of(pid, state, ppid, flags))
        return fmt::format("no process {}", pid);
    if (pid == getpid()) return std::string("profrun cannot sample itself");
    if (state == 'Z')
        return fmt::format("process {} is a zombie: it has exited and only waits for its parent "
                           "({}) to collect its status, so there is nothing to sample",
                           pid, ppid);
    constexpr unsigned kKernelThread = 0x00200000; // PF_KTHREAD
    if (flags & kKernelThread)
        return fmt::format("process {} is a kernel thread: only user-space programs can be "
                           "sampled",
                           pid);
    return std::nullopt;
}

std::string default_attach_output(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/comm", pid));
    std::string name;
    std::getline(in, name);
    for (char& c : name)
        if (c == '/' || c == ' ') c = '_';
    return fmt::format("{}.{}.trace", name.empty() ? "process" : name, pid);
}

int attach_sampled(const SampleOptions& o, const ToolLog& log) {
    raise_file_limit();
    pid_t pid = o.pid;
    if (auto why = check_attachable(pid)) {
        log.error(fmt::format("cannot attach: {}", *why));
        return 1;
    }
    std::string error;
    std::vector<pid_t> threads;
    sampling::SamplerOptions so = sampler_options(o);
    std::unique_ptr<Sampler> sampler = open_sampler(
        o, log, error,
        [&](bool& refused) -> std::unique_ptr<Sampler> {
            return PerfSampler::attach(pid, so, threads, error, &refused);
        },
        [&]() -> std::unique_ptr<Sampler> {
            threads.clear();
            return PtraceSampler::attach(pid, so, threads, error);
        });
    if (!sampler) {
        log.error(fmt::format("cannot attach to process {}: {}", pid, error));
        return 1;
    }
    sampling::RunDescription d;
    d.output = o.output;
    d.exe = read_link(fmt::format("/proc/{}/exe", pid));
    d.cmdline = sampling::command_line_of(pid);
    d.argv = sampling::arguments_of(pid);
    d.cwd = read_link(fmt::format("/proc/{}/cwd", pid));
    char state;
    pid_t ppid = 0;
    unsigned flags;
    stat_of(pid, state, ppid, flags);
    d.pid = uint32_t(pid);
    d.ppid = uint32_t(ppid);
    d.hz = 1e9 / double(sampler->period_ns());
    d.sampler = sampler->name();
    d.stack_bytes = sampler->stack_bytes();
    d.kernel = sampler->kernel_time();
    if (o.idle) d.idle = sampler->switch_stacks() ? "switch" : "proc";
    d.how = "attach";
    std::optional<SampledRun> run;
    if (!o.output.empty()) {
        run.emplace(d);
        if (!run->start(error)) {
            log.error(error);
            return 1;
        }
        run->add_existing(uint32_t(pid), threads);
    }
    Tee records(run ? &*run : nullptr, o.live);
    // Ctrl-C and SIGTERM end the sampling, not profrun: the trace is written first.
    struct sigaction sa{};
    sa.sa_handler = on_stop;
    for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGHUP}) sigaction(sig, &sa, nullptr);
    if (!o.quiet)
        log.info(fmt::format("sampling process {} ({} threads) at {:.0f} Hz{}; Ctrl-C ends", pid,
                             threads.size(), 1e9 / double(sampler->period_ns()),
                             o.duration > 0 ? fmt::format(" for {} s", o.duration) : ""));
    timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool exited = false;
    const int poll_ms = o.idle && !sampler->switch_stacks() ? 10 : 100;
    while (!g_stop) {
        sampler->wait(poll_ms);
        sampler->drain(records);
        if (run) run->process();
        if (o.refresh && !o.refresh(pid)) break;
        char st = 0;
        pid_t pp;
        unsigned fl;
        if (!stat_of(pid, st, pp, fl) || st == 'Z' || st == 'X') {
            exited = true;
            break;
        }
        timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        double elapsed = double(t.tv_sec - t0.tv_sec) + double(t.tv_nsec - t0.tv_nsec) / 1e9;
        if (o.duration > 0 && elapsed >= o.duration) break;
    }
    sampler->disable();
    sampler->drain(records);
    RunSummary s;
    if (run) s = run->finish(sampler->sample_bytes());
    if (exited && !o.quiet) log.info(fmt::format("process {} exited", pid));
    if (run) report(o, s, *sampler, log);
    return 0;
}

} // namespace prof::tools
