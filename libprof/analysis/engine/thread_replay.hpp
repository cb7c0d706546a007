// The replay state of one thread of one trace (its call paths, clock, sampled time and memory
// stacks) and the functions of one trace: what every room of the engine reads and writes.
#pragma once

#include "reader/trace_reader.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

namespace prof::analysis::engine {

constexpr uint32_t kNoCaller = UINT32_MAX;
// In ThreadReplay::fn_map: the function's address was occupied by several objects in turn; the
// object (and so the function) is chosen by the time of each call.
constexpr uint32_t kReusedBit = 0x80000000u;
constexpr uint32_t kUndefined = UINT32_MAX;

// The thread's clock counts ticks in fixed point, with this many fractional bits: the
// compensated costs are fractions of a tick, and integer sums are exact and fast.
constexpr int kClockFraction = 8;
// The most CPU time one step of a thread's samples may stand for, in clock units: 2^58, over
// five days at 2.5 GHz (a valid trace's steps are periods of milliseconds).
constexpr int64_t kMaxCpuUnits = int64_t(1) << 58;
constexpr double kClockUnit = 1.0 / (1 << kClockFraction); // ticks

// A call path: (parent path, function). Node 0 is the thread's root.
struct PathNode {
    uint32_t parent;
    uint32_t function; // index into the trace's functions
    uint64_t calls = 0;
    int64_t total = 0; // on the thread's clock, inclusive
    double ticks() const { return double(total) * kClockUnit; }
};

// (parent, function) -> node, open addressing: the one lookup of every call.
class PathIndex {
  public:
    PathIndex() { rehash(1024); }
    // The node of `key`, or `fresh` after recording it as that.
    uint32_t find_or_add(uint64_t key, uint32_t fresh) {
        size_t i = slot(key);
        for (;; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return slots_[i].value;
            if (slots_[i].key == kEmpty) break;
        }
        slots_[i] = Slot{key, fresh};
        if (++size_ * 2 > slots_.size()) rehash(slots_.size() * 2);
        return fresh;
    }

  private:
    static constexpr uint64_t kEmpty = UINT64_MAX;
    struct Slot {
        uint64_t key = kEmpty;
        uint32_t value = 0;
    };
    size_t slot(uint64_t key) const { return size_t((key * 0x9e3779b97f4a7c15ULL) >> shift_); }
    void rehash(size_t n) {
        std::vector<Slot> old(n);
        old.swap(slots_);
        mask_ = n - 1;
        shift_ = 64 - __builtin_ctzll(n);
        for (const Slot& e : old) {
            if (e.key == kEmpty) continue;
            size_t i = slot(e.key);
            while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
            slots_[i] = e;
        }
    }
    std::vector<Slot> slots_;
    size_t mask_ = 0, size_ = 0;
    int shift_ = 0;
};

struct Frame {
    uint32_t node;
    int64_t start; // the thread's clock when the frame opened
};

// An interval between two events of a thread long enough to have been spent off CPU, in the
// span between two samples: the frame on top then, and its length on the thread's clock.
struct LongInterval {
    uint32_t node;
    int64_t length;
};

// A sample's CPU time, held until the end of its trace: the node open where it was taken, and
// the instruction it interrupted (format 1.9), which may be another function's.
struct PlacedSample {
    uint32_t node;
    uint64_t ip;
    int64_t units;
    uint64_t samples;
    int64_t credit; // scope runs' measured time taken off `units` (SampleTime::place_samples)
};

// 1.13: the timed calls of a counted call path (a CallLatency record), with its trace's clock.
struct PathLatency {
    uint32_t path; // node
    double ns_per_tick;
    uint64_t start_ticks; // the trace's start
    reader::CallLatencyRecord record;
};

// One thread of one trace.
struct ThreadReplay {
    size_t trace = 0;
    uint32_t stream = 0;
    size_t index = 0;             // in Session order
    std::vector<uint32_t> fn_map; // the stream's Function index -> trace function (| kReusedBit)
    std::unordered_map<uint64_t, uint32_t> address_fn; // EnterAddress records
    std::vector<PathNode> nodes{PathNode{kNoCaller, kUndefined}};
    uint64_t seen = 0; // Impl::order_key() when the thread's first record was read
    PathIndex paths;
    std::vector<Frame> stack;
    // The clock (session.hpp, "the time model"): ticks since the trace started, less the
    // profiler's cost; `pending` is that cost in the interval since the last event.
    bool started = false;
    uint64_t first = 0, last = 0;
    int64_t clock = 0, pending = 0;
    uint64_t unmatched_exits = 0;
    // A forked child's stream: how many of its first Enter records are still to come that
    // continue calls of the parent (Meta inherited_frames.<stream>); the observer sees them
    // with no activation.
    uint32_t inherited_left = 0;
    std::vector<uint32_t> inherited_nodes; // their nodes, which count no call for them
    // Sampled time (session.hpp, "the time model"), in the clock's units: each node's own
    // time, from the samples that landed in it and the time off CPU located in it. A span is
    // the time between two samples; `span_*` are its start's clocks.
    bool sampled = false, spans_closed = false;
    bool ended = false; // its ThreadEnd record was read
    uint64_t span_ticks = 0, span_cpu_ns = 0;
    // PROF_TIME=sampled: the CPU clock of the last sample that was charged (clock records of
    // count 0 end spans but charge nothing: the next sample weighs everything since).
    uint64_t charged_cpu_ns = 0;
    int64_t own_waiting = 0;                  // the profiler's CPU time reported since then
    std::vector<LongInterval> long_intervals; // of this span
    int64_t scope_credit = 0;      // scope runs' time in this span, already given to their nodes
    std::unordered_map<uint32_t, int64_t> run_given; // that time by scope node, in all spans
    bool runs_measured = false;    // and kept: DWARF did not find every scope's block
    uint32_t last_top = 0;         // the last frame closed, once none is open
    std::vector<int64_t> self;     // on CPU (and scope runs' measured time)
    std::vector<int64_t> self_off; // off CPU: blocked, sleeping (or unsplit, see below)
    // Waiting for a CPU (format 1.11 Waited records: the kernel's run delay of the thread, read
    // with its samples): the total, charged where the CPU time is at the end. Before a thread's
    // first Waited record, its time off CPU is not split (`waited` false). The time off CPU
    // located since the last Waited record waits in `deferred` (node, units) until the next one
    // says how much of it was waiting for a CPU.
    int64_t runnable = 0, off_located = 0;
    bool waited = false, waited_next = false;
    uint64_t waited_ns = 0, waited_next_ns = 0; // the run delay at the last record, at the next
    std::vector<std::pair<uint32_t, int64_t>> deferred;
    int64_t deferred_total = 0;
    // CPU samples per node, the innermost frame of each (sampled traces; pprof's samples/count).
    std::vector<uint64_t> node_samples;
    uint32_t charged_node = 0; // the node charge_stack gave its time to last
    uint64_t samples = 0, own_samples = 0;
    uint64_t hook_call_samples = 0;   // of own_samples: at the hooks' calls in program code
    uint64_t marker_samples = 0;      // of own_samples: in the line and scope markers' code
    int64_t own = 0, sampled_cpu = 0; // the profiler's CPU time, all CPU time sampled
    int64_t off_cpu = 0;              // time off CPU of a sampled thread (OffCpu records)
    uint64_t off_cpu_records = 0;
    // Memory: unwound stacks (Stack records) and the latest allocation for temporaries.
    struct Memory {
        std::unordered_map<uint32_t, std::vector<uint64_t>> unwound; // Stack id -> addresses
        std::unordered_map<uint32_t, size_t> unwound_site;           // Stack id -> memory site
        uint64_t last_alloc = 0; // the latest allocation, while nothing else was allocated since
        size_t last_alloc_site = 0;
    } memory;
    // 1.9: from its Counting record on, the thread counted its calls in a call tree of its own:
    // the path node of each of its nodes (0: the root), their calls, and the node its records
    // are in (Position: the call path of memory records with stack 0).
    bool counting = false;
    std::vector<uint32_t> tree{0};
    std::vector<uint64_t> tree_calls;
    std::vector<PathLatency> latency; // 1.13
    std::vector<PlacedSample> placed; // Session::Impl::charge
    uint32_t position = 0;
    uint32_t clock_node = 0; // the node of its last Sample record (or where it began counting)
    // Where the thread's last sample landed (0: none yet): the CPU time after it, which its last
    // record measures, goes there (the kernel's timer may have left a thread that shares its CPU
    // with a busy one unsampled for most of its run).
    uint32_t last_sample_node = 0;

    uint32_t child(uint32_t parent, uint32_t function) {
        uint32_t n = paths.find_or_add(uint64_t(parent) << 32 | function, uint32_t(nodes.size()));
        if (n == nodes.size()) nodes.push_back(PathNode{parent, function});
        return n;
    }
};

// The functions of one trace: (address, object) pairs, the object given only for addresses
// that several objects occupied in turn.
struct TraceFunctions {
    std::vector<uint64_t> address;
    std::vector<size_t> module;
    std::vector<uint64_t> seen; // Impl::order_key() when the function was first called
    // Met as a function inlined into a sampled frame (a Location record's inlined call).
    std::vector<bool> inlined;
    std::map<std::pair<uint64_t, size_t>, uint32_t> index;
    uint32_t of(uint64_t a, size_t m, uint64_t order) {
        auto [it, fresh] = index.try_emplace({a, m}, uint32_t(address.size()));
        if (fresh) {
            address.push_back(a);
            module.push_back(m);
            seen.push_back(order);
            inlined.push_back(false);
        }
        return it->second;
    }
};

// The node of the frame on top of thread `t`'s stack (0: none open).
inline uint32_t top(const ThreadReplay& t) {
    return t.stack.empty() ? 0 : t.stack.back().node;
}
// The path node of call tree node `node` of a counting thread (0 for one not defined: a
// damaged trace's).
inline uint32_t tree_node(const ThreadReplay& t, uint32_t node) {
    return node < t.tree.size() ? t.tree[node] : 0;
}

// The addresses of thread `s`'s stack now, innermost first: the functions of its open frames,
// or of a counting thread's position. (The call replay's one input to the heap replay.)
inline std::vector<uint64_t> stack_addresses(const ThreadReplay& s, const TraceFunctions& fns) {
    std::vector<uint64_t> addresses;
    if (s.counting) // the path of its position, innermost first
        for (uint32_t n = s.position; n; n = s.nodes[n].parent)
            addresses.push_back(fns.address[s.nodes[n].function]);
    else
        for (auto f = s.stack.rbegin(); f != s.stack.rend(); ++f)
            addresses.push_back(fns.address[s.nodes[f->node].function]);
    return addresses;
}

} // namespace prof::analysis::engine
