// Test program for diff --memory (run unmodified under libprofmem.so):
//   alloc_amount N [LEAK]
// grow() allocates N blocks of 1000 bytes, all live at once, then frees them; keep() leaks
// LEAK bytes (default 0: no call). Two runs with different N or LEAK differ by exactly that.
// Built with frame pointers so that stacks name grow() and keep().
#include <cstdio>
#include <cstdlib>
#include <vector>

static void* volatile g_escape;

__attribute__((noinline)) void grow(int n) {
    void* blocks[1000];
    if (n > 1000) n = 1000;
    for (int i = 0; i < n; ++i) g_escape = blocks[i] = std::malloc(1000);
    for (int i = 0; i < n; ++i) std::free(blocks[i]);
}

__attribute__((noinline)) void keep(size_t bytes) { g_escape = std::malloc(bytes); }

int main(int argc, char** argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 10;
    long leak = argc > 2 ? std::atol(argv[2]) : 0;
    grow(n);
    if (leak > 0) keep(size_t(leak));
    std::printf("grew %d, leaked %ld\n", n, leak);
    return 0;
}
