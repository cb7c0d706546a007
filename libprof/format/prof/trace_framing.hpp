// The file framing of the trace format (trace_format.hpp, docs/trace-format.md): the file
// header at offset 0, where each chunk lies, the chunk headers, and what finishing a file and
// packing it change in the header. One implementation for every writer of trace files (the
// runtime, profpack, profrun's outside samplers), as record_codec.hpp is for the records.
//
// Usable from the runtime: everything is inline, allocates nothing, throws nothing and is
// never instrumented. The functions fill headers the caller owns (on its stack or in a mapped
// chunk); writing them to the file is the caller's (pwrite, mmap), since the writers differ in
// that on purpose (the runtime's chunks are shared mappings published by their magic).
#pragma once

#include <prof/trace_format.hpp>

#include <cstddef>
#include <cstdint>

#define PROF_FRAMING_INLINE __attribute__((no_instrument_function, always_inline)) inline

namespace prof::format {

// The header of a file being written (format kMajor.kMinor, not finished): every field the
// writer does not know yet is zero. The caller sets the clock fields (ticks_per_second,
// start_ticks, start_mono_ns, start_real_ns).
PROF_FRAMING_INLINE void start_file_header(FileHeader& h, uint32_t chunk_size, ClockKind clock,
                                           uint32_t pid, uint32_t ppid) {
    __builtin_memset(&h, 0, sizeof h);
    __builtin_memcpy(h.magic, kMagic, sizeof h.magic);
    h.major = kMajor;
    h.minor = kMinor;
    h.header_size = kHeaderSize;
    h.chunk_size = chunk_size;
    h.clock_kind = uint32_t(clock);
    h.pid = pid;
    h.ppid = ppid;
}

// The header of a file whose writer reached its normal end: the end of the clock and the
// number of chunks (readers then need not scan).
PROF_FRAMING_INLINE void finish_file_header(FileHeader& h, uint64_t end_ticks, uint64_t end_mono_ns,
                                            uint32_t chunk_count) {
    h.flags |= kFileFinished;
    h.end_ticks = end_ticks;
    h.end_mono_ns = end_mono_ns;
    h.chunk_count = chunk_count;
}

// The header of the packed form (2.x) of a finished 1.x file: the same header, its version,
// the packed flag, the memory records' time shift and the packed file's chunk count.
PROF_FRAMING_INLINE void pack_file_header(FileHeader& h, uint32_t memory_time_shift,
                                          uint32_t chunk_count) {
    h.major = kPackedMajor;
    h.minor = kPackedMinor;
    h.flags |= kFilePacked;
    h.memory_time_shift = memory_time_shift;
    h.chunk_count = chunk_count;
}

// Where chunk number `index` (counted from 0 in file order) of a 1.x file begins.
PROF_FRAMING_INLINE uint64_t chunk_offset(uint32_t chunk_size, uint64_t index) {
    return uint64_t(kHeaderSize) + index * chunk_size;
}

// Fills a chunk header, all but its magic: `used` bytes of records follow it, the first time
// delta counts from `base_ticks`, and (`sync_ticks`, `sync_mono_ns`) is a clock pair taken as
// the chunk was opened. The caller stores the magic (kChunkMagic) last: a chunk with a magic
// has a complete header, which is what a reader of a crashed process's trace relies on.
PROF_FRAMING_INLINE void fill_chunk_header(ChunkHeader& h, StreamKind kind, uint32_t stream,
                                           uint32_t seq, uint32_t used, uint32_t tid,
                                           uint64_t base_ticks, uint64_t sync_ticks,
                                           uint64_t sync_mono_ns) {
    h.kind = uint16_t(kind);
    h.flags = 0;
    h.stream = stream;
    h.seq = seq;
    h.used = used;
    h.tid = tid;
    h.base_ticks = base_ticks;
    h.sync_ticks = sync_ticks;
    h.sync_mono_ns = sync_mono_ns;
    h.packed_size = 0;
    __builtin_memset(h.reserved, 0, sizeof h.reserved);
}

// A chunk header of a 1.x file as the packed form's (2.x): `used` bytes of records once
// unpacked, held in `packed_size` bytes of the zstd stream after it.
PROF_FRAMING_INLINE void pack_chunk_header(ChunkHeader& h, uint32_t used, uint32_t packed_size) {
    h.magic = kPackedChunkMagic;
    h.used = used;
    h.packed_size = packed_size;
}

} // namespace prof::format
