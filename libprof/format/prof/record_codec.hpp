// The record encoding of the trace format (trace_format.hpp, docs/trace-format.md): the LEB128
// and fixed-width writers and one encoder per record, shared by every writer of traces (the
// runtime, profpack, the tests' TraceBuilder). The inline fast paths of prof/prof.hpp keep a copy
// of the Enter, Exit and ScopeRun encoders (that header is installed, this one is not);
// tests/unit/record_codec_tests.cpp ties the two byte for byte.
//
// Usable from the runtime's hot path: everything is inline, allocates nothing, throws nothing
// and is never instrumented. Every encoder writes one whole record at `p`, which the caller has
// made room for, and returns the end of the record. The encoders of the memory records (Alloc,
// Free, Realloc) use the one-store LEB128 writers: they also write up to kLebScratch bytes past
// the end of the record, bytes the format leaves unspecified after a chunk's `used` (the caller
// reserves them). Strings are cut to the length the caller gives; the caller keeps that within
// kMaxString and the record within its chunk.
#pragma once

#include <prof/trace_format.hpp>

#include <cstddef>
#include <cstdint>

#define PROF_CODEC_INLINE __attribute__((no_instrument_function, always_inline)) inline

namespace prof::format {

// ---- primitives --------------------------------------------------------------------------

// Bytes the one-store writers (put_uleb_fast, put_sleb_fast) may write past what they encode.
inline constexpr uint32_t kLebScratch = 7;

PROF_CODEC_INLINE uint8_t* put_u8(uint8_t* p, uint8_t v) {
    *p = v;
    return p + 1;
}

PROF_CODEC_INLINE uint8_t* put_u32(uint8_t* p, uint32_t v) {
    __builtin_memcpy(p, &v, 4);
    return p + 4;
}

PROF_CODEC_INLINE uint8_t* put_u64(uint8_t* p, uint64_t v) {
    __builtin_memcpy(p, &v, 8);
    return p + 8;
}

PROF_CODEC_INLINE uint8_t* put_uleb(uint8_t* p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = uint8_t(v | 0x80);
        v >>= 7;
    }
    *p++ = uint8_t(v);
    return p;
}

PROF_CODEC_INLINE uint8_t* put_sleb(uint8_t* p, int64_t v) {
    for (;;) {
        uint8_t b = uint8_t(v & 0x7f);
        v >>= 7;
        bool done = (v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40));
        *p++ = done ? b : uint8_t(b | 0x80);
        if (done) return p;
    }
}

// Bytes of the unsigned LEB128 encoding of `v` (1 to kMaxUleb).
PROF_CODEC_INLINE uint32_t uleb_size(uint64_t v) {
    return (64 - uint32_t(__builtin_clzll(v | 1)) + 6) / 7;
}

// LEB128 for the allocation path, where the length of a pointer delta or a block size is
// different on every call: the loops above mispredict their exit about once per field. These
// place the 7-bit groups with shifts and masks, store 8 bytes at once and advance by the
// encoded length: the same bytes as put_uleb/put_sleb, but they write up to 8 bytes at `p`
// whatever the length (kLebScratch past the field). Values of more than 8 groups take the loop.
PROF_CODEC_INLINE uint64_t spread_7bit_groups(uint64_t v) { // bits 7i..7i+6 -> byte i, i < 8
    v &= (uint64_t(1) << 56) - 1;
    v = (v & 0x000000000FFFFFFFull) | ((v & 0x00FFFFFFF0000000ull) << 4);
    v = (v & 0x00003FFF00003FFFull) | ((v & 0x0FFFC0000FFFC000ull) << 2);
    return (v & 0x007F007F007F007Full) | ((v & 0x3F803F803F803F80ull) << 1);
}

PROF_CODEC_INLINE uint8_t* put_groups(uint8_t* p, uint64_t v, unsigned n) {
    uint64_t more = 0x8080808080808080ull & ((uint64_t(1) << (8 * n - 8)) - 1); // bytes 0..n-2
    uint64_t out = spread_7bit_groups(v) | more;
    __builtin_memcpy(p, &out, 8);
    return p + n;
}

PROF_CODEC_INLINE uint8_t* put_uleb_fast(uint8_t* p, uint64_t v) {
    if (__builtin_expect(v >> 56, 0)) return put_uleb(p, v);
    unsigned bits = 64 - unsigned(__builtin_clzll(v | 1));
    return put_groups(p, v, (bits + 6) / 7);
}

// put_sleb with one store: the magnitude and a sign bit set the length.
PROF_CODEC_INLINE uint8_t* put_sleb_fast(uint8_t* p, int64_t v) {
    uint64_t magnitude = uint64_t(v ^ (v >> 63)); // v, or ~v when negative
    if (__builtin_expect(magnitude >> 55, 0)) return put_sleb(p, v);
    unsigned bits = 65 - unsigned(__builtin_clzll(magnitude | 1));
    return put_groups(p, uint64_t(v), (bits + 6) / 7);
}

// str: uleb length, then the bytes (no terminator).
PROF_CODEC_INLINE uint8_t* put_str(uint8_t* p, const char* s, size_t n) {
    p = put_uleb(p, n);
    if (n) __builtin_memcpy(p, s, n);
    return p + n;
}

PROF_CODEC_INLINE uint8_t* put_tag(uint8_t* p, Tag tag) {
    return put_u8(p, uint8_t(tag));
}

// Sized records (kFirstSized and up): tag, uleb length, payload. A payload of fewer than 128
// bytes has a one-byte length: begin_small leaves it out, end_small fills it in.
PROF_CODEC_INLINE uint8_t* begin_small(uint8_t* rec, Tag tag) {
    rec[0] = uint8_t(tag);
    return rec + 2;
}
PROF_CODEC_INLINE uint8_t* end_small(uint8_t* rec, uint8_t* end) {
    rec[1] = uint8_t(end - (rec + 2)); // < 128: a one-byte uleb
    return end;
}
// The head of a sized record of `n` payload bytes; the payload follows.
PROF_CODEC_INLINE uint8_t* put_sized_head(uint8_t* p, Tag tag, size_t n) {
    return put_uleb(put_tag(p, tag), n);
}
// A sized record with a payload already encoded elsewhere.
PROF_CODEC_INLINE uint8_t* put_sized(uint8_t* p, Tag tag, const uint8_t* payload, size_t n) {
    p = put_sized_head(p, tag, n);
    if (n) __builtin_memcpy(p, payload, n);
    return p + n;
}

// ---- thread streams ------------------------------------------------------------------------

PROF_CODEC_INLINE uint8_t* put_enter(uint8_t* p, uint64_t fn, uint64_t dt) {
    return put_uleb(put_uleb(put_tag(p, Tag::kEnter), fn), dt);
}

PROF_CODEC_INLINE uint8_t* put_exit(uint8_t* p, uint64_t dt) {
    return put_uleb(put_tag(p, Tag::kExit), dt);
}

PROF_CODEC_INLINE uint8_t* put_function(uint8_t* p, uint64_t address) {
    return put_u64(put_tag(p, Tag::kFunction), address);
}

PROF_CODEC_INLINE uint8_t* put_thread_begin(uint8_t* p, uint64_t dt, uint32_t tid, const char* name,
                                            size_t n) {
    return put_str(put_u32(put_uleb(put_tag(p, Tag::kThreadBegin), dt), tid), name, n);
}

PROF_CODEC_INLINE uint8_t* put_thread_end(uint8_t* p, uint64_t dt) {
    return put_uleb(put_tag(p, Tag::kThreadEnd), dt);
}

PROF_CODEC_INLINE uint8_t* put_enter_address(uint8_t* p, uint64_t address, uint64_t dt) {
    return put_uleb(put_u64(put_tag(p, Tag::kEnterAddress), address), dt);
}

PROF_CODEC_INLINE uint8_t* put_abandon(uint8_t* p, uint64_t count, uint64_t dt) {
    return put_uleb(put_uleb(put_tag(p, Tag::kAbandon), count), dt);
}

PROF_CODEC_INLINE uint8_t* put_dropped(uint8_t* p, uint64_t count) {
    return put_uleb(put_tag(p, Tag::kDropped), count);
}

// 1.2: the runtime's own `ticks` inside the open frame. At most 12 bytes.
PROF_CODEC_INLINE uint8_t* put_pause(uint8_t* p, uint64_t ticks) {
    return end_small(p, put_uleb(begin_small(p, Tag::kPause), ticks));
}

// 1.3: `count` leaf activations of scope `fn`. Its count and ticks are the record's last 16
// bytes, which the writer adds to in place. At most 38 bytes.
PROF_CODEC_INLINE uint8_t* put_scope_run(uint8_t* p, uint64_t dt, uint64_t fn, uint64_t count,
                                         uint64_t ticks) {
    uint8_t* q = put_uleb(put_uleb(begin_small(p, Tag::kScopeRun), dt), fn);
    return end_small(p, put_u64(put_u64(q, count), ticks));
}

// 1.3: hits of PROF_LINE `site`; hits and ticks are the record's last 16 bytes. 26 bytes.
PROF_CODEC_INLINE uint8_t* put_line_counts(uint8_t* p, uint64_t site, uint64_t hits,
                                           uint64_t ticks) {
    uint8_t* q = put_u64(put_u64(put_u64(begin_small(p, Tag::kLineCounts), site), hits), ticks);
    return end_small(p, q);
}

// 1.1: what a thread's PROF_LINE site added up (stream 0: the stream it is written in).
// rss_samples: hits that measured memory; rss_reads (1.10): those of them that read the RSS.
struct LineStatsFields {
    uint64_t stream, site, hits, ticks, rss_samples;
    int64_t rss_increment;
    uint64_t rss_last;
    int64_t heap_increment;
    uint64_t rss_reads;
};
inline constexpr uint32_t kMaxLineStatsRecord = 2 + 8 + 8 * kMaxUleb; // payload < 128

PROF_CODEC_INLINE uint8_t* put_line_stats(uint8_t* p, const LineStatsFields& f) {
    uint8_t* q = begin_small(p, Tag::kLineStats);
    q = put_uleb(q, f.stream);
    q = put_u64(q, f.site);
    q = put_uleb(q, f.hits);
    q = put_uleb(q, f.ticks);
    q = put_uleb(q, f.rss_samples);
    q = put_sleb(q, f.rss_increment);
    q = put_uleb(q, f.rss_last);
    q = put_sleb(q, f.heap_increment);
    q = put_uleb(q, f.rss_reads);
    return end_small(p, q);
}

// 1.1 memory records. `ptr_delta`: the pointer minus the chunk's previous one; `alignment`: the
// std::align_val_t of an operator new or delete form (1.4), 0 for none (the field is left out).
// One-store LEB128 writers: kLebScratch bytes past the end.
inline constexpr uint32_t kMaxAllocRecord = 2 + 3 * kMaxUleb + 5 + 1 + kMaxUleb; // stack: u32
inline constexpr uint32_t kMaxFreeRecord = 2 + 2 * kMaxUleb + 1 + kMaxUleb;
inline constexpr uint32_t kMaxReallocRecord = 2 + 4 * kMaxUleb + 5;

PROF_CODEC_INLINE uint8_t* put_alloc(uint8_t* p, uint64_t dt, int64_t ptr_delta, uint64_t size,
                                     uint32_t stack, uint8_t kind, uint64_t alignment) {
    uint8_t* q = begin_small(p, Tag::kAlloc);
    q = put_uleb_fast(q, dt);
    q = put_sleb_fast(q, ptr_delta);
    q = put_uleb_fast(q, size);
    q = put_uleb_fast(q, stack);
    *q++ = kind;
    if (__builtin_expect(alignment != 0, 0)) q = put_uleb_fast(q, alignment);
    return end_small(p, q);
}

PROF_CODEC_INLINE uint8_t* put_free(uint8_t* p, uint64_t dt, int64_t ptr_delta, uint8_t kind,
                                    uint64_t alignment) {
    uint8_t* q = begin_small(p, Tag::kFree);
    q = put_uleb_fast(q, dt);
    q = put_sleb_fast(q, ptr_delta);
    *q++ = kind;
    if (__builtin_expect(alignment != 0, 0)) q = put_uleb_fast(q, alignment);
    return end_small(p, q);
}

// `old_delta`: the old pointer minus the chunk's previous one; `new_delta`: the new pointer minus
// the old one.
PROF_CODEC_INLINE uint8_t* put_realloc(uint8_t* p, uint64_t dt, int64_t old_delta,
                                       int64_t new_delta, uint64_t size, uint32_t stack) {
    uint8_t* q = begin_small(p, Tag::kRealloc);
    q = put_uleb_fast(q, dt);
    q = put_sleb_fast(q, old_delta);
    q = put_sleb_fast(q, new_delta);
    q = put_uleb_fast(q, size);
    q = put_uleb_fast(q, stack);
    return end_small(p, q);
}

// A stack of `n` return addresses, innermost first. At most 2 + 3 * kMaxUleb + 8 n bytes.
PROF_CODEC_INLINE uint8_t* put_stack(uint8_t* p, uint64_t id, const uintptr_t* pcs, uint32_t n) {
    size_t payload = uleb_size(id) + uleb_size(n) + size_t(n) * 8;
    p = put_uleb(put_uleb(put_sized_head(p, Tag::kStack, payload), id), n);
    for (uint32_t i = 0; i < n; ++i) p = put_u64(p, pcs[i]);
    return p;
}

PROF_CODEC_INLINE uint8_t* put_rss(uint8_t* p, uint64_t dt, uint64_t bytes) {
    return end_small(p, put_uleb(put_uleb(begin_small(p, Tag::kRss), dt), bytes));
}

// 1.5: CPU-time samples of the thread (count 0: no sample of the program, see Tag::kSample).
inline constexpr uint32_t kMaxSampleRecord = 2 + 7 * kMaxUleb; // payload < 128

// `node` (1.9): the call tree node of a counting thread's sample, written when `at_node` is set
// (a counting thread's records always have it, others never). `ip` (1.9): the instruction the
// record's last sample interrupted, written when not 0.
PROF_CODEC_INLINE uint8_t* put_sample(uint8_t* p, uint64_t dt, uint64_t cpu_ns, uint64_t own_ns,
                                      uint64_t own_count, uint64_t count, bool at_node = false,
                                      uint64_t node = 0, uint64_t ip = 0) {
    uint8_t* q = put_uleb(put_uleb(begin_small(p, Tag::kSample), dt), cpu_ns);
    q = put_uleb(put_uleb(put_uleb(q, own_ns), own_count), count);
    if (at_node) q = put_uleb(q, node);
    if (ip) q = put_uleb(q, ip);
    return end_small(p, q);
}

// 1.11: the thread's run delay, before the Sample record it was read with.
inline constexpr uint32_t kMaxWaitedRecord = 2 + kMaxUleb;
PROF_CODEC_INLINE uint8_t* put_waited(uint8_t* p, uint64_t run_delay_ns) {
    return end_small(p, put_uleb(begin_small(p, Tag::kWaited), run_delay_ns));
}

// ---- 1.9: calls counted in a call tree ------------------------------------------------------
inline constexpr uint32_t kMaxCountingRecord = 2 + 2 * kMaxUleb;
inline constexpr uint32_t kMaxCallNodeRecord = 2 + 3 * kMaxUleb; // payload < 128
inline constexpr uint32_t kMaxPositionRecord = 2 + kMaxUleb;

PROF_CODEC_INLINE uint8_t* put_counting(uint8_t* p, uint64_t dt, uint64_t cpu_ns) {
    return end_small(p, put_uleb(put_uleb(begin_small(p, Tag::kCounting), dt), cpu_ns));
}

PROF_CODEC_INLINE uint8_t* put_call_node(uint8_t* p, uint64_t node, uint64_t parent, uint64_t fn) {
    return end_small(
        p, put_uleb(put_uleb(put_uleb(begin_small(p, Tag::kCallNode), node), parent), fn));
}

PROF_CODEC_INLINE uint8_t* put_position(uint8_t* p, uint64_t node) {
    return end_small(p, put_uleb(begin_small(p, Tag::kPosition), node));
}

// The most bytes a CallCounts record of `n` nodes from `first` takes (its padding at most 15).
PROF_CODEC_INLINE size_t call_counts_size(uint64_t first, uint64_t n) {
    size_t payload = uleb_size(first) + uleb_size(n) + 1 + 15 + 8 * n;
    return 1 + uleb_size(payload) + payload;
}

// A CallCounts record of `n` nodes from `first`, every count 0, padded so that its counts start
// at a multiple of 8 in memory (in the file too, where chunks are page-aligned). Returns its
// end; the counts are its last 8 n bytes, which the writer then adds to in place.
PROF_CODEC_INLINE uint8_t* put_call_counts(uint8_t* p, uint64_t first, uint64_t n) {
    size_t fixed = uleb_size(first) + uleb_size(n) + 1 + 8 * n;
    uint32_t pad = 0; // the payload's length can take a byte more as the padding grows
    while (pad < 15 &&
           (reinterpret_cast<uintptr_t>(p) + 1 + uleb_size(fixed + pad) + fixed - 8 * n + pad) % 8)
        ++pad;
    p = put_uleb(put_uleb(put_sized_head(p, Tag::kCallCounts, fixed + pad), first), n);
    p = put_u8(p, uint8_t(pad));
    __builtin_memset(p, 0, pad + 8 * n);
    return p + pad + 8 * n;
}

// 1.13: a CallLatency record of node `node` with `n` buckets, every field 0. Returns its end;
// its fields (LatencyCounts) start at the returned pointer - latency_fields_size(n), aligned
// to 8 bytes, and the writer adds to them in place.
// The most bytes such a record takes (its padding at most 15).
PROF_CODEC_INLINE size_t call_latency_size(uint64_t node, uint64_t n) {
    size_t payload = uleb_size(node) + uleb_size(n) + 1 + 15 + latency_fields_size(n);
    return 1 + uleb_size(payload) + payload;
}
PROF_CODEC_INLINE uint8_t* put_call_latency(uint8_t* p, uint64_t node, uint64_t n) {
    size_t fields = latency_fields_size(n);
    size_t fixed = uleb_size(node) + uleb_size(n) + 1 + fields;
    uint32_t pad = 0;
    while (pad < 15 &&
           (reinterpret_cast<uintptr_t>(p) + 1 + uleb_size(fixed + pad) + fixed - fields + pad) % 8)
        ++pad;
    p = put_uleb(put_uleb(put_sized_head(p, Tag::kCallLatency, fixed + pad), node), n);
    p = put_u8(p, uint8_t(pad));
    __builtin_memset(p, 0, pad + fields);
    return p + pad + fields;
}

// 1.7: a sampled call stack (profrun --sample). At most 2 + 3 * kMaxUleb bytes.
inline constexpr uint32_t kMaxStackSampleRecord = 2 + 3 * kMaxUleb;

PROF_CODEC_INLINE uint8_t* put_stack_sample(uint8_t* p, uint64_t dt, uint64_t stack,
                                            uint64_t cpu_ns) {
    uint8_t* q = put_uleb(put_uleb(begin_small(p, Tag::kStackSample), dt), stack);
    return end_small(p, put_uleb(q, cpu_ns));
}

// 1.8: time off CPU of a sampled thread (profrun --idle). At most 2 + 3 * kMaxUleb bytes.
inline constexpr uint32_t kMaxOffCpuRecord = 2 + 4 * kMaxUleb;

// `runnable` (1.11): 1 when the thread left the CPU preempted (it waited for a CPU), 0 when it
// blocked or slept; -1 leaves it out (a 1.8 record: not known).
PROF_CODEC_INLINE uint8_t* put_off_cpu(uint8_t* p, uint64_t dt, uint64_t stack, uint64_t ns,
                                       int runnable) {
    uint8_t* q = put_uleb(put_uleb(put_uleb(begin_small(p, Tag::kOffCpu), dt), stack), ns);
    if (runnable >= 0) q = put_uleb(q, uint64_t(runnable));
    return end_small(p, q);
}

// ---- packed memory records (2.0/2.1, profpack) ------------------------------------------------
// `dtq`: a delta in units of 2^memory_time_shift ticks; `dt`: in ticks.

PROF_CODEC_INLINE uint8_t* put_mem_alloc(uint8_t* p, AllocKind kind, uint64_t dtq, uint64_t size,
                                         uint64_t stack) {
    p = put_u8(p, uint8_t(uint8_t(Tag::kMemAlloc) + uint8_t(kind) - 1));
    return put_uleb(put_uleb(put_uleb(p, dtq), size), stack);
}

// `back`: 1 = the stream's latest block, 2 the one before, ...; 0 = no block of the trace.
PROF_CODEC_INLINE uint8_t* put_mem_free(uint8_t* p, FreeKind kind, uint64_t dtq, uint64_t back) {
    p = put_u8(p, uint8_t(uint8_t(Tag::kMemFree) + uint8_t(kind) - 1));
    return put_uleb(put_uleb(p, dtq), back);
}

PROF_CODEC_INLINE uint8_t* put_mem_free_remote(uint8_t* p, FreeKind kind, uint64_t dt,
                                               uint64_t stream, uint64_t ordinal) {
    p = put_u8(p, uint8_t(uint8_t(Tag::kMemFreeRemote) + uint8_t(kind) - 1));
    return put_uleb(put_uleb(put_uleb(p, dt), stream), ordinal);
}

// `old`: 0 = null, 1 = no block of the trace, back + 1 otherwise.
PROF_CODEC_INLINE uint8_t* put_mem_realloc(uint8_t* p, uint64_t dtq, uint64_t old, uint64_t size,
                                           uint64_t stack) {
    p = put_uleb(put_uleb(put_tag(p, Tag::kMemRealloc), dtq), old);
    return put_uleb(put_uleb(p, size), stack);
}

PROF_CODEC_INLINE uint8_t* put_mem_realloc_remote(uint8_t* p, uint64_t dt, uint64_t stream,
                                                  uint64_t ordinal, uint64_t size, uint64_t stack) {
    p = put_uleb(put_uleb(put_uleb(put_tag(p, Tag::kMemReallocRemote), dt), stream), ordinal);
    return put_uleb(put_uleb(p, size), stack);
}

// 2.1: the alignment of the record right after it.
PROF_CODEC_INLINE uint8_t* put_mem_aligned(uint8_t* p, uint64_t alignment) {
    return end_small(p, put_uleb(begin_small(p, Tag::kMemAligned), alignment));
}

// ---- process stream ------------------------------------------------------------------------

PROF_CODEC_INLINE uint8_t* put_meta(uint8_t* p, const char* key, size_t key_len, const char* value,
                                    size_t value_len) {
    return put_str(put_str(put_tag(p, Tag::kMeta), key, key_len), value, value_len);
}

struct ModuleFields {
    uint64_t ticks, load_base, start, end;
    const char* path;
    size_t path_len;
    const uint8_t* build_id;
    size_t build_id_len;
};

PROF_CODEC_INLINE uint8_t* put_module(uint8_t* p, const ModuleFields& m) {
    p = put_u64(put_u64(put_u64(put_u64(put_tag(p, Tag::kModule), m.ticks), m.load_base), m.start),
                m.end);
    p = put_str(p, m.path, m.path_len);
    return put_str(p, reinterpret_cast<const char*>(m.build_id), m.build_id_len);
}

PROF_CODEC_INLINE uint8_t* put_symbol(uint8_t* p, uint64_t address, const char* name,
                                      size_t name_len, const char* symbol, size_t symbol_len,
                                      const char* file, size_t file_len, uint64_t line) {
    p = put_u64(put_tag(p, Tag::kSymbol), address);
    p = put_str(put_str(put_str(p, name, name_len), symbol, symbol_len), file, file_len);
    return put_uleb(p, line);
}

PROF_CODEC_INLINE uint8_t* put_end(uint8_t* p, uint64_t end_ticks, uint64_t end_mono_ns,
                                   uint64_t ticks_per_second, uint64_t threads,
                                   uint64_t dropped_events) {
    p = put_u64(put_u64(put_u64(put_tag(p, Tag::kEnd), end_ticks), end_mono_ns), ticks_per_second);
    return put_uleb(put_uleb(p, threads), dropped_events);
}

struct SiteFields {
    uint64_t address;
    SiteKind kind;
    uint64_t line;
    const char* file;
    size_t file_len;
    const char* function;
    size_t function_len;
    const char* label;
    size_t label_len;
};

// 1.1: a marked source site.
PROF_CODEC_INLINE uint8_t* put_site(uint8_t* p, const SiteFields& s) {
    size_t payload = 8 + 1 + uleb_size(s.line) + uleb_size(s.file_len) + s.file_len +
                     uleb_size(s.function_len) + s.function_len + uleb_size(s.label_len) +
                     s.label_len;
    p = put_u8(put_u64(put_sized_head(p, Tag::kSite, payload), s.address), uint8_t(s.kind));
    p = put_uleb(p, s.line);
    return put_str(put_str(put_str(p, s.file, s.file_len), s.function, s.function_len), s.label,
                   s.label_len);
}

// 1.8: a function inlined at a sampled address, and the line of its caller it was inlined at.
struct InlinedCallFields {
    uint64_t function;
    const char* call_file;
    size_t call_file_len;
    uint64_t call_line;
};

// 1.7: the function and source position of a sampled address; 1.8: and the functions inlined
// there, outermost first (none: the 1.7 record). At most 2 + kMaxUleb + 16 + kMaxUleb +
// file_len + 2 * kMaxUleb bytes, and 8 + 2 * kMaxUleb + call_file_len per inlined call.
PROF_CODEC_INLINE uint8_t* put_location(uint8_t* p, uint64_t address, uint64_t function,
                                        const char* file, size_t file_len, uint64_t line,
                                        const InlinedCallFields* inlined = nullptr,
                                        size_t n_inlined = 0) {
    size_t payload = 16 + uleb_size(file_len) + file_len + uleb_size(line);
    if (n_inlined) {
        payload += uleb_size(n_inlined);
        for (size_t i = 0; i < n_inlined; ++i)
            payload += 8 + uleb_size(inlined[i].call_file_len) + inlined[i].call_file_len +
                       uleb_size(inlined[i].call_line);
    }
    p = put_u64(put_u64(put_sized_head(p, Tag::kLocation, payload), address), function);
    p = put_uleb(put_str(p, file, file_len), line);
    if (!n_inlined) return p;
    p = put_uleb(p, n_inlined);
    for (size_t i = 0; i < n_inlined; ++i)
        p = put_uleb(put_str(put_u64(p, inlined[i].function), inlined[i].call_file,
                             inlined[i].call_file_len),
                     inlined[i].call_line);
    return p;
}

// 1.2: the object at load_base/start/end has been unloaded by `ticks`. 34 bytes.
PROF_CODEC_INLINE uint8_t* put_unload(uint8_t* p, uint64_t ticks, uint64_t load_base,
                                      uint64_t start, uint64_t end) {
    uint8_t* q = put_u64(put_u64(begin_small(p, Tag::kUnload), ticks), load_base);
    return end_small(p, put_u64(put_u64(q, start), end));
}

} // namespace prof::format
