// A function in .preinit_array, as a malloc-hook library installs one: the dynamic loader runs
// it before any constructor, and before the C library has set `environ`. It calls
// instrumented functions (so the runtime starts there, from the first hook) and allocates:
// at_preinit() calls early() 3 times and mallocs 4000 bytes; main() frees them.
// Prints whether `environ` was still null at that moment, the pid, whether PROF_FORCE is in
// main's environment, and the value of PREINIT_PROBE there (`-` when it has none).
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern char** environ;

static void* g_block;
static int g_environ_was_null = -1; // -1: the preinit function never ran

__attribute__((noinline)) int early(int i) {
    __asm__ volatile("" ::: "memory");
    return i * 2;
}

__attribute__((noinline)) void at_preinit(int argc, char** argv, char** envp) {
    (void)argc, (void)argv, (void)envp;
    g_environ_was_null = environ == NULL;
    for (int i = 0; i < 3; ++i) early(i);
    g_block = malloc(4000);
}

typedef void (*Preinit)(int, char**, char**);
__attribute__((section(".preinit_array"), used)) static const Preinit g_preinit = at_preinit;

int main(void) {
    const char* environ_then = g_environ_was_null < 0 ? "not-run" : "set";
    if (g_environ_was_null == 1) environ_then = "null";
    const char* probe = getenv("PREINIT_PROBE");
    printf("environ_at_preinit=%s pid=%d prof_force=%s probe=%s\n", environ_then, (int)getpid(),
           getenv("PROF_FORCE") ? "set" : "unset", probe ? probe : "-");
    free(g_block);
    return g_block ? 0 : 1;
}
