// Packaging test program: square() is called exactly 10 times; prints where the trace goes.
#include <prof/prof.h>
#include <prof/version.h>

#include <cstdio>

__attribute__((noinline)) int square(int x) { return x * x; }

int main() {
    int s = 0;
    for (int i = 0; i < 10; ++i) s += square(i);
    const char* trace = prof_trace_path();
    std::printf("%d %s %s\n", s, PROF_VERSION_STRING, trace ? trace : "(no trace)");
    return 0;
}
