/* Test library: an application's own allocator (linked into the program, exporting malloc),
 * counting its calls. Under libprofmem.so the program must still get this allocator. */
#include <stddef.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void __libc_free(void*);

static long calls;

long counting_malloc_calls(void) { return calls; }
void* malloc(size_t n) { ++calls; return __libc_malloc(n); }
void* calloc(size_t a, size_t b) { ++calls; return __libc_calloc(a, b); }
void* realloc(void* p, size_t n) { ++calls; return __libc_realloc(p, n); }
void free(void* p) { __libc_free(p); }
