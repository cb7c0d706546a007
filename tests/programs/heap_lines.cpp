// Marked lines under the memory profiler: no_heap's lines allocate nothing (their heap
// increment is exactly 0), some_heap's first line allocates 100000 bytes, and grow_and_free's
// lines allocate and release blocks whose usable sizes it prints (their exact heap increments).
#include <prof/prof.hpp>

#include <cstdio>
#include <cstdlib>
#include <malloc.h>

static volatile int sink;

__attribute__((noinline)) void no_heap() {
    PROF_LINE(sink = sink + 1);
    PROF_LINE(sink = sink * 2);
}

__attribute__((noinline)) void some_heap() {
    void* p = nullptr;
    PROF_LINE(p = std::malloc(100000));
    PROF_LINE(sink = sink + (p != nullptr));
    std::free(p);
}

void grow_and_free(); // below, so that the lines above keep their numbers

int main() {
    no_heap();
    some_heap();
    grow_and_free();
    std::printf("%d\n", sink);
    return 0;
}

static void* blocks[100];

// Line 40 allocates 100 blocks, line 45 releases every other one, line 47 allocates nothing.
__attribute__((noinline)) void grow_and_free() {
    long long grown = 0, released = 0;
    for (int i = 0; i < 100; ++i) {
        PROF_LINE(blocks[i] = std::malloc(size_t(1000 + 24 * i)));
        grown += (long long)malloc_usable_size(blocks[i]);
    }
    for (int i = 0; i < 100; i += 2) {
        released += (long long)malloc_usable_size(blocks[i]);
        PROF_LINE(std::free(blocks[i]));
    }
    PROF_LINE(sink = sink + 1);
    std::printf("grown %lld released %lld\n", grown, released);
    for (int i = 1; i < 100; i += 2) std::free(blocks[i]);
}
