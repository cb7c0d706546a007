// Test program for profreport latency: `handle` is called 50 times; each call spins 200 us in
// `parse`, and the 50th also spins 4.8 ms in `rebuild`, so that its calls last 200 us, 49 times,
// and 5 ms once, and the tail's extra time is all in `rebuild`. Spinning on the monotonic clock
// (not sleeping) keeps each duration close to what was asked; the clock is read outside the
// hooks (no_instrument_function), so that the profiler's cost per call, which the report takes
// out of each duration, stays a few hooks per call of `handle`. The program measures each call
// of `handle` itself and prints the durations in ns, one per line, for the test to compare.
// Arguments: the calls (default 50), the microseconds `rebuild` spins (default 4800), and K:
// every K-th call rebuilds instead of the last one only (default 0: the last only).
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace {

__attribute__((no_instrument_function)) long long now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) void spin(long long ns) {
    long long end = now_ns() + ns;
    while (now_ns() < end) {
    }
}

__attribute__((noinline)) void parse() {
    spin(200000);
}

long long g_rebuild_ns = 4800000;
int g_every = 0;

__attribute__((noinline)) void rebuild() {
    spin(g_rebuild_ns);
}

__attribute__((noinline)) void handle(int i, int calls) {
    parse();
    if (g_every ? i % g_every == g_every - 1 : i == calls - 1) rebuild();
}

} // namespace

int main(int argc, char** argv) {
    int calls = argc > 1 ? std::atoi(argv[1]) : 50;
    if (argc > 2) g_rebuild_ns = std::atoll(argv[2]) * 1000;
    if (argc > 3) g_every = std::atoi(argv[3]);
    for (int i = 0; i < calls; ++i) {
        long long start = now_ns();
        handle(i, calls);
        std::printf("%lld\n", now_ns() - start);
    }
    return 0;
}
