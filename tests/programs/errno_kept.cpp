// Test program: allocation functions leave errno as the program set it, under the memory
// profiler, on every path its recording takes: a thread's first allocation, new stacks (one
// per nesting depth, each written once), resident-set samples (run with a 1 ms interval),
// and enough records to open many trace chunks. Prints how many calls changed errno.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>

static long g_changed = 0, g_calls = 0;
static void* volatile g_sink; // every block is used: no call is optimized away

static __attribute__((noinline)) void check(int expected) {
    ++g_calls;
    if (errno != expected) ++g_changed;
}

static __attribute__((noinline)) void allocate_at(int depth, int i) {
    if (depth > 0) {
        allocate_at(depth - 1, i);
        asm volatile("" ::: "memory"); // not a tail call: one frame per level
        return;
    }
    int e = 4000 + i % 7;
    errno = e;
    void* p = std::malloc(16 + size_t(i % 512));
    check(e);
    g_sink = p;
    p = std::realloc(p, 600 + size_t(i % 300));
    check(e);
    g_sink = p;
    std::free(p);
    check(e);
    char* q = new char[24];
    check(e);
    g_sink = q;
    delete[] q;
    check(e);
    void* r = std::calloc(4, 8);
    check(e);
    g_sink = r;
    std::free(r);
    check(e);
}

static __attribute__((noinline)) void work(int n) {
    for (int i = 0; i < n; ++i) allocate_at(i % 48, i);
}

int main(int argc, char** argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 60000;
    work(n);
    for (int t = 0; t < 4; ++t) {
        std::thread th([n] {
            errno = 77;
            void* p = std::malloc(40); // the thread's first allocation
            check(77);
            g_sink = p;
            std::free(p);
            check(77);
            work(n / 8);
        });
        th.join();
    }
    std::printf("calls=%ld errno_changed=%ld\n", g_calls, g_changed);
    return 0;
}
