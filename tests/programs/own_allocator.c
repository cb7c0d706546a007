/* Test program: uses its own allocator library; prints how many of its 5 mallocs reached it and
 * that malloc_usable_size still works. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

long counting_malloc_calls(void);

int main(void) {
    long before = counting_malloc_calls();
    void* p[5];
    for (int i = 0; i < 5; ++i) p[i] = malloc(24);
    long reached = counting_malloc_calls() - before;
    size_t usable = malloc_usable_size(p[0]);
    for (int i = 0; i < 5; ++i) free(p[i]);
    printf("reached=%ld usable_ok=%d\n", reached, usable >= 24);
    return 0;
}
