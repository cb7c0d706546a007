// Shared by the engine's room tests that drive a room directly, without a trace file: a trace
// summary that names functions, and a thread's call paths built node by node.
#pragma once

#include "analysis/engine/thread_replay.hpp"
#include "reader/trace_reader.hpp"

#include <string>
#include <vector>

namespace prof::test {

// A trace summary at 1 tick per ns whose symbols name `names[i]` at 0x1000 * (i + 1), as
// name_functions (analysis_support.hpp) names them in a trace built record by record.
inline reader::TraceInfo named_trace_info(const std::vector<std::string>& names) {
    reader::TraceInfo info;
    info.ticks_per_second = 1e9;
    for (size_t i = 0; i < names.size(); ++i)
        info.symbols[0x1000 * (i + 1)] =
            reader::Symbol{names[i], "", "/src/app.cpp", uint32_t(10 * (i + 1)), reader::kNoModule};
    return info;
}

// The trace functions at 0x1000 * (i + 1), i < n, function i being the i-th.
inline analysis::engine::TraceFunctions trace_functions(size_t n) {
    analysis::engine::TraceFunctions fns;
    for (size_t i = 0; i < n; ++i) fns.of(0x1000 * (i + 1), reader::kNoModule, i);
    return fns;
}

// The node of the call path `functions` (outermost first) of thread `t`, with `calls` calls
// and `ticks` inclusive ticks on the thread's clock (the path's ancestors are made as needed,
// their counts left as they are).
inline uint32_t add_path(analysis::engine::ThreadReplay& t, const std::vector<uint32_t>& functions,
                         uint64_t calls, uint64_t ticks) {
    uint32_t node = 0;
    for (uint32_t f : functions) node = t.child(node, f);
    t.nodes[node].calls = calls;
    t.nodes[node].total = int64_t(ticks << analysis::engine::kClockFraction);
    return node;
}

} // namespace prof::test
