// Test program: allocations and frees made inside a library opened with RTLD_DEEPBIND.
//   deep_bind LIBRARY now|lazy   opens LIBRARY (a path, or a bare name found through this
//                                program's RUNPATH) with RTLD_DEEPBIND and RTLD_NOW or RTLD_LAZY
// In the library: 3 malloc(1000), 2 calloc of 2000, 1 realloc of the first block to 3000; then
// 4 frees (the grown block, one malloc'd, both calloc'd) and 1 free of a block this program
// allocated. Left live: one block of 1000 bytes. Exits 2 when the library cannot be opened.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    int mode = (strcmp(argv[2], "lazy") == 0 ? RTLD_LAZY : RTLD_NOW) | RTLD_DEEPBIND;
    void* lib = dlopen(argv[1], mode);
    if (!lib) {
        fprintf(stderr, "deep_bind: %s\n", dlerror());
        return 2;
    }
    void* (*make)(size_t) = (void* (*)(size_t))dlsym(lib, "deep_make");
    void* (*zeroed)(size_t) = (void* (*)(size_t))dlsym(lib, "deep_zeroed");
    void* (*grow)(void*, size_t) = (void* (*)(void*, size_t))dlsym(lib, "deep_grow");
    void (*drop)(void*) = (void (*)(void*))dlsym(lib, "deep_drop");
    if (!make || !zeroed || !grow || !drop) return 2;
    void* a = make(1000);
    void* b = make(1000);
    void* c = make(1000);
    void* d = zeroed(2000);
    void* e = zeroed(2000);
    a = grow(a, 3000);
    drop(a);
    drop(b);
    drop(d);
    drop(e);
    drop(malloc(500)); // this program's block, released by the library
    printf("%p\n", c); // c and the library's other live block stay
    return 0;
}
