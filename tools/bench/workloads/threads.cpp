// Benchmark workload: 4 threads, each running a call-heavy loop of small out-of-line functions.
// Argument: loop iterations per thread (3 calls each).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#define BENCH_CALL __attribute__((noipa)) // a real call in every build variant

BENCH_CALL uint64_t rotate(uint64_t x) { return (x << 13) | (x >> 51); }

BENCH_CALL uint64_t scramble(uint64_t x, uint64_t i) { return (x ^ i) * 0x9E3779B97F4A7C15ull; }

BENCH_CALL uint64_t step(uint64_t acc, uint64_t i) { return rotate(acc) + scramble(acc, i); }

BENCH_CALL uint64_t worker(uint64_t seed, uint64_t iters) {
    uint64_t acc = seed;
    for (uint64_t i = 0; i < iters; ++i) acc = step(acc, i);
    return acc;
}

int main(int argc, char** argv) {
    uint64_t iters = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 800000;
    constexpr int kThreads = 4;
    std::vector<uint64_t> out(kThreads);
    std::vector<std::thread> pool;
    for (int t = 0; t < kThreads; ++t)
        pool.emplace_back([&out, t, iters] { out[t] = worker(uint64_t(t) + 1, iters); });
    for (std::thread& th : pool) th.join();
    uint64_t sum = 0;
    for (uint64_t v : out) sum ^= v;
    std::printf("threads checksum %llu\n", (unsigned long long)sum);
    return 0;
}
