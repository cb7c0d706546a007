// Benchmark workload: allocation-heavy, 2 threads (after the research note's alloc.cpp).
// Argument: alloc+free pairs per thread (default 2,000,000). Each thread:
//  - N times: allocates a block of a mixed size (70 % 16-127 B, 25 % 128-1023 B, 5 % 1-64 KiB),
//    half with malloc/free, half with new[]/delete[], into a 4096-slot live window (the slot's
//    previous block is freed first), touching the block's first byte;
//  - N/8 realloc growth steps of one buffer (+64..+1087 B per step), restarted (freed and
//    started again from realloc(nullptr, ...)) every 64 steps;
//  - frees what is left.
// It prints the exact number of allocator calls it made (malloc/new[]/realloc + free/delete[])
// and the number of allocations (malloc/new[]/realloc) on stdout: the benchmark's denominators.
// Every allocation happens three frames below the thread function (worker -> churn/grow ->
// allocate), all out of line, so every build variant has the same call path.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#define BENCH_CALL __attribute__((noipa)) // a real call in every build variant

namespace {

constexpr unsigned kWindow = 4096;

// One cache line per thread: the two threads' counters are updated on every call, and when they
// shared a line (whether they did depended on where the main thread's stack began, so on the
// run) the line moved between the CPUs on every increment: up to 0.25 s more in half the
// profiled runs, which made the memory configs' figures swing by 2x between runs.
struct alignas(64) Counts {
    uint64_t allocs = 0, frees = 0, reallocs = 0;
};

inline uint64_t next(uint64_t& x) { // xorshift64*
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 0x2545F4914F6CDD1Dull;
}

struct Slot {
    char* p;
    bool array; // allocated with new[]
};

BENCH_CALL size_t pick_size(uint64_t r) {
    unsigned bucket = unsigned(r % 100);
    r >>= 8;
    if (bucket < 70) return 16 + r % 112;     // 16-127 B
    if (bucket < 95) return 128 + r % 896;    // 128-1023 B
    return 1024 + r % (63 * 1024 + 1);        // 1-64 KiB
}

BENCH_CALL char* allocate(size_t n, bool array, Counts& c) {
    ++c.allocs;
    char* p = array ? new char[n] : static_cast<char*>(std::malloc(n));
    p[0] = char(n);
    return p;
}

BENCH_CALL void release(Slot& s, Counts& c) {
    if (!s.p) return;
    ++c.frees;
    if (s.array) delete[] s.p;
    else std::free(s.p);
    s.p = nullptr;
}

BENCH_CALL uint64_t churn(Slot* window, uint64_t n, uint64_t& rng, Counts& c) {
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; ++i) {
        uint64_t r = next(rng);
        Slot& s = window[(r >> 40) % kWindow];
        release(s, c);
        bool array = (r >> 63) != 0;
        s.p = allocate(pick_size(r), array, c);
        s.array = array;
        sum += uint8_t(s.p[0]);
    }
    return sum;
}

BENCH_CALL char* grow_step(char* buf, size_t size, Counts& c) {
    ++c.reallocs;
    char* p = static_cast<char*>(std::realloc(buf, size));
    p[size - 1] = 1;
    return p;
}

BENCH_CALL uint64_t grow(uint64_t steps, uint64_t& rng, Counts& c) {
    char* buf = nullptr;
    size_t size = 0;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < steps; ++i) {
        if (i % 64 == 0 && buf) {
            ++c.frees;
            std::free(buf);
            buf = nullptr;
            size = 0;
        }
        size += 64 + next(rng) % 1024;
        buf = grow_step(buf, size, c);
        sum += uint8_t(buf[size - 1]);
    }
    if (buf) {
        ++c.frees;
        std::free(buf);
    }
    return sum;
}

BENCH_CALL uint64_t worker(unsigned id, uint64_t n, Counts& c) {
    uint64_t rng = 0x9E3779B97F4A7C15ull * (id + 1);
    Slot* window = static_cast<Slot*>(std::calloc(kWindow, sizeof(Slot)));
    ++c.allocs;
    uint64_t sum = churn(window, n, rng, c);
    sum += grow(n / 8, rng, c);
    for (unsigned i = 0; i < kWindow; ++i) release(window[i], c);
    ++c.frees;
    std::free(window);
    return sum;
}

} // namespace

int main(int argc, char** argv) {
    uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2000000;
    constexpr unsigned kThreads = 2;
    Counts counts[kThreads];
    uint64_t sums[kThreads] = {};
    std::thread pool[kThreads];
    for (unsigned t = 0; t < kThreads; ++t)
        pool[t] = std::thread([&, t] { sums[t] = worker(t, n, counts[t]); });
    for (std::thread& th : pool) th.join();
    uint64_t calls = 0, allocations = 0, sum = 0;
    for (unsigned t = 0; t < kThreads; ++t) {
        calls += counts[t].allocs + counts[t].frees + counts[t].reallocs;
        allocations += counts[t].allocs + counts[t].reallocs;
        sum += sums[t];
    }
    std::printf("alloc: %llu allocator calls, %llu allocations, checksum %llu\n",
                (unsigned long long)calls, (unsigned long long)allocations,
                (unsigned long long)sum);
    return 0;
}
