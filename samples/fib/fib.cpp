// Sample: naive recursive Fibonacci, the classic exact-call-count check for the profiler.
#include <cstdio>
#include <cstdlib>

// fib(n) makes C(n) = 1 + C(n-1) + C(n-2) calls of itself, C(0) = C(1) = 1, so
// C(n) = 2 * F(n+1) - 1: fib(20) -> 21891 calls, fib(30) (the default) -> 2692537 calls.
// noinline keeps every call in the source a real call, so the profile can count it.
__attribute__((noinline)) int fib(int n) {
    if (n < 2) return n;
    return fib(n - 1) + fib(n - 2);
}

int main(int argc, char** argv) {
    int n = 30;
    if (argc > 1) {
        char* end = nullptr;
        long value = std::strtol(argv[1], &end, 10);
        // fib(46) is the largest result that fits in an int.
        if (*argv[1] == '\0' || *end != '\0' || value < 0 || value > 46) {
            std::fprintf(stderr, "usage: %s [n]   (0 <= n <= 46, default 30)\n", argv[0]);
            return 2;
        }
        n = static_cast<int>(value);
    }
    std::printf("fib(%d) = %d\n", n, fib(n));
    return 0;
}
