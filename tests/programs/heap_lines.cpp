// Marked lines under the memory profiler: no_heap's lines allocate nothing (their heap
// increment is exactly 0), some_heap's first line allocates 100000 bytes.
#include <prof/prof.hpp>

#include <cstdio>
#include <cstdlib>

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

int main() {
    no_heap();
    some_heap();
    std::printf("%d\n", sink);
    return 0;
}
