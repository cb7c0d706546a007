// Parallel reading of one trace: its thread streams spread over cores, each read by a session
// of its own, and the parts merged so that the result is the one a single reader gives.
#pragma once

#include "analysis/engine/thread_replay.hpp"
#include "reader/trace_reader.hpp"

#include <cstdint>
#include <exception>
#include <memory>
#include <unordered_map>
#include <vector>

namespace prof::analysis::engine {

// What one core read of a trace: its functions and its threads (taken by merge_streams).
struct StreamPart {
    const TraceFunctions& functions;
    std::vector<std::unique_ptr<ThreadReplay>>& threads;
};

// The core of each stream: the largest streams first, each to the core with the fewest bytes.
std::unordered_map<uint32_t, unsigned>
assign_streams(const std::vector<reader::StreamExtent>& streams, unsigned jobs);
// The parts' threads appended to `threads` as trace `trace`, in the order one reader would
// have met them, their functions renumbered to `fns` in the order of their first call.
void merge_streams(std::vector<StreamPart>& parts, TraceFunctions& fns, size_t trace,
                   std::vector<std::unique_ptr<ThreadReplay>>& threads);
// The trace's summary: the process records of `process`, what each part's streams added.
reader::TraceInfo merge_infos(std::vector<reader::TraceInfo>& infos,
                              const reader::TraceInfo& process);
// Of errors met reading parts of one trace, the earliest in the file: the one a single
// reader would have stopped at.
void rethrow_first(const std::vector<std::exception_ptr>& errors);

} // namespace prof::analysis::engine
