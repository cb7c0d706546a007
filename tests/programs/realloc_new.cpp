// Blocks allocated with new[] and new, then passed to realloc (a mismatch) and freed with
// free (which then matches: realloc returned a malloc block).
#include <cstdio>
#include <cstdlib>

__attribute__((noinline)) char* array_then_realloc() {
    char* p = new char[40];
    __asm__ volatile("" : "+r"(p)); // hide the origin from -Wmismatched-new-delete
    return static_cast<char*>(std::realloc(p, 4000));
}

__attribute__((noinline)) int* object_then_realloc() {
    int* p = new int(7);
    __asm__ volatile("" : "+r"(p));
    return static_cast<int*>(std::realloc(p, 80));
}

int main() {
    for (int i = 0; i < 3; ++i) std::free(array_then_realloc());
    std::free(object_then_realloc());
    std::puts("done");
    return 0;
}
