// One marked line hit 500,000 times, every 50th hit spinning for about 10 us of CPU time (10,000
// long hits, 0.1 s) and the others taking a few ns: the line's clock is read around one hit in
// PROF_LINE_CLOCK_EVERY once its hits are short, and a long hit is then timed only when drawn.
// Then a scope "mostly short" around the same, 500,000 activations that join runs. Prints
// long_ns=<the line's long hits' own CPU time, measured around their spins> and scope_ns=<the
// same of the scope's> on stderr, the lower bounds of the estimated times: a long hit preempted
// while not timed is in neither (its wall time would be in the program's sum and only a
// sixteenth of the time in the estimate's).
#include <prof/prof.hpp>

#include <cstdint>
#include <cstdio>
#include <ctime>

namespace {

uint64_t cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

__attribute__((noinline)) uint64_t step(int i, uint64_t& long_ns) {
    if (i % 50 != 49) return uint64_t(i) & 1;
    uint64_t start = cpu_ns(), now = start;
    while (now - start < 10000) now = cpu_ns();
    long_ns += now - start;
    return 1;
}

} // namespace

int main() {
    uint64_t acc = 0, line_ns = 0, scope_ns = 0;
    for (int i = 0; i < 500000; ++i) {
        PROF_LINE(acc += step(i, line_ns));
    }
    for (int i = 0; i < 500000; ++i) {
        PROF_SCOPE("mostly short");
        acc += step(i, scope_ns);
    }
    std::fprintf(stderr, "long_ns=%llu\nscope_ns=%llu\n", static_cast<unsigned long long>(line_ns),
                 static_cast<unsigned long long>(scope_ns));
    std::printf("%llu\n", static_cast<unsigned long long>(acc));
    return 0;
}
