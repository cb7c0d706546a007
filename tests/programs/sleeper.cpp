// Test program: a function that sleeps 50 ms, called once from main, and a caller chain whose
// cumulative times must nest (outer >= middle >= sleep_50ms).
#include <chrono>
#include <thread>

__attribute__((noinline)) void sleep_50ms() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }
__attribute__((noinline)) void middle() { sleep_50ms(); }
__attribute__((noinline)) void outer() { middle(); }

int main() {
    outer();
    return 0;
}
