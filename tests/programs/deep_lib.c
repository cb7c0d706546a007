// Test library for RTLD_DEEPBIND (deep_bind.c): each function calls the C allocator, which a
// library opened with RTLD_DEEPBIND binds to the C library's own, past a preloaded interposer.
#include <stdlib.h>

void* deep_make(size_t n) {
    return malloc(n);
}

void* deep_zeroed(size_t n) {
    return calloc(1, n);
}

void* deep_grow(void* p, size_t n) {
    return realloc(p, n);
}

void deep_drop(void* p) {
    free(p);
}
