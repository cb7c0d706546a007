#include "profrun/run_dir.hpp"

#include "reader/run_manifest.hpp"

#include "reader/trace_reader.hpp"
#include <prof/trace_format.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace prof::tools {

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

bool make_dirs(const std::string& dir) {
    std::string at;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = dir.find('/', pos + 1);
        at = dir.substr(0, pos);
        if (at.empty()) continue;
        if (mkdir(at.c_str(), 0777) != 0 && errno != EEXIST) return false;
    }
    struct stat st;
    return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::optional<std::string> slurp(const std::string& path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// An exclusive lock on the directory for as long as it lives.
class DirLock {
  public:
    explicit DirLock(const std::string& dir)
        : fd_(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
        if (fd_ >= 0)
            while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
            }
    }
    ~DirLock() {
        if (fd_ >= 0) close(fd_);
    }

  private:
    int fd_;
};

} // namespace

std::optional<unsigned long> launcher_rank() {
    for (const auto& names : format::kRankVariables)
        if (const char* v = std::getenv(names[0]); v && *v) {
            char* end = nullptr;
            unsigned long rank = std::strtoul(v, &end, 10);
            if (end && !*end) return rank;
        }
    return std::nullopt;
}

std::string run_id() {
    if (std::string id = env("PROF_RUN_ID"); !id.empty()) return id;
    for (const char* job : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "PMI_JOBID"})
        if (std::string id = env(job); !id.empty()) return fmt::format("mpi-{}", id);
    if (std::string id = env("SLURM_JOB_ID"); !id.empty())
        return fmt::format("slurm-{}.{}", id, env("SLURM_STEP_ID"));
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return fmt::format("{}-{}-{}{:09d}", host, getpid(), now.tv_sec, now.tv_nsec);
}

std::optional<int> prepare_run_dir(const std::string& dir, const std::string& id,
                                   const ToolLog& log) {
    if (!make_dirs(dir)) {
        log.error(fmt::format("cannot make the run directory {}: {}", dir, std::strerror(errno)));
        return 2;
    }
    if (access(dir.c_str(), W_OK | X_OK) != 0) {
        log.error(fmt::format("cannot write the run to {}: {}", dir, std::strerror(errno)));
        return 2;
    }
    // Another run's manifest: its traces would be merged with this one's.
    DirLock lock(dir);
    if (auto text = slurp(dir + "/" + reader::kManifestName)) {
        try {
            reader::RunManifest m = reader::parse_manifest(*text);
            if (m.run != id) {
                log.error(fmt::format("{} holds another run ({}): choose another directory, or "
                                      "remove that one",
                                      dir, m.run));
                return 2;
            }
        } catch (const std::exception& e) {
            log.error(fmt::format("{}/{} is not a run manifest ({}): choose another directory", dir,
                                  reader::kManifestName, e.what()));
            return 2;
        }
    }
    return std::nullopt;
}

size_t update_manifest(const std::string& dir, const std::string& id, pid_t child,
                       const std::vector<std::string>& command, int wait_status,
                       const ToolLog& log) {
    DirLock lock(dir);
    std::string path = dir + "/" + reader::kManifestName;
    reader::RunManifest m;
    m.run = id;
    if (auto text = slurp(path)) {
        try {
            m = reader::parse_manifest(*text);
        } catch (const std::exception& e) {
            log.warn(fmt::format("{}: {}; written anew from the traces", path, e.what()));
            m = reader::RunManifest{};
            m.run = id;
        }
    }
    std::map<std::string, size_t> listed;
    for (size_t i = 0; i < m.processes.size(); ++i) listed[m.processes[i].trace] = i;
    // Every trace of this run not listed yet; a listed one is described again when it was not
    // finished then (a process of another rank still running at that profrun's end).
    for (const std::string& name : reader::run_traces(dir)) {
        auto it = listed.find(name);
        if (it != listed.end() && m.processes[it->second].finished) continue;
        try {
            reader::TraceReader r(dir + "/" + name);
            const reader::TraceInfo& info = r.read_metadata();
            auto run = info.meta.find("run");
            if (run == info.meta.end() || run->second != id) continue; // not this run's
            reader::RunProcess p = reader::describe_trace(info, name);
            if (it != listed.end()) {
                p.exit_code = m.processes[it->second].exit_code;
                p.signal = m.processes[it->second].signal;
                m.processes[it->second] = std::move(p);
            } else {
                listed[name] = m.processes.size();
                m.processes.push_back(std::move(p));
            }
        } catch (const std::exception& e) {
            log.warn(fmt::format("not in the manifest: {}", e.what()));
        }
    }
    // The process profrun waited for: its last image (an exec chain keeps the pid) exited so.
    reader::RunProcess* waited = nullptr;
    for (reader::RunProcess& p : m.processes)
        if (p.pid == uint32_t(child) && (!waited || p.start_ticks >= waited->start_ticks))
            waited = &p;
    if (!waited && child > 0) { // it wrote no trace (a shell, mpirun): listed for its status
        reader::RunProcess p;
        p.pid = uint32_t(child);
        p.ppid = uint32_t(getpid());
        p.argv = command;
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        p.host = host;
        m.processes.push_back(std::move(p));
        waited = &m.processes.back();
    }
    if (waited) {
        if (WIFEXITED(wait_status)) waited->exit_code = WEXITSTATUS(wait_status);
        if (WIFSIGNALED(wait_status)) waited->signal = WTERMSIG(wait_status);
    }
    reader::settle_exit_statuses(m.processes);
    size_t traced = 0;
    for (const reader::RunProcess& p : m.processes) traced += !p.trace.empty();
    std::string tmp = fmt::format("{}.{}.tmp", path, getpid());
    {
        std::ofstream out(tmp);
        out << reader::manifest_json(m);
        if (!out.flush()) {
            log.error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
            unlink(tmp.c_str());
            return traced;
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        log.error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
        unlink(tmp.c_str());
    }
    return traced;
}

} // namespace prof::tools
