// The heap replay of the engine: allocation sites, the blocks live at each point, the heap's
// peak and timelines, replayed in time order across a trace's threads (the memory report).
#pragma once

#include "analysis/engine/thread_replay.hpp"
#include "analysis/model/memory.hpp"
#include "analysis/model/profile.hpp"
#include "reader/address_map.hpp"
#include "reader/time_order.hpp"
#include "reader/trace_reader.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace prof::analysis::engine {

struct LiveBlock {
    uint64_t size;
    size_t site;
    format::AllocKind kind;
    uint8_t alignment; // alignment_code of an operator new form with std::align_val_t
};

// The blocks live at a point of the replay, by address.
using LiveBlocks = reader::AddressMap<LiveBlock>;

// The memory records of every trace read, to one MemoryReport. Its one input from the call
// replay is where a thread is when it allocates: stack_addresses() of its ThreadReplay.
class HeapReplay {
  public:
    MemoryReport memory;

    // The trace about to be read: its index, its objects' address history and its functions.
    void begin_trace(size_t trace, reader::AddressHistory& history,
                     const TraceFunctions& functions) {
        trace_index_ = trace;
        history_ = &history;
        fns_ = &functions;
    }
    void on_alloc(ThreadReplay& s, uint32_t stream, uint64_t ticks, uint64_t ptr, uint64_t size,
                  uint32_t stack, format::AllocKind kind, uint64_t alignment);
    void on_free(ThreadReplay& s, uint32_t stream, uint64_t ticks, uint64_t ptr,
                 format::FreeKind kind, uint64_t alignment);
    void on_realloc(ThreadReplay& s, uint32_t stream, uint64_t ticks, uint64_t old_ptr,
                    uint64_t ptr, uint64_t size, uint32_t stack);
    void on_stack(ThreadReplay& s, uint32_t stack, const std::vector<uint64_t>& pcs);
    // A reading of the resident set size: of thread `stream` at an allocation, or of the
    // runtime's timer (stream 0, the process stream; format 1.11). Replayed in time order with
    // the allocations, so that it is paired with the heap live at that moment.
    void on_rss(uint32_t stream, uint64_t ticks, uint64_t bytes);
    // The events no record older than `sync_ticks` can precede, replayed.
    void chunk_done(uint64_t sync_ticks);
    // End of one trace: leaks, the peak and its contributors, timelines.
    void finish_memory(const reader::TraceInfo& info);
    // Names the frames of the sites not named yet and rebuilds memory.sites and mismatches.
    void merge_sites(const std::vector<reader::TraceInfo>& traces, FunctionResolver& resolver);
    // Takes over what `other` read of its one trace, trace `trace` here (then merge_sites).
    void absorb(HeapReplay& other, size_t trace);

  private:
    // A site: (trace, return addresses innermost first, the module of each address at the
    // time when another object was also loaded at that address, else kNoModule).
    using SiteKey = std::tuple<size_t, std::vector<uint64_t>, std::vector<size_t>>;
    // What names a frame: function name, file, line, module path.
    using FrameKey = std::tuple<std::string, std::string, uint32_t, std::string>;
    // Memory events are matched in time order: a block freed by another thread may come
    // earlier in the file than its allocation. They are buffered until no record older than
    // them can follow (chunk_done), then replayed, so that memory grows with the live
    // blocks, sites and threads of a trace, not with its length. Temporaries depend on one
    // thread's order only and are decided as records arrive.
    struct MemoryEvent {
        uint64_t ticks;
        uint64_t seq; // order of arrival: ties in time replay in file order
        uint64_t ptr;
        uint64_t size;         // allocations; the resident bytes of an RSS reading
        size_t site;           // allocations
        uint8_t op;            // 0 allocation, 1 free, 2 release by realloc, 3 RSS reading
        uint8_t kind;          // AllocKind or FreeKind
        uint8_t alignment = 0; // alignment_code (operator new and delete with std::align_val_t)
    };
    // The heap of the trace being read, replayed: the running total, its peak and what each
    // site held at the peak. `pending` holds each site's change since the latest peak (sites
    // listed in `touched`), folded into `at_peak` when a new peak is reached: every event is
    // folded at most once.
    struct HeapPeak {
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
        // The RSS readings with the heap at each, in time order: one point per `rss_step`
        // readings (the one with the highest RSS), the step doubling each time the points
        // reach MemoryReport::kMaxTimelinePoints (pairs merged the same way).
        struct RssPoint {
            uint64_t ticks, heap, rss;
        };
        std::vector<RssPoint> rss_points;
        uint64_t rss_step = 1, rss_in_step = 0;
        RssPoint rss_best{};
    };

    size_t site_of(ThreadReplay& s, uint32_t stack, uint64_t ticks);
    size_t site_of_addresses(std::vector<uint64_t> addresses, uint64_t ticks,
                             bool* timeless = nullptr);
    void heap_change(uint64_t ticks, int64_t delta, size_t site);
    void note_rss(uint64_t ticks, uint64_t rss);
    void note_temporary_on_free(ThreadReplay& s, uint64_t ptr, bool by_free);
    void buffer_event(uint32_t stream, MemoryEvent e);
    void replay_event(const MemoryEvent& e);

    size_t trace_index_ = 0;
    reader::AddressHistory* history_ = nullptr;
    const TraceFunctions* fns_ = nullptr;
    // While reading, sites are keyed by (trace, addresses innermost first) in `raw_sites_`;
    // blocks live per trace. The report's sites are those with the same named frames merged:
    // an object loaded again at another address (a plugin dlopened and dlclosed in a loop)
    // gives new addresses to the same code.
    std::map<SiteKey, size_t> site_index_;
    std::vector<SiteKey> site_keys_;
    std::vector<MemorySite> raw_sites_;                    // by SiteKey index; stacks stay empty
    std::vector<Mismatch> raw_mismatches_;                 // `site` indexes raw_sites_
    std::map<std::vector<FrameKey>, size_t> merged_index_; // named stack -> memory.sites index
    std::vector<size_t> merged_of_;                        // raw site -> memory.sites index
    LiveBlocks live_;
    std::map<std::tuple<size_t, int, int>, size_t> mismatch_index_;
    uint64_t trace_peak_rss_ = 0;
    reader::TimeOrderedReplay<MemoryEvent> memory_replay_;
    HeapPeak heap_;
};

} // namespace prof::analysis::engine
