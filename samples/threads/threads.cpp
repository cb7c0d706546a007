// Sample: four threads with known, distinct call counts, to check per-thread attribution.
//
// Expected calls, computed from the code below (kThreads = 4, thread i = 0..3):
//   main         1   the main thread
//   worker       4   once per thread
//   nap          4   once per thread; sleeps kNap (10 ms) each, so it dominates wall time
//   step     10000   kStepsPerThread * (i + 1) per thread: 1000 + 2000 + 3000 + 4000
//   mix      20000   twice per step
// Per thread i: worker 1, nap 1, step 1000 * (i + 1), mix 2000 * (i + 1).
// The counts cover the functions defined in this file; std::thread code from the standard
// headers may also appear if the build instruments it.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

namespace {

constexpr int kThreads = 4;
constexpr int kStepsPerThread = 1000;
constexpr auto kNap = std::chrono::milliseconds(10);

uint64_t results[kThreads];

} // namespace

// A small hash round: cheap work whose result feeds the printed checksum.
__attribute__((noinline)) uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    return x ^ (x >> 29);
}

__attribute__((noinline)) uint64_t step(uint64_t acc, uint64_t k) {
    return mix(acc + k) ^ mix(k);
}

// Off-CPU time: shows up as wall time of nap with almost no work inside it.
__attribute__((noinline)) void nap() {
    std::this_thread::sleep_for(kNap);
}

__attribute__((noinline)) void worker(int i) {
    nap();
    uint64_t acc = static_cast<uint64_t>(i);
    for (int k = 0; k < kStepsPerThread * (i + 1); ++k) acc = step(acc, static_cast<uint64_t>(k));
    results[i] = acc;
}

int main() {
    std::thread threads[kThreads];
    for (int i = 0; i < kThreads; ++i) threads[i] = std::thread(worker, i);
    for (auto& t : threads) t.join();

    // The checksum makes the output deterministic and keeps the work observable.
    uint64_t sum = 0;
    for (uint64_t r : results) sum ^= r;
    std::printf("threads: %d, checksum %016llx\n", kThreads, static_cast<unsigned long long>(sum));
    return 0;
}
