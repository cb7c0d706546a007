// Parallel reading (read_parallel.hpp): streams to cores, and the parts merged back in the
// order one reader would have met them.
#include "analysis/engine/read_parallel.hpp"

#include <algorithm>
#include <tuple>

namespace prof::analysis::engine {

std::unordered_map<uint32_t, unsigned>
assign_streams(const std::vector<reader::StreamExtent>& streams, unsigned jobs) {
    // The largest streams first, each to the core with the fewest bytes so far.
    std::vector<reader::StreamExtent> by_size = streams;
    std::stable_sort(by_size.begin(), by_size.end(),
                     [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
    std::vector<uint64_t> load(jobs, 0);
    std::unordered_map<uint32_t, unsigned> core_of;
    for (const reader::StreamExtent& e : by_size) {
        unsigned c = unsigned(std::min_element(load.begin(), load.end()) - load.begin());
        core_of[e.stream] = c;
        load[c] += e.bytes;
    }
    return core_of;
}

void merge_streams(std::vector<StreamPart>& parts, TraceFunctions& fns, size_t trace,
                   std::vector<std::unique_ptr<ThreadReplay>>& threads) {
    // Functions in the order of their first call in the file, then each part's call
    // paths renumbered to them.
    std::vector<std::tuple<uint64_t, unsigned, uint32_t>> defined; // (seen, part, index)
    for (unsigned c = 0; c < parts.size(); ++c) {
        const TraceFunctions& f = parts[c].functions;
        for (uint32_t i = 0; i < f.address.size(); ++i) defined.emplace_back(f.seen[i], c, i);
    }
    std::sort(defined.begin(), defined.end());
    std::vector<std::vector<uint32_t>> renumber(parts.size());
    for (unsigned c = 0; c < parts.size(); ++c)
        renumber[c].resize(parts[c].functions.address.size());
    for (const auto& [seen, c, i] : defined) {
        const TraceFunctions& f = parts[c].functions;
        renumber[c][i] = fns.of(f.address[i], f.module[i], seen);
        if (f.inlined[i]) fns.inlined[renumber[c][i]] = true;
    }
    std::vector<std::pair<unsigned, std::unique_ptr<ThreadReplay>>> merged;
    for (unsigned c = 0; c < parts.size(); ++c)
        for (auto& t : parts[c].threads) {
            for (size_t n = 1; n < t->nodes.size(); ++n)
                t->nodes[n].function = renumber[c][t->nodes[n].function];
            // `paths` stays keyed by the part's numbers: the trace is read, no call
            // path is added to it again.
            t->fn_map.clear();
            t->address_fn.clear();
            merged.emplace_back(c, std::move(t));
        }
    std::stable_sort(merged.begin(), merged.end(),
                     [](const auto& a, const auto& b) { return a.second->seen < b.second->seen; });
    for (auto& [c, t] : merged) {
        t->trace = trace;
        t->index = threads.size();
        threads.push_back(std::move(t));
    }
}

reader::TraceInfo merge_infos(std::vector<reader::TraceInfo>& infos,
                              const reader::TraceInfo& process) {
    // The process records are the same in every part; what the thread streams add to the
    // trace's summary is each part's own.
    reader::TraceInfo info = std::move(infos[0]);
    for (unsigned c = 1; c < infos.size(); ++c) {
        reader::TraceInfo& i = infos[c];
        info.threads.insert(i.threads.begin(), i.threads.end());
        info.lines.insert(i.lines.begin(), i.lines.end());
        info.sites.insert(i.sites.begin(), i.sites.end());
        info.minor_unknown_records += i.minor_unknown_records - process.minor_unknown_records;
        info.memory_records += i.memory_records;
        if (!info.finished || info.partial) info.end_ticks = std::max(info.end_ticks, i.end_ticks);
        info.read_up_to_ticks = std::max(info.read_up_to_ticks, i.read_up_to_ticks);
    }
    return info;
}

// Of errors met reading parts of one trace, the earliest in the file: the one a single
// reader would have stopped at.
void rethrow_first(const std::vector<std::exception_ptr>& errors) {
    std::exception_ptr first;
    uint64_t first_offset = UINT64_MAX;
    for (const std::exception_ptr& e : errors) {
        if (!e) continue;
        try {
            std::rethrow_exception(e);
        } catch (const reader::TraceError& t) {
            if (t.offset() < first_offset) first = e, first_offset = t.offset();
        } catch (...) {
            if (!first) first = e;
        }
    }
    if (first) std::rethrow_exception(first);
}

} // namespace prof::analysis::engine
