// The derived models of the engine: the profile and the call tree, as free functions over the
// replayed threads (read only; the function names are resolved on demand).
#pragma once

#include "analysis/engine/session.hpp"
#include "analysis/engine/thread_replay.hpp"

#include <memory>
#include <vector>

namespace prof::analysis::engine {

// What the replay kept, as the derived models read it.
struct Replayed {
    const std::vector<reader::TraceInfo>& traces;
    const std::vector<TraceFunctions>& functions; // by trace
    const std::vector<std::unique_ptr<ThreadReplay>>& threads;
    FunctionResolver& resolver;
};

// Functions merged across threads and traces, with exact counts and the times `time` says.
Profile build_profile(const Replayed& r, const ThreadFilter& filter, bool compensated,
                      const TimeBasis& time);
// The calling context tree of the threads `o` selects.
views::CallTree build_tree(const Replayed& r, const views::CallTreeOptions& o,
                           const TimeBasis& time);

} // namespace prof::analysis::engine
