// ProfileBuilder: replays each thread's enter/exit events on a shadow stack and accumulates
// per-function and per-edge statistics in clock ticks, then names functions and converts to
// seconds when a profile is built.
#include "analysis/profile.hpp"

#include "reader/address_map.hpp"
#include "reader/dwarf_lines.hpp"
#include "reader/elf_symbols.hpp"
#include "reader/time_order.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <map>
#include <queue>
#include <regex>
#include <tuple>
#include <unistd.h>
#include <unordered_map>

namespace prof::analysis {
namespace {

constexpr uint32_t kNoCaller = UINT32_MAX;

struct LocalFunction {
    uint64_t address = 0;
    // The address was occupied by several objects in turn (dlclose, then dlopen of another):
    // each event goes to the variant of the object loaded there at its time.
    bool reused = false;
    size_t module = reader::kNoModule; // with `reused`: the object of this variant
    uint64_t ncalls = 0, pcalls = 0;
    double tot = 0, cum = 0; // ticks, after overhead compensation
    uint32_t active = 0;                 // activations on the stack
    uint32_t last_caller = kNoCaller - 1; // edge cache: most calls repeat the previous caller
    uint32_t last_edge = 0;
};

struct LocalEdge {
    uint32_t caller, callee;
    uint64_t ncalls = 0, pcalls = 0;
    double tot = 0, cum = 0;
    uint32_t active = 0; // activations of this caller->callee pair on the stack (as cProfile)
};

struct Frame {
    uint32_t fn, edge;
    uint64_t start, child;
    uint64_t children = 0;    // direct calls made from this frame
    double children_time = 0; // their compensated elapsed times (ticks)
    uint64_t paused = 0;      // the runtime's own work in this frame's self time (Pause)
};

// Everything about one thread of one trace, in stream-local function indices.
struct StreamResult {
    size_t trace = 0;
    uint32_t stream = 0;
    std::vector<LocalFunction> functions;
    std::vector<LocalEdge> edges;
    std::unordered_map<uint64_t, uint32_t> edge_index;    // caller << 32 | callee
    std::unordered_map<uint64_t, uint32_t> address_index; // for EnterAddress records
    std::vector<uint32_t> index_of; // the stream's Function index -> index into `functions`
    // A reused address's first function -> its variants for other objects.
    std::unordered_map<uint32_t, std::vector<uint32_t>> variants;
    std::vector<Frame> stack;
    std::unordered_map<uint32_t, std::vector<uint64_t>> unwound; // Stack id -> return addresses
    std::unordered_map<uint32_t, size_t> unwound_site;           // Stack id -> memory site
    uint64_t last_alloc = 0; // the latest allocation, while nothing else was allocated since
    size_t last_alloc_site = 0;
    uint64_t unmatched_exits = 0;
    uint64_t last_ticks = 0;
    bool ended = false;
};

// An operator new or delete form's std::align_val_t (format 1.4), as log2 + 1: 0 = none.
uint8_t alignment_code(uint64_t alignment) {
    return alignment ? uint8_t(std::min(__builtin_ctzll(alignment) + 1, 64)) : 0;
}

// The operator's name with its alignment argument, as the program wrote it:
// new(std::align_val_t(64)).
std::string with_alignment(const char* name, uint8_t code) {
    if (!code) return name;
    return fmt::format("{}(std::align_val_t({}))", name, uint64_t(1) << (code - 1));
}

std::string alloc_name(format::AllocKind k, uint8_t alignment) {
    switch (k) {
    case format::AllocKind::kNew:
        return with_alignment("new", alignment);
    case format::AllocKind::kNewArray:
        return with_alignment("new[]", alignment);
    case format::AllocKind::kAligned: return "aligned_alloc";
    default: return "malloc";
    }
}

std::string free_name(format::FreeKind k, uint8_t alignment) {
    switch (k) {
    case format::FreeKind::kDelete:
        return with_alignment("delete", alignment);
    case format::FreeKind::kDeleteArray:
        return with_alignment("delete[]", alignment);
    default: return "free";
    }
}

// A realloc of a live block, in a mismatch key (FreeKind values start at 1).
constexpr int kReallocRelease = 0;

// Which release function matches an allocation function.
bool matches(format::AllocKind a, format::FreeKind f) {
    switch (a) {
    case format::AllocKind::kNew: return f == format::FreeKind::kDelete;
    case format::AllocKind::kNewArray: return f == format::FreeKind::kDeleteArray;
    default: return f == format::FreeKind::kFree;
    }
}

} // namespace

struct LiveBlock {
    uint64_t size;
    size_t site;
    format::AllocKind kind;
    uint8_t alignment; // alignment_code of an operator new form with std::align_val_t
};

// The blocks live at a point of the replay, by address.
using LiveBlocks = reader::AddressMap<LiveBlock>;

struct ProfileBuilder::Impl : reader::EventSink {
    std::vector<reader::TraceInfo> traces;
    // Memory: while reading, sites are keyed by (trace, addresses innermost first) in
    // `raw_sites`; blocks live per trace. The report's sites are those with the same named
    // frames merged: an object loaded again at another address (a plugin dlopened and
    // dlclosed in a loop) gives new addresses to the same code.
    MemoryReport memory;
    // A site: (trace, return addresses innermost first, the module of each address at the
    // time when another object was also loaded at that address, else kNoModule).
    using SiteKey = std::tuple<size_t, std::vector<uint64_t>, std::vector<size_t>>;
    std::map<SiteKey, size_t> site_index;
    std::vector<SiteKey> site_keys;
    std::vector<MemorySite> raw_sites;    // by SiteKey index; stacks stay empty
    std::vector<Mismatch> raw_mismatches; // `site` indexes raw_sites
    // What names a frame: function name, file, line, module path.
    using FrameKey = std::tuple<std::string, std::string, uint32_t, std::string>;
    std::map<std::vector<FrameKey>, size_t> merged_index; // named stack -> memory.sites index
    std::vector<size_t> merged_of;                        // raw site -> memory.sites index
    LiveBlocks live;
    std::map<std::tuple<size_t, int, int>, size_t> mismatch_index;
    uint64_t trace_peak_rss = 0;
    std::vector<std::unique_ptr<StreamResult>> streams;
    std::unordered_map<uint32_t, StreamResult*> current; // stream id -> result, this trace
    size_t trace_index = 0;

    // Compensation of the trace being read: its Meta records arrive with the process stream,
    // at the start of the file, so they are known before the events they apply to.
    const reader::TraceInfo* reading = nullptr;
    // The module map of the trace being read, from a first pass over its process stream (an
    // object's Unload record can lie later in the file than the events it separates).
    reader::TraceInfo layout;
    std::unique_ptr<reader::AddressHistory> history;

    void read_layout(const std::string& path) {
        reader::TraceReader meta(path);
        layout = meta.read_metadata();
        history = std::make_unique<reader::AddressHistory>(layout);
    }
    bool reused(uint64_t address) const { return history->reused(address); }
    // The function of `s` that an enter of local function `fn` at `ticks` is a call of.
    uint32_t variant(StreamResult& s, uint32_t fn, uint64_t ticks) {
        LocalFunction& base = s.functions[fn];
        size_t module = history->module_at(base.address, ticks);
        if (base.module == reader::kNoModule) base.module = module;
        if (base.module == module) return fn;
        std::vector<uint32_t>& list = s.variants[fn];
        for (uint32_t v : list)
            if (s.functions[v].module == module) return v;
        list.push_back(uint32_t(s.functions.size()));
        LocalFunction f;
        f.address = base.address;
        f.reused = true;
        f.module = module;
        s.functions.push_back(f);
        return list.back();
    }
    bool compensate = true;
    // "reading N%" on stderr while a long trace is read, when stderr is a terminal.
    bool progress = false, progress_shown = false;
    uint64_t events_read = 0;

    void tick_progress(uint64_t ticks) {
        if (!progress || (++events_read & 0x3fffff) || !isatty(2)) return;
        const format::FileHeader& h = reading->header;
        if (h.end_ticks <= h.start_ticks) {
            std::fprintf(stderr, "\rprofreport: reading %s: %llu M events", reading->path.c_str(),
                         (unsigned long long)(events_read >> 20));
        } else {
            double f = double(ticks - h.start_ticks) / double(h.end_ticks - h.start_ticks);
            std::fprintf(stderr, "\rprofreport: reading %s: %3.0f%%", reading->path.c_str(),
                         100 * std::min(1.0, std::max(0.0, f)));
        }
        progress_shown = true;
    }

    StreamResult& stream(uint32_t id) {
        auto it = current.find(id);
        if (it != current.end()) return *it->second;
        streams.push_back(std::make_unique<StreamResult>());
        StreamResult* r = streams.back().get();
        r->trace = trace_index;
        r->stream = id;
        current.emplace(id, r);
        return *r;
    }

    uint32_t edge_of(StreamResult& s, uint32_t caller, uint32_t callee) {
        LocalFunction& f = s.functions[callee];
        if (f.last_caller == caller) return f.last_edge;
        uint64_t key = uint64_t(caller) << 32 | callee;
        auto [it, fresh] = s.edge_index.try_emplace(key, uint32_t(s.edges.size()));
        if (fresh) s.edges.push_back(LocalEdge{caller, callee});
        f.last_caller = caller;
        f.last_edge = it->second;
        return it->second;
    }

    void enter(StreamResult& s, uint32_t fn, uint64_t ticks) {
        uint32_t caller = s.stack.empty() ? kNoCaller : s.stack.back().fn;
        uint32_t e = edge_of(s, caller, fn);
        LocalFunction& f = s.functions[fn];
        LocalEdge& edge = s.edges[e];
        ++f.ncalls;
        ++edge.ncalls;
        if (f.active == 0) ++f.pcalls;
        if (edge.active == 0) ++edge.pcalls;
        ++f.active;
        ++edge.active;
        s.stack.push_back(Frame{fn, e, ticks, 0});
        s.last_ticks = ticks;
    }

    void exit(StreamResult& s, uint64_t ticks) {
        if (s.stack.empty()) {
            ++s.unmatched_exits;
            return;
        }
        Frame fr = s.stack.back();
        s.stack.pop_back();
        uint64_t raw = ticks > fr.start ? ticks - fr.start : 0;
        uint64_t raw_self = raw > fr.child ? raw - fr.child : 0;
        // Compensation: the hooks' own time inside this interval (c_in per call) and what each
        // call made from it added outside the callee's interval (c_out).
        double cin = compensate ? reading->overhead_in : 0, cout = compensate ? reading->overhead_out : 0;
        // A frame's compensated time is its compensated self time plus its callees', so callees
        // never add up to more than their caller.
        double paused = compensate ? double(fr.paused) : 0;
        double self =
            std::max(0.0, double(raw_self) - cin - cout * double(fr.children) - paused);
        double elapsed = self + fr.children_time;
        LocalFunction& f = s.functions[fr.fn];
        LocalEdge& edge = s.edges[fr.edge];
        f.tot += self;
        edge.tot += self;
        if (--f.active == 0) f.cum += elapsed;
        if (--edge.active == 0) edge.cum += elapsed;
        if (!s.stack.empty()) {
            Frame& parent = s.stack.back();
            parent.child += raw;
            ++parent.children;
            parent.children_time += elapsed;
        }
        s.last_ticks = ticks;
    }

    // `count` leaf activations of `fn` that took `total` ticks together: as many enters and
    // exits. Such an activation is timed by the macro's inline path, which measures about what
    // a PROF_LINE around an empty statement does (line_overhead), not the hooks' overhead_in.
    void run(StreamResult& s, uint32_t fn, uint64_t ticks, uint64_t count, uint64_t total) {
        uint32_t caller = s.stack.empty() ? kNoCaller : s.stack.back().fn;
        uint32_t e = edge_of(s, caller, fn);
        LocalFunction& f = s.functions[fn];
        LocalEdge& edge = s.edges[e];
        f.ncalls += count;
        edge.ncalls += count;
        if (f.active == 0) f.pcalls += count;
        if (edge.active == 0) edge.pcalls += count;
        double cin = compensate ? reading->line_overhead : 0;
        double self = std::max(0.0, double(total) - cin * double(count));
        f.tot += self;
        edge.tot += self;
        if (f.active == 0) f.cum += self;
        if (edge.active == 0) edge.cum += self;
        if (!s.stack.empty()) {
            Frame& parent = s.stack.back();
            parent.child += total;
            parent.children += count;
            parent.children_time += self;
        }
        s.last_ticks = ticks;
    }

    // Function records and EnterAddress records share `functions`: the stream's own indices go
    // through `index_of`.
    void on_function(uint32_t id, uint32_t fn, uint64_t address) override {
        StreamResult& s = stream(id);
        if (s.index_of.size() <= fn) s.index_of.resize(fn + 1, UINT32_MAX);
        s.index_of[fn] = uint32_t(s.functions.size());
        s.functions.emplace_back();
        s.functions.back().address = address;
        s.functions.back().reused = reused(address);
    }
    void on_enter(uint32_t id, uint32_t fn, uint64_t ticks) override {
        tick_progress(ticks);
        StreamResult& s = stream(id);
        if (fn >= s.index_of.size() || s.index_of[fn] == UINT32_MAX) return;
        uint32_t f = s.index_of[fn];
        enter(s, s.functions[f].reused ? variant(s, f, ticks) : f, ticks);
    }
    void on_enter_address(uint32_t id, uint64_t address, uint64_t ticks) override {
        StreamResult& s = stream(id);
        auto [it, fresh] = s.address_index.try_emplace(address, uint32_t(s.functions.size()));
        if (fresh) {
            s.functions.emplace_back();
            s.functions.back().address = address;
            s.functions.back().reused = reused(address);
        }
        uint32_t f = it->second;
        enter(s, s.functions[f].reused ? variant(s, f, ticks) : f, ticks);
    }
    void on_exit(uint32_t id, uint64_t ticks) override { exit(stream(id), ticks); }
    void on_scope_run(uint32_t id, uint32_t fn, uint64_t ticks, uint64_t count,
                      uint64_t total) override {
        StreamResult& s = stream(id);
        if (fn >= s.index_of.size() || s.index_of[fn] == UINT32_MAX) return;
        uint32_t f = s.index_of[fn];
        run(s, s.functions[f].reused ? variant(s, f, ticks) : f, ticks, count, total);
    }
    void on_pause(uint32_t id, uint64_t ticks) override {
        StreamResult& s = stream(id);
        if (!s.stack.empty()) s.stack.back().paused += ticks;
    }
    void on_abandon(uint32_t id, uint32_t frames, uint64_t ticks) override {
        StreamResult& s = stream(id);
        for (uint32_t i = 0; i < frames && !s.stack.empty(); ++i) exit(s, ticks);
    }
    void on_thread_begin(uint32_t id, uint64_t ticks) override { stream(id).last_ticks = ticks; }
    size_t site_of(StreamResult& s, uint32_t stack, uint64_t ticks) {
        if (stack) {
            if (auto known = s.unwound_site.find(stack); known != s.unwound_site.end()) return known->second;
            auto it = s.unwound.find(stack);
            if (it == s.unwound.end()) return site_of_addresses({}, ticks);
            bool timeless = true;
            size_t site = site_of_addresses(std::vector<uint64_t>(it->second), ticks, &timeless);
            if (timeless) s.unwound_site[stack] = site;
            return site;
        }
        std::vector<uint64_t> addresses;
        for (auto f = s.stack.rbegin(); f != s.stack.rend(); ++f)
            addresses.push_back(s.functions[f->fn].address);
        return site_of_addresses(std::move(addresses), ticks);
    }
    // `timeless` is cleared when an address of the stack belonged to two objects (dlclose,
    // then another dlopen at that address): the site then depends on the time.
    size_t site_of_addresses(std::vector<uint64_t> addresses, uint64_t ticks, bool* timeless = nullptr) {
        std::vector<size_t> modules;
        for (size_t i = 0; i < addresses.size(); ++i) {
            if (!reused(addresses[i])) continue;
            modules.resize(addresses.size(), reader::kNoModule);
            modules[i] = history->module_at(addresses[i], ticks);
            if (timeless) *timeless = false;
        }
        SiteKey key{trace_index, std::move(addresses), std::move(modules)};
        auto [it, fresh] = site_index.try_emplace(key, raw_sites.size());
        if (fresh) {
            raw_sites.emplace_back();
            site_keys.push_back(std::move(key));
        }
        return it->second;
    }

    // Memory events are matched in time order: a block freed by another thread may come
    // earlier in the file than its allocation. They are buffered until no record older than
    // them can follow (on_chunk_done), then replayed, so that memory grows with the live
    // blocks, sites and threads of a trace, not with its length. Temporaries depend on one
    // thread's order only and are decided as records arrive.
    struct MemoryEvent {
        uint64_t ticks;
        uint64_t seq; // order of arrival: ties in time replay in file order
        uint64_t ptr;
        uint64_t size;   // allocations
        size_t site;     // allocations
        uint8_t op;      // 0 allocation, 1 free, 2 release by realloc
        uint8_t kind;    // AllocKind or FreeKind
        uint8_t alignment = 0; // alignment_code (operator new and delete with std::align_val_t)
    };
    reader::TimeOrderedReplay<MemoryEvent> memory_replay;

    // The heap of the trace being read, replayed: the running total, its peak and what each
    // site held at the peak. `pending` holds each site's change since the latest peak (sites
    // listed in `touched`), folded into `at_peak` when a new peak is reached: every event is
    // folded at most once.
    struct HeapReplay {
        int64_t current = 0, peak = 0;
        uint64_t peak_ticks = 0;
        std::vector<int64_t> at_peak, pending;
        std::vector<uint8_t> is_touched;
        std::vector<size_t> touched;
        // Timeline: one point per `step` events (the interval's maximum); when there are too
        // many points, neighbours are merged and the step doubles.
        std::vector<std::pair<uint64_t, int64_t>> points; // (ticks, live bytes)
        uint64_t step = 1, in_step = 0;
        int64_t window_max = 0;
        uint64_t last_ticks = 0;
    } heap;

    void heap_change(uint64_t ticks, int64_t delta, size_t site) {
        HeapReplay& h = heap;
        if (site >= h.pending.size()) {
            size_t n = std::max(site + 1, raw_sites.size());
            h.pending.resize(n, 0);
            h.at_peak.resize(n, 0);
            h.is_touched.resize(n, 0);
        }
        h.current += delta;
        h.pending[site] += delta;
        if (!h.is_touched[site]) h.is_touched[site] = 1, h.touched.push_back(site);
        if (h.current > h.peak) {
            h.peak = h.current;
            h.peak_ticks = ticks;
            for (size_t t : h.touched) {
                h.at_peak[t] += h.pending[t];
                h.pending[t] = 0;
                h.is_touched[t] = 0;
            }
            h.touched.clear();
        }
        h.window_max = std::max(h.window_max, h.current);
        h.last_ticks = ticks;
        if (++h.in_step == h.step) {
            h.points.emplace_back(ticks, h.window_max);
            h.window_max = h.current;
            h.in_step = 0;
            if (h.points.size() >= 4000) {
                size_t j = 0;
                for (size_t i = 0; i + 1 < h.points.size(); i += 2)
                    h.points[j++] = {h.points[i + 1].first, std::max(h.points[i].second, h.points[i + 1].second)};
                h.points.resize(j);
                h.step *= 2;
            }
        }
    }

    void note_temporary_on_free(StreamResult& s, uint64_t ptr, bool by_free) {
        if (by_free && s.last_alloc == ptr && ptr) {
            ++raw_sites[s.last_alloc_site].temporary;
            ++memory.temporary;
        }
        s.last_alloc = 0;
    }

    void buffer_event(uint32_t stream, MemoryEvent e) {
        if (e.ticks < memory_replay.replayed_upto()) ++memory.late_events;
        memory_replay.push(stream, e);
    }

    void on_alloc(uint32_t id, uint64_t ticks, uint64_t ptr, uint64_t size, uint32_t stack,
                  format::AllocKind kind, uint64_t alignment) override {
        StreamResult& s = stream(id);
        size_t site = site_of(s, stack, ticks);
        buffer_event(id, MemoryEvent{ticks, 0, ptr, size, site, 0, uint8_t(kind),
                                     alignment_code(alignment)});
        s.last_alloc = ptr;
        s.last_alloc_site = site;
    }
    void on_free(uint32_t id, uint64_t ticks, uint64_t ptr, format::FreeKind kind,
                 uint64_t alignment) override {
        StreamResult& s = stream(id);
        note_temporary_on_free(s, ptr, true);
        buffer_event(id,
                     MemoryEvent{ticks, 0, ptr, 0, 0, 1, uint8_t(kind), alignment_code(alignment)});
    }
    void on_realloc(uint32_t id, uint64_t ticks, uint64_t old_ptr, uint64_t ptr, uint64_t size,
                    uint32_t stack) override {
        StreamResult& s = stream(id);
        // As heaptrack counts it: the moved block was temporary if it was this thread's latest.
        if (old_ptr) {
            if (s.last_alloc == old_ptr) {
                ++raw_sites[s.last_alloc_site].temporary;
                ++memory.temporary;
            }
            buffer_event(id, MemoryEvent{ticks, 0, old_ptr, 0, 0, 2, 0});
        }
        size_t site = site_of(s, stack, ticks);
        buffer_event(id, MemoryEvent{ticks, 0, ptr, size, site, 0, uint8_t(format::AllocKind::kMalloc)});
        s.last_alloc = ptr;
        s.last_alloc_site = site;
    }
    void on_chunk_done(uint64_t sync_ticks) override {
        memory_replay.chunk_done(sync_ticks, [&](const MemoryEvent& e) { replay_event(e); });
    }

    // One allocation or release, replayed in time order against the live blocks.
    void replay_event(const MemoryEvent& e) {
        memory.present = true;
        if (e.op == 0) {
            ++memory.allocations;
            memory.bytes_allocated += e.size;
            MemorySite& ms = raw_sites[e.site];
            ++ms.allocations;
            ms.bytes += e.size;
            live.set(e.ptr, LiveBlock{e.size, e.site, format::AllocKind(e.kind), e.alignment});
            heap_change(e.ticks, int64_t(e.size), e.site);
            return;
        }
        if (e.op == 1) ++memory.frees;
        const LiveBlock* found = live.find(e.ptr);
        if (!found) {
            if (e.op == 1) ++memory.unknown_frees;
            return;
        }
        const LiveBlock& b = *found;
        // realloc may only move what malloc and its kin allocated, not a new or new[] block.
        bool realloc_of_new = e.op == 2 && (b.kind == format::AllocKind::kNew ||
                                            b.kind == format::AllocKind::kNewArray);
        // An operator new form with std::align_val_t is released by the delete form with the
        // same alignment, and only by it (C++17 [new.delete]).
        bool mismatched_free =
            e.op == 1 && (!matches(b.kind, format::FreeKind(e.kind)) || b.alignment != e.alignment);
        if (mismatched_free || realloc_of_new) {
            int release = e.op == 2 ? kReallocRelease : int(e.kind) | e.alignment << 8;
            auto key = std::make_tuple(b.site, int(b.kind) | b.alignment << 8, release);
            auto [mt, fresh] = mismatch_index.try_emplace(key, raw_mismatches.size());
            if (fresh)
                raw_mismatches.push_back(Mismatch{
                    alloc_name(b.kind, b.alignment),
                    e.op == 2 ? "realloc" : free_name(format::FreeKind(e.kind), e.alignment), 0,
                    b.site});
            ++raw_mismatches[mt->second].count;
        }
        heap_change(e.ticks, -int64_t(b.size), b.site);
        live.erase(found);
    }

    void on_stack(uint32_t id, uint32_t stack, const std::vector<uint64_t>& pcs) override {
        StreamResult& s = stream(id);
        s.unwound[stack] = pcs;
        s.unwound_site.erase(stack);
    }
    void on_rss(uint32_t, uint64_t ticks, uint64_t bytes) override {
        memory.present = true;
        trace_peak_rss = std::max(trace_peak_rss, bytes);
        rss_ticks.emplace_back(ticks, bytes);
    }
    std::vector<std::pair<uint64_t, uint64_t>> rss_ticks;

    // End of one trace: leaks, the peak and its contributors, timelines.
    void finish_memory(const reader::TraceInfo& info) {
        memory_replay.replay(UINT64_MAX, [&](const MemoryEvent& e) { replay_event(e); });
        memory_replay.clear();
        double tps = info.ticks_per_second > 0 ? info.ticks_per_second : 1e9;
        uint64_t t0 = info.header.start_ticks;
        auto secs = [&](uint64_t t) { return t > t0 ? (t - t0) / tps : 0.0; };
        live.for_each([&](uint64_t, const LiveBlock& b) {
            raw_sites[b.site].leaked_bytes += b.size;
            ++raw_sites[b.site].leaked_blocks;
            memory.leaked_bytes += b.size;
            ++memory.leaked_blocks;
        });
        live.clear();
        HeapReplay& h = heap;
        if (uint64_t(h.peak) > memory.peak_heap) {
            memory.peak_heap = uint64_t(h.peak);
            memory.peak_heap_time = secs(h.peak_ticks);
            for (size_t i = 0; i < raw_sites.size(); ++i) {
                int64_t v = i < h.at_peak.size() ? h.at_peak[i] : 0;
                raw_sites[i].peak_bytes = v > 0 ? uint64_t(v) : 0;
            }
        }
        // Timelines: 2000 to 4000 points per trace, each an interval's maximum.
        for (auto& [t, b] : h.points) memory.heap_timeline.emplace_back(secs(t), double(b));
        if (h.in_step) memory.heap_timeline.emplace_back(secs(h.last_ticks), double(h.window_max));
        heap = HeapReplay{};
        std::sort(rss_ticks.begin(), rss_ticks.end());
        for (auto& [t, b] : rss_ticks) memory.rss_timeline.emplace_back(secs(t), double(b));
        rss_ticks.clear();
        if (info.meta.count("memory_profiler")) memory.present = true; // even with no records
        if (auto it = info.meta.find("peak_rss"); it != info.meta.end())
            trace_peak_rss = std::max<uint64_t>(trace_peak_rss, std::strtoull(it->second.c_str(), nullptr, 10));
        if (memory.present) memory.peak_rss = std::max(memory.peak_rss, trace_peak_rss);
        trace_peak_rss = 0;
    }

    // Names the frames of the raw sites not named yet (those of the trace just read) and
    // rebuilds the report's sites and mismatches: raw sites whose frames all name the same
    // function, file, line and module are one site, with their counts summed (the bytes of
    // each at the peak too, so the sum is the merged site's).
    void merge_sites() {
        merged_of.resize(raw_sites.size(), SIZE_MAX);
        for (size_t i = 0; i < raw_sites.size(); ++i) {
            if (merged_of[i] != SIZE_MAX) continue;
            auto& [trace, addresses, modules] = site_keys[i];
            std::vector<MemoryFrame> stack;
            std::vector<FrameKey> key;
            for (size_t k = 0; k < addresses.size(); ++k) {
                size_t module = k < modules.size() ? modules[k] : reader::kNoModule;
                Function f = resolver.describe(traces[trace], addresses[k], module);
                key.emplace_back(f.name, f.file, f.line, f.module);
                stack.push_back(MemoryFrame{f.name, f.file, f.module, f.line});
            }
            auto [it, fresh] = merged_index.try_emplace(std::move(key), memory.sites.size());
            if (fresh) {
                memory.sites.emplace_back();
                memory.sites.back().stack = std::move(stack);
            }
            merged_of[i] = it->second;
        }
        for (MemorySite& m : memory.sites) {
            std::vector<MemoryFrame> stack = std::move(m.stack);
            m = MemorySite{};
            m.stack = std::move(stack);
        }
        for (size_t i = 0; i < raw_sites.size(); ++i) {
            const MemorySite& r = raw_sites[i];
            MemorySite& m = memory.sites[merged_of[i]];
            m.allocations += r.allocations;
            m.bytes += r.bytes;
            m.temporary += r.temporary;
            m.peak_bytes += r.peak_bytes;
            m.leaked_bytes += r.leaked_bytes;
            m.leaked_blocks += r.leaked_blocks;
        }
        memory.mismatches.clear();
        std::map<std::tuple<size_t, std::string, std::string>, size_t> by_site;
        for (const Mismatch& r : raw_mismatches) {
            size_t site = merged_of[r.site];
            auto [it, fresh] = by_site.try_emplace({site, r.allocated_with, r.freed_with},
                                                   memory.mismatches.size());
            if (fresh)
                memory.mismatches.push_back(Mismatch{r.allocated_with, r.freed_with, 0, site});
            memory.mismatches[it->second].count += r.count;
        }
    }

    void on_thread_end(uint32_t id, uint64_t ticks) override {
        StreamResult& s = stream(id);
        while (!s.stack.empty()) exit(s, ticks);
        s.ended = true;
    }

    FunctionResolver resolver;
};

// Resolution of addresses to functions, per trace, with a cache of ELF files on disk.
struct FunctionResolver::Impl {
    std::map<std::string, std::unique_ptr<reader::ElfSymbols>> elf_cache;
    std::map<std::string, std::unique_ptr<reader::DwarfLines>> line_cache;

    Function describe(const reader::TraceInfo& info, uint64_t address, size_t module) {
        Function f;
        f.address = address;
        if (auto site = info.sites.find(address); site != info.sites.end()) {
            const reader::Site& s = site->second;
            f.file = s.file;
            f.line = s.line;
            f.context = function_display_name(s.function);
            switch (s.kind) {
            case format::SiteKind::kFunction:
                f.kind = "marked function";
                f.name = f.context;
                break;
            case format::SiteKind::kRegion: f.kind = "region"; break;
            default: f.kind = "scope"; break;
            }
            if (f.name.empty()) f.name = s.label.empty() ? f.context : s.label;
            return f;
        }
        const reader::Module* m =
            module < info.modules.size() ? &info.modules[module] : info.module_at(address);
        if (m) f.module = m->path;
        const reader::Symbol* sym = info.symbol_at(address, module);
        if (sym && !sym->name.empty()) {
            f.name = sym->name;
            f.symbol = sym->symbol;
            f.file = sym->file;
            f.line = sym->line;
        }
        if (m && (f.name.empty() || f.symbol.empty())) {
            auto& elf = elf_cache[m->path];
            if (!elf) elf = std::make_unique<reader::ElfSymbols>(m->path);
            bool same_build = m->build_id.empty() || elf->build_id().empty() ||
                              elf->build_id() == m->build_id;
            if (elf->ok() && same_build)
                if (const std::string* sym = elf->lookup(address - m->base)) {
                    if (f.symbol.empty()) f.symbol = *sym;
                    if (f.name.empty()) f.name = reader::demangle(*sym);
                }
            // And the source position from the file's DWARF, as the runtime would have given;
            // a function still unnamed (a local symbol of a stripped object) from the symbol
            // table libdwfl finds, the separate debug file's included.
            if (elf->ok() && same_build && (f.file.empty() || f.name.empty())) {
                auto& lines = line_cache[m->path];
                if (!lines) lines = std::make_unique<reader::DwarfLines>(m->path);
                uint32_t line = 0;
                if (f.file.empty() && lines->lookup(address - m->base, f.file, line)) f.line = line;
                std::string raw;
                if (f.name.empty() && lines->function(address - m->base, raw)) {
                    if (f.symbol.empty()) f.symbol = raw;
                    f.name = reader::demangle(raw);
                }
            }
        }
        if (f.name.empty())
            f.name = m ? fmt::format("0x{:x}", address - m->base) : fmt::format("0x{:x}", address);
        // The symbol table's name is demangled with parameters; keep `symbol` the raw one.
        if (f.symbol.empty() && sym) f.symbol = sym->symbol;
        return f;
    }
};

FunctionResolver::FunctionResolver() : impl_(std::make_unique<Impl>()) {}
FunctionResolver::~FunctionResolver() = default;
Function FunctionResolver::describe(const reader::TraceInfo& info, uint64_t address,
                                    size_t module) {
    return impl_->describe(info, address, module);
}

ProfileBuilder::ProfileBuilder() : impl_(std::make_unique<Impl>()) {}
void ProfileBuilder::set_compensation(bool on) { impl_->compensate = on; }
void ProfileBuilder::set_progress(bool on) { impl_->progress = on; }
ProfileBuilder::~ProfileBuilder() = default;

void ProfileBuilder::add_trace(const std::string& path) {
    impl_->read_layout(path);
    reader::TraceReader r(path);
    impl_->trace_index = impl_->traces.size();
    impl_->current.clear();
    size_t first_stream = impl_->streams.size();
    impl_->reading = &r.info();
    const reader::TraceInfo& info = r.read(*impl_);
    if (impl_->progress_shown) {
        std::fputs("\r\033[K", stderr);
        impl_->progress_shown = false;
    }
    // Frames still open: the thread ended without unwinding (exit() from deep inside, a
    // thread killed with the process); close them when the trace ends.
    uint64_t end = info.end_ticks;
    for (size_t i = first_stream; i < impl_->streams.size(); ++i) {
        StreamResult& s = *impl_->streams[i];
        uint64_t t = std::max(end, s.last_ticks);
        while (!s.stack.empty()) impl_->exit(s, t);
    }
    impl_->finish_memory(info);
    impl_->traces.push_back(info);
    // Name the frames of the memory sites found in this trace, and merge alike stacks.
    impl_->merge_sites();
}

const MemoryReport& ProfileBuilder::memory() const { return impl_->memory; }

std::vector<ThreadFilter> ProfileBuilder::thread_list() const {
    std::vector<ThreadFilter> out;
    for (const auto& s : impl_->streams) out.push_back(ThreadFilter{s->trace, s->stream});
    return out;
}

Profile ProfileBuilder::build(const ThreadFilter& filter) const {
    Profile p;
    p.traces = impl_->traces;
    p.compensated = impl_->compensate;
    // Functions merge across threads by address and across traces by what names them
    // (module, symbol, file, line).
    std::map<std::tuple<std::string, std::string, std::string, uint32_t>, size_t> by_label;
    // By (address, module): objects loaded at one address in turn have functions of their own.
    std::vector<std::map<std::pair<uint64_t, size_t>, size_t>> by_address(impl_->traces.size());
    std::map<std::pair<size_t, size_t>, size_t> edge_at;
    auto function_index = [&](size_t trace, uint64_t address, size_t module) {
        auto [it, fresh] = by_address[trace].try_emplace({address, module}, 0);
        if (!fresh) return it->second;
        Function f = impl_->resolver.describe(impl_->traces[trace], address, module);
        // Distinct symbols stay distinct even when they demangle alike (a deleting and a
        // complete destructor); aliases of one address are one function already.
        auto key = std::make_tuple(f.module, f.symbol.empty() ? f.name : f.symbol, f.file, f.line);
        auto [lt, lfresh] = by_label.try_emplace(key, p.functions.size());
        if (lfresh) p.functions.push_back(std::move(f));
        return it->second = lt->second;
    };
    for (const auto& sp : impl_->streams) {
        const StreamResult& s = *sp;
        if (!filter.all() && (s.trace != filter.trace || s.stream != filter.stream)) continue;
        const reader::TraceInfo& info = impl_->traces[s.trace];
        double tps = info.ticks_per_second > 0 ? info.ticks_per_second : 1e9;
        std::vector<size_t> global(s.functions.size(), SIZE_MAX);
        for (size_t i = 0; i < s.functions.size(); ++i) {
            const LocalFunction& lf = s.functions[i];
            if (!lf.ncalls) continue;
            global[i] =
                function_index(s.trace, lf.address, lf.reused ? lf.module : reader::kNoModule);
            Stats& st = p.functions[global[i]].stats;
            st.add(Stats{lf.ncalls, lf.pcalls, lf.tot / tps, lf.cum / tps});
        }
        for (const LocalEdge& le : s.edges) {
            size_t caller = le.caller == kNoCaller ? kRoot : global[le.caller];
            size_t callee = global[le.callee];
            auto [it, fresh] = edge_at.try_emplace({caller, callee}, p.edges.size());
            if (fresh) p.edges.push_back(Edge{caller, callee, {}});
            p.edges[it->second].stats.add(Stats{le.ncalls, le.pcalls, le.tot / tps, le.cum / tps});
        }
        ThreadSummary ts = summarize_thread(info, s.trace, s.stream);
        ts.unmatched_exits = s.unmatched_exits;
        p.threads.push_back(ts);
    }
    p.recount();
    return p;
}

ThreadSummary summarize_thread(const reader::TraceInfo& info, size_t trace, uint32_t stream) {
    ThreadSummary ts;
    ts.trace = trace;
    ts.stream = stream;
    if (auto it = info.threads.find(stream); it != info.threads.end()) {
        double tps = info.ticks_per_second > 0 ? info.ticks_per_second : 1e9;
        ts.tid = it->second.tid;
        ts.name = it->second.name;
        ts.events = it->second.events;
        ts.dropped = it->second.dropped;
        ts.abandoned = it->second.abandoned;
        ts.seconds = (it->second.last_ticks - it->second.first_ticks) / tps;
    }
    return ts;
}

void Profile::recount() {
    total_calls = primitive_calls = 0;
    total_time = 0;
    for (const Function& f : functions) {
        total_calls += f.stats.ncalls;
        primitive_calls += f.stats.pcalls;
        total_time += f.stats.tottime;
    }
}

std::string function_display_name(const std::string& pretty) {
    // The parameter list is the first '(' outside template brackets that follows a name;
    // the name starts after the last space outside brackets before it.
    int angle = 0;
    size_t open = std::string::npos;
    for (size_t i = 0; i < pretty.size(); ++i) {
        char c = pretty[i];
        if (c == '<') ++angle;
        else if (c == '>' && angle > 0) --angle;
        else if (c == '(' && angle == 0) {
            // "operator()" is a name, not a parameter list.
            if (i >= 8 && pretty.compare(i - 8, 8, "operator") == 0) {
                ++i;
                continue;
            }
            open = i;
            break;
        }
    }
    if (open == std::string::npos) return pretty;
    size_t start = 0;
    angle = 0;
    for (size_t i = open; i-- > 0;) {
        char c = pretty[i];
        if (c == '>') ++angle;
        else if (c == '<' && angle > 0) --angle;
        else if (c == ' ' && angle == 0) {
            start = i + 1;
            break;
        }
    }
    return pretty.substr(start);
}

std::string label(const Function& f, bool full_paths) {
    auto base = [&](const std::string& path) {
        if (full_paths) return path;
        size_t slash = path.rfind('/');
        return slash == std::string::npos ? path : path.substr(slash + 1);
    };
    std::string file = f.file.empty() ? base(f.module.empty() ? std::string("~") : f.module)
                                      : base(f.file);
    return fmt::format("{}:{}({})", file, f.line, f.name);
}

std::vector<size_t> Profile::match(const std::string& regex) const {
    std::regex re(regex);
    std::vector<size_t> out;
    for (size_t i = 0; i < functions.size(); ++i)
        if (std::regex_search(label(functions[i], true), re)) out.push_back(i);
    return out;
}

} // namespace prof::analysis
