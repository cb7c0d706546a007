// Benchmark workload: snappy 1.1.7 (fetched by true_shares.py, never committed) compresses and
// uncompresses a file ITERATIONS times. Snappy has no command line of its own; this is the
// smallest one that runs its hot paths. It prints one line, the same for the same arguments and
// the same build of any compiler, so that a run that did other work shows.
// Usage: snappy_driver ITERATIONS FILE
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "snappy.h"

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
    }
    // FNV-1a of the last compressed form: a compiler that compressed differently would show.
    std::uint64_t hash = 14695981039346656037ull;
    for (unsigned char c : packed) hash = (hash ^ c) * 1099511628211ull;
    std::printf("snappy_driver: iterations=%ld input=%zu packed_total=%lu fnv1a=%016llx\n",
                iterations, input.size(), packed_bytes, static_cast<unsigned long long>(hash));
    return 0;
}
