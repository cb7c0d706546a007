// A plugin for plugin_loop.c: plug_alloc allocates the block its caller asks for.
#include <stdlib.h>

__attribute__((noinline)) void* plug_alloc(int n) {
    void* p = malloc((size_t)n); // line 5: the allocation site every load shares
    __asm__ volatile("" ::: "memory");
    return p;
}
