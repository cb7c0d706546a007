// The runtime's LEB128 writers: the one-store writers of the allocation path give the same
// bytes as the loop writers, for every length, and the reader decodes them.
#include "reader/cursor.hpp"
#include "runtime/thread_state.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

namespace {

using prof::reader::Cursor;

std::vector<uint64_t> edge_values() {
    std::vector<uint64_t> v{0, 1, 0x3f, 0x40, 0x7f, 0x80, ~uint64_t(0)};
    for (unsigned bit = 0; bit < 64; ++bit) {
        uint64_t p = uint64_t(1) << bit;
        for (uint64_t x : {p - 1, p, p + 1, ~(p - 1), ~p, ~p + 1}) v.push_back(x);
    }
    std::mt19937_64 rng(42);
    for (int i = 0; i < 20000; ++i) v.push_back(rng() >> (rng() % 64));
    return v;
}

// 0xAA everywhere first: a byte the fast writer leaves out of the encoding must not count.
struct Buffer {
    uint8_t bytes[32];
    Buffer() { std::memset(bytes, 0xAA, sizeof bytes); }
};

} // namespace

// Each value written by both writers: the same length and bytes, and read back whole.
template <typename Value, typename Slow, typename Fast, typename Read>
void check_writers(Slow slow_write, Fast fast_write, Read read) {
    for (uint64_t u : edge_values()) {
        auto v = Value(u);
        Buffer slow, fast;
        size_t n_slow = size_t(slow_write(slow.bytes, v) - slow.bytes);
        size_t n_fast = size_t(fast_write(fast.bytes, v) - fast.bytes);
        CAPTURE(v);
        REQUIRE(n_fast == n_slow);
        REQUIRE(std::memcmp(slow.bytes, fast.bytes, n_slow) == 0);
        Cursor c{fast.bytes, fast.bytes + n_fast};
        CHECK(read(c) == v);
        CHECK((c.ok && c.p == c.end));
    }
}

TEST_CASE("the one-store uleb writer matches the loop writer and decodes") {
    check_writers<uint64_t>(prof::rt::put_uleb, prof::rt::put_uleb_fast,
                            [](Cursor& c) { return c.uleb(); });
}

TEST_CASE("the one-store sleb writer matches the loop writer and decodes") {
    check_writers<int64_t>(prof::rt::put_sleb, prof::rt::put_sleb_fast,
                           [](Cursor& c) { return c.sleb(); });
}
