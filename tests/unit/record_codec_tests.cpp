// The record codec (format/prof/record_codec.hpp): its one-store LEB128 writers give the same
// bytes as its loop writers for every length, the reader decodes them, every encoder stays
// within the room its callers reserve, and the copy of the Enter, Exit and ScopeRun encoders in
// the installed prof/prof.hpp gives the same bytes as the codec's.
#include "reader/cursor.hpp"
#include "runtime/runtime.hpp"

#include <prof/prof.hpp>
#include <prof/record_codec.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

namespace {

using prof::reader::Cursor;
namespace format = prof::format;

std::vector<uint64_t> edge_values(int random = 20000) {
    std::vector<uint64_t> v{0, 1, 0x3f, 0x40, 0x7f, 0x80, ~uint64_t(0)};
    for (unsigned bit = 0; bit < 64; ++bit) {
        uint64_t p = uint64_t(1) << bit;
        for (uint64_t x : {p - 1, p, p + 1, ~(p - 1), ~p, ~p + 1}) v.push_back(x);
    }
    std::mt19937_64 rng(42);
    for (int i = 0; i < random; ++i) v.push_back(rng() >> (rng() % 64));
    return v;
}

// Every length of LEB128 (1 to 10 bytes) and its edges, a few values each.
std::vector<uint64_t> length_edges() {
    std::vector<uint64_t> v{0, 1};
    for (unsigned groups = 1; groups <= 9; ++groups) {
        uint64_t top = (uint64_t(1) << (7 * groups)) - 1;
        v.insert(v.end(), {top, top + 1});
    }
    v.push_back(~uint64_t(0));
    return v;
}

// 0xAA everywhere first: a byte a writer leaves out of the encoding must not count.
constexpr uint8_t kCanary = 0xAA;
struct Buffer {
    uint8_t bytes[256];
    Buffer() { std::memset(bytes, kCanary, sizeof bytes); }
    // Bytes written (not canaries) from the start: an upper bound of what the encoder touched.
    size_t touched() const {
        size_t n = sizeof bytes;
        while (n && bytes[n - 1] == kCanary) --n;
        return n;
    }
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
        CHECK(slow.touched() == n_slow);
        CHECK(fast.touched() <= n_fast + format::kLebScratch);
        Cursor c{fast.bytes, fast.bytes + n_fast};
        CHECK(read(c) == v);
        CHECK((c.ok && c.p == c.end));
    }
}

TEST_CASE("the one-store uleb writer matches the loop writer and decodes") {
    check_writers<uint64_t>(format::put_uleb, format::put_uleb_fast,
                            [](Cursor& c) { return c.uleb(); });
}

TEST_CASE("the one-store sleb writer matches the loop writer and decodes") {
    check_writers<int64_t>(format::put_sleb, format::put_sleb_fast,
                           [](Cursor& c) { return c.sleb(); });
}

TEST_CASE("uleb_size is the length put_uleb writes") {
    for (uint64_t v : edge_values(2000)) {
        uint8_t b[16];
        CAPTURE(v);
        CHECK(format::uleb_size(v) == uint32_t(format::put_uleb(b, v) - b));
    }
}

// prof/prof.hpp is installed and used inside programs: it cannot include the codec, so it keeps
// a copy of the three encoders its inline paths use. The copy must give the same bytes.
TEST_CASE("prof.hpp's inline encoders give the codec's bytes") {
    std::vector<uint64_t> values = length_edges();
    for (uint64_t v : edge_values(200)) values.push_back(v);
    for (uint64_t v : values) {
        CAPTURE(v);
        Buffer a, b;
        size_t n = size_t(format::put_uleb(a.bytes, v) - a.bytes);
        REQUIRE(size_t(prof::detail::put_uleb(b.bytes, v) - b.bytes) == n);
        CHECK(std::memcmp(a.bytes, b.bytes, sizeof a.bytes) == 0);
    }
    std::vector<uint64_t> edges = length_edges();
    for (uint64_t x : edges)
        for (uint64_t y : edges) {
            CAPTURE(x);
            CAPTURE(y);
            Buffer a, b;
            size_t n = size_t(format::put_enter(a.bytes, x, y) - a.bytes);
            REQUIRE(size_t(prof::detail::put_enter(b.bytes, x, y) - b.bytes) == n);
            CHECK(std::memcmp(a.bytes, b.bytes, sizeof a.bytes) == 0);
            Buffer c, d;
            n = size_t(format::put_scope_run(c.bytes, x, y, x ^ y, y - x) - c.bytes);
            REQUIRE(size_t(prof::detail::put_scope_run(d.bytes, x, y, x ^ y, y - x) - d.bytes) ==
                    n);
            CHECK(std::memcmp(c.bytes, d.bytes, sizeof c.bytes) == 0);
            CHECK(c.touched() == n);
        }
    for (uint64_t x : edges) {
        CAPTURE(x);
        Buffer a, b;
        size_t n = size_t(format::put_exit(a.bytes, x) - a.bytes);
        REQUIRE(size_t(prof::detail::put_exit(b.bytes, x) - b.bytes) == n);
        CHECK(std::memcmp(a.bytes, b.bytes, sizeof a.bytes) == 0);
    }
}

TEST_CASE("prof.hpp's time delta is the runtime's") {
    for (uint64_t last : {uint64_t(0), uint64_t(5), uint64_t(1) << 40, ~uint64_t(0)})
        for (uint64_t now : {uint64_t(0), uint64_t(4), uint64_t(5), uint64_t(6), ~uint64_t(0)}) {
            prof_chunk_writer a{}, b{};
            a.last_ticks = b.last_ticks = last;
            CHECK(prof::detail::take_delta(a, now) == prof::rt::take_delta(b, now));
            CHECK(a.last_ticks == b.last_ticks);
        }
}

// The room the runtime reserves for a record (ensure_bytes) covers its longest encoding and the
// one-store writers' scratch.
TEST_CASE("the memory record encoders stay within their stated room") {
    const uint64_t big = ~uint64_t(0);
    const int64_t far = INT64_MIN;
    Buffer a;
    uint8_t* end = format::put_alloc(a.bytes, big, far, big, UINT32_MAX, 3, uint64_t(1) << 63);
    CHECK(size_t(end - a.bytes) == format::kMaxAllocRecord);
    CHECK(a.touched() <= format::kMaxAllocRecord + format::kLebScratch);
    Buffer f;
    end = format::put_free(f.bytes, big, far, 2, uint64_t(1) << 63);
    CHECK(size_t(end - f.bytes) == format::kMaxFreeRecord);
    CHECK(f.touched() <= format::kMaxFreeRecord + format::kLebScratch);
    Buffer r;
    end = format::put_realloc(r.bytes, big, far, far, big, UINT32_MAX);
    CHECK(size_t(end - r.bytes) == format::kMaxReallocRecord);
    CHECK(r.touched() <= format::kMaxReallocRecord + format::kLebScratch);
    Buffer l;
    end = format::put_line_stats(l.bytes, {big, big, big, big, big, far, big, far, big});
    CHECK(size_t(end - l.bytes) == format::kMaxLineStatsRecord);
    CHECK(l.touched() == format::kMaxLineStatsRecord);
    Buffer e;
    end = format::put_enter_address(e.bytes, big, big);
    CHECK(size_t(end - e.bytes) == format::kMaxEventRecord);
    Buffer s;
    end = format::put_sample(s.bytes, big, big, big, big, big, true, big, big);
    CHECK(size_t(end - s.bytes) == format::kMaxSampleRecord);
    CHECK(s.touched() == format::kMaxSampleRecord);
    Buffer n;
    end = format::put_call_node(n.bytes, big, big, big);
    CHECK(size_t(end - n.bytes) == format::kMaxCallNodeRecord);
    CHECK(n.touched() == format::kMaxCallNodeRecord);
    Buffer k;
    end = format::put_counting(k.bytes, big, big);
    CHECK(size_t(end - k.bytes) == format::kMaxCountingRecord);
    Buffer o;
    end = format::put_position(o.bytes, big);
    CHECK(size_t(end - o.bytes) == format::kMaxPositionRecord);
}

// A sized record's length covers its payload exactly, and the payload decodes field by field.
TEST_CASE("the sized record encoders write their length and payload") {
    auto payload = [](const uint8_t* rec, const uint8_t* end, format::Tag tag) {
        Cursor c{rec, end};
        REQUIRE(c.u8() == uint8_t(tag));
        uint64_t n = c.uleb();
        REQUIRE(c.ok);
        REQUIRE(uint64_t(end - c.p) == n);
        return Cursor{c.p, end};
    };
    Buffer b;
    uint8_t* end = format::put_alloc(b.bytes, 300, -5, 1 << 20, 7, 3, 64);
    Cursor c = payload(b.bytes, end, format::Tag::kAlloc);
    CHECK(c.uleb() == 300);
    CHECK(c.sleb() == -5);
    CHECK(c.uleb() == 1 << 20);
    CHECK(c.uleb() == 7);
    CHECK(c.u8() == 3);
    CHECK(c.uleb() == 64);
    CHECK((c.ok && c.p == c.end));

    uintptr_t pcs[20];
    for (unsigned i = 0; i < 20; ++i) pcs[i] = 0x400000 + i;
    end = format::put_stack(b.bytes, 129, pcs, 20); // a payload over 127 bytes: a 2-byte length
    c = payload(b.bytes, end, format::Tag::kStack);
    CHECK(c.uleb() == 129);
    CHECK(c.uleb() == 20);
    for (unsigned i = 0; i < 20; ++i) CHECK(c.u64() == 0x400000 + i);
    CHECK((c.ok && c.p == c.end));

    std::vector<uint8_t> big(5000);
    const std::string file(200, 'f'), fn = "int main()", label = "x = 1";
    end =
        format::put_site(big.data(), {0x1234, format::SiteKind::kLine, 42, file.data(), file.size(),
                                      fn.data(), fn.size(), label.data(), label.size()});
    c = payload(big.data(), end, format::Tag::kSite);
    CHECK(c.u64() == 0x1234);
    CHECK(c.u8() == uint8_t(format::SiteKind::kLine));
    CHECK(c.uleb() == 42);
    CHECK(c.str() == file);
    CHECK(c.str() == fn);
    CHECK(c.str() == label);
    CHECK((c.ok && c.p == c.end));

    end = format::put_unload(b.bytes, 1, 2, 3, 4);
    c = payload(b.bytes, end, format::Tag::kUnload);
    for (uint64_t v : {1, 2, 3, 4}) CHECK(c.u64() == v);
    CHECK((c.ok && c.p == c.end));

    end = format::put_pause(b.bytes, 1000);
    c = payload(b.bytes, end, format::Tag::kPause);
    CHECK(c.uleb() == 1000);
    CHECK((c.ok && c.p == c.end));

    end = format::put_sample(b.bytes, 10400, 123456789012, 4000000, 1, 3);
    c = payload(b.bytes, end, format::Tag::kSample);
    for (uint64_t v :
         {uint64_t(10400), uint64_t(123456789012), uint64_t(4000000), uint64_t(1), uint64_t(3)})
        CHECK(c.uleb() == v);
    CHECK((c.ok && c.p == c.end));
    // 1.9: a counting thread's sample names its node (0 too), and any the instruction it
    // interrupted (none: 0, not written).
    end = format::put_sample(b.bytes, 5, 6, 7, 0, 1, true, 0);
    c = payload(b.bytes, end, format::Tag::kSample);
    for (uint64_t v : {5, 6, 7, 0, 1, 0}) CHECK(c.uleb() == v);
    CHECK((c.ok && c.p == c.end));
    end = format::put_sample(b.bytes, 5, 6, 7, 0, 1, false, 0, 0x401234);
    c = payload(b.bytes, end, format::Tag::kSample);
    for (uint64_t v : {5, 6, 7, 0, 1, 0x401234}) CHECK(c.uleb() == v);
    CHECK((c.ok && c.p == c.end));
    // The longest one still has a one-byte length.
    end = format::put_sample(b.bytes, ~uint64_t(0), ~uint64_t(0), ~uint64_t(0), ~uint64_t(0),
                             ~uint64_t(0), true, ~uint64_t(0), ~uint64_t(0));
    c = payload(b.bytes, end, format::Tag::kSample);
    CHECK(b.bytes[1] == format::kMaxSampleRecord - 2);

    end = format::put_counting(b.bytes, 777, 888);
    c = payload(b.bytes, end, format::Tag::kCounting);
    CHECK(c.uleb() == 777);
    CHECK(c.uleb() == 888);
    CHECK((c.ok && c.p == c.end));
    end = format::put_call_node(b.bytes, 300, 299, 5);
    c = payload(b.bytes, end, format::Tag::kCallNode);
    for (uint64_t v : {300, 299, 5}) CHECK(c.uleb() == v);
    CHECK((c.ok && c.p == c.end));
    end = format::put_position(b.bytes, 70000);
    c = payload(b.bytes, end, format::Tag::kPosition);
    CHECK(c.uleb() == 70000);
    CHECK((c.ok && c.p == c.end));
    // A block of 300 counts at every alignment: a two-byte length, then padding so that its
    // counts, the last 2,400 bytes, all 0, start at a multiple of 8; within the most it takes.
    std::vector<uint8_t> counts(format::call_counts_size(129, 300) + 16, 0xee);
    for (size_t at = 0; at < 8; ++at) {
        CAPTURE(at);
        std::fill(counts.begin(), counts.end(), 0xee);
        end = format::put_call_counts(counts.data() + at, 129, 300);
        CHECK(size_t(end - (counts.data() + at)) <= format::call_counts_size(129, 300));
        CHECK(reinterpret_cast<uintptr_t>(end - 2400) % 8 == 0);
        CHECK(*end == 0xee);
        c = payload(counts.data() + at, end, format::Tag::kCallCounts);
        CHECK(c.uleb() == 129);
        CHECK(c.uleb() == 300);
        uint8_t pad = c.u8();
        CHECK(pad <= 15);
        for (unsigned i = 0; i < pad; ++i) CHECK(c.u8() == 0);
        for (int i = 0; i < 300; ++i) CHECK(c.u64() == 0);
        CHECK((c.ok && c.p == c.end));
    }
}

TEST_CASE("a CallLatency record is aligned at every offset, and its buckets tile the durations") {
    // 1.13: the fields after the padding start at a multiple of 8, all 0, within the most the
    // record takes.
    const uint32_t n = format::kLatencyBuckets;
    const size_t fields = format::latency_fields_size(n);
    std::vector<uint8_t> rec(format::call_latency_size(70000, n) + 16, 0xee);
    for (size_t at = 0; at < 8; ++at) {
        CAPTURE(at);
        std::fill(rec.begin(), rec.end(), 0xee);
        uint8_t* end = format::put_call_latency(rec.data() + at, 70000, n);
        CHECK(size_t(end - (rec.data() + at)) <= format::call_latency_size(70000, n));
        CHECK(reinterpret_cast<uintptr_t>(end - fields) % 8 == 0);
        CHECK(*end == 0xee);
        Cursor c{rec.data() + at, end};
        REQUIRE(c.u8() == uint8_t(format::Tag::kCallLatency));
        uint64_t length = c.uleb();
        REQUIRE((c.ok && uint64_t(end - c.p) == length));
        CHECK(c.uleb() == 70000);
        CHECK(c.uleb() == n);
        uint8_t pad = c.u8();
        CHECK(pad <= 15);
        for (unsigned i = 0; i < pad; ++i) CHECK(c.u8() == 0);
        for (int i = 0; i < 4; ++i) CHECK(c.u64() == 0);
        for (uint32_t i = 0; i < n; ++i) CHECK(c.u32() == 0);
        CHECK((c.ok && c.p == c.end));
    }
    // Bucket b holds exactly [low(b), low(b + 1)): consecutive, from 0, each at most 1/8 of its
    // lower bound wide past the first 8 (which hold one duration each).
    CHECK(format::latency_bucket_low(0) == 0);
    for (uint32_t b = 0; b + 1 < n; ++b) {
        CAPTURE(b);
        uint64_t low = format::latency_bucket_low(b), next = format::latency_bucket_low(b + 1);
        REQUIRE(next > low);
        CHECK(format::latency_bucket(low) == b);
        CHECK(format::latency_bucket(next - 1) == b);
        if (b >= 8)
            CHECK(8 * (next - low) <= low);
        else
            CHECK(next - low == 1);
    }
    CHECK(format::latency_bucket_low(n) == uint64_t(1) << 42);
    CHECK(format::latency_bucket(UINT64_MAX) == (63 - 2) * 8 + 7);
}
