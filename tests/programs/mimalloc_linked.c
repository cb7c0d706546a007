// A program linked with -lmimalloc: its malloc family is mimalloc's, which the memory profiler
// interposes as it does the C library's. Known counts: 1,000 mallocs of 100..1099 bytes, half
// freed; a calloc of 10,000 bytes grown by realloc to 50,000, then freed. No stdio (its buffer
// would be one more allocation).
#include <mimalloc.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    void* blocks[1000];
    for (int i = 0; i < 1000; ++i) blocks[i] = malloc(100 + (size_t)i);
    for (int i = 0; i < 500; ++i) free(blocks[i]);
    void* grown = calloc(10, 1000);
    grown = realloc(grown, 50000);
    free(grown);
    // mimalloc's own entry point: the program really uses the library it links.
    return mi_version() > 0 ? 0 : 1;
}
