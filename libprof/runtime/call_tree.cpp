// Counting threads (format 1.9): calls kept in a call tree instead of written one by one.
//
// A counting thread's hooks (call_hooks.cpp) read no clock and write no record per call: each
// call adds one to the count of its call path's node, in place in the trace file, and pushes its
// frame; a return pops it. The counts live in CallCounts records, blocks of u64s in the thread's
// own chunks, which stay mapped until the thread ends (ChunkWriter::kept), so a process killed
// at any point keeps every call it counted. The slow path, a call path met for the first time,
// writes its CallNode record (and, for a function met for the first time, its Function record)
// before the node is used, so a reader knows every node that a count or a sample names.
//
// The tree itself, in the thread's own memory (never the application's allocator):
//  - nodes: one per call path, the root first, one cache line each; a frame keeps its node's
//    index, and a node the two children of it entered last (the next call from a path is
//    usually to one of them), with their counts, so that such a call reads nothing else;
//  - an open-addressing table from (parent, function) to node, for the other calls;
//  - a function the runtime filter excludes gets a node too, outside the trace (id 0), so that
//    its calls cost a lookup like every other, and are neither pushed nor counted.
// Times come from the CPU samples, which name the node the thread is in, and from the clocks
// the first hook after a switch reads (switch_clock.cpp): see analysis/engine/session.hpp.
#include "thread_state.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <sys/mman.h>

namespace prof::rt {
namespace {

constexpr uint32_t kInitialNodes = 256;
constexpr uint32_t kMaxNodes = 1u << 22; // per thread: 4 M paths take 256 MB of nodes, 128 of table
constexpr uint32_t kFirstBlock = 64;     // counts per CallCounts record, doubling up to
constexpr uint32_t kMaxBlock = 4096;     // 32 KiB, which fits the smallest chunk twice

// The rest of a counting thread's tree (the nodes are ThreadState::tree_nodes).
struct CallTree {
    uint32_t nodes, capacity; // nodes used (the root included) and mapped
    uint32_t paths_used;      // slots of ThreadState::tree_paths in use
    uint32_t next_id;         // the trace's number of the next node
    uint64_t* block;          // the current CallCounts record's counts, of ids [block_first, ...)
    uint32_t block_first, block_size;
    uint32_t position;       // the node the last Position record named
    uint64_t excluded_calls; // the count an excluded function's node adds to (never read)
    // 1.13: the start of each timed frame, by depth (PROF_MAX_DEPTH of them, mapped when the
    // thread begins counting; null when it times nothing), and the least mean, in ticks, of a
    // timed path's calls.
    uint64_t* starts;
    uint64_t min_ticks;
};
thread_local CallTree t_tree __attribute__((tls_model("initial-exec")));

PROF_NOINSTR bool grow_nodes(ThreadState& s) {
    CallTree& t = t_tree;
    uint32_t capacity = t.capacity ? t.capacity * 2 : kInitialNodes;
    if (capacity > kMaxNodes) return false;
    auto* nodes = static_cast<TreeNode*>(map_anon(size_t(capacity) * sizeof(TreeNode)));
    if (!nodes) return false;
    NodeLatency* latency = nullptr;
    if (t.starts) {
        latency = static_cast<NodeLatency*>(map_anon(size_t(capacity) * sizeof(NodeLatency)));
        if (!latency) {
            munmap(nodes, size_t(capacity) * sizeof(TreeNode));
            return false;
        }
    }
    if (t.capacity) {
        memcpy(nodes, s.tree_nodes, size_t(t.nodes) * sizeof(TreeNode));
        munmap(s.tree_nodes, size_t(t.capacity) * sizeof(TreeNode));
        if (latency) {
            memcpy(latency, t_node_latency, size_t(t.nodes) * sizeof(NodeLatency));
            munmap(t_node_latency, size_t(t.capacity) * sizeof(NodeLatency));
        }
    }
    s.tree_nodes = nodes;
    t_node_latency = latency;
    t.capacity = capacity;
    return true;
}

PROF_NOINSTR bool grow_paths(ThreadState& s) {
    uint32_t old_size = s.tree_path_mask ? s.tree_path_mask + 1 : 0;
    uint32_t size = old_size ? old_size * 2 : 2 * kInitialNodes;
    auto* paths = static_cast<PathSlot*>(map_anon(size_t(size) * sizeof(PathSlot)));
    if (!paths) return false;
    uint32_t mask = size - 1;
    for (uint32_t i = 0; i < old_size; ++i) {
        const PathSlot& o = s.tree_paths[i];
        if (!o.fn) continue;
        uint32_t h = path_slot(o.fn, o.parent, mask);
        while (paths[h].fn) h = (h + 1) & mask;
        paths[h] = o;
    }
    if (old_size) munmap(s.tree_paths, size_t(old_size) * sizeof(PathSlot));
    s.tree_paths = paths;
    s.tree_path_mask = mask;
    return true;
}

// A count for the next node: a new CallCounts record when the current one is used up. Its
// chunk then stays mapped while the thread runs. Null when no room can be made.
PROF_NOINSTR uint64_t* next_count(ThreadState& s) {
    CallTree& t = t_tree;
    if (t.block && t.next_id < t.block_first + t.block_size)
        return &t.block[t.next_id - t.block_first];
    uint32_t size = t.block_size ? t.block_size * 2 : kFirstBlock;
    if (size > kMaxBlock) size = kMaxBlock;
    uint64_t now = s.w.last_ticks;
    if (!ensure_bytes(s, now, format::call_counts_size(t.next_id, size))) return nullptr;
    uint8_t* end = format::put_call_counts(s.w.cursor, t.next_id, size);
    t.block = reinterpret_cast<uint64_t*>(end - 8 * size_t(size));
    t.block_first = t.next_id;
    t.block_size = size;
    s.w.cursor = end;
    s.w.keep = 1;
    commit(s.w);
    return t.block;
}

// A new node of path `parent` + `a` at index t.nodes: in the trace unless `slot` says the
// runtime filter excludes `a`. False when it cannot be made.
PROF_NOINSTR bool add_node(ThreadState& s, uint32_t parent, uintptr_t a, const Slot* slot) {
    CallTree& t = t_tree;
    if (t.nodes == t.capacity && !grow_nodes(s)) return false;
    if ((t.paths_used + 1) * 2 > s.tree_path_mask + 1 && !grow_paths(s)) return false;
    TreeNode n{{}, &t.excluded_calls, 0, parent};
    if (!slot->excluded) {
        uint64_t* calls = next_count(s);
        uint64_t now = s.w.last_ticks;
        if (!calls || !ensure_bytes(s, now, format::kMaxCallNodeRecord)) return false;
        n.calls = calls;
        n.id = t.next_id++;
        s.w.cursor = format::put_call_node(s.w.cursor, n.id, s.tree_nodes[parent].id, slot->index);
        commit(s.w);
    }
    uint32_t h = path_slot(a, parent, s.tree_path_mask);
    while (s.tree_paths[h].fn) h = (h + 1) & s.tree_path_mask;
    s.tree_paths[h] = PathSlot{a, parent, t.nodes};
    ++t.paths_used;
    s.tree_nodes[t.nodes++] = n;
    return true;
}

PROF_NOINSTR void release_tables(ThreadState& s) {
    CallTree& t = t_tree;
    if (t.capacity) munmap(s.tree_nodes, size_t(t.capacity) * sizeof(TreeNode));
    if (t_node_latency) munmap(t_node_latency, size_t(t.capacity) * sizeof(NodeLatency));
    if (t.starts) munmap(t.starts, size_t(s.max_depth) * sizeof(uint64_t));
    t_node_latency = nullptr;
    if (s.tree_path_mask) munmap(s.tree_paths, size_t(s.tree_path_mask + 1) * sizeof(PathSlot));
    s.tree_paths = nullptr;
    s.tree_path_mask = 0;
    t = CallTree{};
    s.tree_nodes = nullptr;
}

} // namespace

PROF_NOINSTR uint32_t tree_child(ThreadState& s, uint32_t parent, uintptr_t a, uintptr_t site) {
    CallTree& t = t_tree;
    uint32_t h = path_slot(a, parent, s.tree_path_mask);
    for (;; h = (h + 1) & s.tree_path_mask) {
        const PathSlot& p = s.tree_paths[h];
        if (p.fn == a && p.parent == parent) return p.node;
        if (!p.fn) break;
    }
    // A path met for the first time: its function's slot (a Function record, the filter),
    // with room for that record made first.
    int saved = errno;
    uint64_t now = s.w.last_ticks;
    uint32_t node = kNoNode;
    if (ensure_bytes(s, now, format::kMaxEventRecord)) {
        const Slot* slot =
            function_slot(s, a, is_scope(site) ? reinterpret_cast<prof_site*>(a) : nullptr);
        // Its Function record is in the chunk before add_node may open the next one.
        commit(s.w);
        if (slot && add_node(s, parent, a, slot)) node = t.nodes - 1;
    }
    errno = saved;
    return node;
}

thread_local NodeLatency* t_node_latency __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

// The parent's copies of node `c` (its recent children) say whether its calls are timed.
PROF_NOINSTR void note_timed(ThreadState& s, uint32_t c, uint32_t timed) {
    TreeNode& p = s.tree_nodes[s.tree_nodes[c].parent];
    for (TreeChild& r : p.recent)
        if (r.fn && r.node == c) r.timed = timed;
}

// A duration into a CallLatency record's fields, its bucket `b`; a bucket's count stops at
// its largest value rather than wrap.
PROF_NOINSTR void add_duration(format::LatencyCounts* l, uint64_t ticks, uint32_t b, uint64_t end) {
    ++l->calls;
    l->sum_ticks += ticks;
    if (ticks > l->max_ticks) {
        l->max_ticks = ticks;
        l->max_end_ticks = end;
    }
    if (l->buckets[b] != UINT32_MAX) ++l->buckets[b];
}

PROF_NOINSTR uint32_t bucket_of(uint64_t ticks) {
    uint32_t b = format::latency_bucket(ticks);
    return b < format::kLatencyBuckets ? b : format::kLatencyBuckets - 1;
}

// The path of node `c` is to be timed from now: its CallLatency record, with the calls of the
// probe that decided it. False when the trace has no room for it.
PROF_NOINSTR bool start_latency(ThreadState& s, uint32_t c, NodeLatency& l) {
    uint64_t now = s.w.last_ticks;
    uint32_t id = s.tree_nodes[c].id;
    if (!ensure_bytes(s, now, format::call_latency_size(id, format::kLatencyBuckets))) return false;
    uint8_t* end = format::put_call_latency(s.w.cursor, id, format::kLatencyBuckets);
    auto* counts = reinterpret_cast<format::LatencyCounts*>(
        end - format::latency_fields_size(format::kLatencyBuckets));
    // Whole before the commit makes the record part of the trace (a reader of a killed
    // process's trace sees it as it stood).
    counts->calls = l.probes;
    counts->sum_ticks = l.probe_ticks;
    counts->max_ticks = l.probe_max;
    counts->max_end_ticks = l.probe_max_end;
    for (uint32_t i = 0; i < l.probes; ++i) ++counts->buckets[l.probe_buckets[i]];
    s.w.cursor = end;
    s.w.keep = 1; // its chunk stays mapped while the thread runs, as the counts'
    commit(s.w);
    l.counts = counts;
    return true;
}

} // namespace

PROF_NOINSTR void tree_time_enter(ThreadState& s, uint32_t d) {
    if (!t_node_latency) return;
    Frame& f = s.frames[d];
    NodeLatency& l = t_node_latency[f.node];
    if (l.state == kLatencyDone) return;
    if (l.state == kLatencyUntimed) { // a probe is due
        l.state = kLatencyProbing;
        l.probes = l.started = 0;
        l.probe_ticks = l.probe_max = l.probe_max_end = 0;
        note_timed(s, f.node, 1);
    }
    if (l.state == kLatencyProbing && ++l.started > 2 * kProbeCalls) {
        l.state = kLatencyUntimed; // its calls are left more often than they return
        note_timed(s, f.node, 0);
        return;
    }
    f.timed = 1;
    t_tree.starts[d] = now_ticks(); // last: the hook's cost after it is in the call's time
}

PROF_NOINSTR void tree_time_exit(ThreadState& s, uint32_t d) {
    uint64_t now = now_ticks(); // first
    Frame& f = s.frames[d];
    f.timed = 0;
    uint64_t start = t_tree.starts[d];
    uint64_t ticks = now > start ? now - start : 0;
    NodeLatency& l = t_node_latency[f.node];
    uint32_t b = bucket_of(ticks);
    if (PROF_LIKELY(l.state == kLatencyTimed)) {
        format::LatencyCounts* c = l.counts;
        add_duration(c, ticks, b, now);
        // Its mean, checked at every power of two of its calls: a path whose calls became
        // shorter than the threshold stops being timed (its record keeps the calls it has).
        if ((c->calls & (c->calls - 1)) == 0 && c->sum_ticks < c->calls * t_tree.min_ticks) {
            l.state = kLatencyDone;
            note_timed(s, f.node, 0);
        }
        return;
    }
    if (l.state != kLatencyProbing) return;
    l.probe_buckets[l.probes++] = uint16_t(b);
    l.probe_ticks += ticks;
    if (ticks > l.probe_max) {
        l.probe_max = ticks;
        l.probe_max_end = now;
    }
    // Timed as soon as the probe's calls reach the mean of a whole probe's (a path called
    // once, for long, is timed), untimed when a whole probe does not. The threshold in ticks
    // from the clock's rate as measured so far (a guess in the first millisecond).
    t_tree.min_ticks = uint64_t(g_options.latency_min_ns) * ticks_per_ms() / 1000000;
    bool timed = l.probe_ticks >= kProbeCalls * t_tree.min_ticks;
    if (!timed && l.probes < kProbeCalls) return;
    if (timed) {
        int saved = errno;
        timed = start_latency(s, f.node, l);
        errno = saved;
    }
    l.state = timed ? kLatencyTimed : kLatencyUntimed;
    if (!timed) note_timed(s, f.node, 0);
}

PROF_NOINSTR bool begin_counting(ThreadState& s) {
    s.count_soon = 0;
    if (s.counting || !s.switch_area || !(sampler_thread_armed() || kCountWithoutSamples))
        return false;
    int saved = errno;
    release_tables(s);
    CallTree& t = t_tree;
    t.next_id = 1;
    forget_runs(s); // no scope run is joined from here on
    if (g_options.latency_min_ns) { // without room for the starts, nothing is timed
        t.starts = static_cast<uint64_t*>(map_anon(size_t(s.max_depth) * sizeof(uint64_t)));
        t.min_ticks = uint64_t(g_options.latency_min_ns) * ticks_per_ms() / 1000000;
    }
    if (!grow_nodes(s) || !grow_paths(s)) {
        release_tables(s);
        errno = saved;
        return false;
    }
    s.tree_nodes[0] = TreeNode{{}, &t.excluded_calls, 0, 0};
    t.nodes = 1;
    // Its clocks now, after the mark: a switch from here on clears the word again.
    s.switch_word = s.switch_area;
    __atomic_store_n(s.switch_word, switch_mark(), __ATOMIC_RELAXED);
    uint64_t now = now_ticks();
    if (!ensure_bytes(s, now, format::kMaxCountingRecord)) {
        release_tables(s);
        s.switch_word = nullptr;
        errno = saved;
        return false;
    }
    uint64_t cpu = thread_cpu_ns();
    s.w.cursor = format::put_counting(s.w.cursor, take_delta(s.w, now), cpu);
    commit(s.w);
    s.counting = 1;
    // PROF_TIME=auto: the trace's calls have their times up to here only (PROF_TIME=sampled
    // says so in its Meta records, from the start).
    if (g_options.time_mode == kTimeAuto) note_counting_began(now);
    // The frames open now, outermost first. One that cannot be given a node (no room) ends
    // the tree there: the frames above it are dropped as too deep to record.
    uint32_t parent = 0, depth = s.depth;
    for (uint32_t i = 0; i < depth; ++i) {
        Frame& f = s.frames[i];
        uint32_t node = tree_child(s, parent, f.fn, f.site);
        if (node == kNoNode || !s.tree_nodes[node].id) {
            // Not in the tree: this frame and those above it are no longer recorded.
            s.depth = i;
            s.overflow += depth - i;
            s.overflow_cfa = f.cfa;
            break;
        }
        f.node = node;
        f.timed = 0; // entered before: its start is not known
        if (f.site == kScopeMark) f.site = kCountedScopeMark;
        parent = node;
    }
    // The macros' inline scope path writes records: their sites go through the runtime now.
    for (uint32_t id = 1; id < s.site_cap; ++id) s.sites[id].scope_index = 0;
    errno = saved;
    return true;
}

PROF_NOINSTR void tree_note_position(ThreadState& s) {
    uint32_t node = tree_position(s);
    if (node == t_tree.position) return;
    t_tree.position = node;
    s.w.cursor = format::put_position(s.w.cursor, node);
}

PROF_NOINSTR void tree_clock_record(ThreadState& s) {
    sampler_clock_record(s, now_ticks());
}

// PROF_TIME=auto: the samples the process has taken (its threads' and the profiler's), until
// there are PROF_COUNT_AFTER; then every thread counts from its next call (its next sample tells
// it), and threads that start later count from their start. A forked child starts again.
namespace {
std::atomic<uint32_t> g_samples_seen{0};
std::atomic<bool> g_count_now{false};
} // namespace

PROF_NOINSTR bool counting_from_start() {
    return g_options.time_mode == kTimeSampled && switch_clock_on();
}

PROF_NOINSTR bool counting_now() {
    return counting_from_start() || (g_options.time_mode == kTimeAuto && switch_clock_on() &&
                                     g_count_now.load(std::memory_order_relaxed));
}

PROF_NOINSTR void note_sample_for_counting(ThreadState& s) {
    if (g_options.time_mode != kTimeAuto || !switch_clock_on() || s.counting) return;
    if (!g_count_now.load(std::memory_order_relaxed)) {
        if (g_samples_seen.fetch_add(1, std::memory_order_relaxed) + 1 < g_options.count_after)
            return;
        g_count_now.store(true, std::memory_order_relaxed);
    }
    s.count_soon = 1;
}

PROF_NOINSTR void counting_after_fork(ThreadState& s) {
    if (g_options.time_mode == kTimeAuto) {
        g_samples_seen.store(0, std::memory_order_relaxed);
        g_count_now.store(false, std::memory_order_relaxed);
    }
    s.count_soon = 0;
}

PROF_NOINSTR void tree_release(ThreadState& s) {
    release_tables(s);
    s.counting = 0;
    s.switch_word = nullptr;
}

} // namespace prof::rt
