// profrun --top: where a process's CPU time goes now, refreshed every second.
#pragma once

#include "common/tool_log.hpp"
#include "profrun/sampled.hpp"

#include <cstddef>
#include <string>

namespace prof::tools {

struct TopOptions {
    std::string sort = "self"; // "self" or "total"
    size_t rows = 0;           // snapshots without a terminal: rows per table (0: 20)
};

// Runs `sampling` (the options of --pid or --sample, their `live` and `refresh` left to this)
// with the live view: full screen on a terminal (keys: s, t, i, space, q), a snapshot table
// per second on standard output otherwise. The exit status of the run.
int run_top(SampleOptions sampling, const TopOptions& o, const ToolLog& log);

} // namespace prof::tools
