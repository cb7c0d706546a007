// Benchmark workload: snappy 1.1.7 (fetched by true_shares.py, never committed) compresses and
// uncompresses a file ITERATIONS times. Snappy has no command line of its own; this is the
// smallest one that runs its hot paths. It prints one line, the same for the same arguments and
// the same build of any compiler, so that a run that did other work shows.
// Usage: snappy_driver ITERATIONS FILE
//
// Built with -DSNAPPY_DRIVER_CHECKSUM_PASSES=N (diff_gate.py), each round trip also runs
// checksum() over a slice of the data N times: a function whose cost the build sets, so that
// a regression of known size in one function is known to be the only one.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "snappy.h"

#ifdef SNAPPY_DRIVER_CHECKSUM_PASSES
// FNV-1a over the first quarter of `data`, SNAPPY_DRIVER_CHECKSUM_PASSES times.
__attribute__((noinline)) std::uint64_t checksum(const std::string& data) {
    std::uint64_t hash = 14695981039346656037ull;
    for (int pass = 0; pass < SNAPPY_DRIVER_CHECKSUM_PASSES; ++pass)
        for (size_t i = 0; i < data.size() / 4; ++i)
            hash = (hash ^ static_cast<unsigned char>(data[i])) * 1099511628211ull;
    return hash;
}
#endif

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s ITERATIONS FILE\n", argv[0]);
        return 2;
    }
    long iterations = std::atol(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "snappy_driver: cannot read %s\n", argv[2]);
        return 2;
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string input = buffer.str();
    std::string packed, unpacked;
    unsigned long packed_bytes = 0;
    for (long i = 0; i < iterations; ++i) {
        snappy::Compress(input.data(), input.size(), &packed);
        if (!snappy::Uncompress(packed.data(), packed.size(), &unpacked) || unpacked != input) {
            std::fprintf(stderr, "snappy_driver: the round trip changed the data\n");
            return 1;
        }
        packed_bytes += packed.size();
#ifdef SNAPPY_DRIVER_CHECKSUM_PASSES
        // Its result is not printed: the output stays the same whatever the passes.
        volatile std::uint64_t sum = checksum(unpacked);
        (void)sum;
#endif
    }
    // FNV-1a of the last compressed form: a compiler that compressed differently would show.
    std::uint64_t hash = 14695981039346656037ull;
    for (unsigned char c : packed) hash = (hash ^ c) * 1099511628211ull;
    std::printf("snappy_driver: iterations=%ld input=%zu packed_total=%lu fnv1a=%016llx\n",
                iterations, input.size(), packed_bytes, static_cast<unsigned long long>(hash));
    return 0;
}
