// Events of several thread streams replayed in time order with a bounded buffer (the memory
// report and profpack replay allocations and releases this way: a block freed by another thread
// may come earlier in the file than its allocation). Each stream's events arrive in its own
// (time) order; they are buffered until no record older than them can follow (a chunk read to
// its end, EventSink::on_chunk_done), then merged by (time, arrival), so that memory grows with
// what is live, not with the length of the trace.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace prof::reader {

// Event: a struct with `uint64_t ticks` and `uint64_t seq` (set by push: the arrival order,
// which breaks ties in time, that is file order).
template <class Event>
class TimeOrderedReplay {
public:
    // Writers before the 1.2 memory Pause records read an event's clock before opening its
    // chunk (a lock wait and an mmap earlier): replays keep this margin behind the chunk's
    // clock, ~6 ms at 2.6 GHz, 17 ms in nanoseconds.
    static constexpr uint64_t kMargin = uint64_t(1) << 24;
    static constexpr size_t kBatch = size_t(1) << 16;

    void push(uint32_t stream, Event e) {
        e.seq = arrivals_++;
        queues_[stream].events.push_back(e);
        ++buffered_;
    }
    // Every event older than this has been replayed.
    uint64_t replayed_upto() const { return replayed_upto_; }

    // A chunk opened at `sync_ticks` was read to its end: replays what is older, when the
    // buffer has grown to twice what the previous replay had to keep (and to kBatch at least),
    // so that each event is sorted a bounded number of times.
    template <class Visit> void chunk_done(uint64_t sync_ticks, Visit&& visit) {
        if (buffered_ < replay_at_ || sync_ticks <= kMargin) return;
        replay(sync_ticks - kMargin, visit);
        replay_at_ = std::max(kBatch, 2 * buffered_);
    }

    // Calls `visit(event)` for the buffered events older than `upto`, in time order (ties in
    // arrival order); the rest stay buffered. UINT64_MAX replays everything.
    template <class Visit> void replay(uint64_t upto, Visit&& visit) {
        using Head = std::tuple<uint64_t, uint64_t, Queue*>; // a k-way merge of the streams
        std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
        auto next = [&](Queue& q) {
            if (q.head < q.events.size() && q.events[q.head].ticks < upto)
                heads.emplace(q.events[q.head].ticks, q.events[q.head].seq, &q);
        };
        for (auto& [stream, q] : queues_) next(q);
        while (!heads.empty()) {
            Queue& q = *std::get<2>(heads.top());
            heads.pop();
            const Event e = q.events[q.head++];
            --buffered_;
            next(q);
            visit(e);
        }
        for (auto& [stream, q] : queues_) {
            if (q.head == q.events.size()) {
                q.events.clear();
                q.head = 0;
            } else if (q.head > q.events.size() / 2) {
                q.events.erase(q.events.begin(), q.events.begin() + ptrdiff_t(q.head));
                q.head = 0;
            }
        }
        replayed_upto_ = std::max(replayed_upto_, upto);
    }

    void clear() { *this = TimeOrderedReplay(); }

private:
    struct Queue {
        std::vector<Event> events;
        size_t head = 0;
    };
    std::unordered_map<uint32_t, Queue> queues_;
    size_t buffered_ = 0;
    uint64_t arrivals_ = 0;
    uint64_t replayed_upto_ = 0;
    size_t replay_at_ = kBatch;
};

} // namespace prof::reader
