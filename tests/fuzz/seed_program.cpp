// Seed program of the trace reader fuzzer: one small trace with every kind of record. Calls
// (recursion, an exception through frames) in the main thread and a named second thread;
// PROF_LINE, PROF_SCOPE, PROF_FUNCTION and a C region; under profrun --mem, allocations of each
// kind, a realloc, a block freed by the other thread, a mismatched free and a leak.
#include <prof/prof.h>
#include <prof/prof.hpp>

#include <cstdio>
#include <cstdlib>
#include <new>
#include <pthread.h>
#include <stdexcept>
#include <thread>

namespace {

__attribute__((noinline)) int fib(int n) {
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) void thrower(int depth) {
    if (depth == 0) throw std::runtime_error("unwind");
    thrower(depth - 1);
}

__attribute__((noinline)) void* allocate_all() {
    PROF_FUNCTION();
    void* m = std::malloc(100);
    void* c = std::calloc(4, 25);
    m = std::realloc(m, 300);
    void* a = std::aligned_alloc(64, 128);
    int* one = new int(7);
    int* many = new int[16];
    PROF_LINE(std::free(c));
    std::free(a);
    delete one;
    delete[] many;
    char* mismatched = new char[8];
    std::free(mismatched); // the memory profiler reports new[] freed with free
    void* wide = ::operator new(32, std::align_val_t(64)); // Alloc with an alignment (1.4)
    ::operator delete(wide, std::align_val_t(64));
    wide = ::operator new(32, std::align_val_t(128));
    ::operator delete(wide); // a mismatch: another alignment
    static volatile void* leak;
    leak = std::malloc(48); // still live at the end
    return m;
}

__attribute__((noinline)) double lines(int n) {
    double s = 0;
    for (int i = 0; i < n; ++i) {
        PROF_LINE(s += i * 0.5);
    }
    {
        PROF_SCOPE("scope");
        s += fib(5);
    }
    PROF_REGION_BEGIN("region");
    s += fib(4);
    PROF_REGION_END();
    return s;
}

} // namespace

int main() {
    void* shared = nullptr;
    std::thread t([&] {
        pthread_setname_np(pthread_self(), "seed-worker");
        shared = allocate_all();
        std::printf("%d\n", fib(8));
    });
    t.join();
    std::free(shared); // allocated by the other thread
    try {
        thrower(3);
    } catch (const std::exception&) {
    }
    std::printf("%d %.1f\n", fib(10), lines(20));
    return 0;
}
