// Test program: tail recursion and mutual tail calls whose call counts are known from the source,
// built at -O2 through prof::instrument. With N as the argument (default 100): count_down is
// called N + 1 times (1 primitive), is_even N / 2 + 1 times and is_odd N / 2 times for even N.
// Clang turns each of these into a loop or a jump unless sibling calls are kept as calls.
#include <cstdio>
#include <cstdlib>

// noinline: the counts test tail calls, not inlining. Clang inlines is_odd into is_even, and with
// -finstrument-functions-after-inlining an inlined function has no hooks (docs/integration.md).
__attribute__((noinline)) long count_down(long n, long acc) {
    if (n == 0) return acc;
    return count_down(n - 1, acc + n);
}

__attribute__((noinline)) bool is_odd(long n);

__attribute__((noinline)) bool is_even(long n) {
    if (n == 0) return true;
    return is_odd(n - 1);
}

__attribute__((noinline)) bool is_odd(long n) {
    if (n == 0) return false;
    return is_even(n - 1);
}

int main(int argc, char** argv) {
    long n = argc > 1 ? std::atol(argv[1]) : 100;
    std::printf("%ld %d\n", count_down(n, 0), is_even(n) ? 1 : 0);
    return 0;
}
