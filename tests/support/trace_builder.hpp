// Builds trace files byte by byte for reader tests: valid ones, and the damaged variants
// (cut short, flipped, oversized lengths) that the reader must reject or read partially. Whole
// records are encoded by the format's record codec, as the runtime and profpack encode them;
// the primitives (u8, uleb, str, ...) build the others, damaged ones included.
#pragma once

#include <prof/record_codec.hpp>
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
        return encode(format::kMaxUleb, [&](uint8_t* p) { return format::put_uleb(p, v); });
    }
    TraceBuilder& sleb(int64_t v) {
        return encode(format::kMaxUleb, [&](uint8_t* p) { return format::put_sleb(p, v); });
    }
    TraceBuilder& str(const std::string& s) {
        return encode(format::kMaxUleb + s.size(),
                      [&](uint8_t* p) { return format::put_str(p, s.data(), s.size()); });
    }
    TraceBuilder& tag(format::Tag t) { return u8(uint8_t(t)); }
    // A sized record (tag >= 0x40): tag, uleb length, payload.
    TraceBuilder& sized(format::Tag t, const std::vector<uint8_t>& payload) {
        return encode(1 + format::kMaxUleb + payload.size(), [&](uint8_t* p) {
            return format::put_sized(p, t, payload.data(), payload.size());
        });
    }

    // Whole records, encoded by the codec.
    TraceBuilder& function(uint64_t address) {
        return encode(9, [&](uint8_t* p) { return format::put_function(p, address); });
    }
    TraceBuilder& enter(uint32_t fn, uint64_t dt) {
        return encode(format::kMaxEventRecord,
                      [&](uint8_t* p) { return format::put_enter(p, fn, dt); });
    }
    TraceBuilder& enter_address(uint64_t address, uint64_t dt) {
        return encode(format::kMaxEventRecord,
                      [&](uint8_t* p) { return format::put_enter_address(p, address, dt); });
    }
    TraceBuilder& exit(uint64_t dt) {
        return encode(format::kMaxEventRecord, [&](uint8_t* p) { return format::put_exit(p, dt); });
    }
    TraceBuilder& abandon(uint64_t count, uint64_t dt) {
        return encode(format::kMaxEventRecord,
                      [&](uint8_t* p) { return format::put_abandon(p, count, dt); });
    }
    TraceBuilder& thread_end(uint64_t dt) {
        return encode(format::kMaxEventRecord,
                      [&](uint8_t* p) { return format::put_thread_end(p, dt); });
    }
    TraceBuilder& pause(uint64_t ticks) {
        return encode(format::kMaxEventRecord,
                      [&](uint8_t* p) { return format::put_pause(p, ticks); });
    }
    TraceBuilder& scope_run(uint64_t dt, uint64_t fn, uint64_t count, uint64_t ticks) {
        return encode(64,
                      [&](uint8_t* p) { return format::put_scope_run(p, dt, fn, count, ticks); });
    }
    TraceBuilder& line_counts(uint64_t site, uint64_t hits, uint64_t ticks) {
        return encode(64,
                      [&](uint8_t* p) { return format::put_line_counts(p, site, hits, ticks); });
    }
    // 1.5: CPU-time samples (count 0: the timer was armed).
    // 1.9: `ip`, the instruction the sample interrupted (0: not written).
    TraceBuilder& sample(uint64_t dt, uint64_t cpu_ns, uint64_t own_ns, uint64_t own_count,
                         uint64_t count, uint64_t ip = 0) {
        return encode(format::kMaxSampleRecord, [&](uint8_t* p) {
            return format::put_sample(p, dt, cpu_ns, own_ns, own_count, count, false, 0, ip);
        });
    }
    // 1.9: a counting thread's records: its samples name a node; the start of counting, its
    // call tree nodes, their counts (a block of `calls` from node `first`), its position.
    TraceBuilder& node_sample(uint64_t dt, uint64_t cpu_ns, uint64_t own_ns, uint64_t own_count,
                              uint64_t count, uint64_t node) {
        return encode(format::kMaxSampleRecord, [&](uint8_t* p) {
            return format::put_sample(p, dt, cpu_ns, own_ns, own_count, count, true, node);
        });
    }
    TraceBuilder& counting(uint64_t dt, uint64_t cpu_ns) {
        return encode(format::kMaxCountingRecord,
                      [&](uint8_t* p) { return format::put_counting(p, dt, cpu_ns); });
    }
    TraceBuilder& call_node(uint64_t node, uint64_t parent, uint64_t fn) {
        return encode(format::kMaxCallNodeRecord,
                      [&](uint8_t* p) { return format::put_call_node(p, node, parent, fn); });
    }
    TraceBuilder& call_counts(uint64_t first, const std::vector<uint64_t>& calls) {
        return encode(format::call_counts_size(first, calls.size()), [&](uint8_t* p) {
            uint8_t* end = format::put_call_counts(p, first, calls.size());
            for (size_t i = 0; i < calls.size(); ++i)
                format::put_u64(end - 8 * (calls.size() - i), calls[i]);
            return end;
        });
    }
    // 1.13: a counted path's timed calls (the buckets: one per entry, from bucket 0).
    TraceBuilder& call_latency(uint64_t node, uint64_t calls, uint64_t sum_ticks,
                               uint64_t max_ticks, uint64_t max_end_ticks,
                               const std::vector<uint32_t>& buckets) {
        return encode(format::call_latency_size(node, buckets.size()), [&](uint8_t* p) {
            uint8_t* end = format::put_call_latency(p, node, buckets.size());
            auto* c = reinterpret_cast<format::LatencyCounts*>(
                end - format::latency_fields_size(buckets.size()));
            c->calls = calls;
            c->sum_ticks = sum_ticks;
            c->max_ticks = max_ticks;
            c->max_end_ticks = max_end_ticks;
            for (size_t i = 0; i < buckets.size(); ++i) c->buckets[i] = buckets[i];
            return end;
        });
    }
    TraceBuilder& position(uint64_t node) {
        return encode(format::kMaxPositionRecord,
                      [&](uint8_t* p) { return format::put_position(p, node); });
    }
    // Memory records: `ptr_delta` from the chunk's previous pointer; `alignment` 0: none.
    TraceBuilder& alloc(uint64_t dt, int64_t ptr_delta, uint64_t size, uint32_t stack,
                        format::AllocKind kind, uint64_t alignment = 0) {
        return encode(format::kMaxAllocRecord, [&](uint8_t* p) {
            return format::put_alloc(p, dt, ptr_delta, size, stack, uint8_t(kind), alignment);
        });
    }
    TraceBuilder& free(uint64_t dt, int64_t ptr_delta, format::FreeKind kind,
                       uint64_t alignment = 0) {
        return encode(format::kMaxFreeRecord, [&](uint8_t* p) {
            return format::put_free(p, dt, ptr_delta, uint8_t(kind), alignment);
        });
    }
    // A reading of the resident set size: at an allocation (thread stream), or of the
    // runtime's timer (process stream, 1.11).
    TraceBuilder& rss(uint64_t dt, uint64_t bytes) {
        return encode(32, [&](uint8_t* p) { return format::put_rss(p, dt, bytes); });
    }
    // A sampled trace's records (1.7, 1.8): a call stack, a sample of it, a stretch off CPU,
    // and what an address is.
    TraceBuilder& stack(uint32_t id, const std::vector<uintptr_t>& pcs) {
        return encode(32 + 8 * pcs.size(), [&](uint8_t* p) {
            return format::put_stack(p, id, pcs.data(), uint32_t(pcs.size()));
        });
    }
    TraceBuilder& stack_sample(uint64_t dt, uint32_t stack, uint64_t cpu_ns) {
        return encode(format::kMaxStackSampleRecord,
                      [&](uint8_t* p) { return format::put_stack_sample(p, dt, stack, cpu_ns); });
    }
    // `runnable` (1.11): 1 preempted, 0 blocked, -1 not known (the 1.8 record).
    TraceBuilder& off_cpu(uint64_t dt, uint32_t stack, uint64_t ns, int runnable = -1) {
        return encode(format::kMaxOffCpuRecord,
                      [&](uint8_t* p) { return format::put_off_cpu(p, dt, stack, ns, runnable); });
    }
    // 1.11: the thread's run delay at its next Sample record.
    TraceBuilder& waited(uint64_t run_delay_ns) {
        return encode(format::kMaxWaitedRecord,
                      [&](uint8_t* p) { return format::put_waited(p, run_delay_ns); });
    }
    TraceBuilder& location(uint64_t address, uint64_t function, const std::string& file,
                           uint32_t line,
                           const std::vector<format::InlinedCallFields>& inlined = {}) {
        size_t n = 64 + file.size();
        for (const auto& c : inlined) n += 32 + c.call_file_len;
        return encode(n, [&](uint8_t* p) {
            return format::put_location(p, address, function, file.data(), file.size(), line,
                                        inlined.data(), inlined.size());
        });
    }
    TraceBuilder& meta(const std::string& key, const std::string& value) {
        return encode(1 + 2 * format::kMaxUleb + key.size() + value.size(), [&](uint8_t* p) {
            return format::put_meta(p, key.data(), key.size(), value.data(), value.size());
        });
    }
    // A module whose load base is its start (or `base`), without a build id.
    TraceBuilder& module(uint64_t ticks, uint64_t start, uint64_t end, const std::string& path,
                         uint64_t base = UINT64_MAX) {
        if (base == UINT64_MAX) base = start;
        return encode(1 + 32 + 2 * format::kMaxUleb + path.size(), [&](uint8_t* p) {
            return format::put_module(
                p, {ticks, base, start, end, path.data(), path.size(), nullptr, 0});
        });
    }
    // A marked site (PROF_LINE, PROF_SCOPE, PROF_FUNCTION) at `address`.
    TraceBuilder& site(uint64_t address, format::SiteKind kind, uint64_t line,
                       const std::string& file, const std::string& function,
                       const std::string& label) {
        return encode(32 + 4 * format::kMaxUleb + file.size() + function.size() + label.size(),
                      [&](uint8_t* p) {
                          return format::put_site(p, {address, kind, line, file.data(), file.size(),
                                                      function.data(), function.size(),
                                                      label.data(), label.size()});
                      });
    }
    TraceBuilder& unload(uint64_t ticks, uint64_t start, uint64_t end) {
        return encode(64,
                      [&](uint8_t* p) { return format::put_unload(p, ticks, start, start, end); });
    }
    TraceBuilder& symbol(uint64_t address, const std::string& name, const std::string& file, uint32_t line) {
        return encode(9 + 4 * format::kMaxUleb + name.size() + file.size(), [&](uint8_t* p) {
            return format::put_symbol(p, address, name.data(), name.size(), "", 0, file.data(),
                                      file.size(), line);
        });
    }
    // The End record; a clock other than ns (`ticks_per_second`) wants a TSC clock kind too.
    TraceBuilder& end_record(uint64_t end_ticks, uint64_t ticks_per_second = 1000000000) {
        return encode(64, [&](uint8_t* p) {
            return format::put_end(p, end_ticks, end_ticks, ticks_per_second, 1, 0);
        });
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
    // Appends what `encode(p)` writes at p (at most `max` bytes, and the codec's scratch) up to
    // the end it returns.
    template <class Encode>
    TraceBuilder& encode(size_t max, Encode encode) {
        std::vector<uint8_t>& d = chunks_.back().data;
        size_t at = d.size();
        d.resize(at + max + format::kLebScratch);
        uint8_t* end = encode(d.data() + at);
        d.resize(size_t(end - d.data()));
        return *this;
    }
    uint32_t chunk_size_;
    format::FileHeader header_;
    std::vector<Chunk> chunks_;
    std::map<uint32_t, uint32_t> seq_;
};

} // namespace prof::test
