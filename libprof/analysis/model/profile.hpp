// Function-level analysis shared by every tool: from the events of one or more traces to
// cProfile's numbers (ncalls, primitive calls, tottime, cumtime) per function and per
// caller -> callee edge, merged over threads or per thread.
//
// Semantics follow cProfile: a call is primitive when the function is not already active on
// the same thread; cumtime is added only when the outermost activation returns, so recursion
// is counted once; tottime excludes time in callees. Frames still open when a thread ends (or
// the trace ends) are closed at that time.
#pragma once

#include "reader/trace_reader.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace prof::analysis {

struct Stats {
    uint64_t ncalls = 0;
    uint64_t pcalls = 0; // primitive (non-recursive) calls
    double tottime = 0;  // seconds
    double cumtime = 0;  // seconds
    void add(const Stats& o) {
        ncalls += o.ncalls;
        pcalls += o.pcalls;
        tottime += o.tottime;
        cumtime += o.cumtime;
    }
};

struct Function {
    std::string name;   // demangled; "0x..." when nothing could name it
    std::string symbol; // as in the object file, when known
    std::string module; // path of the object that contains it
    std::string file;   // source file, when known
    uint32_t line = 0;
    uint64_t address = 0; // runtime address (in the first trace that has it)
    // "function" for instrumented code; "scope", "marked function" or "region" for
    // PROF_SCOPE, PROF_FUNCTION and C regions, whose enclosing function is `context`.
    std::string kind = "function";
    std::string context;
    Stats stats;
    // Frames of it that forked children inherited open: the parent's calls, continued in the
    // children, whose time they hold (in stats) and whose calls they are not.
    uint64_t inherited = 0;
};

// "double work(std::vector<double>&)" -> "work(std::vector<double>&)": the name part of a
// __PRETTY_FUNCTION__ string, without return type.
std::string function_display_name(const std::string& pretty);

inline constexpr size_t kRoot = SIZE_MAX; // caller of a thread's outermost frames

struct Edge {
    size_t caller = kRoot; // index into Profile::functions, or kRoot
    size_t callee = 0;
    Stats stats; // the callee's calls made from this caller
};

struct ThreadSummary {
    size_t trace = 0; // index into Profile::traces
    uint32_t stream = 0;
    uint32_t tid = 0;
    std::string name;
    uint64_t events = 0, dropped = 0, abandoned = 0, unmatched_exits = 0;
    double seconds = 0; // first to last event
};

// Where a profile's times come from (session.hpp, "the time model").
enum class TimeSource {
    kAuto,    // sampled where a trace has enough CPU samples, else traced
    kSampled, // CPU samples for time on CPU, the hooks' clock for time off CPU
    kTraced,  // the hooks' clock, less the profiler's measured cost
};

// Which time a profile's functions get (profreport --clock): wall time, cProfile's (on CPU,
// waiting for a CPU, blocked or sleeping), or CPU time alone (yappi's "cpu" clock).
enum class Clock {
    kWall,
    kCpu,
};

// Fewer CPU samples than this (the program's and the profiler's) time a trace by the hooks'
// clock (TimeSource::kAuto): below, a run is shorter than half a second of CPU time at 250 Hz.
constexpr uint64_t kEnoughSamples = 100;

// How the times of the traces in a profile were obtained, for its header.
struct TimeBasis {
    uint64_t sampled_traces = 0, traced_traces = 0;
    uint64_t untimed_traces = 0; // of the sampled: hooks without a clock (PROF_TIME=sampled)
    // Of those: traces whose hooks read the clock per call until the run had samples enough to
    // be timed by them (PROF_TIME=auto).
    uint64_t switched_traces = 0;
    // Of the sampled: call stacks sampled without hooks (profrun --sample, --pid), so no call
    // was counted.
    uint64_t uncounted_traces = 0;
    // Whether ncalls and primitive calls mean anything: some trace counted them.
    bool calls_counted() const { return uncounted_traces < sampled_traces + traced_traces; }
    // Whether every trace counted them.
    bool all_calls_counted() const { return uncounted_traces == 0; }
    uint64_t samples = 0;        // CPU samples charged to the program (sampled traces)
    uint64_t own_samples = 0;    // samples that landed in the profiler itself, left out
    // Of those: samples at the hooks' calls in the program's code (reader/hook_code.hpp).
    uint64_t hook_call_samples = 0;
    // And those in the code of the PROF_LINE, PROF_SCOPE and PROF_FUNCTION markers, inlined in
    // the program's functions (DWARF: code of libprof's headers).
    uint64_t marker_samples = 0;
    // Sampled threads whose scope runs kept the time their clock reads measured (DWARF did not
    // find every scope's block; SampleTime::place_samples).
    uint64_t measured_run_threads = 0;
    double cpu_seconds = 0;      // CPU time the samples stand for, the program's and the profiler's
    double own_seconds = 0;      // of which the profiler's
    // Sampled without instrumentation with the time off CPU (profrun --idle): the traces, the
    // stretches off CPU and their time, charged like samples, and the part of it charged to a
    // thread's last CPU sample (no stack of the switch was had).
    uint64_t idle_traces = 0;
    double idle_approximate_seconds = 0;
    uint64_t off_cpu_records = 0;
    double off_cpu_seconds = 0;
    // Sampled traces: samples per CPU second. A sample stands for the CPU time since the one
    // before it, so the rate only sets the precision, not the totals.
    double hz() const { return cpu_seconds > 0 ? double(samples + own_samples) / cpu_seconds : 0; }
    // Half the 95% interval, in points of a function at a 10% share: 1.96 sqrt(p (1 - p) / n).
    double points_at_10() const;
    // Samples of the traced traces, too few to time them by (0: none had samples).
    uint64_t too_few = 0;
    TimeSource chosen = TimeSource::kAuto; // what the reader asked for
    Clock clock = Clock::kWall;            // what the reader asked for
    // The sampled threads' time, split (seconds; JSON time_split): the program on CPU (the
    // profiler's own samples left out), waiting for a CPU while runnable (the kernel's run
    // delay, format 1.11 Waited records), and off CPU otherwise: blocked or sleeping. Threads
    // without Waited records (older traces, profrun --idle) have their time off CPU in
    // `off_cpu_unsplit_seconds` instead, neither runnable nor blocked.
    double on_cpu_seconds = 0, runnable_seconds = 0, blocked_seconds = 0;
    double off_cpu_unsplit_seconds = 0;
    // The part of the waiting for a CPU that the profiler's own CPU time caused (it runs as long
    // as the program waits in proportion): left out, like its samples.
    double own_runnable_seconds = 0;
    // Sampled threads that got under a tenth of the samples their CPU time asked for (the
    // kernel's CPU-time timer fires rarely for a thread sharing its CPU with a busy one), and
    // their CPU time: exact in total, coarsely split among their functions.
    uint64_t starved_threads = 0;
    double starved_seconds = 0;
    // Traced traces: their threads' time as the clock read it, and the part of it subtracted
    // as the hooks' cost measured at the start (compensation), with the calls it was
    // subtracted for. When that part is most of the time, what is left is a small difference
    // of large numbers: a tenth more or less in the measured cost moves it by a large factor.
    double traced_raw_seconds = 0, traced_removed_seconds = 0;
    uint64_t traced_calls = 0;
    void add(const TimeBasis& o) {
        sampled_traces += o.sampled_traces;
        traced_traces += o.traced_traces;
        untimed_traces += o.untimed_traces;
        switched_traces += o.switched_traces;
        uncounted_traces += o.uncounted_traces;
        samples += o.samples;
        own_samples += o.own_samples;
        hook_call_samples += o.hook_call_samples;
        marker_samples += o.marker_samples;
        measured_run_threads += o.measured_run_threads;
        cpu_seconds += o.cpu_seconds;
        own_seconds += o.own_seconds;
        idle_traces += o.idle_traces;
        idle_approximate_seconds += o.idle_approximate_seconds;
        off_cpu_records += o.off_cpu_records;
        off_cpu_seconds += o.off_cpu_seconds;
        too_few += o.too_few;
        on_cpu_seconds += o.on_cpu_seconds;
        runnable_seconds += o.runnable_seconds;
        blocked_seconds += o.blocked_seconds;
        off_cpu_unsplit_seconds += o.off_cpu_unsplit_seconds;
        own_runnable_seconds += o.own_runnable_seconds;
        starved_threads += o.starved_threads;
        traced_raw_seconds += o.traced_raw_seconds;
        traced_removed_seconds += o.traced_removed_seconds;
        traced_calls += o.traced_calls;
        starved_seconds += o.starved_seconds;
    }
};

struct Profile {
    std::vector<Function> functions;
    std::vector<Edge> edges;
    std::vector<reader::TraceInfo> traces;
    std::vector<ThreadSummary> threads; // the threads this profile covers
    uint64_t total_calls = 0;
    uint64_t primitive_calls = 0;
    double total_time = 0; // sum of tottime, as cProfile's header
    bool compensated = true; // the runtime's measured costs were subtracted (lines too)
    TimeBasis time;

    void recount();
    // Functions whose label `file:line(name)` contains a match of the ECMAScript regex.
    std::vector<size_t> match(const std::string& regex) const;
};

// Functions whose time from samples cannot be vouched for. Each call of an instrumented
// function runs the hooks' calls in its code: the loads of their arguments and the calls
// (left out as the profiler's), and the spills and the refetching after each return they
// force, which no sample can tell from the function's own work. A function that takes less
// time per call than the hooks cost per call (GCC keeps the hooks of the tiny functions it
// inlines) is mostly such code, and its callers' times lose or gain what it is charged: on
// snappy's GCC build they were off from perf's truth of the uninstrumented build by up to 8
// points, where functions with more time per call were within 3.
//
// A marked scope or function (PROF_SCOPE, PROF_FUNCTION) is timed by its clock reads where the
// samples cannot tell its code from its parent's (a scope run whose block DWARF does not
// give), and their cost in place
// differs from the calibrated one by about its own size (the CPU overlaps them with the code
// or stalls on them): one that takes under ten clock reads per activation is measured no
// better than that (snappy's scan loop marked: 55 ns per activation against about 20 in the
// unmarked program).
struct UncertainTimes {
    double hook_seconds_per_call = 0; // the profiler's samples' time over the calls counted
    std::vector<size_t> functions;    // at least 1% of the time, less per call than the hooks
    std::vector<size_t> callers;      // at least 1% of the time, calling one of them
    double clock_read_seconds = 0;    // what a PROF_LINE measures around an empty statement
    std::vector<size_t> marked;       // at least 1%, under ten clock reads per activation
    // Timed by samples where the markers' own code took most of them (their share, at least
    // half; 0 otherwise): the samples at the seams of the markers' code and the program's
    // (which of the two a sample stands for is a guess, SampleTime::code_at) decide a large
    // part of the program's time. On snappy's CompressFragment with the markers taking 80% of the
    // samples, its total came out at 0.7x its unmarked time. The functions holding marked
    // lines and scopes, by name.
    double marker_share = 0;
    std::vector<std::string> marker_functions;
    // Timed by the hooks' clock with their measured cost subtracted, where that cost was at
    // least half the time the clock read (its share; 0 otherwise), and the cost per call. The
    // measurement at the start varies between identical runs (fib: 35 to 66 ticks a call on
    // one host), and on a program of tiny functions the rest varied 0.012-0.086 s for one
    // 0.015 s run.
    double traced_cost_share = 0;
    double traced_cost_per_call = 0;
    bool empty() const {
        return functions.empty() && marked.empty() && marker_functions.empty() &&
               traced_cost_share == 0;
    }
};
// `functions` and `callers` of a profile timed by samples with calls counted, `marked` of a
// profile with scopes timed by their clock reads (traced, or sampled where DWARF did not find
// their blocks); each by tottime (marked: cumtime), largest first.
UncertainTimes uncertain_times(const Profile& p);

// Where the hooks' cost went, when it was at least the program's own CPU time (a run at least
// twice as long as without them; sampled traces, every call counted): the functions that take
// less time per call than the hooks cost and were called the most (at least 1% of the calls
// each, at most 20, by ncalls), and their share of all calls. Leaving their hooks out
// (GCC's -finstrument-functions-exclude-function-list) removes that much of the cost, and
// their time goes to their callers. Empty `functions` otherwise.
struct CostlyHooks {
    double own_seconds = 0, program_seconds = 0;
    double hook_seconds_per_call = 0;
    std::vector<size_t> functions;
    double calls_share = 0;
};
CostlyHooks costly_hooks(const Profile& p);

// ---- memory (libprofmem.so traces) -------------------------------------------------------------

struct MemoryFrame {
    std::string name, file, module;
    uint32_t line = 0;
    // A function inlined into the next frame's: its code is the next frame's, at that
    // frame's line (FunctionResolver::describe_frames).
    bool inlined = false;
};

struct MemorySite {
    std::vector<MemoryFrame> stack; // innermost first
    uint64_t allocations = 0;       // calls that allocated here (realloc included)
    uint64_t bytes = 0;             // bytes requested by those calls
    uint64_t temporary = 0;         // freed right after, with no other allocation in between
    uint64_t peak_bytes = 0;        // live at the moment of the peak heap
    uint64_t leaked_bytes = 0, leaked_blocks = 0; // still live when the trace ends
    // Of a trace cut short (TraceInfo::partial): still live where it was cut, so of unknown
    // fate (freed after the cut, or leaked); never counted as leaked.
    uint64_t unknown_bytes = 0, unknown_blocks = 0;
};

struct Mismatch {
    // "malloc"/"new"/"new[]"/"aligned_alloc"; "free"/"delete"/"delete[]", or "realloc" (of a new
    // or new[] block). The forms with an alignment name it: "new(std::align_val_t(64))".
    std::string allocated_with, freed_with;
    uint64_t count = 0;
    size_t site = 0; // where the block was allocated
};

// One reading of the resident set size, with the heap live at that moment (the sum of the
// blocks live then, from the replay of the allocator calls before it).
struct MemoryPoint {
    double t = 0;      // seconds since its process's trace started
    uint64_t heap = 0; // bytes
    uint64_t rss = 0;  // bytes
    uint32_t pid = 0;  // the process (a report over several traces has several timelines)
};

struct MemoryReport {
    bool present = false;          // the memory profiler ran (memory records, or its Meta key)
    uint64_t allocations = 0;      // calls to allocation functions
    uint64_t frees = 0;            // calls to release functions (non-null)
    uint64_t temporary = 0;
    uint64_t bytes_allocated = 0;
    uint64_t peak_heap = 0;        // the largest sum of live blocks (per process)
    double peak_heap_time = 0;     // seconds since the trace started
    uint64_t peak_rss = 0;         // the largest resident set size seen
    uint64_t leaked_bytes = 0, leaked_blocks = 0;
    // A trace cut short was read (TraceInfo::partial): its blocks live at the cut are
    // unknown_*, not leaked (MemorySite).
    bool partial = false;
    uint64_t unknown_bytes = 0, unknown_blocks = 0;
    uint64_t unknown_frees = 0;    // frees of blocks allocated before tracing (or by untraced code)
    // Records that came after newer ones had been replayed (a writer that broke the order the
    // format promises); they were replayed late, so peak and timeline may be slightly off.
    uint64_t late_events = 0;
    std::vector<MemorySite> sites; // one per stack of named frames (name, file, line, module)
    std::vector<Mismatch> mismatches;
    std::vector<std::pair<double, double>> heap_timeline; // (seconds, live bytes)
    // The readings of the resident set size (at allocator calls and by the runtime's timer),
    // per trace in time order: at most kMaxTimelinePoints per trace (when a trace has more,
    // each point kept is the reading with the highest RSS of 2, 4, 8, ... consecutive ones).
    std::vector<MemoryPoint> timeline;
    static constexpr size_t kMaxTimelinePoints = 4000;
    std::vector<std::pair<double, double>> rss_timeline; // (t, rss) of `timeline`
};

// What the trace says about one thread (tid, name, event and drop counts, duration).
ThreadSummary summarize_thread(const reader::TraceInfo& info, size_t trace, uint32_t stream);

// Which threads a profile covers.
struct ThreadFilter {
    size_t trace = SIZE_MAX; // with stream: one thread
    uint32_t stream = 0;
    bool all() const { return trace == SIZE_MAX; }
};

// Names the function (or marked site) at a runtime address of a trace: the trace's symbol
// table and sites first, then the ELF file on disk (cached). The one naming every view uses.
// `module` (an index into info.modules) picks one of several objects that were loaded at the
// address one after another; by default, the one loaded there last.
class FunctionResolver {
public:
    FunctionResolver();
    ~FunctionResolver();
    Function describe(const reader::TraceInfo& info, uint64_t address,
                      size_t module = reader::kNoModule);
    // The frames of code at `address`, innermost first: the functions inlined there (from the
    // trace's Location record of the address, else the object's DWARF on disk), each at its
    // own line, then the function the address is in, at the line where the outermost of them
    // was inlined. One frame, describe()'s, where nothing is inlined.
    struct Frame {
        Function function;
        bool inlined = false; // inlined into the next frame's function
    };
    std::vector<Frame> describe_frames(const reader::TraceInfo& info, uint64_t address,
                                       size_t module = reader::kNoModule);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// `file:line(name)` with the file's directories stripped unless `full_paths`.
std::string label(const Function& f, bool full_paths = false);

} // namespace prof::analysis
