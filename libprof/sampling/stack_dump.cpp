// Every thread's call stack in a running process: see stack_dump.hpp.
#include "sampling/stack_dump.hpp"

#include "sampling/perf_sampler.hpp"
#include "sampling/process_stacks.hpp"
#include "sampling/ptrace_sampler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <asm/unistd.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

namespace prof::sampling {
namespace {

// How long the threads asked to stop are waited for together, SIGCHLD by SIGCHLD; one that
// takes longer (kept off every CPU) is then waited for alone (stop_and_read).
constexpr int kStopWaitMs = 200;

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The thread's state letter and name from /proc/PID/task/TID/stat ("TID (NAME) S ...": the
// name may hold spaces and parentheses, so the last ')' ends it).
bool thread_stat(pid_t pid, pid_t tid, char& state, std::string& name) {
    std::string stat = read_text(fmt::format("/proc/{}/task/{}/stat", pid, tid));
    size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 2 >= stat.size())
        return false;
    name = stat.substr(open + 1, close - open - 1);
    state = stat[close + 2];
    return true;
}

// Whether a signal waits for the thread or its process: a system call it cut short stays so.
bool signal_pending(pid_t pid, pid_t tid) {
    std::istringstream in(read_text(fmt::format("/proc/{}/task/{}/status", pid, tid)));
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0)
            if (std::strtoull(line.c_str() + 7, nullptr, 16) != 0) return true;
    return false;
}

// What is read of one thread: its registers (bp only when it was stopped) and the top of its
// stack.
struct Registers {
    uint64_t ip = 0, sp = 0, bp = 0;
    bool bp_known = false;
    std::vector<uint8_t> stack;

    StackCopy copy() const {
        StackCopy c;
        c.ip = ip;
        c.sp = sp;
        c.bp = bp;
        c.bp_known = bp_known;
        c.stack = stack.data();
        c.size = stack.size();
        return c;
    }
};

// The stack from `sp` to the end of its mapping, at most `max` bytes.
void copy_stack(pid_t pid, const std::vector<ProcessMap>& maps, size_t max, Registers& r) {
    auto it = std::upper_bound(maps.begin(), maps.end(), r.sp,
                               [](uint64_t a, const ProcessMap& m) { return a < m.start; });
    const ProcessMap* m = it != maps.begin() && r.sp < std::prev(it)->end ? &*std::prev(it) : nullptr;
    size_t size = m ? size_t(std::min<uint64_t>(m->end - r.sp, max)) : 0;
    r.stack.resize(size);
    if (!size) return;
    iovec local{r.stack.data(), size}, remote{reinterpret_cast<void*>(r.sp), size};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    r.stack.resize(n > 0 ? size_t(n) : 0);
}

// A thread blocked in the kernel, read without stopping it: its pointers from /proc, its
// stack copied, and the pointers read again to know the copy belongs to the same wait.
// How many times the thread has been on a CPU (schedstat's third field): unchanged across a
// copy, the thread did not run while it was made, even if it woke and waited again at the
// same place.
uint64_t times_run(pid_t pid, pid_t tid) {
    std::istringstream in(read_text(fmt::format("/proc/{}/task/{}/schedstat", pid, tid)));
    uint64_t on_cpu = 0, waiting = 0, slices = 0;
    in >> on_cpu >> waiting >> slices;
    return slices;
}

bool read_blocked(pid_t pid, pid_t tid, const std::vector<ProcessMap>& maps, size_t max,
                  DumpThread& t, Registers& r) {
    for (int attempt = 0; attempt < 3; ++attempt) {
        uint64_t runs = times_run(pid, tid);
        std::optional<BlockedRegisters> before = blocked_registers(uint32_t(pid), uint32_t(tid));
        if (!before) break;
        r.ip = before->pc;
        r.sp = before->sp;
        copy_stack(pid, maps, max, r);
        std::optional<BlockedRegisters> after = blocked_registers(uint32_t(pid), uint32_t(tid));
        if (after && after->sp == before->sp && after->pc == before->pc &&
            after->syscall == before->syscall && times_run(pid, tid) == runs) {
            t.syscall = before->syscall;
            return true;
        }
    }
    r = Registers{}; // it keeps waking up: read it as a running one
    return false;
}

// Whether a system call that failed with EINTR can be made again as if it had never been
// interrupted: a wait without a timeout (made again, a timeout would start over) that changed
// nothing before it failed. close() is never made again (its descriptor is gone already, and
// another thread may have its number now), nor connect(), nor a read or a receive (a socket's
// own timeout is not in the registers).
bool restartable(const user_regs_struct& regs) {
    switch (long(regs.orig_rax)) {
    case __NR_epoll_wait:
    case __NR_epoll_pwait:
        return int(regs.r10) == -1; // the timeout, in ms
    case __NR_epoll_pwait2:
        return regs.r10 == 0; // a null timespec: none
    case __NR_rt_sigtimedwait:
        return regs.rdx == 0;
    case __NR_io_getevents:
        return regs.r8 == 0;
    case __NR_semop:
        return true;
    default:
        return false;
    }
}

// A thread to stop: its dump so far, and what its stop gives.
struct ToStop {
    DumpThread thread;
    Registers regs;
    bool seized = false, done = false, gone = false;
    uint64_t from = 0; // the interrupt
};

// A stopped thread: its registers and stack copied, then detached at once.
void read_stopped(pid_t pid, const std::vector<ProcessMap>& maps, size_t max, int deliver, uint64_t seen,
                  ToStop& s) {
    pid_t tid = s.thread.tid;
    DumpThread& t = s.thread;
    Registers& r = s.regs;
    user_regs_struct regs{};
    if (ptrace(PTRACE_GETREGS, tid, nullptr, &regs) == 0) {
        // Entering a system call as the interrupt came, or waiting in one, the thread may have
        // had it fail with EINTR (epoll_wait does; the kernel restarts the others itself): it
        // is set back to the syscall instruction, so that the call is made again, where making
        // it again is the same call (restartable()). Not when a signal of the program's is
        // pending: that EINTR is the program's.
        if (int64_t(regs.orig_rax) >= 0 && int64_t(regs.rax) == -EINTR && !deliver &&
            restartable(regs) && !signal_pending(pid, tid)) {
            uint16_t code = 0;
            iovec local{&code, 2}, remote{reinterpret_cast<void*>(regs.rip - 2), 2};
            if (process_vm_readv(pid, &local, 1, &remote, 1, 0) == 2 && code == 0x050f) {
                user_regs_struct again = regs;
                again.rax = again.orig_rax;
                again.rip -= 2;
                if (ptrace(PTRACE_SETREGS, tid, nullptr, &again) == 0) t.syscall_restarted = true;
            }
        }
        r = Registers{};
        r.ip = regs.rip;
        r.sp = regs.rsp;
        r.bp = regs.rbp;
        r.bp_known = true;
        copy_stack(pid, maps, max, r);
        t.error.clear();
    } else {
        t.error = fmt::format("its registers could not be read: {}", std::strerror(errno));
    }
    ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(long(deliver)));
    uint64_t detached = now_ns();
    t.stopped = true;
    t.stop_ns = detached - s.from;
    t.held_ns = detached - seen;
    s.done = true;
}

// Threads on a CPU, or whose wait /proc could not unwind: all interrupted at once, then each
// read and detached as its stop comes. A thread is held only while its own registers and stack
// are copied; waiting for the stops together keeps a process with many busy threads (each
// stopping only when it next gets a CPU) from waiting for them one after another. A thread
// that ends meanwhile is marked gone; one that cannot be seized keeps its error.
void stop_and_read(pid_t pid, const std::vector<ProcessMap>& maps, size_t max, std::vector<ToStop>& all) {
    std::map<pid_t, ToStop*> waiting;
    for (ToStop& s : all) {
        if (ptrace(PTRACE_SEIZE, s.thread.tid, nullptr, nullptr) != 0) {
            if (errno == ESRCH)
                s.gone = true;
            else if (s.thread.error.empty() && s.thread.frames.empty() && !s.regs.sp)
                s.thread.error = explain_ptrace_error(errno, pid);
            continue;
        }
        s.seized = true;
        s.from = now_ns();
        ptrace(PTRACE_INTERRUPT, s.thread.tid, nullptr, nullptr);
        waiting[s.thread.tid] = &s;
    }
    // Their stops report with SIGCHLD (blocked by dump_process): waited for without polling,
    // so that the time measured is the stop's, not a sleep's. Only these threads are waited
    // for (waitpid on each): a child of the caller's is not reaped here.
    uint64_t until = now_ns() + uint64_t(kStopWaitMs) * 1000000ull;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    while (!waiting.empty()) {
        bool any = false;
        for (auto it = waiting.begin(); it != waiting.end();) {
            int status = 0;
            pid_t w = waitpid(it->first, &status, __WALL | WNOHANG);
            ToStop& s = *it->second;
            if (w == it->first && (WIFEXITED(status) || WIFSIGNALED(status))) {
                s.gone = true;
            } else if (w == it->first && WIFSTOPPED(status)) {
                // Our stop, a stop the program asked for (group-stop), or a signal on its way:
                // the registers are the thread's in each; the signal goes on with the detach.
                int deliver = (status >> 16) == 0 ? WSTOPSIG(status) : 0;
                read_stopped(pid, maps, max, deliver, now_ns(), s);
            } else if (w < 0 && errno == ECHILD) {
                s.gone = true; // not ours any more: it ended and was reaped
            } else {
                ++it;
                continue;
            }
            any = true;
            it = waiting.erase(it);
        }
        if (any || waiting.empty()) continue;
        uint64_t now = now_ns();
        if (now >= until) break;
        timespec left{long((until - now) / 1000000000ull), long((until - now) % 1000000000ull)};
        sigtimedwait(&chld, nullptr, &left);
    }
    // A thread that has not stopped by now (a busy machine that kept it off every CPU) stays
    // traced with the interrupt pending, and would stop at its next return to user space and
    // wait there: it cannot be detached before it stops, so it is detached when it does, here,
    // however long that takes. The dump is late rather than the program stopped.
    for (auto& [tid, s] : waiting) {
        int status = 0;
        while (waitpid(tid, &status, __WALL) < 0 && errno == EINTR) {
        }
        if (WIFSTOPPED(status)) {
            int deliver = (status >> 16) == 0 ? WSTOPSIG(status) : 0;
            read_stopped(pid, maps, max, deliver, now_ns(), *s);
        } else {
            s->gone = true;
        }
    }
}

} // namespace

bool dump_process(pid_t pid, const DumpOptions& options, ProcessDump& out, std::string& error) {
    uint64_t from = now_ns();
    out = ProcessDump{};
    out.pid = pid;
    std::vector<pid_t> tids = threads_of(pid);
    if (tids.empty()) {
        error = fmt::format("no process {} (it exited?)", pid);
        return false;
    }
    // The right to read a thread's registers from /proc is the right to ptrace it: asked once
    // here, so that a refusal is one line and not one per thread.
    // (The kernel checks it when the file is read, not when it is opened.)
    int fd = open(fmt::format("/proc/{}/syscall", pid).c_str(), O_RDONLY | O_CLOEXEC);
    char probe[256];
    ssize_t got = fd >= 0 ? read(fd, probe, sizeof probe) : -1;
    int err = errno;
    if (fd >= 0) close(fd);
    if (got < 0) {
        error = err == ENOENT || err == ESRCH ? fmt::format("no process {} (it exited?)", pid)
                                              : explain_ptrace_error(EPERM, pid);
        return false;
    }
    char exe[4096];
    ssize_t n = readlink(fmt::format("/proc/{}/exe", pid).c_str(), exe, sizeof exe - 1);
    if (n > 0) out.exe.assign(exe, size_t(n));
    out.cmdline = command_line_of(pid);

    // The stops of the threads read running report with SIGCHLD, waited for in read_running.
    sigset_t chld, mask;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &chld, &mask);
    struct RestoreMask {
        sigset_t mask;
        ~RestoreMask() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
    } restore{mask};
    ProcessStacks dumper(pid, options.inlined);
    const std::vector<ProcessMap>& maps = dumper.maps();
    std::vector<ToStop> threads;
    for (pid_t tid : tids) {
        ToStop s;
        DumpThread& t = s.thread;
        t.tid = tid;
        if (!thread_stat(pid, tid, t.state, t.name)) continue; // it ended
        if (t.state == 'Z' || t.state == 'X') {
            t.error = "it has exited";
            s.done = true;
        } else if (read_blocked(pid, tid, maps, options.max_stack_bytes, t, s.regs)) {
            bool complete = false;
            t.frames = dumper.frames(dumper.unwind(s.regs.copy(), t.stack_end, complete));
            // Code with frame pointers finds its caller through rbp, which /proc does not show:
            // where the walk needs it, a thread in an interruptible wait is stopped after all
            // (read_stopped makes sure its system call goes on). One in an uninterruptible wait
            // (D) would not stop before the wait ends: its stack stays as read.
            s.done = complete || t.state != 'S';
        }
        threads.push_back(std::move(s));
    }
    std::vector<ToStop> stop;
    for (ToStop& s : threads)
        if (!s.done) stop.push_back(s);
    stop_and_read(pid, maps, options.max_stack_bytes, stop);
    for (ToStop& s : stop)
        if (s.done && s.thread.error.empty()) {
            bool complete = false;
            s.thread.frames = dumper.frames(dumper.unwind(s.regs.copy(), s.thread.stack_end, complete));
        }
    size_t k = 0;
    for (ToStop& s : threads) {
        if (!s.done) {
            ToStop& stopped = stop[k++];
            if (stopped.gone) continue;
            // Not stopped (refused, or too slow): a wait read from /proc keeps what it gave.
            if (stopped.done || s.thread.frames.empty()) s = std::move(stopped);
        }
        out.threads.push_back(std::move(s.thread));
    }
    if (out.threads.empty()) {
        error = fmt::format("no process {} (it exited?)", pid);
        return false;
    }
    out.elapsed_ns = now_ns() - from;
    return true;
}

std::string syscall_name(long number) {
#define PROF_SYSCALL(name) {__NR_##name, #name},
    static const std::map<long, const char*> names{
        PROF_SYSCALL(read) PROF_SYSCALL(write) PROF_SYSCALL(open) PROF_SYSCALL(close)
        PROF_SYSCALL(poll) PROF_SYSCALL(ppoll) PROF_SYSCALL(select) PROF_SYSCALL(pselect6)
        PROF_SYSCALL(readv) PROF_SYSCALL(writev) PROF_SYSCALL(pread64) PROF_SYSCALL(pwrite64)
        PROF_SYSCALL(preadv) PROF_SYSCALL(pwritev) PROF_SYSCALL(openat) PROF_SYSCALL(ioctl)
        PROF_SYSCALL(nanosleep) PROF_SYSCALL(clock_nanosleep) PROF_SYSCALL(pause)
        PROF_SYSCALL(futex) PROF_SYSCALL(epoll_wait) PROF_SYSCALL(epoll_pwait)
        PROF_SYSCALL(epoll_pwait2) PROF_SYSCALL(accept) PROF_SYSCALL(accept4)
        PROF_SYSCALL(connect) PROF_SYSCALL(recvfrom) PROF_SYSCALL(recvmsg)
        PROF_SYSCALL(recvmmsg) PROF_SYSCALL(sendto) PROF_SYSCALL(sendmsg) PROF_SYSCALL(sendmmsg)
        PROF_SYSCALL(wait4) PROF_SYSCALL(waitid) PROF_SYSCALL(rt_sigsuspend)
        PROF_SYSCALL(rt_sigtimedwait) PROF_SYSCALL(sched_yield) PROF_SYSCALL(flock)
        PROF_SYSCALL(fcntl) PROF_SYSCALL(fsync) PROF_SYSCALL(fdatasync) PROF_SYSCALL(msync)
        PROF_SYSCALL(msgrcv) PROF_SYSCALL(msgsnd) PROF_SYSCALL(semop) PROF_SYSCALL(semtimedop)
        PROF_SYSCALL(io_getevents) PROF_SYSCALL(io_uring_enter) PROF_SYSCALL(splice)
        PROF_SYSCALL(sendfile) PROF_SYSCALL(mmap) PROF_SYSCALL(munmap) PROF_SYSCALL(madvise)
        PROF_SYSCALL(brk) PROF_SYSCALL(clone) PROF_SYSCALL(clone3) PROF_SYSCALL(execve)
        PROF_SYSCALL(exit) PROF_SYSCALL(exit_group) PROF_SYSCALL(getdents64)
        PROF_SYSCALL(newfstatat) PROF_SYSCALL(statx) PROF_SYSCALL(getrandom)
        PROF_SYSCALL(inotify_add_watch) PROF_SYSCALL(pidfd_open) PROF_SYSCALL(membarrier) PROF_SYSCALL(restart_syscall)};
#undef PROF_SYSCALL
    auto it = names.find(number);
    return it != names.end() ? it->second : fmt::format("system call {}", number);
}

std::string state_name(char state) {
    switch (state) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "blocked";
    case 'T': return "stopped";
    case 't': return "stopped by a tracer";
    case 'Z': return "exited";
    case 'X': return "exited";
    case 'I': return "idle";
    case 'P': return "parked";
    default: return fmt::format("state {}", state);
    }
}

} // namespace prof::sampling
