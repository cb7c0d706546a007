// Test program for the CPU-time sampler (trace format 1.5 Sample records). Instrumented; every
// mode burns CPU in burn(), a loop that calls an instrumented leaf now and then, so that the
// thread's timer fires, and each thread that burns ends its work with sampled(): it burns on,
// recording nothing, until a Sample record of it has been written (at most 10 s of CPU time).
// The kernel fires CPU-time timers at most once per tick, and far less often on a CPU that
// another busy thread shares (down to none in 200 ms of CPU time, measured), so a fixed amount
// of CPU time would not make a sample certain. Modes (argv[1]):
//   threads  the main thread, a thread started at once and ended early, and one started late;
//            each prints `cpu <tid> <ns>`, its CPU clock right after its last sample
//   burn     the main thread alone (also the image that `exec` becomes)
//   eintr    threads blocking again and again in poll (64 pipes that never become readable),
//            epoll_wait, nanosleep, read on a pipe another thread feeds, waitpid on a child,
//            sem_wait on a semaphore another thread posts, burning CPU between the calls; each
//            prints `<call> calls=<n> eintr=<k>`. With EINTR_PERF=1 (and PROF_SAMPLE_HZ=0) the
//            threads are sampled by a perf_event cpu-clock descriptor each (1 kHz, F_SETSIG to
//            a real-time signal with SA_RESTART) instead: the same count for comparison
//   signals  an own SIGPROF handler with setitimer(ITIMER_PROF) and a SIGALRM handler with
//            setitimer(ITIMER_REAL); prints `prof=<n> alrm=<m>`
//   rtsig    takes the highest real-time signal whose disposition is SIG_DFL for itself (the
//            sampler's, which sigaction reports as SIG_DFL to the program), as a library would,
//            and sends it to itself with sigqueue and with a timer of its own; then ignores it
//            and raises it; prints `queued=<n> handled=<h> timer=<t> signal=<s> ignored`
//   fork     a child that burns and ends; prints `child <pid>`
//   exec     burns, then execs itself as `burn`
//   vfork    vfork children that _exit and that exec /bin/true, between burns
//   kill     burns, then SIGKILL
//   blocked  a thread that blocks every signal burns 300 ms of CPU time, then reads the
//            signals queued for the user (/proc/self/status SigQ) before unblocking them, and
//            opens /dev/null: prints `queued=<n> fd=<number>` (the sampler keeps at most one
//            signal of a thread queued, and its descriptors out of the program's way)
//   children the main thread starts 400 short children one after another (vfork and exec of
//            /bin/true), burning CPU until each has ended, while a second thread waits in
//            epoll_wait (and a third in poll) on a pipe that becomes readable only at the end:
//            each child's SIGCHLD, ignored by default, is addressed to the burning thread, and
//            the kernel queues it (waking another thread, whose epoll_wait fails with EINTR
//            though no handler runs) only if that thread blocks SIGCHLD at that moment; prints
//            `epoll_wait calls=<n> eintr=<k>`, `poll calls=<n> eintr=<k>` and `children=<m>`
//   mask     sets and resets handlers of SIGUSR1 (sigaction), SIGUSR2 (signal) and SIGCHLD, and
//            SIGPIPE to SIG_IGN, and prints which of them the kernel blocks while the sampler's
//            handler runs (its sa_mask, read with the raw system call: the interposed sigaction
//            reports the program's own disposition of that signal) after each step:
//            `<step> usr1=<0|1> usr2=<0|1> chld=<0|1> pipe=<0|1> kill=<0|1>`; then
//            `kill_refused=<0|1> raised=<n>`
//   pending  fills the thread's chunk (calls, then the 26-byte record of a PROF_LINE's first hit
//            in the chunk, then samples) to less room than a Sample record takes, then burns
//            CPU without recording anything, so that its samples wait: the main thread in
//            starve(), whose next call opens a chunk (again until samples had waited), and a
//            second thread (not instrumented) that ends instead; prints `pending <attempts>`.
//            A counting thread (PROF_TIME=sampled) fills its chunk with new call paths, one
//            level deeper each, and its second thread ends from its deepest frame
#include <prof/prof.hpp>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace {

volatile unsigned long g_sink;

__attribute__((noinline)) void leaf(unsigned long i) {
    g_sink = g_sink + i;
}

// Not instrumented: burn_quietly() must record nothing.
__attribute__((no_instrument_function)) long thread_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

// Burns `us` microseconds of this thread's CPU time.
__attribute__((noinline)) void burn(long us) {
    long until = thread_cpu_ns() + us * 1000;
    unsigned long x = g_sink;
    for (unsigned long i = 0;; ++i) {
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        if ((i & 1023) == 0) leaf(x);
        if ((i & 16383) == 0 && thread_cpu_ns() >= until) break;
    }
    g_sink = x;
}

__attribute__((no_instrument_function)) long room() {
    return prof_tls.w.end - prof_tls.w.cursor;
}

// Burns CPU time without a recorded call until the thread's stream gets a record, which can then
// only be a sample (PROF_SAMPLE_HZ=0: returns at once). First, when its chunk is nearly full, a
// call: the hooks open the next chunk when fewer than 57 bytes are left, so that a sample fits.
// Returns the thread's CPU clock right after that sample.
__attribute__((no_instrument_function)) long sampled() {
    const char* hz = std::getenv("PROF_SAMPLE_HZ");
    if ((hz && !std::strcmp(hz, "0")) || prof_tls.state != PROF_DETAIL_THREAD_ACTIVE)
        return thread_cpu_ns();
    if (room() < 128) leaf(0);
    const uint8_t* cursor = prof_tls.w.cursor;
    uint32_t seq = prof_tls.w.seq;
    long until = thread_cpu_ns() + 10000000000L;
    unsigned long x = g_sink;
    for (unsigned long i = 0;; ++i) {
        if (prof_tls.w.cursor != cursor || prof_tls.w.seq != seq) break;
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        if ((i & 16383) == 0 && thread_cpu_ns() >= until) break;
    }
    g_sink = x;
    return thread_cpu_ns();
}

void print_cpu() {
    long cpu = sampled();
    std::printf("cpu %ld %ld\n", long(syscall(SYS_gettid)), cpu);
}

__attribute__((noinline)) void early_thread() {
    burn(80000);
    print_cpu();
}

__attribute__((noinline)) void late_thread() {
    burn(80000);
    print_cpu();
}

int threads_mode() {
    std::thread early(early_thread);
    burn(80000);
    early.join();
    std::thread late(late_thread);
    late.join();
    burn(40000);
    print_cpu();
    return 0;
}

// ---- eintr ---------------------------------------------------------------------------------

constexpr int kRounds = 300;
constexpr long kBurnUs = 300;
int g_perf_signal = 0;
volatile long g_perf_samples = 0;

void on_perf_sample(int, siginfo_t*, void*) {
    g_perf_samples = g_perf_samples + 1;
}

// EINTR_PERF=1: this thread's own perf_event cpu-clock sampler, as a perf-based in-process
// sampler would open it when it counts kernel time too (the signal generated at the counter's
// overflow, wherever the thread is, in a system call as well). The runtime's own perf_event
// timer counts user mode only, which is what keeps its signals out of system calls.
void start_perf_sampler() {
    if (!g_perf_signal) return;
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = 1000000; // ns of the thread's CPU time
    attr.wakeup_events = 1;
    attr.exclude_kernel = 0;
    int fd = int(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
        std::fprintf(stderr, "perf_event_open: %s\n", std::strerror(errno));
        std::exit(2);
    }
    f_owner_ex owner{F_OWNER_TID, int(syscall(SYS_gettid))};
    fcntl(fd, F_SETOWN_EX, &owner);
    fcntl(fd, F_SETSIG, g_perf_signal);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC);
}

struct Counts {
    const char* call;
    int calls = 0, eintr = 0;
};

void count(Counts& c, long r) {
    ++c.calls;
    if (r < 0 && errno == EINTR) ++c.eintr;
}

__attribute__((noinline)) void poll_loop(Counts& c) {
    start_perf_sampler();
    std::vector<pollfd> fds;
    for (int i = 0; i < 64; ++i) {
        int p[2];
        if (pipe(p) != 0) std::abort();
        fds.push_back(pollfd{p[0], POLLIN, 0});
    }
    for (int i = 0; i < kRounds; ++i) {
        burn(kBurnUs);
        count(c, poll(fds.data(), fds.size(), 1));
    }
    sampled();
}

__attribute__((noinline)) void epoll_loop(Counts& c) {
    start_perf_sampler();
    int ep = epoll_create1(EPOLL_CLOEXEC), p[2];
    if (ep < 0 || pipe(p) != 0) std::abort();
    epoll_event ev{};
    ev.events = EPOLLIN;
    epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
    for (int i = 0; i < kRounds; ++i) {
        burn(kBurnUs);
        count(c, epoll_wait(ep, &ev, 1, 1));
    }
    sampled();
}

__attribute__((noinline)) void sleep_loop(Counts& c) {
    start_perf_sampler();
    for (int i = 0; i < kRounds; ++i) {
        burn(kBurnUs);
        timespec ms{0, 1000000};
        count(c, nanosleep(&ms, nullptr));
    }
    sampled();
}

int g_pipe[2];
sem_t g_sem;

__attribute__((noinline)) void feed_loop() {
    start_perf_sampler();
    for (int i = 0; i < kRounds; ++i) {
        burn(kBurnUs);
        char b = 'x';
        if (write(g_pipe[1], &b, 1) != 1) std::abort();
        sem_post(&g_sem);
    }
    sampled();
}

__attribute__((noinline)) void read_loop(Counts& c) {
    start_perf_sampler();
    for (int got = 0; got < kRounds;) {
        burn(kBurnUs / 3);
        char b;
        long r = read(g_pipe[0], &b, 1);
        count(c, r);
        if (r == 1) ++got;
    }
    sampled();
}

__attribute__((noinline)) void sem_loop(Counts& c) {
    start_perf_sampler();
    for (int got = 0; got < kRounds;) {
        burn(kBurnUs / 3);
        long r = sem_wait(&g_sem);
        count(c, r);
        if (r == 0) ++got;
    }
    sampled();
}

__attribute__((noinline)) void wait_loop(Counts& c) {
    start_perf_sampler();
    for (int i = 0; i < kRounds / 6; ++i) {
        burn(kBurnUs);
        char arg0[] = "sleep", arg1[] = "0.002";
        char* argv[] = {arg0, arg1, nullptr};
        pid_t pid = -1;
        if (posix_spawn(&pid, "/bin/sleep", nullptr, nullptr, argv, environ) != 0) std::abort();
        int status = 0;
        long r;
        while ((r = waitpid(pid, &status, 0)) < 0) {
            count(c, r);
            if (errno != EINTR) std::abort();
        }
        count(c, r);
    }
    sampled();
}

int eintr_mode() {
    if (const char* e = std::getenv("EINTR_PERF"); e && !std::strcmp(e, "1")) {
        g_perf_signal = SIGRTMIN + 4;
        struct sigaction act {};
        act.sa_sigaction = on_perf_sample;
        act.sa_flags = SA_SIGINFO | SA_RESTART;
        sigaction(g_perf_signal, &act, nullptr);
    }
    if (pipe(g_pipe) != 0 || sem_init(&g_sem, 0, 0) != 0) return 1;
    Counts polls{"poll"}, epolls{"epoll_wait"}, sleeps{"nanosleep"}, reads{"read"},
        sems{"sem_wait"}, waits{"waitpid"};
    std::vector<std::thread> threads;
    threads.emplace_back(poll_loop, std::ref(polls));
    threads.emplace_back(epoll_loop, std::ref(epolls));
    threads.emplace_back(sleep_loop, std::ref(sleeps));
    threads.emplace_back(read_loop, std::ref(reads));
    threads.emplace_back(sem_loop, std::ref(sems));
    threads.emplace_back(wait_loop, std::ref(waits));
    threads.emplace_back(feed_loop);
    for (auto& t : threads) t.join();
    for (const Counts* c : {&polls, &epolls, &sleeps, &reads, &sems, &waits})
        std::printf("%s calls=%d eintr=%d\n", c->call, c->calls, c->eintr);
    if (g_perf_signal) std::printf("perf_samples=%ld\n", long(g_perf_samples));
    return 0;
}

// ---- children ------------------------------------------------------------------------------

int children_mode() {
    int done[2];
    if (pipe(done) != 0) return 1;
    Counts epolls{"epoll_wait"}, polls{"poll"};
    std::thread epoll_waiter([&] {
        int ep = epoll_create1(EPOLL_CLOEXEC);
        epoll_event ev{};
        ev.events = EPOLLIN;
        epoll_ctl(ep, EPOLL_CTL_ADD, done[0], &ev);
        for (;;) {
            long r = epoll_wait(ep, &ev, 1, 10000);
            count(epolls, r);
            if (r > 0) break;
        }
    });
    std::thread poll_waiter([&] {
        pollfd fd{done[0], POLLIN, 0};
        for (;;) {
            long r = poll(&fd, 1, 10000);
            count(polls, r);
            if (r > 0) break;
        }
    });
    int children = 0;
    for (int i = 0; i < 400; ++i) {
        char arg0[] = "true";
        char* argv[] = {arg0, nullptr};
        // vfork, not posix_spawn: glibc's posix_spawn blocks every signal until the child has
        // exec'd, and a child that ends before the parent unblocks them gets the same EINTR.
        pid_t pid = vfork();
        if (pid == 0) {
            execve("/bin/true", argv, environ);
            _exit(127);
        }
        if (pid < 0) std::abort();
        int status = 0;
        while (waitpid(pid, &status, WNOHANG) == 0) burn(50);
        ++children;
    }
    char b = 'x';
    if (write(done[1], &b, 1) != 1) std::abort();
    epoll_waiter.join();
    poll_waiter.join();
    for (const Counts* c : {&epolls, &polls})
        std::printf("%s calls=%d eintr=%d\n", c->call, c->calls, c->eintr);
    std::printf("children=%d\n", children);
    return 0;
}

// ---- mask ----------------------------------------------------------------------------------

// The kernel's struct for rt_sigaction on x86-64.
struct KernelSigaction {
    void* handler;
    unsigned long flags;
    void* restorer;
    unsigned long mask;
};

volatile int g_raised = 0;
void on_usr(int) {
    g_raised = g_raised + 1;
}

// The sampler's signal: a real-time signal whose handler the kernel knows while the program is
// told SIG_DFL; 0 when there is none.
int sampler_signal_seen() {
    for (int n = SIGRTMAX; n >= SIGRTMIN; --n) {
        KernelSigaction k{};
        struct sigaction seen {};
        if (syscall(SYS_rt_sigaction, n, nullptr, &k, 8) == 0 && k.handler != nullptr &&
            sigaction(n, nullptr, &seen) == 0 && seen.sa_handler == SIG_DFL)
            return n;
    }
    return 0;
}

void print_mask(const char* step, int sig) {
    KernelSigaction k{};
    syscall(SYS_rt_sigaction, sig, nullptr, &k, 8);
    auto has = [&](int n) { return int(k.mask >> (n - 1) & 1); };
    std::printf("%s usr1=%d usr2=%d chld=%d pipe=%d kill=%d\n", step, has(SIGUSR1), has(SIGUSR2),
                has(SIGCHLD), has(SIGPIPE), has(SIGKILL));
}

int mask_mode() {
    int sig = sampler_signal_seen();
    if (!sig) {
        std::printf("no sampler signal\n");
        return 1;
    }
    print_mask("start", sig);
    struct sigaction handler {
    }, ignore{}, dfl{};
    handler.sa_handler = on_usr;
    ignore.sa_handler = SIG_IGN;
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGUSR1, &handler, nullptr);
    signal(SIGUSR2, on_usr);
    sigaction(SIGCHLD, &handler, nullptr);
    sigaction(SIGPIPE, &ignore, nullptr);
    print_mask("set", sig);
    raise(SIGUSR1);
    raise(SIGUSR2);
    sigaction(SIGUSR1, &dfl, nullptr);
    signal(SIGUSR2, SIG_IGN);
    sigaction(SIGCHLD, &dfl, nullptr);
    print_mask("reset", sig);
    bool refused = sigaction(SIGKILL, &handler, nullptr) != 0 && errno == EINVAL;
    print_mask("kill", sig);
    std::printf("kill_refused=%d raised=%d\n", int(refused), int(g_raised));
    return 0;
}

// ---- signals -------------------------------------------------------------------------------

volatile long g_prof, g_alrm;
void on_prof(int) {
    g_prof = g_prof + 1;
}
void on_alrm(int) {
    g_alrm = g_alrm + 1;
}

int signals_mode() {
    std::signal(SIGPROF, on_prof);
    struct sigaction act {};
    act.sa_handler = on_alrm;
    act.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &act, nullptr);
    itimerval every{{0, 1000}, {0, 1000}};
    setitimer(ITIMER_PROF, &every, nullptr);
    setitimer(ITIMER_REAL, &every, nullptr);
    burn(200000);
    sampled();
    itimerval off{};
    setitimer(ITIMER_PROF, &off, nullptr);
    setitimer(ITIMER_REAL, &off, nullptr);
    std::printf("prof=%ld alrm=%ld\n", long(g_prof), long(g_alrm));
    return 0;
}

// ---- rtsig ---------------------------------------------------------------------------------

volatile long g_handled, g_timer_fired;
int g_own_value = 0;
void on_rt(int, siginfo_t* info, void*) {
    if (info->si_code == SI_TIMER && info->si_value.sival_ptr == &g_own_value)
        g_timer_fired = g_timer_fired + 1;
    else
        g_handled = g_handled + 1;
}

int rtsig_mode() {
    int sig = 0;
    for (int n = SIGRTMAX; n >= SIGRTMIN && !sig; --n) {
        struct sigaction old {};
        if (sigaction(n, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) sig = n;
    }
    struct sigaction act {};
    act.sa_sigaction = on_rt;
    act.sa_flags = SA_SIGINFO | SA_RESTART;
    if (!sig || sigaction(sig, &act, nullptr) != 0) return 1;
    struct sigaction now {};
    sigaction(sig, nullptr, &now);
    if (now.sa_sigaction != on_rt) return 2; // the program sees its own handler
    constexpr int kQueued = 1000;
    for (int i = 0; i < kQueued; ++i) {
        sigqueue(getpid(), sig, sigval{i});
        if (i % 50 == 0) burn(2000);
    }
    sigevent ev{};
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = sig;
    ev.sigev_value.sival_ptr = &g_own_value;
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0) return 3;
    itimerspec every{{0, 1000000}, {0, 1000000}};
    timer_settime(timer, 0, &every, nullptr);
    while (g_timer_fired < 20) burn(1000);
    timer_delete(timer);
    burn(20000);
    if (std::signal(sig, SIG_IGN) != reinterpret_cast<sighandler_t>(on_rt)) return 4;
    for (int i = 0; i < 10; ++i) raise(sig);
    burn(20000);
    sampled();
    std::printf("queued=%d handled=%ld timer=%s signal=%d ignored\n", kQueued, long(g_handled),
                g_timer_fired >= 20 ? "yes" : "no", sig);
    return 0;
}

// ---- fork, exec, vfork, kill ---------------------------------------------------------------

__attribute__((noinline)) void child_work() {
    burn(80000);
    sampled();
}

int fork_mode() {
    burn(40000);
    sampled();
    pid_t pid = fork();
    if (pid == 0) {
        child_work();
        return 0;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    burn(40000);
    std::printf("child %d\n", int(pid));
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int exec_mode(char* self) {
    burn(40000);
    sampled();
    char arg[] = "burn";
    char* argv[] = {self, arg, nullptr};
    execv(self, argv);
    return 1;
}

__attribute__((noinline)) int in_vfork_child() {
    return 3;
}

int vfork_mode() {
    burn(30000);
    for (int i = 0; i < 20; ++i) {
        pid_t pid = vfork();
        if (pid == 0) _exit(in_vfork_child());
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 3) return 1;
        pid = vfork();
        if (pid == 0) {
            execl("/bin/true", "true", static_cast<char*>(nullptr));
            _exit(127);
        }
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 2;
        burn(3000);
    }
    print_cpu();
    return 0;
}

// ---- pending -------------------------------------------------------------------------------

// burn() without a recorded call.
__attribute__((no_instrument_function)) void burn_quietly(long us) {
    long until = thread_cpu_ns() + us * 1000;
    unsigned long x = g_sink;
    for (unsigned long i = 0;; ++i) {
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        if ((i & 16383) == 0 && thread_cpu_ns() >= until) break;
    }
    g_sink = x;
}

// Leaves the chunk with less room than two Sample records take, and returns the attempts it
// took. The hooks open a chunk when fewer than 57 bytes are left, so calls alone leave more; the
// LineCounts record of a PROF_LINE's first hit in a chunk (26 bytes, written when at least 32
// are left) then leaves less. The samples that still fit use up the rest.
// Gives up (exits) after 100 attempts or when a chunk does not fill: never a trace without end.
__attribute__((no_instrument_function)) int fill_chunk() {
    for (int attempt = 1; attempt <= 100; ++attempt) {
        for (long calls = 0; room() >= 64; ++calls)
            if (calls < 10000000)
                leaf(0);
            else
                std::exit(3);
        long before = room();
        PROF_LINE(g_sink = g_sink + 1);
        if (before - room() >= 26 && room() < 40) return attempt;
        // The site has its record in this chunk already: on to the next chunk.
        for (long r = room(), calls = 0; room() <= r; ++calls)
            if (calls < 10000000)
                leaf(0);
            else
                std::exit(3);
    }
    std::exit(3);
}

// After fill_chunk(): the samples that still fit take the rest of the chunk (at most 1 s of CPU
// time), then every sample waits, for `us` microseconds of CPU time. A Sample record takes 13
// bytes or more (with the interrupted instruction of a PIE, more than 16): below 32 left, the
// first samples of that burn take the rest.
__attribute__((no_instrument_function)) void starve_quietly(long us) {
    long until = thread_cpu_ns() + 1000000000L;
    while (room() >= 32 && thread_cpu_ns() < until) burn_quietly(100);
    burn_quietly(us);
}

__attribute__((no_instrument_function)) uint64_t uleb_at(const uint8_t*& p) {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
        uint8_t byte = *p++;
        v |= uint64_t(byte & 0x7f) << shift;
        if (byte < 0x80) return v;
    }
}

// Whether the thread's current chunk begins with the samples that waited: a Sample record of
// samples of the program (count > 0; one of count 0 is the clocks a hook read after a switch,
// which a busy machine can bring first too), after the Waited record (format 1.11) written
// before it, if any.
__attribute__((no_instrument_function)) bool samples_first() {
    const uint8_t* p = prof_tls.w.base + PROF_DETAIL_CHUNK_HEADER;
    if (*p == 0x54) p += 2 + p[1]; // Waited: tag, length (below 128), payload
    if (*p != 0x4c) return false;
    p += 2;      // the Sample's tag and length (below 128)
    uleb_at(p);  // dt
    uleb_at(p);  // cpu_ns
    uleb_at(p);  // own_ns
    uleb_at(p);  // own_count
    return uleb_at(p) > 0;
}

// Until the samples that waited were written first in the next chunk, which its first record
// then is (Sample, 0x4c, or the Waited record before it, 0x54; otherwise a Pause or the call's
// Enter): where another busy thread
// shares the CPU, the kernel may not fire the timer for hundreds of milliseconds of CPU time.
// At most 10 s of CPU time; returns the attempts.
__attribute__((noinline)) int starve() {
    long until = thread_cpu_ns() + 10000000000L;
    for (int attempt = 1;; ++attempt) {
        fill_chunk();
        starve_quietly(50000);
        leaf(1); // opens the next chunk
        if (samples_first() || thread_cpu_ns() >= until) return attempt;
    }
}

// The same, once, in a thread that then ends with its samples waiting (when there were any).
__attribute__((no_instrument_function)) void* quiet_thread(void*) {
    fill_chunk();
    starve_quietly(200000);
    return nullptr; // the samples that waited are written when the thread ends
}

// A counting thread (PROF_TIME=sampled) writes no record for a call on a path met before: its
// chunk fills with the paths met for the first time, one level deeper each (a CallNode record
// each, now and then a CallCounts record), until fewer than 64 bytes are left; then as above.
// The samples that wait clear the thread's switch word: the next hook writes them, before the
// clocks it reads. Gives up after 10 s of CPU time.
__attribute__((noinline)) int starve_deeper(long until, int attempt) {
    if (room() < 64) {
        long before = room();
        PROF_LINE(g_sink = g_sink + 1);
        if (before - room() >= 26 && room() < 40) {
            starve_quietly(50000);
            leaf(1); // the samples that waited, first in the next chunk
            if (samples_first() || thread_cpu_ns() >= until) return attempt;
            ++attempt;
        }
    }
    int attempts = starve_deeper(until, attempt);
    g_sink = g_sink + 1; // not a tail call: every level is a frame of its own
    return attempts;
}

// The same in a counting thread that ends with its samples waiting: from its deepest frame,
// where its chunk is full, it exits (pthread_exit) instead of returning through hooks that
// would write them.
__attribute__((noinline)) void fill_deeper(int level) {
    if (level > 1000000) std::exit(3);
    if (room() < 64) {
        long before = room();
        PROF_LINE(g_sink = g_sink + 1);
        if (before - room() >= 26 && room() < 40) {
            starve_quietly(200000);
            pthread_exit(nullptr); // the samples that waited are written when the thread ends
        }
    }
    fill_deeper(level + 1);
    g_sink = g_sink + 1;
}

__attribute__((no_instrument_function)) void* quiet_counting_thread(void*) {
    fill_deeper(0);
    return nullptr;
}

int pending_mode() {
    bool counting = prof_tls.counting;
    int attempts = counting ? starve_deeper(thread_cpu_ns() + 10000000000L, 1) : starve();
    pthread_t t;
    if (pthread_create(&t, nullptr, counting ? quiet_counting_thread : quiet_thread, nullptr) != 0)
        return 1;
    pthread_join(t, nullptr);
    std::printf("pending %d\n", attempts);
    return 0;
}

} // namespace

// ---- blocked --------------------------------------------------------------------------------

int blocked_mode() {
    long queued = -1;
    int fd = -1;
    std::thread worker([&] {
        sigset_t all, before;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &before);
        burn(300000);
        if (FILE* f = std::fopen("/proc/self/status", "r")) {
            char line[256];
            while (std::fgets(line, sizeof line, f))
                if (std::sscanf(line, "SigQ: %ld/", &queued) == 1) break;
            std::fclose(f);
        }
        pthread_sigmask(SIG_SETMASK, &before, nullptr);
        fd = open("/dev/null", O_RDONLY);
    });
    worker.join();
    std::printf("queued=%ld fd=%d\n", queued, fd);
    return 0;
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "burn";
    if (!std::strcmp(mode, "threads")) return threads_mode();
    if (!std::strcmp(mode, "eintr")) return eintr_mode();
    if (!std::strcmp(mode, "children")) return children_mode();
    if (!std::strcmp(mode, "mask")) return mask_mode();
    if (!std::strcmp(mode, "signals")) return signals_mode();
    if (!std::strcmp(mode, "rtsig")) return rtsig_mode();
    if (!std::strcmp(mode, "fork")) return fork_mode();
    if (!std::strcmp(mode, "exec")) return exec_mode(argv[0]);
    if (!std::strcmp(mode, "vfork")) return vfork_mode();
    if (!std::strcmp(mode, "pending")) return pending_mode();
    if (!std::strcmp(mode, "blocked")) return blocked_mode();
    if (!std::strcmp(mode, "kill")) {
        burn(100000);
        sampled();
        raise(SIGKILL);
    }
    burn(60000);
    print_cpu();
    return 0;
}
