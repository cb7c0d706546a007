/* Test program: tail_calls.cpp in C (C and C++ get the same recipe). With N as the argument
 * (default 100): c_count_down is called N + 1 times, c_is_even N / 2 + 1 times and c_is_odd
 * N / 2 times for even N. */
#include <stdio.h>
#include <stdlib.h>

/* noinline: the counts test tail calls, not inlining (see tail_calls.cpp). */
__attribute__((noinline)) long c_count_down(long n, long acc) {
    if (n == 0) return acc;
    return c_count_down(n - 1, acc + n);
}

__attribute__((noinline)) int c_is_odd(long n);

__attribute__((noinline)) int c_is_even(long n) {
    if (n == 0) return 1;
    return c_is_odd(n - 1);
}

__attribute__((noinline)) int c_is_odd(long n) {
    if (n == 0) return 0;
    return c_is_even(n - 1);
}

int main(int argc, char** argv) {
    long n = argc > 1 ? atol(argv[1]) : 100;
    printf("%ld %d\n", c_count_down(n, 0), c_is_even(n));
    return 0;
}
