// Test program: allocation calls on consecutive lines, built at -O0, -O1 and -O2. The
// instruction after a call is often the next line's (a result kept in a register for later, an
// unused status), and after a call that never returns, the next function's: each allocation
// must be reported at the line of its call. Each line with an allocation ends with a comment
// `site: BYTES`, the bytes it allocates once; `caller of BYTES` marks the line of the call
// below an allocation's own function. tests/e2e/memory_lines_tests.cpp reads these comments.
#include <stdio.h>
#include <stdlib.h>

#if defined(__clang__)
#define OPAQUE __attribute__((noinline, optnone))
#else
#define OPAQUE __attribute__((noipa))
#endif

OPAQUE void keep(void* p) {
    (void)p;
}

OPAQUE void kept_for_later(void) {
    char* a = malloc(10);    // site: 10
    char* b = malloc(20);    // site: 20
    a = realloc(a, 100);     // site: 100
    char* c = calloc(3, 40); // site: 120
    void* d = NULL;
    int status = posix_memalign(&d, 64, 50); // site: 50
    keep(a);
    keep(b);
    keep(c);
    if (status == 0) keep(d);
}

OPAQUE void passed_on(void) {
    keep(malloc(30));        // site: 30
    keep(calloc(5, 8));      // site: 40
    keep(realloc(NULL, 60)); // site: 60
}

// The call of this function is the last instruction of main's code: its return address is
// past the end of main.
OPAQUE __attribute__((noreturn)) void finish(void) {
    keep(malloc(90)); // site: 90
    fflush(stdout);
    exit(0);
}

int main(void) {
    kept_for_later(); // caller of 10
    passed_on();      // caller of 30
    finish();         // caller of 90
}
