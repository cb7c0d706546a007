// The calling thread's run delay in ns: its time runnable but waiting for a CPU, from the
// kernel's /proc/thread-self/schedstat (0 where it cannot be read). The test programs measure
// their own waits with it, the truth the profile's time split is held to. Not instrumented: it
// is the measure, not the program measured.
#pragma once

#include <cstdint>
#include <cstdio>

__attribute__((no_instrument_function)) inline uint64_t run_delay() {
    std::FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
    unsigned long long on_cpu = 0, waited = 0;
    if (!f) return 0;
    if (std::fscanf(f, "%llu %llu", &on_cpu, &waited) != 2) waited = 0;
    std::fclose(f);
    return waited;
}
