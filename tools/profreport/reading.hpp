// How profreport reads its traces: one session over them, with the reading's progress on the
// terminal, and the handling of the errors of a command that writes one output.
#pragma once

#include "analysis/engine/session.hpp"
#include "common/tool_log.hpp"
#include "options.hpp"
#include "output.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace prof::profreport {

// "reading N%" on standard error while long traces are read, when it is a terminal; erased
// when the reading ends.
class ProgressLine {
  public:
    ProgressLine();
    ~ProgressLine();
    ProgressLine(const ProgressLine&) = delete;
    ProgressLine& operator=(const ProgressLine&) = delete;
    analysis::ProgressFn callback();

  private:
    bool tty_, shown_ = false;
};

// One pass over the traces for every view of this run.
// How a command's traces are read, from its options.
analysis::SessionOptions session_options(const Args& a);

struct Reading {
    ProgressLine progress;
    std::unique_ptr<analysis::Session> session;
    Reading(const Args& a, const std::vector<std::string>& traces);
};

// Each group of traces read into a session of its own (a process, an MPI rank), up to a.jobs
// groups at once (0: one per core), each group on one core. The error of the first group, in
// order, that cannot be read is thrown.
std::vector<std::unique_ptr<analysis::Session>>
read_groups(const Args& a, const std::vector<std::vector<std::string>>& groups);

// The one warning line of each trace whose file is cut short (partial): for the views that
// print no other note about the data.
void warn_partial(const tools::ToolLog& log, const analysis::Session& session);

// The traces of `a`, read once; null (and the reader's error line) when one cannot be read.
std::unique_ptr<Reading> read_traces(const Args& a, const tools::ToolLog& log);

// Runs `body` (which writes `out`), turning an exception into one error line and status 1;
// the output is discarded then.
int guarded(Output& out, const tools::ToolLog& log, const std::function<int()>& body);

// The call tree of the traces for --tree, --flamegraph, --html and --export collapsed/callgrind
// (--threads splits it, --thread selects one); false (and an error line) when --thread names no
// thread of the traces.
bool call_tree_options(const Args& a, const tools::ToolLog& log, analysis::Session& session,
                       analysis::views::CallTreeOptions& o);

} // namespace prof::profreport
