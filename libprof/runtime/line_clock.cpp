// Which hits of a PROF_LINE read the clock (prof/prof.hpp's LineTimer).
//
// A hit's two clock reads cost about 20 ns in a VM (rdtsc is slow there), more than the short
// statements people mark in their hot loops: snappy's CompressFragment with five marked lines
// ran 6x its time, and the markers' code took 80% of its CPU samples. Counting a hit costs a
// few ns; timing it is what is dear. So once a site's hits are short (under ten clock reads,
// where the reads cost more than a tenth of the line), one hit in PROF_LINE_CLOCK_EVERY is
// timed, and its duration counted N times: a Horvitz-Thompson estimate. Each hit is timed with
// probability 1/N decided before it runs (the gaps between timed hits are geometric, so each hit's
// chance is the same whatever came before), and a timed hit counts N times: the sum's expectation
// is the sum of all hits' times, however the durations vary or repeat. The first hits of a site on
// a thread are all timed (a line hit a few times is timed exactly), and while its timed hits are
// long every hit is timed. A short line in a run long enough to be timed by CPU samples takes its
// time from them anyway (analysis/model/lines.cpp); the estimate serves the choice between the two
// and runs timed by the clock alone.
#include "runtime.hpp"

extern "C" {
__attribute__((visibility("default"))) unsigned long long prof_line_short_ticks = 0;
}

namespace prof::rt {
namespace {

// Short hits of a site on a thread that are all timed before any is left untimed: a line hit
// fewer times is timed exactly, and past this one interrupt in a timed hit, counted 16 times,
// stays small beside the line's total (with 32, a line of 1000 hits a thread came out at
// times 2.5x its function's time under load: tests/e2e/line_tests.cpp). 16 us of clock reads.
constexpr uint32_t kTimedFirst = 1024;
// The longest gap drawn, in units of N (its chance at N = 16: e^-64).
constexpr uint32_t kMaxGapTimesN = 64;

// PROF_LINE_CLOCK_EVERY = 2^g_bits: a hit is timed when a group of g_bits random bits is all
// zero. g_groups such groups fill a 64-bit word, g_low has the lowest bit of each and g_high the
// highest: (x - g_low) & ~x & g_high has the highest bit of the first zero group set (a borrow
// reaches only the groups above a zero one), so one random word draws g_groups trials at once.
uint32_t g_every = 1;
uint32_t g_bits = 0, g_groups = 0;
uint64_t g_low = 0, g_high = 0;
uint8_t g_group_of[64]; // bit -> its group (a division here took a quarter of the time)

PROF_NOINSTR uint64_t next_random(prof_thread& t) {
    uint64_t x = t.clock_rng;
    if (PROF_UNLIKELY(!x)) x = (reinterpret_cast<uintptr_t>(&t) ^ now_ticks()) | 1;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    t.clock_rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

// The untimed hits before the next timed one: geometric, each hit timed with chance 1/N.
PROF_NOINSTR uint32_t draw_gap(prof_thread& t) {
    uint32_t gap = 0, cap = kMaxGapTimesN * g_every;
    while (gap < cap) {
        uint64_t x = next_random(t);
        uint64_t zero = (x - g_low) & ~x & g_high;
        if (zero) return gap + g_group_of[__builtin_ctzll(zero)];
        gap += g_groups;
    }
    return cap;
}

} // namespace

PROF_NOINSTR void line_clock_init() {
    g_every = uint32_t(g_options.line_clock_every);
    if (g_every <= 1 || !g_use_tsc) {
        prof_line_short_ticks = 0;
        return;
    }
    g_bits = uint32_t(__builtin_ctz(g_every)); // a power of two (options.inc)
    g_groups = 64 / g_bits;
    g_low = g_high = 0;
    for (uint32_t bit = 0; bit < 64; ++bit) g_group_of[bit] = uint8_t(bit / g_bits);
    for (uint32_t i = 0; i < g_groups; ++i) {
        g_low |= uint64_t(1) << (i * g_bits);
        g_high |= uint64_t(1) << (i * g_bits + g_bits - 1);
    }
    // What two back-to-back reads measure: the lowest of a few, as the hot loop sees it.
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 32; ++i) {
        uint64_t a = now_ticks();
        uint64_t b = now_ticks();
        if (b > a && b - a < best) best = b - a;
    }
    prof_line_short_ticks = best == UINT64_MAX ? 0 : 10 * best;
}

} // namespace prof::rt

extern "C" __attribute__((visibility("default"))) PROF_NOINSTR void
prof_line_plan(prof_site_counts* c, unsigned long long ticks) {
    using namespace prof::rt;
    if (ticks >= prof_line_short_ticks || g_every <= 1 || c->clock_timed < kTimedFirst) {
        if (ticks < prof_line_short_ticks) ++c->clock_timed;
        c->clock_skip = 0;
        c->clock_extra = 0;
        return;
    }
    c->clock_skip = draw_gap(prof_tls);
    c->clock_extra = g_every - 1;
}
