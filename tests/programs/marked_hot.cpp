// Test program for marked lines in a hot loop (issue: a function's total excludes the markers'
// own cost). work() marks two statements of a few nanoseconds each, 2 x 8 M hits, about 30
// times the statements' own time in markers; plain_work() is the same code built with
// -DPROF_DISABLE (marked_hot_plain.cpp). main runs plain_work, then work, and prints each one's
// CPU time (`plain_ns=N`, `work_ns=N`, the thread's CPU clock); then plain_scoped() and
// scoped(), a PROF_SCOPE of a few nanoseconds in a loop, 4 M activations (`plain_scoped_ns=N`,
// the unmarked copy's CPU time); then slow(), a marked line whose
// statement calls spin() out of line, 300 hits of about 2000 multiply rounds, and the CPU time
// spin took in all (`spin_ns=N`). Prints the checksums on stdout.
#include <prof/prof.hpp>

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <vector>

extern "C" uint64_t spin(int rounds);
extern "C" uint64_t plain_work(const uint64_t* v, size_t n, int rounds);
extern "C" uint64_t plain_slow(int hits);
extern "C" uint64_t plain_scoped(const uint64_t* v, size_t n, int rounds);

#define WORK_NAME work
#define SCOPED_NAME scoped
#define SLOW_NAME slow
#include "marked_hot.inc"

static uint64_t cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t spin_total_ns = 0;

extern "C" __attribute__((noinline)) uint64_t spin(int rounds) {
    uint64_t t0 = cpu_ns();
    uint64_t x = uint64_t(rounds);
    for (int i = 0; i < rounds; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    spin_total_ns += cpu_ns() - t0;
    return x;
}

int main() {
    std::vector<uint64_t> v(4096);
    for (size_t i = 0; i < v.size(); ++i) v[i] = i * 2654435761u;
    const int rounds = 2000; // 8 M elements
    uint64_t t0 = cpu_ns();
    uint64_t a = plain_work(v.data(), v.size(), rounds);
    uint64_t t1 = cpu_ns();
    uint64_t b = work(v.data(), v.size(), rounds);
    uint64_t t2 = cpu_ns();
    uint64_t t3 = cpu_ns();
    uint64_t d = plain_scoped(v.data(), v.size(), 1000);
    uint64_t t4 = cpu_ns();
    uint64_t e = scoped(v.data(), v.size(), 1000);
    uint64_t c = slow(2000);
    std::printf("%llu %llu %llu\n", (unsigned long long)a, (unsigned long long)b,
                (unsigned long long)c);
    std::fprintf(stderr, "plain_ns=%llu\nwork_ns=%llu\nspin_ns=%llu\nplain_scoped_ns=%llu\n",
                 (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1),
                 (unsigned long long)spin_total_ns, (unsigned long long)(t4 - t3));
    return a == b && d == e ? 0 : 1;
}
