// Test program: a program that defines its own malloc (instrumented, as the rest of it) and
// calls it three times. libprof.so brings libstdc++ into a C program, whose initializer
// allocates through this malloc before libprof.so's constructor: the profiler's call, not the
// program's, which must not be counted. Built as C (test_own_malloc) and as C++
// (test_own_malloc_cxx, where libstdc++ is the program's own and its call is the program's),
// each also with entry_counter.c's hooks (the *_counted builds): the truth.
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
extern void* __libc_malloc(size_t);

__attribute__((noinline)) void* malloc(size_t n) {
    return __libc_malloc(n);
}
#ifdef __cplusplus
}
#endif

int main(void) {
    void* blocks[3];
    for (int i = 0; i < 3; ++i) blocks[i] = malloc(16 * (size_t)(i + 1));
    printf("%d\n", blocks[0] && blocks[1] && blocks[2]);
    return 0;
}
