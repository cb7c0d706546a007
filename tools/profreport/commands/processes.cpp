// profreport processes DIR...: the process tree of a run (profrun -d), one line per process:
// its command, rank, exit, wall time, and from its trace the calls, the profiled time and the
// allocations.
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "output.hpp"
#include "reading.hpp"
#include "runs.hpp"

#include <fmt/format.h>

#include <cstring>

#include <functional>
#include <map>

namespace prof::profreport {

CLI::App* add_processes(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "processes", "[options] DIR...",
        "The process tree of a run (profrun -d DIR).\n"
        "\n"
        "One line per process, under its parent: pid, MPI rank, exit status, wall time,\n"
        "and from its trace the calls, the profiled time (the table's total) and the\n"
        "allocations.");
    declare_output(*sub, a);
    declare_reading(*sub, a);
    declare_traces(cli, *sub, a);
    sub->callback([&a] {
        a.processes = true;
        a.command = run_processes;
    });
    return sub;
}

namespace {

std::string exit_of(const reader::RunProcess& p) {
    if (p.signal) { // SIGPIPE, as kill -l names it
        const char* name = sigabbrev_np(*p.signal);
        return name ? fmt::format("SIG{}", name) : fmt::format("sig {}", *p.signal);
    }
    if (p.exit_code) return std::to_string(*p.exit_code);
    return p.trace.empty() || p.finished ? "-" : "running?";
}

struct Figures {
    bool read = false;
    uint64_t calls = 0, allocations = 0;
    double time = 0;
    bool sampled = false; // no call counts (profrun --sample)
};

Figures figures_of(const Args& a, const std::string& path, const tools::ToolLog& log) {
    Figures f;
    try {
        analysis::Session s(session_options(a));
        s.add_trace(path);
        analysis::Profile p = s.profile();
        f.calls = p.total_calls;
        f.time = p.total_time;
        f.sampled = !p.time.calls_counted();
        f.allocations = s.memory().allocations;
        f.read = true;
    } catch (const std::exception& e) {
        log.warn(e.what());
    }
    return f;
}

} // namespace

int run_processes(const Args& a, const tools::ToolLog& log) {
    Output out(a.output);
    return guarded(out, log, [&] {
        std::vector<RunListing> runs;
        for (const std::string& dir : a.run_dirs) runs.push_back(read_run(dir, log));
        // As `profreport DIR` says of it: a directory with no process is no run to list.
        for (const RunListing& run : runs)
            if (run.processes.empty()) {
                log.error(nothing_to_read(run));
                return 1;
            }
        if (!out.open(log)) return 1;
        std::FILE* f = out.file();
        for (const RunListing& run : runs) {
            std::map<uint32_t, std::vector<size_t>> children; // ppid -> processes
            std::map<uint32_t, bool> known;
            for (const reader::RunProcess& p : run.processes) known[p.pid] = true;
            std::vector<size_t> roots;
            for (size_t i = 0; i < run.processes.size(); ++i) {
                const reader::RunProcess& p = run.processes[i];
                if (known.count(p.ppid) && p.ppid != p.pid)
                    children[p.ppid].push_back(i);
                else
                    roots.push_back(i);
            }
            std::map<std::string, bool> hosts;
            for (const reader::RunProcess& p : run.processes) hosts[p.host] = true;
            fmt::print(f, "run {}: {} process{} on {} host{}\n\n", run.dir, run.processes.size(),
                       run.processes.size() == 1 ? "" : "es", hosts.size(),
                       hosts.size() == 1 ? "" : "s");
            fmt::print(f, "{:<24} {:>5} {:>8} {:>9} {:>12} {:>10} {:>12}  {}\n", "pid", "rank",
                       "exit", "wall s", "calls", "time s", "allocations", "command");
            // An exec chain has several traces of one pid: the children hang under its last.
            std::map<uint32_t, bool> shown;
            std::function<void(size_t, int)> show = [&](size_t i, int depth) {
                const reader::RunProcess& p = run.processes[i];
                // An image that exec'd another ends there: the next trace of its pid goes on.
                bool last_image = true;
                for (size_t j = i + 1; j < run.processes.size(); ++j)
                    if (run.processes[j].pid == p.pid) last_image = false;
                Figures fig;
                if (!p.trace.empty()) fig = figures_of(a, run.dir + "/" + p.trace, log);
                double wall = p.end_utc_ns > p.start_utc_ns
                                  ? double(p.end_utc_ns - p.start_utc_ns) * 1e-9
                                  : -1;
                std::string argv;
                for (const std::string& s : p.argv) argv += (argv.empty() ? "" : " ") + s;
                if (argv.empty()) argv = p.exe;
                if (argv.size() > 60) argv = argv.substr(0, 57) + "...";
                fmt::print(f, "{:<24} {:>5} {:>8} {:>9} {:>12} {:>10} {:>12}  {}{}\n",
                           std::string(size_t(depth) * 2, ' ') + std::to_string(p.pid),
                           p.rank ? std::to_string(*p.rank) : "-",
                           last_image ? exit_of(p) : std::string("exec"),
                           wall >= 0 ? fmt::format("{:.3f}", wall) : "-",
                           !fig.read     ? "-"
                           : fig.sampled ? "?"
                                         : std::to_string(fig.calls),
                           fig.read ? fmt::format("{:.3f}", fig.time) : "-",
                           fig.read && fig.allocations ? std::to_string(fig.allocations) : "-",
                           argv, p.trace.empty() ? "  (no trace)" : "");
                if (shown[p.pid] || !last_image) return;
                shown[p.pid] = true;
                for (size_t c : children[p.pid]) show(c, depth + 1);
            };
            for (size_t r : roots) show(r, 0);
            fmt::print(f, "\n");
        }
        return out.close(log) ? 0 : 1;
    });
}

} // namespace prof::profreport
