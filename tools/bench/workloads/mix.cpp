// Benchmark workload: a realistic mix of small STL-heavy calls (sort with an out-of-line
// comparator, std::map updates and lookups, a hash, short strings). Argument: size scale.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#define BENCH_CALL __attribute__((noipa)) // a real call in every build variant

namespace {

struct Rec {
    uint32_t key;
    uint32_t val;
};

uint64_t g_rng = 0x9E3779B97F4A7C15ull;

uint32_t next_rand() { // inlined: user code whose hooks stay in instrumented builds
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(g_rng >> 33);
}

} // namespace

BENCH_CALL bool by_key(const Rec& a, const Rec& b) {
    return a.key != b.key ? a.key < b.key : a.val < b.val;
}

BENCH_CALL void bump(std::map<uint32_t, uint64_t>& m, uint32_t k) { ++m[k]; }

BENCH_CALL uint64_t lookup(const std::map<uint32_t, uint64_t>& m, uint32_t k) {
    auto it = m.find(k);
    return it == m.end() ? 0 : it->second;
}

BENCH_CALL uint64_t mix_hash(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

BENCH_CALL std::string make_name(uint32_t i) { // fits the small-string buffer: no allocation
    return "item-" + std::to_string(i % 100000);
}

BENCH_CALL size_t name_len(const std::string& s) {
    return s.size() + size_t(s.empty() ? 0 : s.back());
}

int main(int argc, char** argv) {
    double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
    const size_t n_sort = size_t(250000 * scale), n_bump = size_t(200000 * scale),
                 n_lookup = size_t(1500000 * scale), n_hash = size_t(1500000 * scale),
                 n_name = size_t(1000000 * scale);
    uint64_t sum = 0;

    std::vector<Rec> recs(n_sort);
    for (Rec& r : recs) r = Rec{next_rand() % 100000, next_rand()};
    std::sort(recs.begin(), recs.end(), by_key);
    sum += recs.front().key + recs.back().key;

    std::map<uint32_t, uint64_t> counts;
    for (size_t i = 0; i < n_bump; ++i) bump(counts, next_rand() % 4096);
    for (size_t i = 0; i < n_lookup; ++i) sum += lookup(counts, next_rand() % 8192);

    for (size_t i = 0; i < n_hash; ++i) sum += mix_hash(i);

    for (size_t i = 0; i < n_name; ++i) sum += name_len(make_name(next_rand()));

    std::printf("mix checksum %llu\n", (unsigned long long)sum);
    return 0;
}
