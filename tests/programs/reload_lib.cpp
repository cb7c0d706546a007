// Test library built twice (tests/programs/CMakeLists.txt): libtest_reload_a.so with functions
// alpha_*, libtest_reload_b.so with functions bravo_*. Names of equal length and identical code
// give the two files the same layout, so that the loader maps the second where the first was
// and every function of one sits at the address of its counterpart in the other.
#ifndef RELOAD_PREFIX
#error RELOAD_PREFIX must be defined (the prefix of the function names)
#endif
#define RELOAD_CAT2(a, b) a##b
#define RELOAD_CAT(a, b) RELOAD_CAT2(a, b)
#define RELOAD_NAME(suffix) RELOAD_CAT(RELOAD_PREFIX, suffix)

#include <cstdlib>

// The factor is data, so that the code of the two libraries is the same byte for byte.
static volatile int factor = RELOAD_FACTOR;

extern "C" {
__attribute__((noinline)) int RELOAD_NAME(_step)(int x) {
    return x * factor + 1;
}
__attribute__((noinline)) int RELOAD_NAME(_work)(int x) {
#ifdef RELOAD_ALLOC
    // Leaks factor x 100 bytes per call: 300 for alpha, 500 for bravo.
    void* volatile leak = malloc(size_t(factor) * 100);
    (void)leak;
#endif
    return RELOAD_NAME(_step)(x) + RELOAD_NAME(_step)(x + 1);
}
}
