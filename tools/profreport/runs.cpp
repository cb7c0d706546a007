#include "runs.hpp"

#include "reader/trace_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace prof::profreport {

RunListing read_run(const std::string& dir, const tools::ToolLog& log) {
    RunListing run;
    run.dir = dir;
    std::string manifest_path = dir + "/" + reader::kManifestName;
    std::optional<reader::RunManifest> manifest;
    if (std::ifstream in(manifest_path); in) {
        run.manifest = true;
        std::stringstream text;
        text << in.rdbuf();
        try {
            manifest = reader::parse_manifest(text.str());
        } catch (const std::exception& e) {
            log.warn(fmt::format("{}: {}; reading the directory's traces without it", manifest_path,
                                 e.what()));
        }
    }
    std::map<std::string, const reader::RunProcess*> listed;
    if (manifest) {
        for (const reader::RunProcess& p : manifest->processes) {
            if (p.trace.empty()) continue;
            auto [it, fresh] = listed.emplace(p.trace, &p);
            if (!fresh)
                log.warn(fmt::format("{}: processes {} and {} both claim {}; read once",
                                     manifest_path, it->second->pid, p.pid, p.trace));
        }
    }
    std::set<std::string> present;
    std::vector<std::string> names = reader::run_traces(dir);
    // Said only when there are traces to read: a directory without any is one error, the
    // caller's.
    if (!run.manifest && !names.empty())
        log.warn(fmt::format("{} has no {} (not written by profrun -d, or the run is still going "
                             "on): reading its traces",
                             dir, reader::kManifestName));
    for (const std::string& name : names) {
        present.insert(name);
        try {
            reader::TraceReader r(dir + "/" + name);
            reader::RunProcess p = reader::describe_trace(r.read_metadata(), name);
            if (auto it = listed.find(name); it != listed.end()) {
                p.exit_code = it->second->exit_code;
                p.signal = it->second->signal;
            }
            run.processes.push_back(std::move(p));
        } catch (const std::exception& e) {
            log.warn(fmt::format("{}; left out of the run", e.what()));
        }
    }
    if (manifest) {
        for (const reader::RunProcess& p : manifest->processes) {
            if (p.trace.empty()) {
                run.processes.push_back(p); // profiled nothing itself (a shell, mpirun)
            } else if (!present.count(p.trace)) {
                log.warn(fmt::format("{}: the trace of process {} ({}), {}, is missing", dir, p.pid,
                                     p.command(), p.trace));
            }
        }
    }
    std::stable_sort(run.processes.begin(), run.processes.end(),
                     [](const reader::RunProcess& x, const reader::RunProcess& y) {
                         return x.start_utc_ns < y.start_utc_ns;
                     });
    reader::settle_exit_statuses(run.processes); // a run written before the manifest kept them
    return run;
}

std::string nothing_to_read(const RunListing& run) {
    if (run.processes.empty() && !run.manifest)
        return fmt::format("{} holds no trace (and no {}: not a run directory of profrun -d)",
                           run.dir, reader::kManifestName);
    return fmt::format("{} holds no readable trace", run.dir);
}

namespace {

bool matches(const reader::RunProcess& p, const std::string& which) {
    if (!which.empty() && which.find_first_not_of("0123456789") == std::string::npos)
        return std::to_string(p.pid) == which;
    std::string exe = p.exe.substr(p.exe.rfind('/') + 1);
    return p.command() == which || exe == which;
}

} // namespace

std::string expand_runs(Args& a, const tools::ToolLog& log) {
    std::vector<std::string> traces;
    size_t vs = SIZE_MAX;
    bool any_run = false;
    for (size_t i = 0; i < a.traces.size(); ++i) {
        if (i == a.diff.vs) vs = traces.size();
        const std::string& path = a.traces[i];
        if (!reader::is_run_dir(path)) {
            traces.push_back(path);
            continue;
        }
        any_run = true;
        a.run_dirs.push_back(path);
        if (a.processes) continue; // the tree reads the run itself
        RunListing run = read_run(path, log);
        size_t before = traces.size();
        for (const reader::RunProcess& p : run.processes)
            if (!p.trace.empty() && (a.process.empty() || matches(p, a.process)))
                traces.push_back(path + "/" + p.trace);
        // Nothing to read is a trace that cannot be read (status 1), not bad usage.
        if (traces.size() == before && a.process.empty())
            throw std::runtime_error(nothing_to_read(run));
        if (traces.size() == before)
            return fmt::format("no process '{}' in the run {} (profreport processes {} "
                                     "lists them)",
                                     a.process, path, path);
    }
    if (!a.process.empty() && !any_run)
        return "--process picks a process of a run directory (profrun -d DIR)";
    if (a.processes && traces.size())
        return fmt::format("processes lists the processes of a run: {} is not a run directory "
                           "(profrun -d DIR)",
                           traces.front());
    a.traces = std::move(traces);
    if (a.diff.vs != SIZE_MAX) a.diff.vs = vs;
    return {};
}

} // namespace prof::profreport
