// Test program for diff's pictures: three pieces of CPU work under main, two of them sized by
// the arguments, so that two sets of runs differ where the test says. `steady` does the same
// work every run (3 x 10^5 calls of `mix`); `grows` and `shrinks` call it A and B times 10^5
// (arguments A B, default 1 1), each through `shared`, which all three call: its callers'
// shares differ between the sets.
// Prints a checksum, so that no loop is optimized out.
#include <cstdio>
#include <cstdlib>

namespace {

volatile unsigned g_sink;

__attribute__((noinline)) unsigned mix(unsigned x) {
    for (int i = 0; i < 100; ++i) x = x * 2654435761u + 0x9e3779b9u;
    return x;
}

__attribute__((noinline)) unsigned shared(unsigned x, long n) {
    for (long i = 0; i < n; ++i) x = mix(x);
    return x;
}

__attribute__((noinline)) unsigned steady() {
    return shared(1, 300000);
}

__attribute__((noinline)) unsigned grows(long n) {
    return shared(2, n);
}

__attribute__((noinline)) unsigned shrinks(long n) {
    return shared(3, n);
}

} // namespace

int main(int argc, char** argv) {
    long a = argc > 1 ? std::atol(argv[1]) : 1, b = argc > 2 ? std::atol(argv[2]) : 1;
    unsigned x = steady() ^ grows(a * 100000) ^ shrinks(b * 100000);
    g_sink = x;
    std::printf("%u\n", x);
    return 0;
}
