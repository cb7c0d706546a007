// Test program for marked code that a signal handler interrupts: a SIGALRM timer at a high
// rate (every 20 us, or twice the handler's latest duration when that is longer: on a loaded
// machine or under a sanitizer, the timer would otherwise fire again before the handler
// returns, and the program would run nothing else) runs scopes and a marked line in its handler while the main thread runs a PROF_LINE
// loop and a loop of scope runs with a nested scope every 16th iteration. Run it with small
// chunks (PROF_CHUNK_SIZE=65536) so that the handler's records open new chunks. The main
// loops' counts must be exact (the handler's own events may be dropped when it interrupts the
// runtime): line `main` N hits, scope `loop` N, scope `inner` N / 16. Argument: N.
#include <prof/prof.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sys/time.h>

volatile long g_sink;
long g_interval_us = 20;

long now_us() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

void on_alarm(int) {
    long start = now_us();
    for (int k = 0; k < 20; ++k) {
        {
            PROF_SCOPE("handler_a");
            g_sink = g_sink + 1;
        }
        {
            PROF_SCOPE("handler_b");
            g_sink = g_sink + 1;
        }
    }
    PROF_LINE(g_sink = g_sink + 2); // handler
    // Back to 20 us when the handler is quick again (a preemption made it look slow).
    long took = now_us() - start;
    long want = 2 * took > 20 ? 2 * took : 20;
    if (want != g_interval_us) {
        g_interval_us = want;
        itimerval every{{0, want}, {0, want}};
        setitimer(ITIMER_REAL, &every, nullptr);
    }
}

int main(int argc, char** argv) {
    long n = argc > 1 ? std::atol(argv[1]) : 4000000;
    std::signal(SIGALRM, on_alarm);
    itimerval every{{0, 20}, {0, 20}};
    setitimer(ITIMER_REAL, &every, nullptr);
    for (long i = 0; i < n; ++i) {
        PROF_LINE(g_sink = g_sink + i); // main
    }
    for (long i = 0; i < n; ++i) {
        PROF_SCOPE("loop");
        g_sink = g_sink + i;
        if ((i & 15) == 0) {
            PROF_SCOPE("inner");
            g_sink = g_sink + 1;
        }
    }
    itimerval off{};
    setitimer(ITIMER_REAL, &off, nullptr);
    std::printf("signals done\n");
    return 0;
}
