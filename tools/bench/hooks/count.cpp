// Counting instrumentation hooks: counts enter events in every thread and writes the total to
// the file named by COUNT_OUT (or stderr) at exit. Used once per workload for the call count.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

std::atomic<uint64_t> g_enters{0}, g_exits{0};

__attribute__((destructor)) void report() {
    const char* path = std::getenv("COUNT_OUT");
    FILE* f = path && *path ? std::fopen(path, "w") : stderr;
    if (!f) return;
    std::fprintf(f, "%llu %llu\n", (unsigned long long)g_enters.load(),
                 (unsigned long long)g_exits.load());
    if (f != stderr) std::fclose(f);
}

} // namespace

extern "C" void __cyg_profile_func_enter(void*, void*) {
    g_enters.fetch_add(1, std::memory_order_relaxed);
}

extern "C" void __cyg_profile_func_exit(void*, void*) {
    g_exits.fetch_add(1, std::memory_order_relaxed);
}
