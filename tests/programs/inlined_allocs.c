// Test program: allocations made in functions that are always inlined, once and twice deep.
// A memory stack names each inlined function as a frame of its own, innermost first, each at
// its own line: the line of the allocation in the innermost, then the line where each was
// inlined in its caller. Each allocation's bytes say where it comes from; the `line: NAME`
// comments name the lines tests/e2e/memory_lines_tests.cpp expects in the stacks.
#include <stdio.h>
#include <stdlib.h>

#if defined(__clang__)
#define OPAQUE __attribute__((noinline, optnone))
#else
#define OPAQUE __attribute__((noipa))
#endif
#define INLINED static inline __attribute__((always_inline))

OPAQUE void keep(void* p) {
    (void)p;
}

INLINED void* allocate_something(size_t n) {
    return malloc(n); // line: site
}

INLINED void* allocate_through(size_t n) {
    return allocate_something(n); // line: through
}

OPAQUE void foo(void) {
    keep(allocate_something(100)); // line: foo 100
}

OPAQUE void bar(void) {
    keep(allocate_something(200)); // line: bar 200
    keep(allocate_through(300));   // line: bar 300
}

int main(void) {
    foo(); // line: main foo
    bar(); // line: main bar
    return 0;
}
