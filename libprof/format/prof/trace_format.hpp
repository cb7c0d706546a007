// The libprof trace format, version 1 (and its packed form, 2.0): the one definition shared by the runtime (writer) and
// the reader. docs/trace-format.md is the prose spec of exactly these structs and tags; change
// both together. Rules: a major bump breaks readers (they refuse and name both versions); a
// minor bump only adds sized record tags (kFirstSized and up), which older readers skip by
// their length. A new chunk kind needs a major bump. A tag number is never reused.
// All integers are little-endian; the writer only builds on little-endian hosts.
//
// Layout of a trace file:
//   [FileHeader, padded to kHeaderSize bytes]
//   [chunk 0][chunk 1]...                     every chunk is FileHeader::chunk_size bytes
// A chunk is a ChunkHeader followed by `used` bytes of records. Each chunk belongs to one
// stream: stream 0 is the process stream (metadata, modules, symbols, end record), streams
// 1..N are threads. Chunks of one stream appear in the file in increasing `seq` order, so a
// reader can process the file front to back. The writer maps chunks from the file and
// updates `used` after every record, so a process killed at any point leaves a file that
// reads up to its last complete record. Version 2.0 (kFilePacked, written by profpack) lays
// its chunks end to end instead, each ChunkHeader followed by packed_size bytes of one zstd
// stream (docs/trace-format.md, section 13).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace prof::format {

inline constexpr char kMagic[8] = {'L', 'I', 'B', 'P', 'R', 'O', 'F', '\n'};
inline constexpr uint16_t kMajor = 1;
inline constexpr uint16_t kMinor = 13; // 1.1: sites, line statistics; 1.2: unloads, pauses;
                                       // 1.3: scope runs; 1.4: aligned operator new/delete;
                                       // 1.5: CPU-time samples; 1.6: hooks without a clock
                                       // (Meta time=sampled); 1.7: sampled call stacks
                                       // (profrun --sample, --pid); 1.8: time off CPU of a
                                       // sampled thread (profrun --idle); 1.9: calls counted
                                       // in a call tree (Counting, CallNode, CallCounts,
                                       // Position; Sample's node); 1.10: LineStats'
                                       // rss_reads (lines that measure the heap only),
                                       // FileHeader's counting_ticks; 1.11: Waited,
                                       // OffCpu's runnable, Rss records in the process
                                       // stream (the RSS timer); 1.12: a memory Stack's
                                       // addresses are its calls' (return address - 1);
                                       // 1.13: CallLatency (a call path's distribution)
// Version 2.0 is the packed form of a finished 1.x trace (kFilePacked), which only profpack
// writes: another chunk layout and thread records below kFirstSized, so a major version, which
// readers of 1.x refuse by name. Its records are those of 1.x plus the packed memory records
// (2.1: and MemAligned; 2.2: the Sample records of 1.5, as written).
inline constexpr uint16_t kPackedMajor = 2;
inline constexpr uint16_t kPackedMinor = 6; // 2.1: MemAligned; 2.2: Sample; 2.3: the
                                            // call tree records of 1.9, as written; 2.4:
                                            // Waited and the process stream's Rss
                                            // records of 1.11, as written; 2.5: the
                                            // Stack records of 1.12, as written; 2.6: the
                                            // CallLatency records of 1.13, as written
inline constexpr uint32_t kHeaderSize = 4096;
inline constexpr uint32_t kChunkMagic = 0x4b484350; // "PCHK" little-endian
// 2.0: a chunk of a packed file (kFilePacked): its records are ChunkHeader::packed_size bytes
// of the file's zstd stream.
inline constexpr uint32_t kPackedChunkMagic = 0x5a4b4350; // "PCKZ" little-endian
inline constexpr uint32_t kMinChunkSize = 64u << 10; // holds any process record
inline constexpr uint32_t kMaxChunkSize = 64u << 20;

enum class ClockKind : uint32_t {
    kTsc = 1,       // x86-64 rdtsc (invariant TSC); ticks_per_second calibrated
    kMonotonic = 2, // CLOCK_MONOTONIC nanoseconds; ticks_per_second = 1e9
};

// Flags in FileHeader::flags.
inline constexpr uint32_t kFileFinished = 1u << 0; // the writer reached its normal end
// 2.0: written by profpack from a finished trace. Chunks follow one another without padding
// (each is a ChunkHeader and packed_size bytes), their records are zstd-compressed, and thread
// streams hold the packed memory records (kMemInfo ... kMemReallocRemote) instead of Alloc,
// Free and Realloc. Runtimes never write it: the file they map stays crash-safe.
inline constexpr uint32_t kFilePacked = 1u << 1;

struct FileHeader {
    char magic[8];
    uint16_t major;
    uint16_t minor;
    uint32_t header_size; // offset of chunk 0
    uint32_t chunk_size;  // size of every chunk, header included
    uint32_t flags;       // kFileFinished, ...
    uint32_t clock_kind;  // ClockKind
    uint32_t pid;
    uint32_t ppid;
    uint32_t memory_time_shift; // 2.0: memory record deltas are in units of 2^shift ticks
    uint64_t ticks_per_second; // calibrated at start, refined at finish (0: readers derive it)
    uint64_t start_ticks;      // clock reading when the runtime started
    uint64_t start_mono_ns;    // CLOCK_MONOTONIC at the same moment
    uint64_t start_real_ns;    // CLOCK_REALTIME at the same moment (wall-clock date)
    uint64_t end_ticks;        // set at finish (0 if the process died)
    uint64_t end_mono_ns;
    uint32_t chunk_count; // set at finish; readers of crashed traces scan instead
    uint32_t reserved0;
    // 1.10, set at finish: the clock when the first thread began counting its calls without a
    // clock under PROF_TIME=auto (once samples could time the run); 0 if none did. A reader
    // that needs every call's time (a timeline) refuses such a file from its header, unread.
    uint64_t counting_ticks;
    uint8_t reserved[4096 - 104];
};
static_assert(sizeof(FileHeader) == kHeaderSize);
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the trace format is little-endian");
static_assert(offsetof(FileHeader, ticks_per_second) == 40);
static_assert(offsetof(FileHeader, chunk_count) == 88);

// Chunk kinds are the stream's kind; there is one record grammar for all of them.
enum class StreamKind : uint16_t {
    kProcess = 1, // stream 0: Meta, Module, Symbol, End records (1.11: the RSS timer's Rss)
    kThread = 2,  // one stream per thread: events
};

struct ChunkHeader {
    uint32_t magic; // kChunkMagic; zero means the chunk was reserved but never used
    uint16_t kind;  // StreamKind
    uint16_t flags;
    uint32_t stream; // 0 = process stream, 1.. = thread streams
    uint32_t seq;    // 0, 1, 2, ... within the stream
    uint32_t used;   // bytes of records after this header; updated after each record
    uint32_t tid;    // kernel thread id that owns the stream (0 for the process stream)
    uint64_t base_ticks; // the first time delta in this chunk is relative to this
    uint64_t sync_ticks; // clock pair taken when the chunk was opened, used to derive the
    uint64_t sync_mono_ns; // tick frequency of a trace whose writer never finished
    uint32_t packed_size;  // 2.0: bytes of the zstd stream after this header
    uint8_t reserved[12];
};
static_assert(sizeof(ChunkHeader) == 64);

// Record tags. A record is one tag byte followed by fields:
//   u64 = 8 bytes little-endian; uleb = unsigned LEB128 (at most 10 bytes);
//   str = uleb length + bytes (no terminator), at most kMaxString bytes.
// Time deltas (dt) are clock ticks since the previous timed record of the same chunk
// (or since ChunkHeader::base_ticks for the first one).
enum class Tag : uint8_t {
    kInvalid = 0x00,
    // Thread streams.
    kEnter = 0x01,        // uleb fn, uleb dt: enter function with stream-local index fn
    kExit = 0x02,         // uleb dt: the innermost open frame returns
    kFunction = 0x03,     // u64 address: defines the next stream-local function index
    kThreadBegin = 0x04,  // uleb dt, u32 tid, str name
    kThreadEnd = 0x05,    // uleb dt: the thread finished; no record follows
    kEnterAddress = 0x06, // u64 address, uleb dt: enter without an index (table full)
    kAbandon = 0x07,      // uleb count, uleb dt: the innermost `count` frames ended without
                          // their exit hook (longjmp, exceptions through uninstrumented code)
    kDropped = 0x08,      // uleb count: events not recorded (PROF_MAX_DEPTH), 2 per call
    // 2.0, thread streams of packed files only (kFilePacked), in place of Alloc, Free and
    // Realloc. A block is named by the stream that allocated it and its ordinal there (1, 2, ...
    // in the order of that stream's MemAlloc and MemRealloc records); pointers are not kept.
    // `dtq` is a time delta in units of 2^FileHeader::memory_time_shift ticks; the remainder is
    // carried into the stream's next timed record, whose delta stays exact. The kind of an
    // allocation or release is in the tag: kMemAlloc + AllocKind - 1, kMemFree + FreeKind - 1.
    kMemAlloc = 0x10,         // 0x10-0x13: uleb dtq, uleb size, uleb stack (as in Alloc)
    kMemFree = 0x14,          // 0x14-0x16: uleb dtq, uleb back: 1 = the stream's latest block,
                              // 2 the one before, ...; 0 = no block of the trace
    kMemFreeRemote = 0x17,    // 0x17-0x19: uleb dt, uleb stream, uleb ordinal (dt in ticks:
                              // rounded, it could come before its block's allocation)
    kMemRealloc = 0x1a,       // uleb dtq, uleb old, uleb size, uleb stack: old 0 = null, 1 = no
                              // block of the trace, back + 1 otherwise; the new block is the
                              // stream's next
    kMemReallocRemote = 0x1b, // uleb dt (ticks), uleb stream, uleb ordinal, uleb size, uleb stack
    // Process stream.
    kMeta = 0x20,   // str key, str value
    kModule = 0x21, // u64 ticks, u64 load_base, u64 start, u64 end, str path, str build_id
    kSymbol = 0x22, // u64 address, str name, str symbol, str file, uleb line
    kEnd = 0x23,    // u64 end_ticks, u64 end_mono_ns, u64 ticks_per_second,
                    // uleb threads, uleb dropped_events
    // Tags from kFirstSized on are followed by `uleb length` and that many payload bytes, in
    // every stream. Minor versions add records only here, so older readers skip them.
    kFirstSized = 0x40,
    // 1.1, process stream: a marked source site (PROF_LINE, PROF_SCOPE, PROF_FUNCTION, a C
    // region). Scopes enter and exit like functions, with the site's address as the function.
    //   u64 address, u8 SiteKind, uleb line, str file, str function, str label
    kSite = 0x40,
    // 1.1, thread streams: what a thread's PROF_LINE sites added up since its previous
    // LineStats record for the same site (aggregated in process, written at thread end, at
    // finish and before fork).
    //   uleb stream (0 = this one), u64 site address, uleb hits, uleb ticks,
    //   uleb rss_samples, sleb rss_increment_bytes, uleb rss_last_bytes,
    //   sleb heap_increment_bytes, uleb rss_reads (1.10)
    // rss_samples counts the hits that measured memory (the heap, the RSS or both), rss_reads
    // those of them that read the RSS (absent before 1.10: all of them); the RSS fields sum
    // over the reads, heap_increment over rss_samples.
    kLineStats = 0x41,
    // 1.1, thread streams: the memory profiler (libprofmem.so). Pointers are signed deltas
    // from the previous pointer of the same chunk (0 at the start of a chunk); `stack` 0 means
    // the thread's current call path (from its Enter/Exit records), otherwise a Stack id of
    // the same stream. One record per user-level call, whatever the entry point.
    //   Alloc:   uleb dt, sleb ptr, uleb size, uleb stack, u8 AllocKind [, uleb alignment]
    //   Free:    uleb dt, sleb ptr, u8 FreeKind [, uleb alignment] (before the real free)
    // `alignment` (1.4) only for the operator new and delete forms with std::align_val_t: its
    // value. Absent (or 0) for every other form; older readers ignore it.
    //   Realloc: uleb dt, sleb old_ptr, sleb new_ptr, uleb size, uleb stack
    //   Stack:   uleb id, uleb count, count x u64 address (innermost first): return addresses;
    //            from 1.12 each minus 1, an address inside its call instruction
    //   Rss:     uleb dt, uleb resident bytes (1.11: also in the process stream, written by
    //            the runtime's RSS timer, timed within that stream as thread records are)
    kAlloc = 0x42,
    kFree = 0x43,
    kRealloc = 0x44,
    kStack = 0x45,
    kRss = 0x46,
    // 1.2, process stream: the object recorded by the latest Module record with this load_base,
    // start and end has been unloaded (dlclose) by `ticks`.
    //   u64 ticks, u64 load_base, u64 start, u64 end
    kUnload = 0x47,
    // 1.2, thread streams: the runtime spent `ticks` of the time up to the next timed record on
    // its own work (opening a chunk), inside the frame open at this point. Not timed.
    //   uleb ticks
    kPause = 0x48,
    // 1.3, thread streams: `count` activations of scope `fn` (a function index, as in Enter),
    // one after the other with no record between them, each a leaf (nothing recorded inside),
    // at the depth of an Enter written here; together they took `ticks`. Timed by the first
    // one's start. The writer adds to `count` and `ticks` in place while the record is the
    // last of its chunk, so both are fixed-width.
    //   uleb dt, uleb fn, u64 count, u64 ticks
    kScopeRun = 0x49,
    // 1.3, thread streams: hits of PROF_LINE `site` in this stream and their ticks, to be added
    // to its other LineCounts and LineStats records. The writer adds each hit in place while the
    // record's chunk is the thread's current one, so both counts are fixed-width.
    //   u64 site address, u64 hits, u64 ticks
    kLineCounts = 0x4a,
    // 2.1, thread streams of packed files only: the std::align_val_t (the `alignment` of its
    // Alloc or Free) of the record right after it in the chunk, if that is a MemAlloc or a
    // MemFree/MemFreeRemote of a new or delete kind; of nothing otherwise.
    //   uleb alignment
    kMemAligned = 0x4b,
    // 1.5, thread streams: the thread's timer on its own CPU clock fired `count` times with the
    // thread at this point of the stream (or, for count 0, the timer was armed). Timed like
    // Alloc: dt is the first field, and the next record's dt counts from it. `cpu_ns` is the
    // thread's CPU clock (CLOCK_THREAD_CPUTIME_ID) when the record's last sample was taken;
    // `own_ns` and `own_count` are the CPU time and the samples, since the stream's previous
    // Sample record, that landed in the profiler's own code. The program's CPU time that the
    // record stands for, in the frame open at this point, is cpu_ns minus the previous Sample
    // record's cpu_ns minus own_ns. A record of count 0 stands for no sample of the program: the
    // first of a stream (its timer was armed; own 0), and one written when the thread ends or
    // the process finishes: before 1.11 only for samples of the profiler that no record reported
    // yet (its cpu_ns then the previous one's plus own_ns); from 1.11 always, with the thread's
    // CPU clock when its timer stopped (the CPU time since the last sample, which the kernel's
    // timer may not have signalled for a long time, is then known).
    //   uleb dt, uleb cpu_ns, uleb own_ns, uleb own_count, uleb count [, uleb node] [, uleb ip]
    // `node` (1.9) is present exactly in a counting thread's records (after its Counting
    // record): the call tree node the thread was in (0: no frame open). There every Sample
    // record, of any count, carries the thread's clocks: the wall time since the stream's
    // previous Sample record less the CPU time between them was spent off CPU in that node.
    // `ip` (1.9), when the record stands for samples of the program: the instruction its last
    // sample interrupted (a sample in a function's prologue or epilogue, outside its hooks, is
    // that function's). Absent in other records (and from older writers).
    kSample = 0x4c,
    // 1.7, thread streams (profrun --sample, --pid: no hooks): the thread was sampled with the
    // call stack `stack` (a Stack record of the stream, written before; its first address is
    // the interrupted instruction, the others return addresses), standing for `cpu_ns` of the
    // thread's CPU time (the sampling period). Timed.
    //   uleb dt, uleb stack, uleb cpu_ns
    kStackSample = 0x4d,
    // 1.7, process stream: what the code at `address` (a Stack record's address) is: the entry
    // address of its function (a Symbol record names it; 0: unknown) and its source position
    // (empty and 0: unknown).
    //   u64 address, u64 function, str file, uleb line
    kLocation = 0x4e,
    // 1.8, thread streams (profrun --sample --idle): the thread was off CPU (blocked,
    // sleeping, or waiting for a CPU) for `ns` nanoseconds up to this record's time, with the
    // call stack `stack` (a Stack record of the stream, written before: where it left the CPU,
    // or, where the kernel gives no stack of a context switch, its last CPU sample's; see
    // Meta sample_idle). Timed.
    //   uleb dt, uleb stack, uleb ns [, uleb runnable]
    // `runnable` (1.11): 1 when the thread left the CPU preempted, so that the stretch was spent
    // waiting for a CPU (the kernel's PERF_RECORD_MISC_SWITCH_OUT_PREEMPT), 0 when it blocked or
    // slept. Absent (1.8 to 1.10): not known.
    kOffCpu = 0x4f,
    // 1.9, thread streams: from here on the thread's hooks count calls in a call tree instead
    // of writing Enter, Exit and Abandon records (PROF_TIME=sampled from the thread's start;
    // PROF_TIME=auto once the process has enough CPU samples to be timed by them). No call
    // record follows it in the stream; its Sample records carry a node. Timed; `cpu_ns` is the
    // thread's CPU clock (CLOCK_THREAD_CPUTIME_ID) then.
    //   uleb dt, uleb cpu_ns
    kCounting = 0x50,
    // 1.9, thread streams after Counting: defines call tree node `node` (1, 2, ... in order),
    // the call path `parent`'s (0: the thread's root, else a node defined before) followed by
    // function `fn` (a stream-local function index, as in Enter; a scope's site for scopes).
    // The frames a thread had open when it began counting are defined first, outermost first.
    //   uleb node, uleb parent, uleb fn
    kCallNode = 0x51,
    // 1.9, thread streams after Counting: the calls of nodes first .. first + n - 1 (u64 each,
    // fixed width), which the writer adds to in place while the thread runs: the chunk that
    // holds the record stays mapped until the thread ends, so a killed process keeps its
    // counts. Blocks follow each other (the first starts at 1, each at the end of the one
    // before), and come before the CallNode records of their nodes; a node of a block that is
    // never defined has 0 calls. `pad` (0 to 15) zero bytes come before the counts, so that the
    // writer's counts are aligned to 8 bytes.
    //   uleb first, uleb n, u8 pad, pad x u8, n x u64 calls
    kCallCounts = 0x52,
    // 1.9, thread streams after Counting: the records that follow, up to the next Position,
    // were written in call tree node `node` (0: no frame open): what `stack` 0 of the memory
    // records means in a counting thread.
    //   uleb node
    kPosition = 0x53,
    // 1.11, thread streams: the thread's run delay, the time it has spent runnable but waiting
    // for a CPU since it began (the second field of the kernel's /proc/thread-self/schedstat),
    // read with the Sample record that follows it. Between two Sample records that each have
    // one, the time off CPU (the wall time less the CPU time) was that much waiting for a CPU,
    // the rest blocked or asleep. Untimed. A thread whose run delay cannot be read has none.
    //   uleb run_delay_ns
    kWaited = 0x54,
    // 1.13, thread streams after Counting: the inclusive wall time of the calls of call tree
    // node `node` (defined before), which the writer times from the record on (and the calls
    // that made it time them, docs/trace-format.md): `calls` timed, their summed duration
    // `sum_ticks`, the longest `max_ticks` and the clock at its end `max_end_ticks`, and how
    // many lasted a duration of each bucket (latency_bucket below; the last also holds every
    // longer one; a count stops at 2^32 - 1). The writer adds to it in place while the thread
    // runs, as to CallCounts. `pad` (0 to 15) zero bytes align the u64s to 8 bytes.
    //   uleb node, uleb n, u8 pad, pad x u8, u64 calls, u64 sum_ticks, u64 max_ticks,
    //   u64 max_end_ticks, n x u32 buckets
    kCallLatency = 0x55,
};

// 1.13: the buckets of a CallLatency record, log-linear in clock ticks: durations 0 to 7 have
// a bucket each; from there, each power of two is split into 8 buckets of equal width, so that
// a bucket is at most 1/8 of its lower bound wide.
inline constexpr uint32_t kLatencySubBuckets = 8;
inline uint32_t latency_bucket(uint64_t ticks) {
    if (ticks < kLatencySubBuckets) return uint32_t(ticks);
    uint32_t top = 63 - uint32_t(__builtin_clzll(ticks)); // 3 and up
    return (top - 2) * kLatencySubBuckets + uint32_t((ticks >> (top - 3)) & 7);
}
// The least duration of bucket `b`; bucket b spans [latency_bucket_low(b), ..._low(b + 1)).
inline uint64_t latency_bucket_low(uint32_t b) {
    if (b < kLatencySubBuckets) return b;
    uint32_t top = b / kLatencySubBuckets + 2;
    return uint64_t(kLatencySubBuckets + b % kLatencySubBuckets) << (top - 3);
}
// The writer's bucket count: up to 2^42 ticks (an hour and more at 1 GHz).
inline constexpr uint32_t kLatencyBuckets = (42 - 2) * kLatencySubBuckets;
// A CallLatency record's fields after its padding, as the writer adds to them in place.
struct LatencyCounts {
    uint64_t calls, sum_ticks, max_ticks, max_end_ticks;
    uint32_t buckets[1]; // n of them
};
inline size_t latency_fields_size(uint64_t n) {
    return 32 + 4 * size_t(n);
}

enum class AllocKind : uint8_t {
    kMalloc = 1,   // malloc, calloc (realloc and reallocarray are Realloc records)
    kAligned = 2,  // posix_memalign, aligned_alloc, memalign, valloc, pvalloc
    kNew = 3,      // operator new (every form but the array ones)
    kNewArray = 4, // operator new[]
};

enum class FreeKind : uint8_t {
    kFree = 1,        // free (or realloc to size 0)
    kDelete = 2,      // operator delete
    kDeleteArray = 3, // operator delete[]
};

enum class SiteKind : uint8_t {
    kLine = 1,     // PROF_LINE(statement)
    kScope = 2,    // PROF_SCOPE(name)
    kFunction = 3, // PROF_FUNCTION()
    kRegion = 4,   // prof_region_begin/end (C API)
};

inline constexpr uint32_t kMaxString = 16384;
inline constexpr uint32_t kMaxUleb = 10;
// Largest thread-stream event record: kEnterAddress = 1 + 8 + 10.
inline constexpr uint32_t kMaxEventRecord = 1 + 8 + kMaxUleb;

// The packed memory records of 2.0, kMemAlloc (0x10) to kMemReallocRemote (0x1b).
inline bool is_packed_memory_tag(uint8_t tag) {
    return tag >= uint8_t(Tag::kMemAlloc) && tag <= uint8_t(Tag::kMemReallocRemote);
}

inline bool header_magic_ok(const FileHeader& h) {
    return std::memcmp(h.magic, kMagic, sizeof kMagic) == 0;
}

// The launchers' variables a process's MPI rank (or Slurm task) and its job's size are read
// from, the first one set: Open MPI, MPICH and Intel MPI, PMIx, Slurm (Meta mpi_rank, mpi_size,
// mpi_rank_from).
inline constexpr const char* kRankVariables[][2] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMI_RANK", "PMI_SIZE"},
    {"PMIX_RANK", "PMIX_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS"}};

} // namespace prof::format
