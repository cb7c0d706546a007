// Builds trace files byte by byte for reader tests: valid ones, and the damaged variants
// (cut short, flipped, oversized lengths) that the reader must reject or read partially.
#pragma once

#include <prof/trace_format.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace prof::test {

class TraceBuilder {
public:
    explicit TraceBuilder(uint32_t chunk_size = format::kMinChunkSize) : chunk_size_(chunk_size) {
        format::FileHeader h{};
        std::memcpy(h.magic, format::kMagic, 8);
        h.major = format::kMajor;
        h.minor = format::kMinor;
        h.header_size = format::kHeaderSize;
        h.chunk_size = chunk_size;
        h.flags = format::kFileFinished;
        h.clock_kind = uint32_t(format::ClockKind::kMonotonic);
        h.pid = 42;
        h.ticks_per_second = 1000000000;
        header_ = h;
    }

    format::FileHeader& header() { return header_; }

    // Starts a chunk of `stream` (0 = process); records appended go into it. `sync_ticks`:
    // the clock when the writer opened it (0: unknown).
    TraceBuilder& chunk(uint32_t stream, uint64_t base_ticks = 0, uint64_t sync_ticks = 0) {
        chunks_.push_back(Chunk{stream, seq_[stream]++, base_ticks, sync_ticks, {}});
        return *this;
    }
    size_t chunk_bytes() const { return chunks_.back().data.size(); }
    TraceBuilder& u8(uint8_t v) { return bytes(&v, 1); }
    TraceBuilder& u32(uint32_t v) { return bytes(&v, 4); }
    TraceBuilder& u64(uint64_t v) { return bytes(&v, 8); }
    TraceBuilder& uleb(uint64_t v) {
        do {
            uint8_t b = v & 0x7f;
            v >>= 7;
            u8(b | (v ? 0x80 : 0));
        } while (v);
        return *this;
    }
    TraceBuilder& str(const std::string& s) {
        uleb(s.size());
        return bytes(s.data(), s.size());
    }
    TraceBuilder& tag(format::Tag t) { return u8(uint8_t(t)); }
    // A sized record (tag >= 0x40): tag, uleb length, payload.
    TraceBuilder& sized(format::Tag t, const std::vector<uint8_t>& payload) {
        tag(t).uleb(payload.size());
        return bytes(payload.data(), payload.size());
    }

    // Convenience records.
    TraceBuilder& function(uint64_t address) { return tag(format::Tag::kFunction).u64(address); }
    TraceBuilder& enter(uint32_t fn, uint64_t dt) { return tag(format::Tag::kEnter).uleb(fn).uleb(dt); }
    TraceBuilder& exit(uint64_t dt) { return tag(format::Tag::kExit).uleb(dt); }
    TraceBuilder& symbol(uint64_t address, const std::string& name, const std::string& file, uint32_t line) {
        return tag(format::Tag::kSymbol).u64(address).str(name).str("").str(file).uleb(line);
    }
    TraceBuilder& end_record(uint64_t end_ticks) {
        return tag(format::Tag::kEnd).u64(end_ticks).u64(end_ticks).u64(1000000000).uleb(1).uleb(0);
    }

    std::vector<uint8_t> bytes() const {
        std::vector<uint8_t> out(format::kHeaderSize + chunks_.size() * chunk_size_, 0);
        std::memcpy(out.data(), &header_, sizeof header_);
        for (size_t i = 0; i < chunks_.size(); ++i) {
            const Chunk& c = chunks_[i];
            format::ChunkHeader h{};
            h.magic = format::kChunkMagic;
            h.kind = uint16_t(c.stream ? format::StreamKind::kThread : format::StreamKind::kProcess);
            h.stream = c.stream;
            h.seq = c.seq;
            h.used = uint32_t(c.data.size());
            h.tid = c.stream ? 1000 + c.stream : 0;
            h.base_ticks = c.base_ticks;
            h.sync_ticks = c.sync_ticks;
            uint8_t* p = out.data() + format::kHeaderSize + i * chunk_size_;
            std::memcpy(p, &h, sizeof h);
            std::memcpy(p + sizeof h, c.data.data(), c.data.size());
        }
        return out;
    }

    static void save(const std::string& path, const std::vector<uint8_t>& data) {
        std::ofstream(path, std::ios::binary | std::ios::trunc)
            .write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
    }
    void save(const std::string& path) const { save(path, bytes()); }

private:
    struct Chunk {
        uint32_t stream, seq;
        uint64_t base_ticks, sync_ticks;
        std::vector<uint8_t> data;
    };
    TraceBuilder& bytes(const void* p, size_t n) {
        auto* b = static_cast<const uint8_t*>(p);
        chunks_.back().data.insert(chunks_.back().data.end(), b, b + n);
        return *this;
    }
    uint32_t chunk_size_;
    format::FileHeader header_;
    std::vector<Chunk> chunks_;
    std::map<uint32_t, uint32_t> seq_;
};

} // namespace prof::test
