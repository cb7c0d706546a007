// Test program with known truth for the time split (profreport --clock, JSON time_split): three
// threads, each off CPU in its own way, measure themselves and print what they measured.
// - `sleeper` runs nap(), which sleeps 4 x 50 ms (blocked or sleeping);
// - `reader` runs wait_on_pipe(), blocked in read() until main writes, 200 ms later;
// - `crowded` runs crowded_work(), which burns CPU on CPU 0 while hog() (another thread, pinned
//   there too) keeps that CPU busy: about half its wall time is spent waiting for a CPU.
// Each thread prints its wall time, its CPU time and its run delay (the kernel's time runnable
// but waiting for a CPU, /proc/thread-self/schedstat) over its function, in ns, as
// `F_wall`, `F_cpu` and `F_waited` for F in nap, wait_on_pipe, crowded_work and hog (the last
// two from their threads' start), and main (the whole run).
// Argument: the CPU time crowded_work burns, in seconds (default 0.6).
#include "run_delay.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace {

volatile uint64_t g_sink;
std::atomic<bool> g_stop{false};
int g_pipe[2];
double g_burn_seconds = 0.6;

uint64_t now(clockid_t c) {
    timespec t;
    clock_gettime(c, &t);
    return uint64_t(t.tv_sec) * 1000000000 + uint64_t(t.tv_nsec);
}

void pin_to_cpu0() {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

struct Measure {
    uint64_t wall = now(CLOCK_MONOTONIC), cpu = now(CLOCK_THREAD_CPUTIME_ID), waited = run_delay();
    void print(const char* name) const {
        uint64_t w = now(CLOCK_MONOTONIC) - wall, c = now(CLOCK_THREAD_CPUTIME_ID) - cpu,
                 r = run_delay() - waited;
        std::printf("%s_wall %llu\n%s_cpu %llu\n%s_waited %llu\n", name, (unsigned long long)w,
                    name, (unsigned long long)c, name, (unsigned long long)r);
    }
};

} // namespace

__attribute__((noinline)) void nap() {
    for (int i = 0; i < 4; ++i) {
        timespec t{0, 50 * 1000 * 1000};
        while (nanosleep(&t, &t) != 0) {
        }
    }
}

__attribute__((noinline)) void wait_on_pipe() {
    char c;
    while (read(g_pipe[0], &c, 1) < 0) {
    }
}

// The CPU burnt in one loop without calls: no hook runs inside it.
__attribute__((noinline)) void crowded_work() {
    uint64_t until = now(CLOCK_THREAD_CPUTIME_ID) + uint64_t(g_burn_seconds * 1e9);
    while (now(CLOCK_THREAD_CPUTIME_ID) < until)
        for (int i = 0; i < 20000; ++i) g_sink = g_sink * 6364136223846793005ULL + 1;
}

__attribute__((noinline)) void hog() {
    while (!g_stop.load(std::memory_order_relaxed))
        for (int i = 0; i < 20000; ++i) g_sink = g_sink * 2862933555777941757ULL + 3;
}

void* sleeper(void*) {
    Measure m;
    nap();
    m.print("nap");
    return nullptr;
}

void* reader(void*) {
    Measure m;
    wait_on_pipe();
    m.print("wait_on_pipe");
    return nullptr;
}

void* hogger(void*) {
    Measure m; // from the thread's start: its wait to get onto CPU 0 too
    pin_to_cpu0();
    hog();
    m.print("hog");
    return nullptr;
}

void* crowded(void*) {
    Measure m;
    pin_to_cpu0();
    crowded_work();
    m.print("crowded_work");
    return nullptr;
}

int main(int argc, char** argv) {
    Measure m;
    if (argc > 1) g_burn_seconds = std::atof(argv[1]);
    if (pipe(g_pipe) != 0) return 1;
    pthread_t hog_thread, threads[3];
    pthread_create(&hog_thread, nullptr, hogger, nullptr);
    pthread_create(&threads[0], nullptr, sleeper, nullptr);
    pthread_create(&threads[1], nullptr, reader, nullptr);
    pthread_create(&threads[2], nullptr, crowded, nullptr);
    timespec t{0, 200 * 1000 * 1000};
    while (nanosleep(&t, &t) != 0) {
    }
    if (write(g_pipe[1], "x", 1) != 1) return 1;
    for (pthread_t& th : threads) pthread_join(th, nullptr);
    g_stop = true;
    pthread_join(hog_thread, nullptr);
    m.print("main");
    std::fflush(stdout);
    return 0;
}
