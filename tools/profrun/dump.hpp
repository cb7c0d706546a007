// profrun --pid PID --dump: every thread's stack of a running process, printed.
#pragma once

#include "common/tool_log.hpp"

#include <string>
#include <sys/types.h>

namespace prof::tools {

// Prints the dump of `pid` on standard output as text (py-spy dump's layout) or JSON
// ("json"); 0, or 1 with one line when the process cannot be dumped.
int dump_stacks(pid_t pid, const std::string& format, const ToolLog& log);

} // namespace prof::tools
