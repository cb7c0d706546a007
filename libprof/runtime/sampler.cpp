// CPU-time sampling (trace format 1.5, Sample records): every traced thread is signalled after
// each 1/PROF_SAMPLE_HZ seconds of its own CPU time, and the signal handler appends a Sample
// record to the thread's current chunk: the thread's CPU clock at that moment, at that point of
// its stream (in the frame open there). Readers weigh each record by the CPU time since the
// stream's previous one, so the weights are exact whatever rate the signals come at.
//
// What signals the thread (PROF_SAMPLE_TIMER):
// - A POSIX timer on the thread's CPU clock (`posix`, the default; timer_create with
//   CLOCK_THREAD_CPUTIME_ID and SIGEV_THREAD_ID). On kernels with POSIX_CPU_TIMERS_TASK_WORK
//   the signal is generated on the thread's return to user mode, so it never interrupts a
//   blocking system call (no EINTR from poll, nanosleep, ...; tests/programs/sampled.cpp counts
//   them), and the time of a system call is sampled where the call returns: in its caller. The
//   kernel checks CPU-time timers only at its tick (250 Hz here), and only for the thread
//   running then: a thread whose CPU bursts fall between ticks (3 ms of work and a 1 ms sleep,
//   on a CPU another process keeps busy, locks in step with a 4 ms tick) goes unsampled for tens
//   of milliseconds, and the sample that finally comes carries all that CPU time to wherever it
//   lands.
// - A perf_event software cpu-clock descriptor per thread (`perf`), user mode only, with
//   F_SETSIG to our signal and F_SETOWN_EX to the thread. Its clock is an hrtimer that runs
//   while the thread runs, so a sample comes after each period of the thread's CPU time,
//   wherever the period ends: no tick lock-step. `exclude_kernel` is not only what
//   perf_event_paranoid 2 allows: an overflow is taken only when the timer interrupts user code,
//   so the signal is delivered on the way back to that code and never arrives inside a system
//   call. The price: a period that ends in the kernel is skipped, and its time goes with the
//   next sample, wherever the thread is by then; on SQLite, whose writes are a third of its
//   CPU time, that moved unixWrite from 35% (perf record) to 4%, where the POSIX timer gives
//   37% (tools/bench/true_time.py). Each overflow disables the event (PERF_EVENT_IOC_REFRESH 1)
//   until the handler re-arms it: at most one signal of it is ever queued, so a thread that
//   blocks our signal cannot fill the user's queue of pending signals (the kernel would then
//   send SIGIO). The descriptor sits in the top quarter of the descriptor limit (at most from
//   4096), so the program keeps the numbers it expects; a thread that finds no room there, or
//   a kernel that refuses perf events, gets a POSIX timer.
//
// The handler's contract, on top of runtime.hpp's: no lock, no allocation, no call into the
// hooks, errno kept, nothing instrumented. It writes only when the thread's state says that no
// other writer of its chunk is in progress (kActive, or kDeferred once settled), and only into
// the room left in the thread's current chunk: opening a chunk takes the global lock. A sample
// that does not fit waits in thread-local storage; the runtime writes it when the thread next
// opens a chunk (refill_event), before the event that needed the room, which is where the thread
// was when the sample was taken. A sample that lands in the profiler's own code (the thread is
// busy in the runtime or in an inline record write, or the interrupted instruction lies in the
// text of libprof.so or libprofmem.so) is no sample of the program: its CPU time is counted as
// the profiler's own and reported in the next record written.
//
// The signal: the highest real-time signal whose disposition is SIG_DFL when tracing starts. Its
// handler stays installed for the life of the process, because a sampling signal still in flight
// would kill a process whose disposition went back to SIG_DFL. libprof.so interposes sigaction
// and signal so that a program which installs a handler on that very signal keeps it: the
// program's disposition is recorded and applied to every signal that is not one of ours (a
// timer's: si_code SI_TIMER with our sigev_value; a descriptor's: si_code POLL_IN or POLL_HUP
// with the thread's descriptor as si_fd). When libprof.so does not come before the C library in
// symbol lookup (a preloaded libprofmem.so in an uninstrumented program), the interposers would
// not be called, and sampling stays off.
#include "thread_state.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <link.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

extern "C" {
// The C library's own functions, which the interposers below forward to: glibc's sigaction and
// signal are weak aliases of __sigaction and ssignal.
int __sigaction(int sig, const struct sigaction* act, struct sigaction* old);
// The interposer below as this library itself sees it (not as the dynamic linker binds the
// name sigaction).
int libprof_own_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept
    __attribute__((visibility("hidden")));
}

extern "C" void __cyg_profile_func_enter(void*, void*);
extern "C" void __cyg_profile_func_exit(void*, void*);

namespace prof::rt {

PROF_NOINSTR uint64_t thread_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

namespace {

// The sigev_value of our timers: the address of this object, which no other sender knows.
constinit char g_timer_tag = 0;
// The signal of our timers; 0 while not sampling (the interposers then pass every call on).
std::atomic<int> g_signal{0};
long g_period_ns = 0;
// Whether threads are signalled by perf_event descriptors (else by POSIX timers), and the
// lowest descriptor number theirs may take.
bool g_perf_timer = false;
int g_fd_floor = 0;

// The code of the profiler: a sample whose interrupted instruction lies here is its own.
struct CodeRange {
    uintptr_t start, end;
};
constexpr int kMaxRanges = 8;
CodeRange g_own_code[kMaxRanges];
int g_own_ranges = 0;

// What the program set for our signal through the interposed sigaction or signal. Two slots:
// a writer fills the one not in use and then publishes it, so that a handler running on another
// thread reads a whole disposition.
struct sigaction g_program_action[2];
std::atomic<int> g_program_slot{0};
std::atomic<bool> g_program_writer{false};

// The signals the program has a handler for (bit n - 1 for signal n), as the interposed
// sigaction and signal saw them set: blocked while our handler runs (its sa_mask), so that no
// handler of the program runs inside it, where its hooks would find the thread busy and drop its
// calls. Those only: a signal the thread blocks is queued where it would have been discarded
// (the SIGCHLD of a child that ends, a signal set to SIG_IGN), and for a signal sent to the
// process the kernel then wakes another thread, whose epoll_wait fails with EINTR though no
// handler runs (tests/programs/sampled.cpp `children`: with every signal blocked, 1 to 20 EINTR
// per 400 children).
std::atomic<uint64_t> g_handled{0};
// Our handler, as installed but for its sa_mask.
struct sigaction g_own_action;

// Per thread, in initial-exec TLS (zero-initialised, readable from a signal handler). While the
// timer is armed, the fields a handler updates when the thread is busy (`last_cpu`, `own_ns`,
// `own_count`) are never written by the runtime; the others are written by a handler only when
// the thread is not busy and by the runtime only while it is, so no field has two writers at
// once.
struct ThreadSampler {
    timer_t timer; // the POSIX timer, when `fd` is not used
    bool armed;
    bool perf; // signalled by the perf_event descriptor `fd` (of event `event_id`)
    int fd;    // kept after the descriptor is closed: a signal still queued is ours
    uint64_t event_id;
    uint64_t last_cpu;  // the thread's CPU clock at the previous sample (or at arming)
    uint64_t own_ns;    // CPU time of the samples that landed in the profiler, since arming
    uint64_t own_count; // and their number
    uint64_t reported_own_ns, reported_own_count; // the part of both in records already
    // Samples of the program that found no room in the chunk: the latest one's clocks, and the
    // profiler's totals at that moment; in a counting thread, the node they were taken in (no
    // hook runs before they are written: see program_sample).
    uint32_t pending, pending_node;
    uint64_t pending_ticks, pending_cpu, pending_own_ns, pending_own_count, pending_ip;
    // The thread's /proc/thread-self/schedstat, as its descriptor plus 1 (0: none, as in a
    // thread never armed), whose run delay (its time runnable but waiting for a CPU) each
    // Sample record gets before it in a Waited record; and the pending samples' run delay
    // (kNoRunDelay: not read).
    int schedstat;
    uint64_t pending_run_delay;
    // The timer was deleted and the thread's last record is not written yet; its clocks then.
    bool stopped;
    uint64_t stop_cpu, stop_run_delay;
};
thread_local ThreadSampler t_sampler __attribute__((tls_model("initial-exec")));

std::atomic<bool> g_arm_failed_logged{false};
std::atomic<bool> g_perf_failed_logged{false};

// The hooks as the program's PLT slots name them, once bound.
uintptr_t g_hook_enter = 0, g_hook_exit = 0;
// The loaded objects' readable code when sampling started: where a PLT stub may be decoded
// (code mapped execute-only, which protection keys allow, cannot be read).
constexpr int kMaxStubRanges = 64;
CodeRange g_stub_code[kMaxStubRanges];
int g_stub_ranges = 0;

#if defined(__x86_64__)
// Whether the instruction at `pc` is a PLT stub's jump to a hook: the stub is in the program's
// text, but only instrumentation runs it, so a sample there is the profiler's cost (on fib, 4%
// of the run is in these stubs). The forms: `jmp *slot(%rip)` (.plt, and .plt.got), preceded
// by `endbr64` and with a `bnd` prefix in .plt.sec. Every byte read is part of the instruction
// the thread was about to run, and the slot is the one that instruction reads, so all are
// mapped. A stub not bound yet (lazy binding) jumps back into the PLT: its first call only.
PROF_NOINSTR bool at_hook_stub(uintptr_t pc) {
    bool readable = false;
    for (int i = 0; i < g_stub_ranges && !readable; ++i)
        readable = pc >= g_stub_code[i].start && pc + 16 <= g_stub_code[i].end;
    if (!readable) return false;
    auto p = reinterpret_cast<const uint8_t*>(pc);
    if (p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa) p += 4; // endbr64
    if (p[0] == 0xf2) ++p;                                                    // bnd
    if (p[0] != 0xff || p[1] != 0x25) return false;
    int32_t disp;
    __builtin_memcpy(&disp, p + 2, sizeof disp);
    uintptr_t target;
    __builtin_memcpy(&target, p + 6 + disp, sizeof target);
    return target && (target == g_hook_enter || target == g_hook_exit);
}
#endif

// The instruction a signal interrupted (0 where unknown).
PROF_NOINSTR uintptr_t interrupted_ip(const void* context) {
#if defined(__x86_64__)
    return uintptr_t(static_cast<const ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
#else
    (void)context;
    return 0;
#endif
}

PROF_NOINSTR bool in_own_code(const void* context) {
#if defined(__x86_64__)
    uintptr_t pc = interrupted_ip(context);
    for (int i = 0; i < g_own_ranges; ++i)
        if (pc >= g_own_code[i].start && pc < g_own_code[i].end) return true;
    return at_hook_stub(pc);
#else
    (void)context;
#endif
    return false;
}

// ---- waiting for a CPU (format 1.11 Waited records) ---------------------------------------------
// The time a thread spent off CPU is either waiting for a CPU (runnable, preempted: a busy
// machine's time, which is not the program's) or blocked and asleep (the program's own wait).
// Only the kernel knows which: its run delay per thread, the second field of schedstat. Each
// thread keeps that file open from its arming on, placed high in the descriptor table like the
// perf descriptors; a read is one pread (2 us here), at each sample and at the thread's last
// record (not at the records of a counting thread's clocks after each context switch).
constexpr uint64_t kNoRunDelay = UINT64_MAX;

PROF_NOINSTR int open_schedstat() {
    if (!g_fd_floor) return -1;
    int low = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (low < 0) return -1;
    int fd = fcntl(low, F_DUPFD_CLOEXEC, g_fd_floor);
    close(low);
    return fd;
}

// The thread's run delay in ns (kNoRunDelay where it cannot be read: no file, or a program that
// closed the descriptor; a number reused for another file must give "N N N\n" to be read).
// Async-signal-safe; keeps errno.
PROF_NOINSTR uint64_t run_delay_ns(const ThreadSampler& t) {
    int fd = t.schedstat - 1;
    if (fd < 0) return t.stopped ? t.stop_run_delay : kNoRunDelay; // read when it stopped
    int saved = errno;
    char buf[96];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    errno = saved;
    if (n <= 0) return kNoRunDelay;
    uint64_t field[3] = {};
    int fields = 0;
    bool digits = false;
    for (ssize_t i = 0; i < n; ++i) {
        char c = buf[i];
        if (c >= '0' && c <= '9' && fields < 3) {
            field[fields] = field[fields] * 10 + uint64_t(c - '0');
            digits = true;
        } else if ((c == ' ' || c == '\n') && digits) {
            ++fields;
            digits = false;
            if (c == '\n') break;
        } else {
            return kNoRunDelay;
        }
    }
    return fields == 3 ? field[1] : kNoRunDelay;
}

// Closed when the thread's timer is (its descriptor number is then the program's to reuse).
PROF_NOINSTR void close_schedstat(ThreadSampler& t) {
    int fd = t.schedstat - 1;
    t.schedstat = 0;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (fd >= 0) close(fd);
}

PROF_NOINSTR uint8_t* put_run_delay(uint8_t* p, uint64_t run_delay) {
    return run_delay == kNoRunDelay ? p : format::put_waited(p, run_delay);
}

// Writes `rec` (n bytes) at the thread's cursor, timed `now`, and publishes it.
PROF_NOINSTR void append(ThreadState& s, const uint8_t* rec, size_t n, uint64_t now) {
    memcpy(s.w.cursor, rec, n);
    s.w.cursor += n;
    if (now > s.w.last_ticks) s.w.last_ticks = now;
    commit(s.w);
}

// A sample of the program: its record at the thread's cursor, or pending when it does not fit.
// The thread is marked busy around it (the caller found it active). In a counting thread the
// record names the thread's node and carries its clocks (take_sample marked the switch word);
// a pending one clears the word, so that the thread's next hook writes it (refill_event) before
// the node changes.
// The record also names the interrupted instruction: a reader charges a sample in the prologue
// or epilogue of a function (before its enter hook, after its exit hook) to that function.
PROF_NOINSTR void program_sample(ThreadState& s, ThreadSampler& t, uint64_t cpu, uintptr_t ip) {
    s.state = kBusy;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    uint64_t now = now_ticks();
    uint8_t rec[kSampleRoom];
    uint64_t dt = now > s.w.last_ticks ? now - s.w.last_ticks : 0;
    uint32_t node = s.counting ? tree_position(s) : 0;
    uint64_t run_delay = run_delay_ns(t);
    uint8_t* sample = put_run_delay(rec, run_delay);
    size_t n = size_t(format::put_sample(sample, dt, cpu, t.own_ns - t.reported_own_ns,
                                         t.own_count - t.reported_own_count, t.pending + 1ull,
                                         s.counting, node, ip) -
                      rec);
    if (s.w.base && s.w.end - s.w.cursor >= ptrdiff_t(n)) {
        append(s, rec, n, now);
        t.pending = 0;
        t.reported_own_ns = t.own_ns;
        t.reported_own_count = t.own_count;
    } else {
        ++t.pending;
        t.pending_node = node;
        t.pending_ip = ip;
        t.pending_ticks = now;
        t.pending_cpu = cpu;
        t.pending_own_ns = t.own_ns;
        t.pending_own_count = t.own_count;
        t.pending_run_delay = run_delay;
        if (s.counting) __atomic_store_n(s.switch_word, uint64_t(0), __ATOMIC_RELAXED);
    }
    std::atomic_signal_fence(std::memory_order_seq_cst);
    s.state = kActive;
}

PROF_NOINSTR void take_sample(void* context) {
    ThreadState& s = prof_tls;
    ThreadSampler& t = t_sampler;
    uint8_t state = s.state;
    // A thread that records nothing (stopped, ended, or a vfork child running on this memory)
    // is left alone: not even the clock is read.
    if (!t.armed || (state != kActive && state != kDeferred && state != kBusy)) return;
    note_sample_for_counting(s);
    // A counting thread's record carries its clocks (program_sample): its switch word, which
    // the kernel cleared to deliver this signal, is marked before they are read, so that a
    // switch from here on clears it again.
    bool counting = s.counting && state == kActive;
    if (counting) __atomic_store_n(s.switch_word, switch_mark(), __ATOMIC_RELAXED);
    uint64_t cpu = thread_cpu_ns();
    uint64_t spent = cpu > t.last_cpu ? cpu - t.last_cpu : 0;
    t.last_cpu = cpu;
    if (state == kBusy || in_own_code(context)) {
        t.own_ns += spent;
        ++t.own_count;
        // No record: the thread's next hook reads the clocks instead.
        if (counting) __atomic_store_n(s.switch_word, uint64_t(0), __ATOMIC_RELAXED);
        return;
    }
    // A scope activation joining a run is open with its Enter not written: written now, the
    // sample is inside it (the inline path notices and ends it with an Exit).
    if (state == kDeferred) settle(s);
    program_sample(s, t, cpu, interrupted_ip(context));
}

// The program's disposition of our signal, for a signal that is not a sample.
PROF_NOINSTR void pass_on(int sig, siginfo_t* info, void* context) {
    int slot = g_program_slot.load(std::memory_order_acquire);
    struct sigaction a = g_program_action[slot];
    if (a.sa_flags & SA_RESETHAND) {
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        g_program_action[slot ^ 1] = dfl;
        g_program_slot.store(slot ^ 1, std::memory_order_release);
    }
    if (a.sa_flags & SA_SIGINFO) {
        a.sa_sigaction(sig, info, context);
    } else if (a.sa_handler == SIG_DFL) {
        // What the signal would have done without us: terminate the process. It is sent again
        // with the default disposition; it is blocked here and arrives when the handler returns.
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        __sigaction(sig, &dfl, nullptr);
        syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
    } else if (a.sa_handler != SIG_IGN) {
        a.sa_handler(sig);
    }
}

PROF_NOINSTR void on_signal(int sig, siginfo_t* info, void* context) {
    ThreadSampler& t = t_sampler;
    if (t.perf && (info->si_code == POLL_HUP || info->si_code == POLL_IN) && info->si_fd == t.fd) {
        if (!t.armed) return; // queued before the descriptor was closed
        int saved = errno;
        take_sample(context);
        // The event disabled itself at its overflow; armed again for one more.
        if (t.armed) ioctl(t.fd, PERF_EVENT_IOC_REFRESH, 1);
        errno = saved;
        return;
    }
    if (info->si_code != SI_TIMER || info->si_value.sival_ptr != &g_timer_tag) {
        pass_on(sig, info, context);
        return;
    }
    int saved = errno;
    take_sample(context);
    errno = saved;
}

// A disabled software cpu-clock event of the calling thread, user mode only, with a period of
// `period_ns` of its CPU time; -1 with errno when the kernel refuses it.
PROF_NOINSTR int open_cpu_clock(long period_ns) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = uint64_t(period_ns);
    attr.disabled = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.wakeup_events = 1;
    return int(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

// Whether `fd` still is the event `id` (a program may have closed it, and the number been
// reused for a descriptor of its own).
PROF_NOINSTR bool is_event(int fd, uint64_t id) {
    uint64_t now = 0;
    return ioctl(fd, PERF_EVENT_IOC_ID, &now) == 0 && now == id;
}

// The calling thread's event, moved to the top of the descriptor table and set to signal the
// thread with `sig`; false (nothing left open) where that fails.
PROF_NOINSTR bool arm_cpu_clock(ThreadSampler& t, int sig, int tid) {
    int low = open_cpu_clock(g_period_ns);
    if (low < 0) return false;
    int fd = fcntl(low, F_DUPFD_CLOEXEC, g_fd_floor);
    close(low);
    if (fd < 0) return false;
    f_owner_ex owner{F_OWNER_TID, tid};
    uint64_t id = 0;
    if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, sig) != 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) != 0 ||
        ioctl(fd, PERF_EVENT_IOC_ID, &id) != 0) {
        close(fd);
        return false;
    }
    t.perf = true;
    t.fd = fd;
    t.event_id = id;
    return true;
}

// Finds the text of libprof.so (the object holding this function) and of libprofmem.so.
PROF_NOINSTR int note_own_code(dl_phdr_info* info, size_t, void*) {
    auto here = reinterpret_cast<uintptr_t>(&note_own_code);
    const char* name = info->dlpi_name ? info->dlpi_name : "";
    const char* base = strrchr(name, '/');
    base = base ? base + 1 : name;
    bool ours = strncmp(base, "libprofmem.so", 13) == 0;
    for (int pass = 0; pass < 2; ++pass)
        for (size_t i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
            uintptr_t start = info->dlpi_addr + ph.p_vaddr, end = start + ph.p_memsz;
            if (pass == 0) {
                ours = ours || (here >= start && here < end);
            } else if (ours && g_own_ranges < kMaxRanges) {
                g_own_code[g_own_ranges++] = CodeRange{start, end};
            } else if (!ours && (ph.p_flags & PF_R) && g_stub_ranges < kMaxStubRanges) {
                g_stub_code[g_stub_ranges++] = CodeRange{start, end};
            }
        }
    return 0;
}

// Whether calls to sigaction anywhere in the process reach the interposer below: it is the
// definition the dynamic linker bound libprof.so's own reference to.
PROF_NOINSTR bool sigaction_interposed() {
#if defined(__x86_64__) && !defined(PROF_SANITIZER_BUILD)
    void* bound;
    __asm__("movq sigaction@GOTPCREL(%%rip), %0" : "=r"(bound));
    return bound == reinterpret_cast<void*>(&libprof_own_sigaction);
#else
    return false;
#endif
}

// Whether a disposition runs a function of the program (sa_handler and sa_sigaction share
// their storage).
PROF_NOINSTR bool has_handler(const struct sigaction& a) {
    return a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN;
}

// The signals of g_handled's bits.
PROF_NOINSTR sigset_t handled_set(uint64_t bits) {
    sigset_t set;
    sigemptyset(&set);
    for (int n = 1; n <= 64; ++n)
        if (bits >> (n - 1) & 1) sigaddset(&set, n); // refuses the C library's own signals
    return set;
}

// Installs our handler on `sig` with the program's handled signals as its mask; false (errno
// set) when the C library refuses it. Threads that change the set at once each install it and
// then look again: whoever installs last sees the set it read still current, or installs again.
PROF_NOINSTR bool install_own_handler(int sig) {
    for (;;) {
        uint64_t bits = g_handled.load(std::memory_order_acquire);
        struct sigaction act = g_own_action;
        act.sa_mask = handled_set(bits);
        if (__sigaction(sig, &act, nullptr) != 0) return false;
        if (g_handled.load(std::memory_order_acquire) == bits) return true;
    }
}

// The program's view of our signal: what it last set (initially the default disposition).
// Unused in sanitizer builds, which keep the C library's sigaction (below).
[[maybe_unused]] PROF_NOINSTR int program_sigaction(const struct sigaction* act,
                                                    struct sigaction* old) {
    // Our signal and the program's handled ones blocked while the slots change, so that no
    // handler on this thread sees them half-written or waits for this writer. Not every signal:
    // see g_handled.
    sigset_t handled = handled_set(g_handled.load(std::memory_order_acquire)), before;
    sigaddset(&handled, g_signal.load(std::memory_order_relaxed));
    pthread_sigmask(SIG_BLOCK, &handled, &before);
    while (g_program_writer.exchange(true, std::memory_order_acquire)) {
    }
    int slot = g_program_slot.load(std::memory_order_relaxed);
    if (old) *old = g_program_action[slot];
    if (act) {
        g_program_action[slot ^ 1] = *act;
        g_program_slot.store(slot ^ 1, std::memory_order_release);
    }
    g_program_writer.store(false, std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    return 0;
}

} // namespace

// PROF_SAMPLE_TIMER=perf: perf_event descriptors unless refused, and the lowest number they
// may take: the top quarter of the descriptor limit, from 4096 at most. Otherwise (`auto`,
// `posix`) POSIX timers: they sample system calls where they return (see the top).
static PROF_NOINSTR void choose_timer() {
    enum { kAuto, kPerf, kPosix };
    g_perf_timer = false;
    // The floor of our descriptors (perf events, schedstat files); 0: none may be opened.
    rlimit files{};
    bool room = getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur >= 64;
    g_fd_floor = !room                    ? 0
                 : files.rlim_cur >= 8192 ? 4096
                                          : int(files.rlim_cur - files.rlim_cur / 4);
    if (g_options.sample_timer != kPerf) return;
    if (!room) {
        log(LogLevel::kWarn, "sample_timer_posix", "reason=\"descriptor limit too low\"");
        return;
    }
    int probe = open_cpu_clock(g_period_ns);
    if (probe < 0) {
        log(LogLevel::kWarn, "sample_timer_posix", "reason=\"perf_event_open: %s\"",
            strerror(errno));
        return;
    }
    close(probe);
    g_perf_timer = true;
}

// At start, before the trace file is created (its Meta records name the signal).
PROF_NOINSTR void sampler_init() {
    if (!g_options.sample_hz) return;
    if (!sigaction_interposed()) {
        log(LogLevel::kInfo, "sampling_off",
            "reason=\"libprof.so comes after the C library in symbol lookup, so a program's "
            "signal handlers could displace the sampler's\"");
        return;
    }
    int sig = 0;
    for (int n = SIGRTMAX; n >= SIGRTMIN && !sig; --n) {
        struct sigaction old {};
        if (__sigaction(n, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            sig = n;
    }
    if (!sig) {
        log(LogLevel::kWarn, "sampling_off", "reason=\"no real-time signal is free\"");
        return;
    }
    g_own_ranges = g_stub_ranges = 0;
    dl_iterate_phdr(note_own_code, nullptr);
    // Through the GOT: the definitions the program's PLT slots are bound to.
    g_hook_enter = reinterpret_cast<uintptr_t>(&__cyg_profile_func_enter);
    g_hook_exit = reinterpret_cast<uintptr_t>(&__cyg_profile_func_exit);
    g_program_action[0] = {};
    g_program_action[0].sa_handler = SIG_DFL;
    // The program's handlers so far; later ones are seen by the interposers below.
    uint64_t handled = 0;
    for (int n = 1; n <= 64; ++n) {
        struct sigaction old {};
        if (n != sig && __sigaction(n, nullptr, &old) == 0 && has_handler(old))
            handled |= 1ull << (n - 1);
    }
    g_handled.store(handled, std::memory_order_release);
    g_own_action = {};
    g_own_action.sa_sigaction = on_signal;
    g_own_action.sa_flags = SA_SIGINFO | SA_RESTART;
    if (!install_own_handler(sig)) {
        log(LogLevel::kWarn, "sampling_off", "reason=\"sigaction failed\" error=\"%s\"",
            strerror(errno));
        return;
    }
    g_period_ns = long(1000000000u / g_options.sample_hz);
    if (!g_period_ns) g_period_ns = 1;
    choose_timer();
    g_signal.store(sig, std::memory_order_release);
    log(LogLevel::kInfo, "sampling", "signal=%d hz=%u timer=%s", sig, g_options.sample_hz,
        g_perf_timer ? "perf_cpu_clock" : "posix_cpu_timer");
}

PROF_NOINSTR const char* sampler_clock() {
    return g_perf_timer ? "cpu-clock" : "thread_cputime";
}

PROF_NOINSTR int sampler_signal() {
    return g_signal.load(std::memory_order_relaxed);
}

// The thread's timer, armed by the thread itself (it is busy: no sample is taken meanwhile). The
// first record of its samples, of count 0, gives the CPU clock the next one counts from.
PROF_NOINSTR void sampler_thread_start(ThreadState& s) {
    ThreadSampler& t = t_sampler;
    t = ThreadSampler{};
    int sig = g_signal.load(std::memory_order_relaxed);
    if (!sig || s.state != kBusy) return;
    int saved = errno;
    if (g_perf_timer && !arm_cpu_clock(t, sig, int(s.w.tid)) &&
        !g_perf_failed_logged.exchange(true))
        log(LogLevel::kInfo, "thread_timer_posix",
            "tid=%u reason=\"no perf_event descriptor above %d: %s\"", s.w.tid, g_fd_floor,
            strerror(errno));
    timer_t timer{};
    if (!t.perf) {
        sigevent ev{};
        ev.sigev_notify = SIGEV_THREAD_ID;
        ev.sigev_signo = sig;
        ev.sigev_value.sival_ptr = &g_timer_tag;
        ev._sigev_un._tid = int(s.w.tid); // sigev_notify_thread_id
        if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &timer) != 0) {
            if (!g_arm_failed_logged.exchange(true))
                log(LogLevel::kWarn, "thread_not_sampled", "tid=%u error=\"%s\"%s", s.w.tid,
                    strerror(errno),
                    errno == EAGAIN ? " hint=\"RLIMIT_SIGPENDING (ulimit -i)\"" : "");
            errno = saved;
            return;
        }
    }
    uint64_t now = now_ticks();
    if (!ensure_bytes(s, now, kSampleRoom)) {
        if (t.perf)
            close(t.fd);
        else
            timer_delete(timer);
        t = ThreadSampler{};
        errno = saved;
        return;
    }
    t.schedstat = open_schedstat() + 1;
    uint64_t cpu = thread_cpu_ns();
    s.w.cursor = put_run_delay(s.w.cursor, run_delay_ns(t));
    s.w.cursor = format::put_sample(s.w.cursor, take_delta(s.w, now), cpu, 0, 0, 0);
    commit(s.w);
    t.last_cpu = cpu;
    t.timer = timer;
    t.armed = true;
    if (t.perf) {
        ioctl(t.fd, PERF_EVENT_IOC_REFRESH, 1);
    } else {
        itimerspec every{};
        every.it_interval.tv_nsec = every.it_value.tv_nsec = g_period_ns % 1000000000;
        every.it_interval.tv_sec = every.it_value.tv_sec = g_period_ns / 1000000000;
        timer_settime(timer, 0, &every, nullptr);
    }
    errno = saved;
}

// The calling thread's timer is deleted (its thread ends, or the process finishes). A signal of
// it that is still on its way finds the thread disarmed and is dropped.
PROF_NOINSTR void sampler_thread_stop() {
    ThreadSampler& t = t_sampler;
    if (!t.armed) return;
    int saved = errno;
    t.armed = false;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!t.perf)
        timer_delete(t.timer);
    else if (is_event(t.fd, t.event_id))
        close(t.fd);
    // The clocks of the thread's last record (sampler_flush), read before its file is closed.
    t.stop_cpu = thread_cpu_ns();
    t.stop_run_delay = run_delay_ns(t);
    t.stopped = true;
    close_schedstat(t);
    errno = saved;
}

PROF_NOINSTR bool sampler_thread_armed() {
    return t_sampler.armed;
}

// The thread is busy (a hook, or its end): no sample is taken meanwhile. For a counting thread
// (whose timer was armed).
PROF_NOINSTR void sampler_clock_record(ThreadState& s, uint64_t now) {
    if (!ensure_bytes(s, now, kSampleRoom)) return;
    int saved = errno;
    uint64_t cpu = thread_cpu_ns();
    errno = saved;
    // With the samples of the profiler since the previous record: each record's own time lies
    // between it and the one before.
    ThreadSampler& t = t_sampler;
    // The run delay only with the thread's last clocks: read at every switch (a pread of 2 us),
    // it cost a pipe ping-pong 15-25% of its time; the samples carry it, and the reader splits
    // the time off CPU of all the spans between two of them.
    if (t.stopped) s.w.cursor = put_run_delay(s.w.cursor, run_delay_ns(t));
    s.w.cursor = format::put_sample(
        s.w.cursor, take_delta(s.w, now), cpu, t.own_ns - t.reported_own_ns,
        t.own_count - t.reported_own_count, 0, s.counting, s.counting ? tree_position(s) : 0);
    t.reported_own_ns = t.own_ns;
    t.reported_own_count = t.own_count;
    commit(s.w);
}

// A forked child's thread: the timer or event is the parent thread's (timers are not inherited;
// the child's copy of the descriptor is closed), and so are the samples waiting.
PROF_NOINSTR void sampler_after_fork() {
    ThreadSampler& t = t_sampler;
    int saved = errno;
    if (t.armed && t.perf && is_event(t.fd, t.event_id)) close(t.fd);
    // The parent thread's schedstat: the child's thread reopens its own when it is armed.
    if (t.armed) close_schedstat(t);
    errno = saved;
    t = ThreadSampler{};
}

PROF_NOINSTR bool sampler_pending(bool last) {
    const ThreadSampler& t = t_sampler;
    return t.pending != 0 ||
           (last && (t.own_count != t.reported_own_count || (t.stopped && !prof_tls.counting)));
}

// Writes the samples that found no room, at the cursor: the caller is the runtime (the thread is
// busy) and has made kMaxSampleRecord bytes of room, twice that for the thread's `last` records.
PROF_NOINSTR void sampler_flush(ThreadState& s, bool last) {
    ThreadSampler& t = t_sampler;
    if (t.pending) {
        s.w.cursor = put_run_delay(s.w.cursor, t.pending_run_delay);
        s.w.cursor = format::put_sample(s.w.cursor, take_delta(s.w, t.pending_ticks), t.pending_cpu,
                                        t.pending_own_ns - t.reported_own_ns,
                                        t.pending_own_count - t.reported_own_count, t.pending,
                                        s.counting, t.pending_node, t.pending_ip);
        commit(s.w);
        t.reported_own_ns = t.pending_own_ns;
        t.reported_own_count = t.pending_own_count;
        t.pending = 0;
    }
    // The thread's last record (its timer is deleted), which stands for no sample of the program
    // (count 0): the samples of the profiler not reported yet, and the thread's clocks when its
    // timer stopped (1.11), so that the CPU time since its last sample is known however long ago
    // that was (a thread crowded off its CPU can go hundreds of milliseconds of CPU time without
    // a signal of the CPU-time timer, which the kernel checks only at its tick). A counting
    // thread's records carry its clocks (a record read them after that sample, after a switch):
    // this one too, read now, and its thread_end writes them again in any case.
    if (last && (t.own_count != t.reported_own_count || (t.stopped && !s.counting))) {
        int saved = errno;
        uint64_t cpu = s.counting ? thread_cpu_ns() : t.stopped ? t.stop_cpu : t.last_cpu;
        errno = saved;
        if (t.stopped) s.w.cursor = put_run_delay(s.w.cursor, run_delay_ns(t));
        t.stopped = s.counting && t.stopped; // a counting thread's clock record reads it
        s.w.cursor = format::put_sample(
            s.w.cursor, take_delta(s.w, now_ticks()), cpu, t.own_ns - t.reported_own_ns,
            t.own_count - t.reported_own_count, 0, s.counting, s.counting ? tree_position(s) : 0);
        commit(s.w);
        t.reported_own_ns = t.own_ns;
        t.reported_own_count = t.own_count;
    }
}

} // namespace prof::rt

// ---- sigaction and signal ---------------------------------------------------------------------
// Every call passes through to the C library but those for the sampler's signal, which set and
// return the program's own disposition of it (see the top of this file).
// Not in sanitizer builds: the sanitizers' runtimes call sigaction while they start, before
// instrumented code such as this may run, and interpose it themselves (the sampler is off).
#ifndef PROF_SANITIZER_BUILD
using prof::rt::g_signal;

namespace prof::rt {
namespace {

// Sets the program's disposition of `sig` (not ours) through `install`, the C library's
// sigaction or signal (true when it succeeded), keeping our handler's mask in step: a signal
// that gets a handler joins the mask before, one that loses it leaves after, so that the
// program's handler never runs inside ours.
template <class Install>
PROF_NOINSTR bool set_program_disposition(int ours, int sig, bool handles, Install install) {
    uint64_t bit = sig >= 1 && sig <= 64 ? 1ull << (sig - 1) : 0;
    bool masked = g_handled.load(std::memory_order_acquire) & bit;
    if (!bit || handles == masked) return install();
    int saved = errno;
    if (handles) {
        g_handled.fetch_or(bit, std::memory_order_acq_rel);
        install_own_handler(ours);
        errno = saved;
        if (install()) return true;
        saved = errno;
        g_handled.fetch_and(~bit, std::memory_order_acq_rel);
        install_own_handler(ours);
        errno = saved;
        return false;
    }
    if (!install()) return false;
    g_handled.fetch_and(~bit, std::memory_order_acq_rel);
    install_own_handler(ours);
    errno = saved;
    return true;
}

} // namespace
} // namespace prof::rt

extern "C" PROF_NOINSTR __attribute__((visibility("default"))) int
sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
    int ours = g_signal.load(std::memory_order_acquire);
    if (ours && sig == ours) return prof::rt::program_sigaction(act, old);
    if (!ours || !act) return __sigaction(sig, act, old);
    bool set = prof::rt::set_program_disposition(ours, sig, prof::rt::has_handler(*act),
                                                 [&] { return __sigaction(sig, act, old) == 0; });
    return set ? 0 : -1;
}

extern "C" int libprof_own_sigaction(int, const struct sigaction*, struct sigaction*) noexcept
    __attribute__((alias("sigaction")));

// glibc's signal(): BSD semantics (SA_RESTART, the signal blocked in its handler).
extern "C" PROF_NOINSTR __attribute__((visibility("default"))) __sighandler_t
signal(int sig, __sighandler_t handler) noexcept {
    int ours = g_signal.load(std::memory_order_acquire);
    if (!ours) return ssignal(sig, handler);
    if (sig != ours) {
        __sighandler_t old = SIG_ERR;
        prof::rt::set_program_disposition(
            ours, sig, handler != SIG_DFL && handler != SIG_IGN && handler != SIG_ERR, [&] {
                old = ssignal(sig, handler);
                return old != SIG_ERR;
            });
        return old;
    }
    struct sigaction act {
    }, old{};
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    sigaddset(&act.sa_mask, sig);
    act.sa_flags = SA_RESTART;
    prof::rt::program_sigaction(&act, &old);
    return old.sa_handler; // glibc: one union with sa_sigaction, as signal() returns it
}
#endif // PROF_SANITIZER_BUILD
