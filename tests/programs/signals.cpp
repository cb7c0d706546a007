// Test program for marked code that a signal handler interrupts: a SIGALRM timer at a high
// rate (every 20 us) runs scopes and a marked line in its handler while the main thread runs a
// PROF_LINE loop and a loop of scope runs with a nested scope every 16th iteration. When the
// timer has fired again by the end of a handler (a loaded machine, a sanitizer, the signal
// delivery itself taking most of the 20 us), the next handler would start at once and the main
// thread would get no time at all: the interval then doubles, and comes back down by halves
// after 64 handlers in a row that end with no signal pending. Run it with small chunks
// (PROF_CHUNK_SIZE=65536) so that the handler's records open new chunks. The main loops'
// counts must be exact (the handler's own events may be dropped when it interrupts the
// runtime): line `main` N hits, scope `loop` N, scope `inner` N / 16. Argument: N.
#include <prof/prof.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sys/time.h>

volatile long g_sink;
long g_interval_us = 20;
int g_calm = 0; // handlers in a row that ended with no SIGALRM pending

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
    long took = now_us() - start;
    sigset_t pending;
    sigpending(&pending);
    long want = g_interval_us;
    if (sigismember(&pending, SIGALRM)) {
        want = want < 25000 ? 2 * want : 50000;
        g_calm = 0;
    } else if (++g_calm >= 64) {
        want = want / 2 > 20 ? want / 2 : 20;
        g_calm = 0;
    }
    if (want < 2 * took) want = 2 * took;
    if (want > 500000) want = 500000; // a setitimer interval stays under one second
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
