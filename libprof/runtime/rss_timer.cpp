// Resident memory over time: the /proc/self/statm descriptor every reading of the resident set
// size uses (the allocation path, PROF_LINE_RSS, the timer), and the timer thread that reads it
// every PROF_MEM_RSS_INTERVAL ms while the memory profiler runs, so that a stretch without
// allocator calls (a program touching memory it allocated earlier) still has RSS points.
//
// Why a thread of the runtime's own, as heaptrack's libheaptrack has, rather than a timer
// signal: it sleeps with clock_nanosleep with every signal blocked, so no signal ever reaches
// the application's threads, none of their calls can fail with EINTR because of it, and the
// program's own signals (process-directed ones too) are never delivered to it.
//
// Why its readings go to the process stream (Rss records there, format 1.11) rather than to a
// stream of its own: the process stream is the runtime's already, never a program thread, so
// no view (threads, per-thread peaks, call views, run manifests) and no figure (the End
// record's count of thread streams) has to learn to leave it out. The global lock it takes for
// each record, a few hundred nanoseconds every 10 ms on a thread that is not the program's,
// orders it with the finish: once the finish has begun nothing more is written (the runtime's
// own work, symbolization, is not the program's memory), and a record is never half written
// when the process dies (the chunk's `used` covers whole records only).
//
// Hot-path contract of runtime.hpp: the timer thread records nothing as a program thread (its
// state is kOff from its first instruction), and the allocation pthread_create makes for its
// thread-local storage is made with the creating thread's recording blocked, so it is not
// counted as the program's. The thread never exits (it parks after the finish): its exit would
// release that storage through the interposed free, as a release of a block never recorded.
#include "thread_state.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace prof::rt {
namespace {

// ---- the statm descriptor ------------------------------------------------------------------
// -1: not opened yet; kStatmBroken: a descriptor just opened did not read as statm (no /proc,
// or something odd): no further tries, so that no descriptor leaks per reading.
constexpr int kStatmBroken = -2;
std::atomic<int> g_statm{-1};
// The identity of the file opened, to tell our descriptor from one of the program's that took
// its number after the program closed ours (daemons close every descriptor).
std::atomic<uint64_t> g_statm_dev{0}, g_statm_ino{0};

// The lowest number the runtime's own descriptors take: the top quarter of the descriptor
// limit, from 4096 at most, as the sampler places its perf_event descriptors, so that the
// program gets the low numbers it expects (a shell's redirections, programs that assume the
// next open returns 3).
PROF_NOINSTR int descriptor_floor() {
    rlimit files{};
    if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur < 64) return 0;
    return files.rlim_cur >= 8192 ? 4096 : int(files.rlim_cur - files.rlim_cur / 4);
}

// /proc/self/statm of the calling process, moved up to descriptor_floor() (`at`: that very
// number, replacing what is there, for a fork child's own file in place of its parent's).
PROF_NOINSTR int open_statm(int at = -1) {
    int low = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (low < 0) return -1;
    int fd = low;
    if (at >= 0) {
        fd = dup3(low, at, O_CLOEXEC);
    } else if (int floor = descriptor_floor(); floor > low) {
        fd = fcntl(low, F_DUPFD_CLOEXEC, floor);
        if (fd < 0) fd = low; // the top of the table is full: the low number then
    }
    if (fd != low) close(low);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0) {
        g_statm_dev.store(st.st_dev, std::memory_order_relaxed);
        g_statm_ino.store(st.st_ino, std::memory_order_relaxed);
    }
    return fd;
}

PROF_NOINSTR bool is_our_statm(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 && st.st_dev == g_statm_dev.load(std::memory_order_relaxed) &&
           st.st_ino == g_statm_ino.load(std::memory_order_relaxed);
}

// The descriptor, opened on first use; -1 when none can be.
PROF_NOINSTR int statm_fd() {
    int fd = g_statm.load(std::memory_order_acquire);
    if (fd != -1) return fd < 0 ? -1 : fd;
    int opened = open_statm();
    if (opened < 0) return -1;
    int expected = -1;
    if (!g_statm.compare_exchange_strong(expected, opened, std::memory_order_acq_rel)) {
        close(opened); // another thread opened one first
        return expected < 0 ? -1 : expected;
    }
    return opened;
}

// The resident pages of a statm text ("size resident shared text lib data dt\n"); false when
// the bytes are not such a text.
PROF_NOINSTR bool parse_statm(const char* p, const char* end, uint64_t& resident) {
    uint64_t fields[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
        if (p == end || *p < '0' || *p > '9') return false;
        while (p != end && *p >= '0' && *p <= '9')
            fields[i] = fields[i] * 10 + unsigned(*p++ - '0');
        if (p == end || (*p != ' ' && *p != '\n')) return false;
        ++p;
    }
    resident = fields[1];
    return true;
}

// ---- the timer thread ----------------------------------------------------------------------
// Whether this process has started its timer (a fork child has none until it starts its own).
std::atomic<bool> g_timer_started{false};

constexpr size_t kTimerStack = 64u << 10; // clock_nanosleep, pread, a record: little stack

PROF_NOINSTR void park() {
    for (;;) pause(); // every signal is blocked: never returns; the process's end ends it
}

PROF_NOINSTR void* timer_main(void*) {
    // Never a program thread: nothing it calls may open a stream or record an allocation.
    prof_tls.state = kOff;
    prctl(PR_SET_NAME, "prof-rss", 0, 0, 0);
    const uint64_t period_ns = uint64_t(g_options.mem_rss_interval_ms) * 1000000u;
    uint64_t next = monotonic_ns();
    for (;;) {
        next += period_ns;
        timespec at{time_t(next / 1000000000u), long(next % 1000000000u)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
        }
        // No reading (statm cannot be read), or no record any more: the finish has begun, or
        // tracing stopped (a full disk).
        uint64_t rss = rss_bytes_now();
        if (!rss || !process_rss_record(rss)) break;
        // Behind by more than a period (the machine was busy, the process stopped by SIGSTOP):
        // the next reading a period from now, not a burst of readings to catch up.
        uint64_t now = monotonic_ns();
        if (now > next + period_ns) next = now;
    }
    park();
    return nullptr;
}

} // namespace

PROF_NOINSTR uint64_t rss_bytes_now() {
    int saved = errno;
    static const long page = sysconf(_SC_PAGESIZE);
    uint64_t resident = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
        int fd = statm_fd();
        if (fd < 0) break;
        char buf[128];
        ssize_t n = pread(fd, buf, sizeof buf, 0);
        if (n > 0 && parse_statm(buf, buf + n, resident)) break;
        resident = 0;
        // Not statm: the program closed our descriptor (and its number may be one of the
        // program's files now, which must not be closed). Forget it and open another once; a
        // descriptor just opened that does not read as statm ends the readings.
        int expected = fd;
        g_statm.compare_exchange_strong(expected, attempt ? kStatmBroken : -1,
                                        std::memory_order_acq_rel);
    }
    errno = saved;
    return resident * uint64_t(page);
}

PROF_NOINSTR void rss_timer_start() {
    if (!g_memory_active || !g_options.mem_rss_interval_ms || !tracing_active()) return;
    if (g_timer_started.exchange(true, std::memory_order_acq_rel)) return;
    int saved = errno;
    // The statm descriptor first, while the program may still be single-threaded: moving it
    // up to descriptor_floor() grows the descriptor table, which the kernel does after an RCU
    // grace period when the table is shared with another thread (`profrun --mem -- perl -e 1`:
    // 32-34 ms of wall time with the timer thread started first, 18.6 ms without the wait).
    statm_fd();
    // The new thread inherits this signal mask: every signal blocked (glibc keeps its own
    // internal signals, such as the one setuid uses across threads, deliverable).
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, kTimerStack);
    // pthread_create allocates the thread's TLS vector through the (interposed) calloc: with
    // this thread's recording blocked, that block is not the program's.
    uint8_t prev = block_thread();
    pthread_t thread;
    int rc = pthread_create(&thread, &attr, timer_main, nullptr);
    unblock_thread(prev);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (rc != 0)
        log(LogLevel::kWarn, "rss_timer_off",
            "error=\"%s\" hint=\"RSS is read at allocator calls only\"", strerror(rc));
    errno = saved;
}

PROF_NOINSTR void rss_after_fork_child() {
    // The inherited descriptor reads the parent's statm (/proc/self was the parent when it was
    // opened): the child's own file takes its number, if the number is still ours.
    int fd = g_statm.load(std::memory_order_relaxed);
    if (fd >= 0) g_statm.store(is_our_statm(fd) ? open_statm(fd) : -1, std::memory_order_relaxed);
    // The parent's timer thread is not in the child: the child starts its own (its trace is
    // another file, with its own RSS timeline).
    g_timer_started.store(false, std::memory_order_relaxed);
    rss_timer_start();
}

} // namespace prof::rt
