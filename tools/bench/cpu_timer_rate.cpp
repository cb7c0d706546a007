// How many signals a thread gets from a sampler on its own CPU time, the way libprof's sampler
// arms it (`timer`: timer_create on CLOCK_THREAD_CPUTIME_ID, SIGEV_THREAD_ID, every 1 ms) and
// the way a perf_event one would (`perf`: a cpu-clock event of the thread, every 1 ms, F_SETSIG),
// while the thread burns `seconds` of CPU time. Alone on a CPU, and on a CPU another busy thread
// shares (tools/bench/sampling.py does not do this; run it by hand):
//
//   g++ -O2 tools/bench/cpu_timer_rate.cpp -o /tmp/cpu_timer_rate
//   /tmp/cpu_timer_rate timer 1; /tmp/cpu_timer_rate perf 1
//   taskset -c 0 sh -c 'while :; do :; done' & taskset -c 0 /tmp/cpu_timer_rate timer 1; kill %1
//
// Prints one line: signals, and for the timer its overruns (si_overrun: expirations whose signal
// was still pending).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

volatile long g_signals, g_overruns;

void on_signal(int, siginfo_t* info, void*) {
    g_signals = g_signals + 1;
    if (info->si_code == SI_TIMER) g_overruns = g_overruns + info->si_overrun;
}

long cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2 || (std::strcmp(argv[1], "timer") && std::strcmp(argv[1], "perf"))) {
        std::fprintf(stderr, "usage: cpu_timer_rate timer|perf [seconds]\n");
        return 2;
    }
    bool timer = !std::strcmp(argv[1], "timer");
    double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
    int sig = SIGRTMAX;
    struct sigaction act {};
    act.sa_sigaction = on_signal;
    act.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(sig, &act, nullptr);
    int tid = int(syscall(SYS_gettid));
    if (timer) {
        sigevent ev{};
        ev.sigev_notify = SIGEV_THREAD_ID;
        ev.sigev_signo = sig;
        ev._sigev_un._tid = tid;
        timer_t t;
        if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &t) != 0) return 1;
        itimerspec every{{0, 1000000}, {0, 1000000}};
        timer_settime(t, 0, &every, nullptr);
    } else {
        perf_event_attr attr{};
        attr.size = sizeof attr;
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_CPU_CLOCK;
        attr.sample_period = 1000000;
        attr.wakeup_events = 1;
        int fd = int(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
        if (fd < 0) {
            std::perror("perf_event_open");
            return 1;
        }
        f_owner_ex owner{F_OWNER_TID, tid};
        fcntl(fd, F_SETOWN_EX, &owner);
        fcntl(fd, F_SETSIG, sig);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC);
    }
    long start = cpu_ns(), end = start + long(seconds * 1e9);
    volatile unsigned long x = 0;
    while (cpu_ns() < end)
        for (int i = 0; i < 10000; ++i) x = x * 3 + 1;
    std::printf("%s: %.1f s of CPU time, 1 ms period: %ld signals", argv[1], seconds,
                long(g_signals));
    if (timer) std::printf(", %ld overruns", long(g_overruns));
    std::printf("\n");
    return 0;
}
