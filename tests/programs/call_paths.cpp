// Test program for counting threads (format 1.9): many functions and call paths. main first
// calls each of K functions once, from main (a new function and a new path each: every block of
// counts the call tree needs is made right after a new function's record), then walks paths in
// which each function calls two others picked by a seed, to a depth, so that the tree grows by
// thousands of paths. Prints the calls of the functions it made: `calls <n>`. Argument: rounds
// of walks (default 40).
#include <array>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace {

constexpr int K = 3000;
using Fn = void (*)(int, unsigned);
unsigned long g_calls;

template <int N>
__attribute__((noinline)) void f(int depth, unsigned seed);

template <int... I>
constexpr std::array<Fn, sizeof...(I)> make_table(std::integer_sequence<int, I...>) {
    return {{&f<I>...}};
}
const std::array<Fn, K> table = make_table(std::make_integer_sequence<int, K>{});

template <int N>
__attribute__((noinline)) void f(int depth, unsigned seed) {
    ++g_calls;
    if (depth <= 0) return;
    table[(seed + N) % K](depth - 1, seed * 31 + N);
    table[(seed * 7 + N) % 13](depth - 1, seed + 1);
}

} // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 40;
    for (Fn fn : table) fn(0, 0);
    for (int r = 0; r < rounds; ++r) table[unsigned(r) % K](8, unsigned(r) * 2654435761u);
    std::printf("calls %lu\n", g_calls);
    return 0;
}
