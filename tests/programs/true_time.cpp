// Test program with known truth for sampled time: three functions burn CPU in the shares
// 60/30/10 (rounds of random length, so that no periodic sampling can lock step with them),
// tiny() is called 10 M times, and nap() sleeps 4 x 50 ms. It measures each function's CPU
// time itself (CLOCK_THREAD_CPUTIME_ID around every call, a few hundred readings) and the cost
// of tiny() per call, and prints them:
//   share_60 <cpu ns>
//   share_30 <cpu ns>
//   share_10 <cpu ns>
//   tiny <ns per call>
//   tiny_stretch <wall time / CPU time of the tiny() loop>
//   nap <wall ns>
//   nap_waited <ns of it waiting for a CPU: the kernel's run delay>
// Built twice: instrumented (the profile is compared with these figures) and plain (the true
// cost of tiny(), which instrumentation would inflate). Argument: seconds of CPU to burn
// (default 2).
#include "run_delay.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace {

volatile uint64_t g_sink;

uint64_t now(clockid_t c) {
    timespec t;
    clock_gettime(c, &t);
    return uint64_t(t.tv_sec) * 1000000000 + uint64_t(t.tv_nsec);
}

uint64_t cpu_now() {
    return now(CLOCK_THREAD_CPUTIME_ID);
}

// Burns about `ns` of CPU.
void burn(uint64_t ns) {
    uint64_t until = cpu_now() + ns;
    while (cpu_now() < until)
        for (int i = 0; i < 2000; ++i) g_sink = g_sink * 6364136223846793005ULL + 1;
}

uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
double uniform() { // 0.5 .. 1.5
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return 0.5 + double(g_rng % 1000000) / 1e6;
}

} // namespace

__attribute__((noinline)) void share_60(uint64_t ns) {
    burn(ns);
}
__attribute__((noinline)) void share_30(uint64_t ns) {
    burn(ns);
}
__attribute__((noinline)) void share_10(uint64_t ns) {
    burn(ns);
}

__attribute__((noinline)) void tiny() {
    for (int i = 0; i < 32; ++i) g_sink = g_sink * 2862933555777941757ULL + 3037000493ULL;
}

__attribute__((noinline)) void nap() {
    timespec t{0, 50 * 1000 * 1000};
    while (nanosleep(&t, &t) != 0) {
    }
}

// 1 ms sleeps between CPU blocks of 3 ms: less than a sampling period apart, so that
// sampled time must tell the sleep from the CPU time around it within one span.
__attribute__((noinline)) void short_nap() {
    timespec t{0, 1000 * 1000};
    while (nanosleep(&t, &t) != 0) {
    }
}

int short_naps() {
    // The run delay over the whole loop: a sampling span holds a CPU block and a sleep, and
    // the profile knows only how long the span waited for a CPU, not in which part.
    uint64_t napped = 0, delay = run_delay();
    for (int i = 0; i < 300; ++i) {
        share_60(3000000);
        uint64_t wall = now(CLOCK_MONOTONIC);
        short_nap();
        napped += now(CLOCK_MONOTONIC) - wall;
    }
    uint64_t waited = run_delay() - delay;
    std::printf("short_nap %llu\nshort_nap_waited %llu\n", (unsigned long long)napped,
                (unsigned long long)waited);
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 1 && argv[1][0] == 'n') return short_naps(); // "naps"
    double seconds = argc > 1 ? std::atof(argv[1]) : 2;
    uint64_t spent[3] = {0, 0, 0};
    void (*const burner[3])(uint64_t) = {share_60, share_30, share_10};
    const double share[3] = {0.6, 0.3, 0.1};
    // Rounds of 5 ms on average, each part of random length around its share.
    for (uint64_t total = 0; total < uint64_t(seconds * 1e9);) {
        for (int k = 0; k < 3; ++k) {
            uint64_t before = cpu_now();
            burner[k](uint64_t(5e6 * share[k] * uniform()));
            uint64_t took = cpu_now() - before;
            spent[k] += took;
            total += took;
        }
    }
    uint64_t start = cpu_now(), start_wall = now(CLOCK_MONOTONIC);
    for (int i = 0; i < 10000000; ++i) tiny();
    double tiny_ns = double(cpu_now() - start) / 1e7;
    // Wall time over CPU time of that loop: more than 1 when the machine was busy, which a
    // profile (wall time, like cProfile's) shows and a CPU clock does not.
    double stretch = double(now(CLOCK_MONOTONIC) - start_wall) / (tiny_ns * 1e7);
    uint64_t wall = now(CLOCK_MONOTONIC), delay = run_delay();
    for (int i = 0; i < 4; ++i) nap();
    uint64_t napped = now(CLOCK_MONOTONIC) - wall, waited = run_delay() - delay;
    std::printf("share_60 %llu\nshare_30 %llu\nshare_10 %llu\ntiny %.3f\ntiny_stretch %.4f\n"
                "nap %llu\nnap_waited %llu\n",
                (unsigned long long)spent[0], (unsigned long long)spent[1],
                (unsigned long long)spent[2], tiny_ns, stretch, (unsigned long long)napped,
                (unsigned long long)waited);
    return 0;
}
