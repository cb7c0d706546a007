// render/pprof: the profile.proto message decoded field by field with a small reader of the
// protobuf wire format (no protobuf library), and the gzip wrapper inflated back with zlib.
#include "unit/render/render_support.hpp"

#include "render/pprof.hpp"

#include <zlib.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

using namespace prof;
using namespace prof::test;

namespace {

// One message's fields in wire order: numbers as varints, the rest as bytes.
struct Field {
    uint32_t number = 0;
    uint64_t varint = 0;
    std::string bytes;
    bool length_delimited = false;
};

uint64_t read_varint(const std::string& s, size_t& at) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        REQUIRE(at < s.size());
        uint8_t b = uint8_t(s[at++]);
        v |= uint64_t(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    FAIL("varint longer than 10 bytes");
    return v;
}

std::vector<Field> fields_of(const std::string& message) {
    std::vector<Field> out;
    for (size_t at = 0; at < message.size();) {
        uint64_t key = read_varint(message, at);
        Field f;
        f.number = uint32_t(key >> 3);
        switch (key & 7) {
        case 0:
            f.varint = read_varint(message, at);
            break;
        case 2: {
            uint64_t n = read_varint(message, at);
            REQUIRE(at + n <= message.size());
            f.bytes = message.substr(at, n);
            f.length_delimited = true;
            at += n;
            break;
        }
        default:
            FAIL("wire type " << (key & 7) << " is not used by profile.proto's fields here");
        }
        out.push_back(std::move(f));
    }
    return out;
}

// A repeated integer field: packed (one length-delimited run) or one varint per element.
std::vector<uint64_t> integers(const std::vector<Field>& fields, uint32_t number) {
    std::vector<uint64_t> out;
    for (const Field& f : fields) {
        if (f.number != number) continue;
        if (!f.length_delimited) {
            out.push_back(f.varint);
            continue;
        }
        for (size_t at = 0; at < f.bytes.size();) out.push_back(read_varint(f.bytes, at));
    }
    return out;
}

struct Decoded {
    std::vector<std::string> strings;                       // string_table (6)
    std::vector<std::pair<std::string, std::string>> types; // sample_type (1): type, unit
    std::vector<std::vector<uint64_t>> values;              // each sample's (2) values
    std::vector<size_t> depths;                             // each sample's location count
    size_t locations = 0, functions = 0, mappings = 0;
};

Decoded decode(const std::string& profile) {
    Decoded d;
    std::vector<Field> top = fields_of(profile);
    for (const Field& f : top)
        if (f.number == 6) d.strings.push_back(f.bytes);
    REQUIRE(!d.strings.empty());
    CHECK(d.strings[0].empty()); // string_table[0] must be ""
    for (const Field& f : top) {
        if (f.number == 1) {
            std::vector<Field> vt = fields_of(f.bytes);
            std::vector<uint64_t> type = integers(vt, 1), unit = integers(vt, 2);
            REQUIRE(type.size() == 1);
            REQUIRE(unit.size() == 1);
            REQUIRE(type[0] < d.strings.size());
            REQUIRE(unit[0] < d.strings.size());
            d.types.emplace_back(d.strings[type[0]], d.strings[unit[0]]);
        } else if (f.number == 2) {
            std::vector<Field> sample = fields_of(f.bytes);
            d.values.push_back(integers(sample, 2));
            d.depths.push_back(integers(sample, 1).size());
        } else if (f.number == 3) {
            ++d.mappings;
        } else if (f.number == 4) {
            ++d.locations;
        } else if (f.number == 5) {
            ++d.functions;
        }
    }
    return d;
}

std::vector<uint64_t> sums(const Decoded& d) {
    std::vector<uint64_t> total(d.types.size(), 0);
    for (const std::vector<uint64_t>& v : d.values) {
        REQUIRE(v.size() == d.types.size());
        for (size_t i = 0; i < v.size(); ++i) total[i] += v[i];
    }
    return total;
}

} // namespace

TEST_CASE("pprof call profile: calls and wall time per call path, summing to the trace's") {
    analysis::views::CallTree tree = render_tree();
    render::PprofProcess proc;
    proc.host = "h", proc.pid = 42, proc.tree = &tree;
    Decoded d = decode(render::pprof_profile({proc}, false));
    REQUIRE(d.types.size() == 2);
    CHECK(d.types[0] == std::make_pair(std::string("calls"), std::string("count")));
    CHECK(d.types[1] == std::make_pair(std::string("wall"), std::string("nanoseconds")));
    // Call paths: main, main>a, main>a>c, main>b, main>b>c (the two threads' main>a merge).
    CHECK(d.values.size() == 5);
    std::vector<uint64_t> total = sums(d);
    CHECK(total[0] == 8);         // main 2, a 2, b 1, c 3
    CHECK(total[1] == 150 * kMs); // every path's own time: 150 ms in all
    std::map<size_t, size_t> by_depth;
    for (size_t depth : d.depths) ++by_depth[depth];
    CHECK(by_depth == std::map<size_t, size_t>{{1, 1}, {2, 2}, {3, 2}});
    CHECK(d.functions == 4);
    // The names, escaped nowhere: a protobuf string holds any bytes.
    for (const std::string& name : {std::string("main"), std::string("a"), kB, kC})
        CHECK(std::find(d.strings.begin(), d.strings.end(), name) != d.strings.end());
    CHECK(std::find(d.strings.begin(), d.strings.end(), "host") != d.strings.end());
}

TEST_CASE("pprof heap profile: allocated and in-use objects and bytes per site") {
    analysis::Session mem;
    mem.add_trace(memory_trace());
    analysis::views::CallTree tree = mem.call_tree({});
    render::PprofProcess proc;
    proc.pid = 7, proc.tree = &tree, proc.memory = &mem.memory();
    Decoded d = decode(render::pprof_profile({proc}, true));
    REQUIRE(d.types.size() == 4);
    CHECK(d.types[0] == std::make_pair(std::string("alloc_objects"), std::string("count")));
    CHECK(d.types[1] == std::make_pair(std::string("alloc_space"), std::string("bytes")));
    CHECK(d.types[2] == std::make_pair(std::string("inuse_objects"), std::string("count")));
    CHECK(d.types[3] == std::make_pair(std::string("inuse_space"), std::string("bytes")));
    CHECK(d.values.size() == 2); // two sites
    // 3 allocations of 550 bytes; live at the end: the 50-byte leak.
    CHECK(sums(d) == std::vector<uint64_t>{3, 550, 1, 50});
}

TEST_CASE("pprof: a heap profile of a trace without allocations is refused") {
    analysis::views::CallTree tree = render_tree();
    render::PprofProcess proc;
    proc.tree = &tree;
    CHECK_THROWS_AS(render::pprof_profile({proc}, true), std::invalid_argument);
}

TEST_CASE("gzip: RFC 1952 bytes that inflate back to the input") {
    std::string data;
    for (int i = 0; i < 10000; ++i) data += char('a' + i % 26);
    std::string gz = render::gzip(data);
    REQUIRE(gz.size() > 18);
    CHECK(uint8_t(gz[0]) == 0x1f);
    CHECK(uint8_t(gz[1]) == 0x8b);
    CHECK(gz.size() < data.size());
    z_stream z{};
    REQUIRE(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK); // gzip header expected
    std::string back(data.size() + 16, '\0');
    z.next_in = reinterpret_cast<Bytef*>(gz.data());
    z.avail_in = uInt(gz.size());
    z.next_out = reinterpret_cast<Bytef*>(back.data());
    z.avail_out = uInt(back.size());
    CHECK(inflate(&z, Z_FINISH) == Z_STREAM_END);
    back.resize(z.total_out);
    inflateEnd(&z);
    CHECK(back == data);
}
