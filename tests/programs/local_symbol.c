// A static function that only the separate debug file's symbol table names (the binary is
// stripped, with a .gnu_debuglink to its .debug file) allocates a block; the process then
// ends with _exit, so the trace has no symbol table and profreport names frames from disk.
#include <stdlib.h>
#include <unistd.h>

static void* volatile keep;

__attribute__((noinline)) static void* hidden_alloc(int n) {
    void* p = malloc((size_t)n); // line 10
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void) {
    keep = hidden_alloc(4242);
    _exit(0);
}
