// A run: the traces of every process of one profiled command, in one directory (profrun -d),
// and its manifest, run.json (docs/runs.md). The traces say most of what the manifest holds;
// the manifest adds what only the process that waited for one knows (its exit status), and the
// index of the files. Readers take the directory's traces either way: a manifest that is
// missing or does not parse, or that names a file that is not there, is reported and the rest
// is read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace prof::reader {

struct TraceInfo;

constexpr const char* kManifestName = "run.json";
constexpr int kManifestVersion = 1;

// One process of a run: one trace file (an exec'd image writes a file of its own, with the
// same pid).
struct RunProcess {
    std::string trace; // file name, inside the run's directory; empty: not profiled (the
                       // command profrun started, when it wrote no trace itself)
    uint32_t pid = 0, ppid = 0;
    std::vector<std::string> argv;
    std::string exe, host;
    // (CLOCK_REALTIME ns, trace clock ticks) read together at the start and at the end (the end
    // is 0 when the process did not finish its trace).
    uint64_t start_utc_ns = 0, start_ticks = 0, end_utc_ns = 0, end_ticks = 0;
    double ticks_per_second = 0;
    bool finished = false;
    // When known: the process profrun waited for, or one its traced parent reaped (see
    // settle_exit_statuses).
    std::optional<int> exit_code, signal;
    // How the children this process reaped ended, by pid: the wait statuses its runtime
    // recorded (Meta child_status.<pid>: "exit N" or "signal N"). Not in the manifest.
    std::map<uint32_t, std::string> reaped;
    std::optional<uint32_t> rank, size; // MPI rank and job size (or a Slurm task's)
    std::string rank_from;              // the variable the rank was read from

    std::string command() const; // argv[0]'s base name, else the exe's
};

struct RunManifest {
    int version = kManifestVersion;
    std::string run; // the run's id (profrun's, or the MPI job's)
    std::vector<RunProcess> processes;
};

// A process as its trace describes it (its metadata only).
RunProcess describe_trace(const TraceInfo& info, const std::string& file_name);

// Gives each process whose status is not known, and whose image is its pid's last (an image
// that exec'd another did not end), the status its parent's runtime recorded when it reaped
// it: a pipeline's stage killed by SIGPIPE, a child that exited 3. Of several parents with the
// pid (a pid reused), the latest to start before the child.
void settle_exit_statuses(std::vector<RunProcess>& processes);

std::string manifest_json(const RunManifest& m);
// Throws std::runtime_error saying where the text stops being a manifest.
RunManifest parse_manifest(const std::string& text);

// The trace files of a run's directory (`*.trace`, sorted by name).
std::vector<std::string> run_traces(const std::string& dir);
bool is_run_dir(const std::string& path);

} // namespace prof::reader
