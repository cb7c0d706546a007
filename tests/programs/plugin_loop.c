// Loads plugins in turn (argv[2...], cycling) argv[1] times: each load calls plug_alloc twice,
// frees one block at once (a temporary) and leaks the other (64 bytes), then dlcloses the
// plugin. At the end a 1 MiB block, freed at once, puts the peak heap after every leak.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
    if (argc < 3) return 2;
    int loads = atoi(argv[1]);
    int reused = 0;
    void* first = NULL;
    for (int k = 0; k < loads; ++k) {
        void* h = dlopen(argv[2 + k % (argc - 2)], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            printf("dlopen: %s\n", dlerror());
            return 1;
        }
        void* (*f)(int) = (void* (*)(int))dlsym(h, "plug_alloc");
        if (!first) first = (void*)f;
        reused += (void*)f == first;
        free(f(100));
        if (!f(64)) return 1;
        dlclose(h);
    }
    void* volatile big = malloc(1 << 20);
    free(big);
    printf("loads %d at the first address %d\n", loads, reused);
    return 0;
}
