// The ptrace fallback sampler: see ptrace_sampler.hpp.
#include "sampling/ptrace_sampler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

namespace prof::sampling {
namespace {

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// The thread's time on CPU (user and system), in ns: schedstat's first field; else stat's
// utime + stime, in clock ticks.
uint64_t cpu_ns_of(uint32_t pid, pid_t tid) {
    char buf[512];
    int fd =
        open(fmt::format("/proc/{}/task/{}/schedstat", pid, tid).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = 0;
            return std::strtoull(buf, nullptr, 10);
        }
    }
    std::ifstream in(fmt::format("/proc/{}/task/{}/stat", pid, tid));
    std::string line;
    if (!std::getline(in, line)) return 0;
    size_t close_paren = line.rfind(')');
    if (close_paren == std::string::npos) return 0;
    std::istringstream rest(line.substr(close_paren + 2));
    std::string skip;
    for (int i = 0; i < 11; ++i) rest >> skip; // state .. cmajflt
    unsigned long long utime = 0, stime = 0;
    rest >> utime >> stime;
    return (utime + stime) * (1000000000ull / uint64_t(sysconf(_SC_CLK_TCK)));
}

std::string comm_of(uint32_t pid, pid_t tid) {
    std::ifstream in(fmt::format("/proc/{}/task/{}/comm", pid, tid));
    std::string name;
    std::getline(in, name);
    return name;
}

constexpr int kStopSignals[] = {SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU};

// waitpid for one thread, for at most `ms`: a thread the program stopped (group-stop) may
// never report the stop asked for, and profrun must not hang on it.
pid_t wait_thread(pid_t tid, int& status, int ms) {
    for (int i = 0; i < ms * 20; ++i) {
        pid_t r = waitpid(tid, &status, __WALL | WNOHANG);
        if (r != 0) return r;
        timespec d{0, 50000};
        nanosleep(&d, nullptr);
    }
    return 0;
}

} // namespace

std::string explain_ptrace_error(int err, pid_t pid) {
    if (err == EPERM) {
        struct stat st;
        if (geteuid() != 0 && stat(fmt::format("/proc/{}", pid).c_str(), &st) == 0 &&
            st.st_uid != geteuid())
            return fmt::format("ptrace of process {} is refused: it belongs to another user (uid "
                               "{}), and only root (or CAP_SYS_PTRACE) may trace it",
                               pid, st.st_uid);
        std::ifstream in("/proc/sys/kernel/yama/ptrace_scope");
        int scope = -1;
        if (in >> scope && scope >= 1)
            return fmt::format("ptrace of process {} is refused: kernel.yama.ptrace_scope is {} "
                               "(0 lets a user trace their own processes; 1 only their "
                               "children{})",
                               pid, scope, scope >= 2 ? "; 2 only root; 3 nobody" : "");
        return fmt::format("ptrace of process {} is refused (another user's process, a "
                           "seccomp filter, or a tracer already attached)",
                           pid);
    }
    if (err == ESRCH) return fmt::format("no process {} (it exited?)", pid);
    return fmt::format("ptrace of process {} failed: {}", pid, std::strerror(err));
}

PtraceSampler::~PtraceSampler() {
    if (!detached_) disable();
}

bool PtraceSampler::seize(pid_t tid, uint32_t pid, bool launch, std::string& error) {
    long options = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC;
    if (follow_forks_) options |= PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK;
    if (ptrace(PTRACE_SEIZE, tid, nullptr, reinterpret_cast<void*>(options)) != 0) {
        if (errno == ESRCH && !launch) return true; // the thread ended meanwhile
        error = explain_ptrace_error(errno, pid_t(pid));
        return false;
    }
    Thread& t = threads_[tid];
    t.pid = pid;
    t.cpu_ns = cpu_ns_of(pid, tid);
    return true;
}

std::unique_ptr<PtraceSampler> PtraceSampler::launch(pid_t child, const SamplerOptions& o,
                                                     std::string& error) {
    std::unique_ptr<PtraceSampler> s(new PtraceSampler);
    s->period_ns_ = uint64_t(1e9 / std::clamp(o.hz, 1.0, kMaxHz));
    s->stack_bytes_ = o.stack_bytes & ~7u;
    s->follow_forks_ = o.subprocesses;
    s->child_ = child;
    s->next_tick_ = now_ns() + s->period_ns_;
    if (!s->seize(child, uint32_t(child), true, error)) return nullptr;
    s->processes_.insert(uint32_t(child));
    return s;
}

std::unique_ptr<PtraceSampler> PtraceSampler::attach(pid_t pid, const SamplerOptions& o,
                                                     std::vector<pid_t>& threads,
                                                     std::string& error) {
    std::unique_ptr<PtraceSampler> s(new PtraceSampler);
    s->period_ns_ = uint64_t(1e9 / std::clamp(o.hz, 1.0, kMaxHz));
    s->stack_bytes_ = o.stack_bytes & ~7u;
    s->exec_seen_ = true; // the image is the one running
    s->next_tick_ = now_ns() + s->period_ns_;
    // Threads created before their creator was seized are not followed: list again until no
    // new one appears.
    for (int round = 0; round < 100; ++round) {
        bool fresh = false;
        for (pid_t tid : threads_of(pid)) {
            if (s->threads_.count(tid)) continue;
            fresh = true;
            if (!s->seize(tid, uint32_t(pid), false, error)) return nullptr;
        }
        if (!fresh) break;
    }
    if (s->threads_.empty()) {
        error = explain_ptrace_error(ESRCH, pid);
        return nullptr;
    }
    for (const auto& [tid, t] : s->threads_) threads.push_back(tid);
    s->processes_.insert(uint32_t(pid));
    // The mappings there now are the run's to read (SampledRun::add_existing): only new ones
    // are reported from here.
    for (const Mapping& m : executable_maps(uint32_t(pid)))
        s->mapped_[uint32_t(pid)].emplace(m.start, m.path);
    return s;
}

void PtraceSampler::resume(pid_t tid, int signal) {
    ptrace(PTRACE_CONT, tid, nullptr, reinterpret_cast<void*>(long(signal)));
}

// A wait status of a traced thread that is not the stop a sample asked for: handled so that
// the thread runs on (a signal passed through, a new thread or process followed, an exec
// noted), or stays stopped only where the program stopped it (group-stop, kept with LISTEN).
void PtraceSampler::handle(pid_t tid, int status) {
    auto it = threads_.find(tid);
    uint32_t pid = it != threads_.end() ? it->second.pid : uint32_t(tid);
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        TaskEvent e;
        e.exit = true;
        e.pid = e.ppid = pid;
        e.tid = e.ptid = uint32_t(tid);
        e.time_ns = now_ns();
        tasks_.push_back(e);
        if (it != threads_.end()) threads_.erase(it);
        if (tid == child_) child_status_ = status;
        return;
    }
    if (!WIFSTOPPED(status)) return;
    int sig = WSTOPSIG(status);
    int event = status >> 16;
    if (event == PTRACE_EVENT_CLONE || event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK) {
        unsigned long fresh = 0;
        ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &fresh);
        bool process = event != PTRACE_EVENT_CLONE;
        Thread& t = threads_[pid_t(fresh)];
        t.pid = process ? uint32_t(fresh) : pid;
        TaskEvent e;
        e.pid = t.pid;
        e.ppid = pid;
        e.tid = uint32_t(fresh);
        e.ptid = uint32_t(tid);
        e.time_ns = now_ns();
        tasks_.push_back(e);
        if (process) processes_.insert(t.pid);
        resume(tid, 0);
        return;
    }
    if (event == PTRACE_EVENT_EXEC) {
        // The thread that called exec now has the process's id; the others are gone.
        for (auto t = threads_.begin(); t != threads_.end();)
            t = t->second.pid == pid && t->first != tid ? threads_.erase(t) : std::next(t);
        CommEvent c;
        c.pid = pid;
        c.tid = uint32_t(tid);
        c.exec = true;
        c.name = comm_of(pid, tid);
        c.time_ns = now_ns();
        comms_.push_back(c);
        mapped_.erase(pid); // the new image's mappings are reported at the next drain
        exec_seen_ = true;
        if (auto t = threads_.find(tid); t != threads_.end())
            t->second.cpu_ns = cpu_ns_of(pid, tid);
        resume(tid, 0);
        return;
    }
    if (event == PTRACE_EVENT_STOP) {
        siginfo_t si;
        bool group_stop = ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si) != 0 && errno == EINVAL &&
                          std::find(std::begin(kStopSignals), std::end(kStopSignals), sig) !=
                              std::end(kStopSignals);
        if (group_stop)
            ptrace(PTRACE_LISTEN, tid, nullptr, nullptr); // stopped as the program asked
        else
            resume(tid, 0); // a new thread's first stop, or an interrupt no one waits for
        return;
    }
    // A signal on its way to the thread: delivered as it would have been.
    resume(tid, event ? 0 : sig);
}

bool PtraceSampler::wait(int timeout_ms) {
    // Until the next tick or the timeout: every stop of a traced thread is handled as it comes
    // (SIGCHLD, blocked here, wakes the wait), so no thread waits on profrun.
    uint64_t until = now_ns() + uint64_t(timeout_ms) * 1000000ull;
    if (next_tick_ && next_tick_ < until) until = next_tick_;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, nullptr);
    for (;;) {
        int status;
        pid_t tid;
        // A new thread's first stop may come before its creator's clone event: it is resumed
        // like any, and known from the event.
        while ((tid = waitpid(-1, &status, __WALL | WNOHANG)) > 0) handle(tid, status);
        uint64_t now = now_ns();
        if (now >= until || (child_ && child_status_)) return true;
        timespec left{long((until - now) / 1000000000ull), long((until - now) % 1000000000ull)};
        if (sigtimedwait(&chld, nullptr, &left) < 0 && errno != EAGAIN) return false;
    }
}

void PtraceSampler::read_maps(uint32_t pid, RecordSink& sink) {
    auto& seen = mapped_[pid];
    uint64_t now = now_ns();
    for (Mapping& m : executable_maps(pid)) {
        if (!seen.emplace(m.start, m.path).second) continue;
        m.time_ns = now;
        sink.on_mapping(m);
    }
}

void PtraceSampler::sample_thread(pid_t tid, Thread& t, RecordSink& sink) {
    uint64_t cpu = cpu_ns_of(t.pid, tid);
    if (cpu <= t.cpu_ns) return; // it used no CPU since the last sample: nothing to charge
    if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) return;
    // Its stop; other stops of the thread met first are handled (and the interrupt stays
    // pending for the next one).
    int status = 0;
    bool ours = false;
    for (int other = 0; other < 8 && !ours; ++other) {
        // Not stopping: the interrupt stays pending, and wait() resumes the stop it makes.
        if (wait_thread(tid, status, 100) != tid) return;
        if (WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_STOP) {
            siginfo_t si;
            ours = ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si) == 0;
        }
        if (!ours) {
            handle(tid, status);
            if (!threads_.count(tid)) return; // it exited
        }
    }
    if (!ours) return;
    user_regs_struct regs{};
    bool got = ptrace(PTRACE_GETREGS, tid, nullptr, &regs) == 0;
    size_t copied = 0;
    if (got && stack_bytes_) {
        stack_.resize(stack_bytes_);
        iovec local{stack_.data(), stack_.size()},
            remote{reinterpret_cast<void*>(regs.rsp), stack_.size()};
        ssize_t n = process_vm_readv(pid_t(t.pid), &local, 1, &remote, 1, 0);
        copied = n > 0 ? size_t(n) : 0;
    }
    resume(tid, 0);
    if (!got) return;
    // The frame-pointer chain, within the copy: what the kernel's walk would give.
    std::vector<uint64_t> chain{regs.rip};
    uint64_t bp = regs.rbp;
    while (chain.size() < 128 && bp >= regs.rsp && bp + 16 <= regs.rsp + copied && (bp & 7) == 0) {
        uint64_t next, ret;
        std::memcpy(&next, stack_.data() + (bp - regs.rsp), 8);
        std::memcpy(&ret, stack_.data() + (bp - regs.rsp) + 8, 8);
        if (ret < 4096) break;
        chain.push_back(ret);
        if (next <= bp) break;
        bp = next;
    }
    Sample s;
    s.pid = t.pid;
    s.tid = uint32_t(tid);
    s.time_ns = now_ns();
    s.period_ns = cpu - t.cpu_ns;
    s.chain = chain.data();
    s.chain_size = uint32_t(chain.size());
    s.regs = true;
    s.ip = regs.rip;
    s.sp = regs.rsp;
    s.bp = regs.rbp;
    s.stack = stack_.data();
    s.stack_size = copied;
    t.cpu_ns = cpu;
    sample_bytes_ += sizeof(regs) + copied;
    ++samples_;
    sink.on_sample(s);
}

void PtraceSampler::drain(RecordSink& sink) {
    for (const TaskEvent& e : tasks_) sink.on_task(e);
    tasks_.clear();
    for (const CommEvent& c : comms_) sink.on_comm(c);
    comms_.clear();
    if (!exec_seen_) return; // profrun's own image until the exec
    for (uint32_t pid : processes_) read_maps(pid, sink);
    for (auto& [tid, t] : threads_)
        if (!t.named) {
            t.named = true;
            CommEvent c;
            c.pid = t.pid;
            c.tid = uint32_t(tid);
            c.name = comm_of(t.pid, tid);
            c.time_ns = now_ns();
            sink.on_comm(c);
        }
    uint64_t now = now_ns();
    if (now < next_tick_) return;
    next_tick_ = now + period_ns_;
    std::vector<pid_t> tids;
    for (const auto& [tid, t] : threads_) tids.push_back(tid);
    for (pid_t tid : tids)
        if (auto it = threads_.find(tid); it != threads_.end())
            sample_thread(tid, it->second, sink);
    for (const TaskEvent& e : tasks_) sink.on_task(e);
    tasks_.clear();
}

void PtraceSampler::disable() {
    if (detached_) return;
    detached_ = true;
    // A thread is detached from a stop: interrupted first, and a signal it was stopped for is
    // delivered with the detach.
    for (const auto& [tid, t] : threads_) {
        if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) continue;
        for (int tries = 0; tries < 8; ++tries) {
            int status;
            if (wait_thread(tid, status, 200) != tid) break;
            if (WIFEXITED(status) || WIFSIGNALED(status)) {
                if (tid == child_) child_status_ = status;
                break;
            }
            int event = status >> 16;
            int sig = WIFSTOPPED(status) && event == 0 ? WSTOPSIG(status) : 0;
            if (event == PTRACE_EVENT_CLONE || event == PTRACE_EVENT_FORK ||
                event == PTRACE_EVENT_VFORK) {
                // The new thread is traced too: it detaches when its first stop comes (the
                // kernel detaches it when this process exits, at the latest).
                unsigned long fresh = 0;
                ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &fresh);
                ptrace(PTRACE_DETACH, pid_t(fresh), nullptr, nullptr);
            }
            if (ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(long(sig))) == 0) break;
        }
    }
    threads_.clear();
}

} // namespace prof::sampling
