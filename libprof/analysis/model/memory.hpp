// Allocation sites (MemoryReport, analysis/model/profile.hpp) as the views see them: weighed
// by a measure, named frame by frame, and arranged as a call tree for flame graphs.
#pragma once

#include "analysis/model/call_tree.hpp"
#include "analysis/model/profile.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace prof::analysis::views {

// What an allocation flame graph weighs each call path by: bytes requested, calls to allocation
// functions, bytes never released, or bytes live at the moment of the peak heap.
enum class MemoryWeight { kBytes, kAllocations, kLeaked, kPeak };
std::optional<MemoryWeight> parse_memory_weight(const std::string& s);
const char* memory_weight_name(MemoryWeight w); // "bytes", "allocations", "leaked", "peak"
uint64_t memory_weight(const MemorySite& s, MemoryWeight w);
// A frame of an allocation stack as views show it: "f(int)", or "0x1a2b (in libfoo.so)" when
// there is no symbol.
std::string memory_frame_name(const MemoryFrame& f);
// The allocation sites as a call tree: each site's stack outermost first (MemorySite::stack is
// innermost first), frames merged by function per parent; a node's total_ns holds the weight of
// the sites below it and `calls` their allocations (leaked blocks for kLeaked). Sites of zero
// weight are left out; a site without a stack hangs under "[no stack]".
CallTree memory_call_tree(const MemoryReport& m, MemoryWeight w);

} // namespace prof::analysis::views
