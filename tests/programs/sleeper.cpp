// Test program: a function that sleeps 50 ms, called once from main, and a caller chain whose
// cumulative times must nest (outer >= middle >= sleep_50ms).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

__attribute__((noinline)) void sleep_50ms() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }
__attribute__((noinline)) void middle() { sleep_50ms(); }
__attribute__((noinline)) void outer() { middle(); }

int main() {
    // With TEST_TIME_SLEEPS set, outer()'s own wall time goes to stderr: the bound of the
    // sleep's time in the trace, however late a loaded machine wakes it.
    auto before = std::chrono::steady_clock::now();
    outer();
    auto took = std::chrono::steady_clock::now() - before;
    if (std::getenv("TEST_TIME_SLEEPS"))
        std::fprintf(stderr, "outer_ns=%lld\n",
                     static_cast<long long>(
                         std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()));
    return 0;
}
