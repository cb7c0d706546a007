// Test program for scope runs (format 1.3): consecutive leaf activations of one scope join one
// ScopeRun record; an activation inside which anything is recorded (a call, a scope, the fork
// handler) gets its own Enter and Exit. Built with -finstrument-functions. Exact counts:
//   leaf        100000 in leaves() from main, 20000 in each of 2 threads: 140000
//   mixed       1000; 100 of them call helper(), 100 open "child"
//   a, b        500 each, alternating (no run: their records alternate)
//   with_line   1000, around a PROF_LINE hit 1000 times
//   thrown      100, 50 of them left by an exception caught in the same loop
//   nap         5 activations of 10 ms
//   forking     3; the third forks: the child's trace has that activation only, continued
//               (0 calls: it is the parent's)
// Prints a checksum.
#include "run_delay.hpp"

#include <prof/prof.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

__attribute__((noinline)) long helper(long x) {
    asm volatile("");
    return x * 3;
}

__attribute__((noinline)) long leaves(long n) {
    long s = 0;
    for (long i = 0; i < n; ++i) {
        PROF_SCOPE("leaf");
        s += i;
    }
    return s;
}

__attribute__((noinline)) long mixed() {
    long s = 0;
    for (int i = 0; i < 1000; ++i) {
        PROF_SCOPE("mixed");
        if (i % 10 == 3) s += helper(i);
        if (i % 10 == 7) {
            PROF_SCOPE("child");
            s += i;
        }
        s += i;
    }
    return s;
}

__attribute__((noinline)) long alternating() {
    long s = 0;
    for (int i = 0; i < 500; ++i) {
        {
            PROF_SCOPE("a");
            s += i;
        }
        {
            PROF_SCOPE("b");
            s ^= i;
        }
    }
    return s;
}

__attribute__((noinline)) long with_line() {
    long s = 0;
    for (int i = 0; i < 1000; ++i) {
        PROF_SCOPE("with_line");
        PROF_LINE(s += i);
    }
    return s;
}

__attribute__((noinline)) long throws() {
    long s = 0;
    for (int i = 0; i < 100; ++i) {
        try {
            PROF_SCOPE("thrown");
            s += i;
            if (i % 2) throw i;
        } catch (int v) {
            s -= v;
        }
    }
    return s;
}

__attribute__((noinline)) void naps() {
    for (int i = 0; i < 5; ++i) {
        PROF_SCOPE("nap");
        timespec ts{0, 10 * 1000 * 1000};
        nanosleep(&ts, nullptr); // libc: nothing recorded inside, so the five are one run
    }
}

// Returns in the child with true.
__attribute__((noinline)) bool forks() {
    pid_t pid = -1;
    for (int i = 0; i < 3; ++i) {
        PROF_SCOPE("forking");
        if (i == 2) pid = fork();
    }
    if (pid == 0) return true;
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    return false;
}

int main() {
    long s = leaves(100000);
    long t1s = 0, t2s = 0;
    std::thread t1([&] { t1s = leaves(20000); });
    std::thread t2([&] { t2s = leaves(20000); });
    t1.join();
    t2.join();
    s += t1s + t2s + mixed() + alternating() + with_line() + throws();
    // With TEST_TIME_SLEEPS set, the naps' own wall time goes to stderr: the bound of their
    // time in the trace, however late a loaded machine wakes them; and their wait for a CPU
    // after each wake-up (the run delay), which --clock wall charges where the CPU time is.
    timespec before{}, after{};
    uint64_t waited = run_delay();
    clock_gettime(CLOCK_MONOTONIC, &before);
    naps();
    clock_gettime(CLOCK_MONOTONIC, &after);
    waited = run_delay() - waited;
    if (std::getenv("TEST_TIME_SLEEPS"))
        std::fprintf(stderr, "naps_ns=%lld\nnaps_waited_ns=%llu\n",
                     (after.tv_sec - before.tv_sec) * 1000000000LL +
                         (after.tv_nsec - before.tv_nsec),
                     (unsigned long long)waited);
    if (forks()) return 0;
    std::printf("scope_runs checksum %ld\n", s);
    return 0;
}
