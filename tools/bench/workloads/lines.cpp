// Benchmark workload for the line/scope layer: N iterations of one tiny statement, bare or marked.
//
// The marking is chosen at compile time with -DVARIANT=...:
//   V_BARE   the statement alone (the baseline every other variant is compared with)
//   V_FLOOR  two __rdtsc() reads around the statement, their difference added to a
//            thread-local: the "two cycle-counter reads" the overhead target is measured against
//   V_LINE   PROF_LINE(statement); run with PROF_LINE_RSS=1 it also reads /proc/self/statm
//            before and after every hit (two pread() system calls per hit)
//   V_SCOPE  { PROF_SCOPE("step"); statement } - the hits add up in one ScopeRun record;
//            run with PROF_SCOPE_RUNS=0, one Enter and one Exit record per hit
// Every variant is linked against libprof (-lprof, no -finstrument-functions) and calls
// prof_is_tracing(), so all of them load the runtime and write a trace: the difference from
// V_BARE is the per-hit cost alone, with the runtime's start-up and exit work cancelling out.
// Argument: N, the number of iterations (= hits of the marked statement).
#include <prof/prof.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <x86intrin.h>

#define V_BARE 1
#define V_FLOOR 2
#define V_LINE 3
#define V_SCOPE 4

#if !defined(VARIANT)
#error "build with -DVARIANT=V_BARE, V_FLOOR, V_LINE or V_SCOPE"
#endif

namespace {

// Makes the compiler treat `v` as read and rewritten here, so each iteration's addition is
// really executed (no closed form, no vectorisation) while staying in a register.
inline uint64_t keep(uint64_t v) {
    asm volatile("" : "+r"(v));
    return v;
}

#if VARIANT == V_FLOOR
// Local-exec TLS (this is the executable): a single %fs-relative add per hit.
thread_local uint64_t t_floor_ticks;
#endif

// noipa: one real out-of-line loop in every variant, not folded into main.
__attribute__((noipa)) uint64_t run(uint64_t n) {
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n; ++i) {
#if VARIANT == V_BARE
        acc = keep(acc + i * 3);
#elif VARIANT == V_FLOOR
        uint64_t t0 = __rdtsc();
        acc = keep(acc + i * 3);
        t_floor_ticks += __rdtsc() - t0;
        asm volatile("" ::: "memory"); // store the sum every hit, as a profiler would
#elif VARIANT == V_LINE
        PROF_LINE(acc = keep(acc + i * 3));
#elif VARIANT == V_SCOPE
        {
            PROF_SCOPE("step");
            acc = keep(acc + i * 3);
        }
#else
#error "unknown VARIANT"
#endif
    }
    return acc;
}

} // namespace

int main(int argc, char** argv) {
    uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20000000;
    uint64_t acc = run(n);
#if VARIANT == V_FLOOR
    std::printf("floor ticks %llu\n", (unsigned long long)t_floor_ticks);
#endif
    std::printf("lines checksum %llu, tracing %d\n", (unsigned long long)acc, prof_is_tracing());
    return 0;
}
