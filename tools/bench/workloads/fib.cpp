// Benchmark workload: naive recursive Fibonacci, one call per node (fib(32) makes 7,049,155 calls).
#include <cstdio>
#include <cstdlib>

// noipa keeps every call a real call in every build variant: no inlining, cloning or
// pure-function folding that would differ between instrumented and plain builds.
__attribute__((noipa)) long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(int argc, char** argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 32;
    std::printf("fib(%d) = %ld\n", n, fib(n));
    return 0;
}
