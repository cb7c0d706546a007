// What one CPU-time sample costs the sampled thread, for tools/bench/sampling.py. A loop that
// reads the cycle counter runs for `seconds` of the thread's CPU time inside one PROF_SCOPE (the
// thread's first event starts its stream and arms its timer), and notes every gap between two
// reads longer than 1 us: the thread was interrupted (a timer tick, and with sampling the
// sample's timer work, signal delivery, handler and return). Two measures: the total of the
// gaps, against a run with PROF_SAMPLE_HZ=0; and, in one run at a rate below the kernel's tick
// (PROF_SAMPLE_HZ=125 at 250 ticks a second), the median gap of the ticks that brought a sample
// against that of the ticks that did not, under the same load. Prints one JSON line.
// Not instrumented; link with libprof.so.
#include <prof/prof.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>
#include <x86intrin.h>

namespace {

double cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double tsc_per_second() {
    timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    unsigned long long t0 = __rdtsc();
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 100000000L);
    unsigned long long t1 = __rdtsc();
    return double(t1 - t0) / (double(b.tv_sec - a.tv_sec) + double(b.tv_nsec - a.tv_nsec) * 1e-9);
}

} // namespace

int main(int argc, char** argv) {
    double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
    double hz = tsc_per_second();
    auto us = [&](double ticks) { return ticks / hz * 1e6; };
    unsigned long long threshold = (unsigned long long)(hz * 1e-6);
    // Each gap, and whether a Sample record was written during it: the loop records nothing
    // else, so the thread's chunk cursor moves only then.
    struct Gap {
        unsigned long long ticks;
        bool sampled;
    };
    std::vector<Gap> gaps;
    gaps.reserve(1 << 20);
    double start = cpu_seconds(), end = start + seconds;
    {
        PROF_SCOPE("probe");
        const uint8_t* cursor = prof_tls.w.cursor;
        unsigned long long last = __rdtsc();
        for (unsigned long i = 0;; ++i) {
            unsigned long long now = __rdtsc();
            if (now - last > threshold && gaps.size() < gaps.capacity()) {
                const uint8_t* c = __atomic_load_n(&prof_tls.w.cursor, __ATOMIC_RELAXED);
                gaps.push_back(Gap{now - last, c != cursor});
                cursor = c;
            }
            last = now;
            if ((i & 65535) == 0) {
                if (cpu_seconds() >= end) break;
                last = __rdtsc(); // the clock read itself is not a gap
            }
        }
    }
    double cpu = cpu_seconds() - start;
    // The gaps from 5 to 500 us are the timer ticks (the VM's timer interrupt alone takes
    // several microseconds), with the sample's work when there is one; shorter ones are other
    // interruptions of the virtual CPU, longer ones the thread losing its CPU to another.
    std::vector<double> ticks, sampled;
    double total = 0;
    for (const Gap& g : gaps) {
        double t = us(double(g.ticks));
        if (t < 5 || t >= 500) continue;
        total += t;
        (g.sampled ? sampled : ticks).push_back(t);
    }
    auto median = [](std::vector<double>& v) {
        if (v.empty()) return 0.0;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    std::printf("{\"cpu_s\": %.6f, \"long_gaps\": %zu, \"long_gap_total_us\": %.1f, "
                "\"sampled_gaps\": %zu, \"sampled_median_us\": %.2f, \"other_median_us\": %.2f}\n",
                cpu, ticks.size() + sampled.size(), total, sampled.size(), median(sampled),
                median(ticks));
    return 0;
}
