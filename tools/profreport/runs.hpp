// Runs among profreport's arguments (profrun -d DIR): a directory stands for its traces, all of
// them or one process's (--process PID|NAME), and its processes can be listed as a tree.
#pragma once

#include "common/tool_log.hpp"
#include "options.hpp"
#include "reader/run_manifest.hpp"

#include <string>
#include <vector>

namespace prof::profreport {

// A run as read from its directory: the processes of its readable traces, in start order, with
// what the manifest adds (exit status; a process listed without a trace).
struct RunListing {
    std::string dir;
    std::vector<reader::RunProcess> processes;
    bool manifest = false; // the directory has a run.json
};

// The error for a run with nothing to read: a directory that is no run at all, or whose
// traces cannot be read. Every command that reads runs says it, and exits 1.
std::string nothing_to_read(const RunListing& run);

// Reads the run in `dir`; each problem (no manifest, one that does not parse, a listed trace
// that is missing, two processes claiming one file, a trace that cannot be read) is one
// warning, and the rest is read.
RunListing read_run(const std::string& dir, const tools::ToolLog& log);

// Replaces each run directory among a.traces by its traces (one process's with --process).
// An error message, or empty.
std::string expand_runs(Args& a, const tools::ToolLog& log);

} // namespace prof::profreport
