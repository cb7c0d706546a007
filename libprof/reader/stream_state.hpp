// What the decoders of a trace's streams share (trace_reader.cpp: the chunk walk and the
// event records; stream_records.cpp: the call tree's and the memory profiler's records): the
// state of one stream as its chunks are read, and the rules of an allocation's alignment.
// Internal to the reader.
#pragma once

#include "reader/trace_reader.hpp"

#include <cstdint>
#include <vector>

namespace prof::reader {

struct TraceReader::StreamState {
    uint32_t next_seq = 0;
    uint32_t functions = 0; // stream-local indices defined so far
    bool ended = false;
    uint64_t blocks = 0; // packed files (2.0): blocks allocated so far
    // 1.9: the thread counts its calls in a call tree (after its Counting record): its nodes
    // defined so far, and the nodes its CallCounts blocks cover.
    bool counting = false;
    uint64_t nodes = 0, counted = 0;
    std::vector<bool> timed; // 1.13: the nodes whose CallLatency record was read
};

// An `alignment` field (1.4) or MemAligned record (2.1) as the sink sees it: kept for the
// operator new and delete forms only (0 for the others, which have none), and false when it is
// not a power of two (a corrupt record).
inline bool valid_alignment(uint64_t& alignment, bool operator_form) {
    if (alignment & (alignment - 1)) return false;
    if (!operator_form) alignment = 0;
    return true;
}

inline bool operator_form(format::AllocKind k) {
    return k == format::AllocKind::kNew || k == format::AllocKind::kNewArray;
}
inline bool operator_form(format::FreeKind k) {
    return k == format::FreeKind::kDelete || k == format::FreeKind::kDeleteArray;
}

} // namespace prof::reader
