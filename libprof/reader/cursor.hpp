// Bounds-checked decoding of trace records (trace_reader.cpp, pack/trace_packer.cpp).
#pragma once

#include <prof/trace_format.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace prof::reader {

// Bounds-checked cursor over one chunk's records. `fail` reports whether running out of
// bytes means corruption (a complete chunk) or just the end of a cut-short file.
struct Cursor {
    const uint8_t* p;
    const uint8_t* end;
    bool ok = true;

    bool has(size_t n) const { return size_t(end - p) >= n; }
    uint8_t u8() {
        if (!has(1)) return ok = false, 0;
        return *p++;
    }
    template <typename T>
    T fixed() { // a little-endian integer of sizeof(T) bytes
        if (!has(sizeof(T))) return ok = false, T{};
        T v;
        std::memcpy(&v, p, sizeof(T));
        p += sizeof(T);
        return v;
    }
    uint32_t u32() { return fixed<uint32_t>(); }
    uint64_t u64() { return fixed<uint64_t>(); }
    int64_t sleb() { // in unsigned arithmetic: the sign extension of a 9-byte value is 1 << 63
        uint64_t v = 0;
        unsigned shift = 0;
        for (; shift < 64; shift += 7) {
            if (p == end) return ok = false, 0;
            uint8_t b = *p++;
            v |= uint64_t(b & 0x7f) << shift;
            if (!(b & 0x80)) {
                if (shift + 7 < 64 && (b & 0x40)) v |= ~uint64_t(0) << (shift + 7);
                return int64_t(v);
            }
        }
        return ok = false, 0;
    }
    uint64_t uleb() {
        uint64_t v = 0;
        for (unsigned shift = 0; shift < 64; shift += 7) {
            if (p == end) return ok = false, 0;
            uint8_t b = *p++;
            v |= uint64_t(b & 0x7f) << shift;
            if (!(b & 0x80)) return v;
        }
        return ok = false, 0; // more than 10 bytes: not a valid uleb
    }
    std::string_view str() {
        uint64_t n = uleb();
        if (!ok || n > format::kMaxString || !has(n)) return ok = false, std::string_view{};
        std::string_view s(reinterpret_cast<const char*>(p), n);
        p += n;
        return s;
    }
};

} // namespace prof::reader
