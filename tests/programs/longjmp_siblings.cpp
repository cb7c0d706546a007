// Test program: a longjmp out of 5 nested calls of deep(), then a sibling call, after(), whose
// frame is larger than deep's (a 256-byte buffer). after() belongs to runner(), not to the
// deep() frames the longjmp left. Built instrumented (-finstrument-functions) and, with
// SCOPES defined, marked with PROF_SCOPE instead. runner() runs 3 times; after() sleeps 2 ms.
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#ifdef SCOPES
#include <prof/prof.hpp>
#define MARK(name) PROF_SCOPE(name)
#else
#define MARK(name) static_cast<void>(0)
#endif

static std::jmp_buf g_jump;

__attribute__((noinline)) void deep(int n) {
    MARK("deep");
    if (n == 0) std::longjmp(g_jump, 1);
    deep(n - 1);
    __asm__ volatile("");
}

__attribute__((noinline)) void after(int ms) {
    MARK("after");
    volatile char buffer[256];
    std::memset(const_cast<char*>(buffer), 0, sizeof buffer);
    usleep(ms * 1000);
}

__attribute__((noinline)) void runner() {
    MARK("runner");
    if (setjmp(g_jump) == 0) deep(4);
    after(2);
}

int main() {
    for (int i = 0; i < 3; ++i) runner();
    std::puts("ok");
    return 0;
}
