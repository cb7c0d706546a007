// Reads libprof trace files (docs/trace-format.md). One pass, front to back, over a read-only
// mapping: process records (metadata, modules, symbols, end) fill TraceInfo, thread events go
// to a sink in each thread's order. Every length and count is bounds-checked against the
// chunk; anything wrong is a TraceError that names the byte offset. A file that simply stops
// (a crashed or killed process, a copy cut short) reads up to its last complete record and
// says so in TraceInfo::incomplete.
#pragma once

#include <prof/trace_format.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct ZSTD_DCtx_s; // zstd's decompression context (packed files)

namespace prof::reader {

class TraceError : public std::runtime_error {
public:
    TraceError(const std::string& path, uint64_t offset, const std::string& what);
    TraceError(const std::string& path, const std::string& what);
    uint64_t offset() const { return offset_; }

private:
    uint64_t offset_ = 0;
};

struct Module {
    uint64_t ticks = 0; // when the runtime first saw it
    uint64_t base = 0;  // load bias: runtime address - address in the file
    uint64_t start = 0, end = 0;
    std::string path;
    std::string build_id; // lowercase hex
    uint64_t unload_ticks = UINT64_MAX; // unloaded by then (Unload record, format 1.2)
};

inline constexpr size_t kNoModule = SIZE_MAX;

struct Symbol {
    std::string name;   // demangled
    std::string symbol; // as in the object file (mangled), when known
    std::string file;
    uint32_t line = 0;
    // Index into TraceInfo::modules of the object the writer named it in: the one loaded at the
    // address when the record was written. kNoModule when no Module record covered it.
    size_t module = kNoModule;
};

// A marked source site (format 1.1): PROF_LINE, PROF_SCOPE, PROF_FUNCTION or a C region.
struct Site {
    format::SiteKind kind = format::SiteKind::kLine;
    uint32_t line = 0;
    std::string file;
    std::string function; // as the compiler spelled it (__PRETTY_FUNCTION__ or __func__)
    std::string label;    // the statement (lines) or the name (scopes, regions)
};

// Sums of one PROF_LINE site on one thread.
struct LineStats {
    uint64_t hits = 0;
    uint64_t ticks = 0;
    uint64_t rss_samples = 0;   // hits that also measured memory (the heap, the RSS or both)
    uint64_t rss_reads = 0;     // of those, the hits that read the resident set size (1.10)
    int64_t rss_increment = 0;  // bytes, summed over the reads
    uint64_t rss_last = 0;      // bytes after the latest read
    int64_t heap_increment = 0; // usable heap bytes (memory profiler), summed over rss_samples
    // Set by the replay of a trace timed by its CPU samples, for the lines of the source files
    // whose code DWARF let it find: the samples whose instruction is the line's code (the
    // line, or code inlined there), and the CPU time they stand for.
    bool sample_timed = false;
    uint64_t samples = 0;
    double sampled_seconds = 0;
    void add(const LineStats& o) {
        hits += o.hits;
        sample_timed |= o.sample_timed;
        samples += o.samples;
        sampled_seconds += o.sampled_seconds;
        heap_increment += o.heap_increment;
        ticks += o.ticks;
        rss_samples += o.rss_samples;
        rss_reads += o.rss_reads;
        rss_increment += o.rss_increment;
        if (o.rss_reads) rss_last = o.rss_last;
    }
};

// A function inlined at a sampled address (format 1.8): its id (a Symbol record names it) and
// the line of its caller where it was inlined.
struct InlinedCall {
    uint64_t function = 0;
    std::string call_file;
    uint32_t call_line = 0;
};

// What the code at a sampled address is (format 1.7 Location records, profrun --sample).
struct Location {
    uint64_t function = 0; // entry address of its function (a Symbol record names it); 0: unknown
    std::string file;      // source position of the address; empty and 0: unknown
    uint32_t line = 0;
    // 1.8: the functions inlined at the address, outermost first: the first was inlined into
    // `function`, each next one into the one before; the address's own position (file, line)
    // is in the last.
    std::vector<InlinedCall> inlined;
};

struct Thread {
    uint32_t stream = 0;
    uint32_t tid = 0;
    std::string name;
    bool ended = false;       // a ThreadEnd record was read
    uint64_t first_ticks = 0; // earliest timestamp in the stream
    uint64_t last_ticks = 0;  // latest timestamp in the stream
    uint64_t events = 0;      // enter + exit records; two per activation of a scope run
    uint64_t samples = 0;     // CPU samples: Sample counts (1.5) and StackSample records (1.7)
    uint64_t dropped = 0;     // events the runtime could not record
    uint64_t abandoned = 0;   // frames closed without their exit (longjmp, ...)
    // 1.9: from a point on (Counting), the thread counted its calls in a call tree; `events`
    // then also counts two per call of its CallCounts records.
    bool counting = false;
};

struct TraceInfo {
    std::string path;
    format::FileHeader header{};
    std::map<std::string, std::string> meta; // exe, cmdline, cwd, pid, ppid, host, runtime
    std::vector<Module> modules;             // in file order
    // By runtime address: the name in the object loaded there last. An object unloaded and
    // replaced by another at the same addresses keeps its names in `replaced_symbols`.
    std::unordered_map<uint64_t, Symbol> symbols;
    std::map<std::pair<size_t, uint64_t>, Symbol> replaced_symbols; // (module, address)
    std::unordered_map<uint64_t, Site> sites;     // by the site's runtime address
    std::map<std::pair<uint32_t, uint64_t>, LineStats> lines; // (stream, site address)
    std::map<uint32_t, Thread> threads;            // by stream
    bool finished = false;   // the writer reached its end (FileHeader flag and End record)
    bool incomplete = false; // the file ends early; see `incomplete_reason`
    std::string incomplete_reason;
    // The file itself is cut short (an interrupted copy or download, a full disk): it ends
    // inside a chunk, or before the chunks or the End record its header promises. What was
    // read is whole up to its last whole record, but each thread's stream stops wherever its
    // last chunk in the file stopped: `end_ticks` is then the latest timestamp read (never the
    // End record's), and a frame open there closes at its own thread's last timestamp. A trace
    // whose process was killed is whole up to where it stopped: incomplete, not partial.
    bool partial = false;
    // Of a partial trace, the time up to which every record of the run is in the file: the
    // opening of the chunk the file cuts (chunks lie in the file in the order they were opened,
    // and a chunk's records are no older than its opening), or of its last chunk when the cut
    // fell between chunks (the next one opened no earlier). Without chunk clocks (0 in every
    // chunk header), the latest timestamp read.
    uint64_t read_up_to_ticks = 0;
    uint64_t chunks = 0;
    uint64_t bytes = 0;
    uint64_t end_ticks = 0;        // End record, or the latest timestamp seen (see `partial`)
    double ticks_per_second = 0;   // from the End record, or derived from clock sync points
    uint64_t minor_unknown_records = 0; // records of a newer minor version that were skipped
    uint64_t memory_records = 0;        // Alloc/Free/Realloc records (memory profiler)
    // CPU-time samples (format 1.5 Sample records): the sum of their `count`s, and of their
    // `own_count`s (samples that landed in the profiler's own code); read with the events.
    uint64_t samples = 0;
    uint64_t own_samples = 0;
    double sample_hz = 0; // the rate the runtime asked for (Meta sample_hz); 0: not sampled
    // Sampled call stacks (format 1.7 StackSample records: a program sampled without hooks,
    // profrun --sample or --pid); such a trace has no call counts.
    uint64_t stack_samples = 0;
    // Their threads' stretches off CPU (format 1.8 OffCpu records, profrun --idle).
    uint64_t off_cpu_records = 0, off_cpu_ns = 0;
    std::unordered_map<uint64_t, Location> locations; // by address (Location records)
    // The runtime's own cost measured at start (Meta overhead_*_ticks; 0 when not measured).
    double overhead_in = 0;   // ticks inside a callee's interval per call
    double overhead_out = 0;  // ticks a call adds to its caller
    double line_overhead = 0; // ticks a PROF_LINE measures around an empty statement

    double seconds(uint64_t ticks) const { return ticks_per_second ? ticks / ticks_per_second : 0; }
    // Seconds from the start of the run to `read_up_to_ticks`: what a partial trace holds.
    double read_up_to_seconds() const {
        return read_up_to_ticks > header.start_ticks
                   ? seconds(read_up_to_ticks - header.start_ticks)
                   : 0;
    }
    // The object that contained `address` at time `ticks` (index into `modules`, or kNoModule):
    // of the objects recorded there, the first not unloaded by then, or a later one already
    // recorded by then. Without a time: the object loaded there last.
    size_t module_index_at(uint64_t address, uint64_t ticks = UINT64_MAX) const;
    const Module* module_at(uint64_t address, uint64_t ticks = UINT64_MAX) const;
    // The name of `address` in module `module` (kNoModule: in the object loaded there last).
    const Symbol* symbol_at(uint64_t address, size_t module = kNoModule) const;
};

// Which object the code at an address belonged to at a given time, for traces in which an
// object was unloaded and another loaded at its addresses (format 1.2 Unload records). Built
// once from a trace's module map; TraceInfo::module_index_at with a time, in O(log n) of the
// objects that occupied the address (a plugin reloaded many times is the case to be fast for).
class AddressHistory {
  public:
    explicit AddressHistory(const TraceInfo& info);
    // Whether more than one recorded object covered `address` over time (usually never).
    bool reused(uint64_t address) const;
    size_t module_at(uint64_t address, uint64_t ticks);

  private:
    const std::vector<Module>* modules_;
    std::vector<std::pair<uint64_t, uint64_t>> reused_;          // sorted, disjoint [start, end)
    std::unordered_map<uint64_t, std::vector<size_t>> covering_; // address -> modules, file order
};

// An Enter or Exit record of a thread stream, decoded (EventSink::on_calls).
struct CallRecord {
    uint64_t ticks;
    uint32_t fn;   // Enter: the stream-local function index; Exit: 0
    uint32_t exit; // 1 for an Exit
};

// A Sample record of a thread stream, decoded (format 1.5, EventSink::on_sample). The program's
// CPU time it stands for, in the frame open at this point of the stream, is cpu_ns minus the
// previous SampleRecord's cpu_ns (of the same stream) minus own_ns. A record of count 0 stands
// for no sample of the program: the first of a stream (its timer was armed), and the last one
// of a thread whose latest samples all landed in the profiler (they are its own_ns).
// 1.13: a CallLatency record: the timed calls of a call tree node. Durations in clock ticks;
// bucket b counts those of [format::latency_bucket_low(b), ..._low(b + 1)), the last bucket
// every longer one too.
struct CallLatencyRecord {
    uint64_t calls = 0, sum_ticks = 0, max_ticks = 0, max_end_ticks = 0;
    std::vector<uint32_t> buckets;
};

struct SampleRecord {
    uint64_t ticks;     // when the record's last sample was taken
    uint64_t cpu_ns;    // the thread's CPU clock then (CLOCK_THREAD_CPUTIME_ID, absolute)
    uint64_t own_ns;    // CPU ns since the previous record that landed in the profiler itself
    uint32_t own_count; // samples since the previous record that landed in the profiler itself
    uint32_t count;     // samples of the program this record stands for at this point
    // 1.9: in a counting thread (at_node), the call tree node the thread was in (0: no frame
    // open), and every record carries the thread's clocks: the wall time since the previous
    // record less the CPU time between them was spent off CPU in that node.
    bool at_node;
    uint32_t node;
    // 1.9: the instruction the record's last sample interrupted (0: not recorded): a reader
    // charges a sample that interrupted an instrumented function before its enter hook or after
    // its exit hook (its prologue, its epilogue) to that function, not to its caller.
    uint64_t ip;
};

// Receives thread events in stream order. `fn` in on_enter is the stream-local function index
// announced by on_function; on_enter_address carries an address directly.
class EventSink {
public:
    virtual ~EventSink() = default;
    // Consecutive Enter and Exit records of one stream, the bulk of every trace, in one call
    // (a sink that needs them one by one gets on_enter and on_exit by default). Any other
    // record of the stream comes after the calls before it were delivered.
    virtual void on_calls(uint32_t stream, const CallRecord* records, size_t n) {
        for (size_t i = 0; i < n; ++i) {
            if (records[i].exit)
                on_exit(stream, records[i].ticks);
            else
                on_enter(stream, records[i].fn, records[i].ticks);
        }
    }
    virtual void on_function(uint32_t stream, uint32_t fn, uint64_t address) = 0;
    virtual void on_enter(uint32_t stream, uint32_t fn, uint64_t ticks) = 0;
    virtual void on_enter_address(uint32_t stream, uint64_t address, uint64_t ticks) = 0;
    virtual void on_exit(uint32_t stream, uint64_t ticks) = 0;
    // `count` activations of scope `fn`, leaves, one after the other from `ticks` on, that took
    // `total` ticks together (format 1.3 ScopeRun).
    virtual void on_scope_run(uint32_t stream, uint32_t fn, uint64_t ticks, uint64_t count,
                              uint64_t total) = 0;
    virtual void on_abandon(uint32_t stream, uint32_t frames, uint64_t ticks) = 0;
    virtual void on_thread_begin(uint32_t /*stream*/, uint64_t /*ticks*/) {}
    // Memory profiler records (format 1.1). `stack` 0 = the thread's current call path.
    // `alignment`: the std::align_val_t of an operator new or delete form that takes one
    // (format 1.4), else 0.
    virtual void on_alloc(uint32_t /*stream*/, uint64_t /*ticks*/, uint64_t /*ptr*/,
                          uint64_t /*size*/, uint32_t /*stack*/, format::AllocKind,
                          uint64_t /*alignment*/) {}
    virtual void on_free(uint32_t /*stream*/, uint64_t /*ticks*/, uint64_t /*ptr*/,
                         format::FreeKind, uint64_t /*alignment*/) {}
    virtual void on_realloc(uint32_t /*stream*/, uint64_t /*ticks*/, uint64_t /*old_ptr*/,
                            uint64_t /*ptr*/, uint64_t /*size*/, uint32_t /*stack*/) {}
    virtual void on_stack(uint32_t /*stream*/, uint32_t /*id*/, const std::vector<uint64_t>& /*pcs*/) {}
    // A reading of the resident set size: at an allocation of thread `stream`, or (stream 0,
    // format 1.11) by the runtime's timer, from the process stream.
    virtual void on_rss(uint32_t /*stream*/, uint64_t /*ticks*/, uint64_t /*bytes*/) {}
    // The runtime's own time inside the frame open now (format 1.2 Pause records).
    virtual void on_pause(uint32_t /*stream*/, uint64_t /*ticks*/) {}
    // CPU-time samples of the thread at this point of its stream (format 1.5). The calls
    // before it have been delivered (on_calls) when it comes.
    virtual void on_sample(uint32_t /*stream*/, const SampleRecord& /*s*/) {}
    // 1.11: the thread's run delay (ns waiting for a CPU since it began) at its next Sample.
    virtual void on_waited(uint32_t /*stream*/, uint64_t /*run_delay_ns*/) {}
    // A sampled call stack (format 1.7): Stack record `stack` of the stream (delivered before by
    // on_stack; innermost first, the first address the interrupted instruction), standing for
    // `cpu_ns` of the thread's CPU time.
    virtual void on_stack_sample(uint32_t /*stream*/, uint64_t /*ticks*/, uint32_t /*stack*/,
                                 uint64_t /*cpu_ns*/) {}
    // A stretch of `ns` off CPU of a sampled thread, ending at `ticks` (format 1.8), with the
    // Stack record `stack` of the stream; `runnable` (1.11) 1 when it was spent waiting for a
    // CPU (preempted), 0 blocked or asleep, -1 not known (an older trace).
    virtual void on_off_cpu(uint32_t /*stream*/, uint64_t /*ticks*/, uint32_t /*stack*/,
                            uint64_t /*ns*/, int /*runnable*/) {}
    // 1.9: from `ticks` on the thread counts its calls in a call tree (no call record follows);
    // its CPU clock was `cpu_ns` then.
    virtual void on_counting(uint32_t /*stream*/, uint64_t /*ticks*/, uint64_t /*cpu_ns*/) {}
    // Call tree node `node` (1, 2, ... in order) is path `parent` (0: the root) + function `fn`.
    virtual void on_call_node(uint32_t /*stream*/, uint32_t /*node*/, uint32_t /*parent*/,
                              uint32_t /*fn*/) {}
    // The calls of nodes first .. first + calls.size() - 1 (their final counts in a finished
    // trace). Blocks come in order, each before its nodes' definitions.
    virtual void on_call_counts(uint32_t /*stream*/, uint32_t /*first*/,
                                const std::vector<uint64_t>& /*calls*/) {}
    // 1.13: the timed calls of node `node` (defined before): their final counts in a finished
    // trace.
    virtual void on_call_latency(uint32_t /*stream*/, uint32_t /*node*/,
                                 const CallLatencyRecord& /*r*/) {}
    // The records that follow were written in call tree node `node` (memory records' stack 0).
    virtual void on_position(uint32_t /*stream*/, uint32_t /*node*/) {}
    virtual void on_thread_end(uint32_t /*stream*/, uint64_t /*ticks*/) {}
    // A chunk was read to its end; `sync_ticks` is the clock reading when it was opened. The
    // writer assigns chunks their place in the file and reads that clock under one lock, and
    // (from 1.2 on) times every memory record at or after the opening of its chunk: no memory
    // record later in the file is older than `sync_ticks`. A sink may act on what is older.
    virtual void on_chunk_done(uint64_t /*sync_ticks*/) {}
};

struct Cursor; // bounds-checked record decoder (cursor.hpp)

// How much of a trace one thread stream holds: what a reader spreading streams over several
// cores needs to balance them (TraceReader::stream_extents).
struct StreamExtent {
    uint32_t stream = 0;
    uint64_t bytes = 0;       // record bytes of its chunks
    uint64_t first_chunk = 0; // file position (in chunks) of its first chunk
};

class TraceReader {
public:
    // Opens and checks the file header. Throws TraceError: missing file, not a trace, a newer
    // major version, a header that does not add up.
    explicit TraceReader(std::string path);
    ~TraceReader();
    TraceReader(const TraceReader&) = delete;
    TraceReader& operator=(const TraceReader&) = delete;

    // Reads everything once. Throws TraceError on corruption (with its offset); a file that is
    // merely cut short is not an error (TraceInfo::incomplete).
    const TraceInfo& read(EventSink& sink);
    const TraceInfo& info() const { return info_; }

    // Reads the process stream only (metadata, modules, symbols): cheap for `profreport --info`.
    const TraceInfo& read_metadata();

    // The thread streams of an unpacked trace, from its chunk headers alone, in order of
    // their first chunk; empty for a packed trace, whose chunks are one compressed stream and
    // cannot be read apart.
    std::vector<StreamExtent> stream_extents() const;
    // Makes read() deliver (and count in TraceInfo::threads and lines) only the thread streams
    // `wanted` accepts; the process stream is always read. The other streams' chunks are
    // skipped by their headers, so that several readers can share one trace's streams.
    void select_streams(std::function<bool(uint32_t)> wanted) { wanted_ = std::move(wanted); }

private:
    struct StreamState;
    void check_header();
    void read_chunks(EventSink* sink);
    // `ticks`: the chunk's base_ticks, from which its Rss records are timed (1.11).
    void process_records(const uint8_t* p, const uint8_t* end, uint64_t offset, uint64_t ticks,
                         EventSink* sink);
    void add_symbol(uint64_t address, Symbol s);
    bool thread_records(StreamState& st, Thread& th, const uint8_t* p, const uint8_t* end,
                        uint64_t ticks, uint64_t offset, bool cut, EventSink* sink);
    void finish_timing();
    void sized_record(uint8_t tag, const uint8_t* p, uint64_t n, uint32_t stream, uint64_t offset);
    bool call_tree_record(format::Tag tag, Cursor& m, StreamState& st, Thread& th, uint64_t& ticks,
                          EventSink* sink, std::string& wrong);
    bool memory_record(format::Tag tag, Cursor& m, uint32_t stream, uint64_t& ticks,
                       uint64_t& last_ptr, EventSink* sink);
    bool packed_memory_record(uint8_t tag, Cursor& c, StreamState& st, uint32_t stream,
                              uint64_t& ticks, uint64_t alignment, EventSink* sink);

    TraceInfo info_;
    const uint8_t* data_ = nullptr;
    uint64_t size_ = 0;   // the bytes of the trace at data_
    uint64_t mapped_ = 0; // the length of the mapping at data_
    int fd_ = -1;
    // Packed files (2.0): chunks are decompressed into `unpacked_` one at a time.
    bool packed_ = false;
    std::vector<uint8_t> unpacked_;
    struct ZstdFree {
        void operator()(ZSTD_DCtx_s* d) const;
    };
    std::unique_ptr<ZSTD_DCtx_s, ZstdFree> unpack_;
    std::function<bool(uint32_t)> wanted_; // select_streams
    uint64_t unknown_blocks_ = 0; // names for frees of blocks the trace did not allocate
    // Clock sync pairs (ticks, monotonic ns) from chunk headers: derive the frequency of a
    // trace that has no End record.
    uint64_t first_sync_ticks_ = 0, first_sync_ns_ = 0, last_sync_ticks_ = 0, last_sync_ns_ = 0;
};

// Demangles an Itanium C++ ABI symbol; returns the input when it is not one.
std::string demangle(std::string_view symbol);

} // namespace prof::reader
