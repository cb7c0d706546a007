// profrun --sample and --pid: programs sampled from outside, without a rebuild.
#pragma once

#include "common/tool_log.hpp"

#include <functional>

#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace prof::sampling {
class RecordSink;
}

namespace prof::tools {

struct SampleOptions {
    std::vector<std::string> command; // launch: COMMAND [ARGS...]
    std::string program;              // launch: the file COMMAND runs
    pid_t pid = 0;                    // attach
    double duration = 0;              // attach: seconds; 0 until Ctrl-C or the exit
    std::string output;
    double rate = 999;
    unsigned stack_bytes = 8192;
    bool subprocesses = false, quiet = false;
    bool idle = false; // the time off CPU too (--idle)
    // --sampler: "auto" (perf events, ptrace where they are refused), "perf", "ptrace"
    std::string sampler = "auto";
    // -d DIR: the run's directory and id; the traces are DIR/<command>.<pid>.trace.
    std::string run_dir, run_id;
    // --top: every record goes to `live` as well, and `refresh` is called after each read of
    // the records (at least every 100 ms); it returns false to end the sampling. With `output`
    // empty, no trace is written.
    sampling::RecordSink* live = nullptr;
    bool stdin_null = false; // launch: COMMAND's standard input is /dev/null
    std::function<bool(pid_t)> refresh;
    // Set by run_sampled: the launched process and its wait status.
    pid_t* launched = nullptr;
    int* wait_status = nullptr;
};

// Runs the command sampled; its exit status (128+N when killed by signal N), or 1.
int run_sampled(const SampleOptions& o, const ToolLog& log);
// Samples a running process until the duration ends, Ctrl-C, or its exit; 0, or 1.
int attach_sampled(const SampleOptions& o, const ToolLog& log);
// Why `pid` cannot be sampled (no such process, a zombie, a kernel thread), or nothing.
std::optional<std::string> check_attachable(pid_t pid);
// `NAME.PID.trace`, from the process's name.
std::string default_attach_output(pid_t pid);

} // namespace prof::tools
