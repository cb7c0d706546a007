// The heap replay (heap_replay.hpp): sites, live blocks, the peak and the timelines.
#include "analysis/engine/heap_replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace prof::analysis::engine {
namespace {

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
    case format::AllocKind::kAligned:
        return "aligned_alloc";
    default:
        return "malloc";
    }
}

std::string free_name(format::FreeKind k, uint8_t alignment) {
    switch (k) {
    case format::FreeKind::kDelete:
        return with_alignment("delete", alignment);
    case format::FreeKind::kDeleteArray:
        return with_alignment("delete[]", alignment);
    default:
        return "free";
    }
}

// A realloc of a live block, in a mismatch key (FreeKind values start at 1).
constexpr int kReallocRelease = 0;

// Which release function matches an allocation function.
bool matches(format::AllocKind a, format::FreeKind f) {
    switch (a) {
    case format::AllocKind::kNew:
        return f == format::FreeKind::kDelete;
    case format::AllocKind::kNewArray:
        return f == format::FreeKind::kDeleteArray;
    default:
        return f == format::FreeKind::kFree;
    }
}

} // namespace

size_t HeapReplay::site_of(ThreadReplay& s, uint32_t stack, uint64_t ticks) {
    if (stack) {
        if (auto known = s.memory.unwound_site.find(stack); known != s.memory.unwound_site.end())
            return known->second;
        auto it = s.memory.unwound.find(stack);
        if (it == s.memory.unwound.end()) return site_of_addresses({}, ticks);
        bool timeless = true;
        size_t site = site_of_addresses(std::vector<uint64_t>(it->second), ticks, &timeless);
        if (timeless) s.memory.unwound_site[stack] = site;
        return site;
    }
    return site_of_addresses(stack_addresses(s, *fns_), ticks);
}
// `timeless` is cleared when an address of the stack belonged to two objects (dlclose,
// then another dlopen at that address): the site then depends on the time.
size_t HeapReplay::site_of_addresses(std::vector<uint64_t> addresses, uint64_t ticks,
                                     bool* timeless) {
    std::vector<size_t> modules;
    for (size_t i = 0; i < addresses.size(); ++i) {
        if (!history_->reused(addresses[i])) continue;
        modules.resize(addresses.size(), reader::kNoModule);
        modules[i] = history_->module_at(addresses[i], ticks);
        if (timeless) *timeless = false;
    }
    SiteKey key{trace_index_, std::move(addresses), std::move(modules)};
    auto [it, fresh] = site_index_.try_emplace(key, raw_sites_.size());
    if (fresh) {
        raw_sites_.emplace_back();
        site_keys_.push_back(std::move(key));
    }
    return it->second;
}

void HeapReplay::heap_change(uint64_t ticks, int64_t delta, size_t site) {
    HeapPeak& h = heap_;
    if (site >= h.pending.size()) {
        size_t n = std::max(site + 1, raw_sites_.size());
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
                h.points[j++] = {h.points[i + 1].first,
                                 std::max(h.points[i].second, h.points[i + 1].second)};
            h.points.resize(j);
            h.step *= 2;
        }
    }
}

void HeapReplay::note_rss(uint64_t ticks, uint64_t rss) {
    HeapPeak& h = heap_;
    HeapPeak::RssPoint p{ticks, uint64_t(std::max<int64_t>(h.current, 0)), rss};
    if (!h.rss_in_step || rss >= h.rss_best.rss) h.rss_best = p;
    if (++h.rss_in_step < h.rss_step) return;
    h.rss_points.push_back(h.rss_best);
    h.rss_in_step = 0;
    if (h.rss_points.size() >= MemoryReport::kMaxTimelinePoints) {
        size_t j = 0;
        for (size_t i = 0; i + 1 < h.rss_points.size(); i += 2)
            h.rss_points[j++] = h.rss_points[i].rss > h.rss_points[i + 1].rss ? h.rss_points[i]
                                                                              : h.rss_points[i + 1];
        h.rss_points.resize(j);
        h.rss_step *= 2;
    }
}

void HeapReplay::note_temporary_on_free(ThreadReplay& s, uint64_t ptr, bool by_free) {
    if (by_free && s.memory.last_alloc == ptr && ptr) {
        ++raw_sites_[s.memory.last_alloc_site].temporary;
        ++memory.temporary;
    }
    s.memory.last_alloc = 0;
}

void HeapReplay::buffer_event(uint32_t stream, MemoryEvent e) {
    if (e.ticks < memory_replay_.replayed_upto()) ++memory.late_events;
    memory_replay_.push(stream, e);
}

void HeapReplay::on_alloc(ThreadReplay& s, uint32_t id, uint64_t ticks, uint64_t ptr, uint64_t size,
                          uint32_t stack, format::AllocKind kind, uint64_t alignment) {
    size_t site = site_of(s, stack, ticks);
    buffer_event(
        id, MemoryEvent{ticks, 0, ptr, size, site, 0, uint8_t(kind), alignment_code(alignment)});
    s.memory.last_alloc = ptr;
    s.memory.last_alloc_site = site;
}
void HeapReplay::on_free(ThreadReplay& s, uint32_t id, uint64_t ticks, uint64_t ptr,
                         format::FreeKind kind, uint64_t alignment) {
    note_temporary_on_free(s, ptr, true);
    buffer_event(id, MemoryEvent{ticks, 0, ptr, 0, 0, 1, uint8_t(kind), alignment_code(alignment)});
}
void HeapReplay::on_realloc(ThreadReplay& s, uint32_t id, uint64_t ticks, uint64_t old_ptr,
                            uint64_t ptr, uint64_t size, uint32_t stack) {
    // As heaptrack counts it: the moved block was temporary if it was this thread's latest.
    if (old_ptr) {
        if (s.memory.last_alloc == old_ptr) {
            ++raw_sites_[s.memory.last_alloc_site].temporary;
            ++memory.temporary;
        }
        buffer_event(id, MemoryEvent{ticks, 0, old_ptr, 0, 0, 2, 0});
    }
    size_t site = site_of(s, stack, ticks);
    buffer_event(id,
                 MemoryEvent{ticks, 0, ptr, size, site, 0, uint8_t(format::AllocKind::kMalloc)});
    s.memory.last_alloc = ptr;
    s.memory.last_alloc_site = site;
}
void HeapReplay::chunk_done(uint64_t sync_ticks) {
    memory_replay_.chunk_done(sync_ticks, [&](const MemoryEvent& e) { replay_event(e); });
}

// One allocation or release, replayed in time order against the live blocks.
void HeapReplay::replay_event(const MemoryEvent& e) {
    if (e.op == 3) return note_rss(e.ticks, e.size);
    memory.present = true;
    if (e.op == 0) {
        ++memory.allocations;
        memory.bytes_allocated += e.size;
        MemorySite& ms = raw_sites_[e.site];
        ++ms.allocations;
        ms.bytes += e.size;
        live_.set(e.ptr, LiveBlock{e.size, e.site, format::AllocKind(e.kind), e.alignment});
        heap_change(e.ticks, int64_t(e.size), e.site);
        return;
    }
    if (e.op == 1) ++memory.frees;
    const LiveBlock* found = live_.find(e.ptr);
    if (!found) {
        if (e.op == 1) ++memory.unknown_frees;
        return;
    }
    const LiveBlock& b = *found;
    // realloc may only move what malloc and its kin allocated, not a new or new[] block.
    bool realloc_of_new =
        e.op == 2 && (b.kind == format::AllocKind::kNew || b.kind == format::AllocKind::kNewArray);
    // An operator new form with std::align_val_t is released by the delete form with the
    // same alignment, and only by it (C++17 [new.delete]).
    bool mismatched_free =
        e.op == 1 && (!matches(b.kind, format::FreeKind(e.kind)) || b.alignment != e.alignment);
    if (mismatched_free || realloc_of_new) {
        int release = e.op == 2 ? kReallocRelease : int(e.kind) | e.alignment << 8;
        auto key = std::make_tuple(b.site, int(b.kind) | b.alignment << 8, release);
        auto [mt, fresh] = mismatch_index_.try_emplace(key, raw_mismatches_.size());
        if (fresh)
            raw_mismatches_.push_back(
                Mismatch{alloc_name(b.kind, b.alignment),
                         e.op == 2 ? "realloc" : free_name(format::FreeKind(e.kind), e.alignment),
                         0, b.site});
        ++raw_mismatches_[mt->second].count;
    }
    heap_change(e.ticks, -int64_t(b.size), b.site);
    live_.erase(found);
}

void HeapReplay::on_stack(ThreadReplay& s, uint32_t stack, const std::vector<uint64_t>& pcs) {
    s.memory.unwound[stack] = pcs;
    s.memory.unwound_site.erase(stack);
}
void HeapReplay::on_rss(uint32_t stream, uint64_t ticks, uint64_t bytes) {
    memory.present = true;
    trace_peak_rss_ = std::max(trace_peak_rss_, bytes);
    // Never counted as late: a reading that comes late (from writers before 1.2) is paired
    // with the heap at the next replay, and no figure but its point depends on it.
    memory_replay_.push(stream, MemoryEvent{ticks, 0, 0, bytes, 0, 3, 0});
}

// End of one trace: leaks, the peak and its contributors, timelines.
void HeapReplay::finish_memory(const reader::TraceInfo& info) {
    // A trace cut short holds every event up to its read_up_to_ticks only: after that, a block
    // allocated in a chunk cut off can be freed in one that was read (a release of "a block
    // allocated before tracing"), and one freed in a chunk cut off stays live (a heap above the
    // run's). The heap is replayed up to there, where it is exact.
    uint64_t upto =
        info.partial && info.read_up_to_ticks < UINT64_MAX ? info.read_up_to_ticks + 1 : UINT64_MAX;
    memory_replay_.replay(upto, [&](const MemoryEvent& e) { replay_event(e); });
    memory_replay_.clear();
    double tps = info.ticks_per_second > 0 ? info.ticks_per_second : 1e9;
    uint64_t t0 = info.header.start_ticks;
    auto secs = [&](uint64_t t) { return t > t0 ? (t - t0) / tps : 0.0; };
    // Blocks live at the end of a file cut short may have been freed after the cut: their
    // fate is unknown, and none of them is known to leak.
    memory.partial |= info.partial;
    live_.for_each([&](uint64_t, const LiveBlock& b) {
        MemorySite& site = raw_sites_[b.site];
        if (info.partial) {
            site.unknown_bytes += b.size;
            ++site.unknown_blocks;
            memory.unknown_bytes += b.size;
            ++memory.unknown_blocks;
            return;
        }
        site.leaked_bytes += b.size;
        ++site.leaked_blocks;
        memory.leaked_bytes += b.size;
        ++memory.leaked_blocks;
    });
    live_.clear();
    HeapPeak& h = heap_;
    if (uint64_t(h.peak) > memory.peak_heap) {
        memory.peak_heap = uint64_t(h.peak);
        memory.peak_heap_time = secs(h.peak_ticks);
        for (size_t i = 0; i < raw_sites_.size(); ++i) {
            int64_t v = i < h.at_peak.size() ? h.at_peak[i] : 0;
            raw_sites_[i].peak_bytes = v > 0 ? uint64_t(v) : 0;
        }
    }
    // Timelines: 2000 to 4000 points per trace, each an interval's maximum.
    for (auto& [t, b] : h.points) memory.heap_timeline.emplace_back(secs(t), double(b));
    if (h.in_step) memory.heap_timeline.emplace_back(secs(h.last_ticks), double(h.window_max));
    if (h.rss_in_step) h.rss_points.push_back(h.rss_best);
    for (const HeapPeak::RssPoint& p : h.rss_points) {
        memory.timeline.push_back(MemoryPoint{secs(p.ticks), p.heap, p.rss, info.header.pid});
        memory.rss_timeline.emplace_back(secs(p.ticks), double(p.rss));
    }
    heap_ = HeapPeak{};
    if (info.meta.count("memory_profiler")) memory.present = true; // even with no records
    if (auto it = info.meta.find("peak_rss"); it != info.meta.end())
        trace_peak_rss_ =
            std::max<uint64_t>(trace_peak_rss_, std::strtoull(it->second.c_str(), nullptr, 10));
    if (memory.present) memory.peak_rss = std::max(memory.peak_rss, trace_peak_rss_);
    trace_peak_rss_ = 0;
}

// Names the frames of the raw sites not named yet (those of the trace just read) and
// rebuilds the report's sites and mismatches: raw sites whose frames all name the same
// function, file, line and module are one site, with their counts summed (the bytes of
// each at the peak too, so the sum is the merged site's).
void HeapReplay::merge_sites(const std::vector<reader::TraceInfo>& traces,
                             FunctionResolver& resolver) {
    merged_of_.resize(raw_sites_.size(), SIZE_MAX);
    for (size_t i = 0; i < raw_sites_.size(); ++i) {
        if (merged_of_[i] != SIZE_MAX) continue;
        auto& [trace, addresses, modules] = site_keys_[i];
        std::vector<MemoryFrame> stack;
        std::vector<FrameKey> key;
        for (size_t k = 0; k < addresses.size(); ++k) {
            size_t module = k < modules.size() ? modules[k] : reader::kNoModule;
            // Functions inlined at the address are frames of their own.
            for (FunctionResolver::Frame& fr :
                 resolver.describe_frames(traces[trace], addresses[k], module)) {
                Function& f = fr.function;
                key.emplace_back(f.name, f.file, f.line, f.module);
                stack.push_back(MemoryFrame{f.name, f.file, f.module, f.line, fr.inlined});
            }
        }
        auto [it, fresh] = merged_index_.try_emplace(std::move(key), memory.sites.size());
        if (fresh) {
            memory.sites.emplace_back();
            memory.sites.back().stack = std::move(stack);
        }
        merged_of_[i] = it->second;
    }
    for (MemorySite& m : memory.sites) {
        std::vector<MemoryFrame> stack = std::move(m.stack);
        m = MemorySite{};
        m.stack = std::move(stack);
    }
    for (size_t i = 0; i < raw_sites_.size(); ++i) {
        const MemorySite& r = raw_sites_[i];
        MemorySite& m = memory.sites[merged_of_[i]];
        m.allocations += r.allocations;
        m.bytes += r.bytes;
        m.temporary += r.temporary;
        m.peak_bytes += r.peak_bytes;
        m.leaked_bytes += r.leaked_bytes;
        m.leaked_blocks += r.leaked_blocks;
        m.unknown_bytes += r.unknown_bytes;
        m.unknown_blocks += r.unknown_blocks;
    }
    memory.mismatches.clear();
    std::map<std::tuple<size_t, std::string, std::string>, size_t> by_site;
    for (const Mismatch& r : raw_mismatches_) {
        size_t site = merged_of_[r.site];
        auto [it, fresh] =
            by_site.try_emplace({site, r.allocated_with, r.freed_with}, memory.mismatches.size());
        if (fresh) memory.mismatches.push_back(Mismatch{r.allocated_with, r.freed_with, 0, site});
        memory.mismatches[it->second].count += r.count;
    }
}

} // namespace prof::analysis::engine

namespace prof::analysis::engine {

void HeapReplay::absorb(HeapReplay& other, size_t trace) {
    MemoryReport& m = other.memory;
    size_t offset = raw_sites_.size();
    // The sites' bytes at the peak heap are those of the trace whose peak is the highest.
    bool higher = m.peak_heap > memory.peak_heap;
    for (MemorySite& site : higher ? raw_sites_ : other.raw_sites_) site.peak_bytes = 0;
    if (higher) {
        memory.peak_heap = m.peak_heap;
        memory.peak_heap_time = m.peak_heap_time;
    }
    for (size_t i = 0; i < other.raw_sites_.size(); ++i) {
        auto& [key_trace, addresses, modules] = other.site_keys_[i];
        SiteKey key{trace, std::move(addresses), std::move(modules)};
        site_keys_.push_back(std::move(key));
        raw_sites_.push_back(other.raw_sites_[i]);
    }
    for (Mismatch mm : other.raw_mismatches_) {
        mm.site += offset;
        raw_mismatches_.push_back(std::move(mm));
    }
    memory.present |= m.present;
    memory.allocations += m.allocations;
    memory.frees += m.frees;
    memory.temporary += m.temporary;
    memory.bytes_allocated += m.bytes_allocated;
    memory.peak_rss = std::max(memory.peak_rss, m.peak_rss);
    memory.leaked_bytes += m.leaked_bytes;
    memory.leaked_blocks += m.leaked_blocks;
    memory.partial |= m.partial;
    memory.unknown_bytes += m.unknown_bytes;
    memory.unknown_blocks += m.unknown_blocks;
    memory.unknown_frees += m.unknown_frees;
    memory.late_events += m.late_events;
    memory.heap_timeline.insert(memory.heap_timeline.end(), m.heap_timeline.begin(),
                                m.heap_timeline.end());
    memory.rss_timeline.insert(memory.rss_timeline.end(), m.rss_timeline.begin(),
                               m.rss_timeline.end());
    memory.timeline.insert(memory.timeline.end(), m.timeline.begin(), m.timeline.end());
}

} // namespace prof::analysis::engine
