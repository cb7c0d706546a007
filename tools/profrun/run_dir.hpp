// profrun -d DIR: a run's directory. Every process of the run writes its trace into DIR
// (PROF_RUN_DIR, named <program>.<pid>.trace), and profrun writes the manifest, run.json, when
// the command ends. Several profruns may share DIR (mpirun -np N profrun -d DIR -- ./app): each
// one merges its processes into the manifest under a lock on the directory.
#pragma once

#include "common/tool_log.hpp"

#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace prof::tools {

// The run's id: PROF_RUN_ID when set (an outer profrun's), else the MPI or Slurm job's (so that
// the ranks' profruns agree), else a new one.
std::string run_id();

// The MPI rank (or Slurm task) this profrun is, from the launcher's variables, as the runtime
// reads them (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, SLURM_PROCID); none outside a job.
std::optional<unsigned long> launcher_rank();

// Creates DIR (and its parents) or checks that it can be written to and holds no other run.
// Nothing, or the exit status.
std::optional<int> prepare_run_dir(const std::string& dir, const std::string& id,
                                   const ToolLog& log);

// Adds the run's traces in DIR that the manifest lacks, and the exit status of `child` (the
// process this profrun started as `command` and waited for, `wait_status` from waitpid; listed
// without a trace when it wrote none). Returns how many traces the manifest lists.
size_t update_manifest(const std::string& dir, const std::string& id, pid_t child,
                       const std::vector<std::string>& command, int wait_status,
                       const ToolLog& log);

} // namespace prof::tools
