// profrun -s KEY: the report of what a run wrote, printed after it (cProfile's -s).
#pragma once

#include "common/tool_log.hpp"

#include <optional>
#include <string>

namespace prof::tools {

struct ReportAtEnd {
    std::string sort;           // a pstats key, checked on the command line
    unsigned long long limit = 0; // rows (0: all)
    bool memory = false;        // --mem: the memory summary follows
    // LD_PRELOAD as profrun found it: the report runs without the libraries added for COMMAND.
    std::optional<std::string> preload_before;
};

// Prints the report of `traces` (a trace, or a run's directory) with the profreport in
// `tools_dir` on standard error. The run's exit status is not changed by it; a report that
// cannot be printed says why.
void print_report_at_end(const ReportAtEnd& r, const std::string& traces,
                         const std::string& tools_dir, const std::string& log_format,
                         const ToolLog& log);

} // namespace prof::tools
