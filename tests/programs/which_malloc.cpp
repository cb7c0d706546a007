// Test program: an instrumented program that defines no allocator must keep glibc's malloc
// (libprof links no allocator that could interpose, mimalloc included). Prints the object
// that `malloc` and `operator new` resolve to.
#include <cstdio>
#include <cstring>
#include <dlfcn.h>

static const char* object_of(const char* symbol) {
    Dl_info info{};
    if (!dladdr(dlsym(RTLD_DEFAULT, symbol), &info) || !info.dli_fname) return "?";
    const char* slash = std::strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

__attribute__((noinline)) int work(int x) { return x * 2; }

int main() {
    std::printf("malloc=%s free=%s new=%s work=%d\n", object_of("malloc"), object_of("free"),
                object_of("_Znwm"), work(21));
    return 0;
}
