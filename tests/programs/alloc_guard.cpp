// Test program: the runtime never calls the application's allocator while tracing. This
// program defines its own malloc family (forwarding to glibc's) and counts calls; fib(25)
// records ~485 k events, enough to open many trace chunks and define functions, and must not
// change the count. It also prints which object the process's `malloc` resolves to.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>

extern "C" void* __libc_malloc(size_t);
extern "C" void* __libc_calloc(size_t, size_t);
extern "C" void* __libc_realloc(void*, size_t);
extern "C" void __libc_free(void*);

static std::atomic<long> g_calls{0};

extern "C" __attribute__((no_instrument_function)) void* malloc(size_t n) { ++g_calls; return __libc_malloc(n); }
extern "C" __attribute__((no_instrument_function)) void* calloc(size_t a, size_t b) { ++g_calls; return __libc_calloc(a, b); }
extern "C" __attribute__((no_instrument_function)) void* realloc(void* p, size_t n) { ++g_calls; return __libc_realloc(p, n); }
extern "C" __attribute__((no_instrument_function)) void free(void* p) { if (p) ++g_calls; __libc_free(p); }

__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main() {
    long before = g_calls.load();
    int r = fib(25);
    long during = g_calls.load() - before;
    Dl_info info{};
    dladdr(dlsym(RTLD_DEFAULT, "malloc"), &info);
    const char* slash = info.dli_fname ? std::strrchr(info.dli_fname, '/') : nullptr;
    std::printf("fib=%d allocator_calls_during_tracing=%ld malloc_from=%s\n", r, during,
                slash ? slash + 1 : (info.dli_fname ? info.dli_fname : "?"));
    return 0;
}
