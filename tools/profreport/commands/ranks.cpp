// profreport ranks (or --ranks) DIR|TRACE...: the load imbalance of an MPI run, per function the
// min, mean and max over the ranks of ncalls, tottime and cumtime, and the rank of the max.
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "output.hpp"
#include "reader/run_manifest.hpp"
#include "reader/trace_reader.hpp"
#include "reading.hpp"
#include "render/ranks.hpp"

#include <fmt/format.h>

#include <map>
#include <set>

namespace prof::profreport {

std::string refuse_ranks_sort(const Args& a) {
    switch (a.table.sort) {
    case render::SortKey::kCumtime:
    case render::SortKey::kTottime:
    case render::SortKey::kNcalls:
    case render::SortKey::kPcalls:
        return {};
    default:
        // The table orders by the max over the ranks of the metric whose imbalance it shows.
        if (!a.sort_given) return {};
        return "the ranks are sorted by the max of cumtime, tottime or ncalls: --sort name, "
               "file, line, nfl and stdname do not apply";
    }
}

CLI::App* add_ranks(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "ranks", "[options] DIR|TRACE...",
        "The load imbalance of an MPI run (profreport --ranks).\n"
        "\n"
        "Per function, the min, mean and max over the ranks of ncalls, tottime and\n"
        "cumtime, the rank of each max, and the imbalance of the metric sorted by\n"
        "(max / mean - 1), as Scalasca shows it. Ranks come from the traces (the MPI\n"
        "launcher's variables, docs/runs.md); the traces of one rank are merged, and a\n"
        "trace of no rank (mpirun, a shell) is left out.");
    TableFlags t = declare_table(*sub, a);
    cli.help_name(t.match, "-m, --match REGEX");
    declare_format(*sub, a, {"text", "json", "csv"});
    declare_output(*sub, a);
    declare_reading(*sub, a);
    declare_traces(cli, *sub, a);
    sub->callback([&a] {
        a.ranks = true;
        a.command = run_ranks;
        if (std::string refused = refuse_ranks_sort(a); !refused.empty())
            throw CLI::ValidationError(refused);
    });
    return sub;
}

CLI::Option* add_ranks_flag(CLI::App& report, Args& a) {
    // Declared after --sort: its value is known when this callback runs.
    return report.add_flag_callback(
        "--ranks",
        [&a] {
            a.ranks = true;
            a.command = run_ranks;
            if (std::string refused = refuse_ranks_sort(a); !refused.empty())
                throw CLI::ValidationError(refused);
        },
        "an MPI run's load imbalance: per function the min, mean and max\n"
        "over the ranks of ncalls, tottime and cumtime (profreport ranks)");
}

int run_ranks(const Args& a, const tools::ToolLog& log) {
    Output out(a.output);
    return guarded(out, log, [&] {
        std::map<uint32_t, std::vector<std::string>> by_rank;
        std::map<uint32_t, analysis::RankProfile> ranks;
        std::map<uint32_t, std::set<uint32_t>> sizes;
        std::vector<std::string> unranked;
        std::set<std::string> jobs; // the runs' ids: ranks of two jobs are not one job's
        for (const std::string& path : a.traces) {
            reader::TraceReader r(path);
            const reader::TraceInfo& info = r.read_metadata();
            reader::RunProcess p = reader::describe_trace(info, path);
            if (auto run = info.meta.find("run"); run != info.meta.end() && p.rank)
                jobs.insert(run->second);
            if (!p.rank) {
                unranked.push_back(fmt::format("{} ({})", p.command(), p.pid));
                continue;
            }
            by_rank[*p.rank].push_back(path);
            analysis::RankProfile& rp = ranks[*p.rank];
            rp.rank = *p.rank;
            rp.pids.push_back(p.pid);
            if (rp.host.empty()) rp.host = p.host;
            if (p.size) sizes[*p.size].insert(*p.rank);
        }
        if (by_rank.empty()) {
            log.error(fmt::format("no trace of an MPI rank among the {} given (a rank's trace "
                                  "names it when the launcher set OMPI_COMM_WORLD_RANK, "
                                  "PMI_RANK, PMIX_RANK or SLURM_PROCID)",
                                  a.traces.size()));
            return 1;
        }
        if (jobs.size() > 1)
            log.warn(fmt::format("the traces are of {} runs (MPI jobs): their ranks of the same "
                                 "number are merged",
                                 jobs.size()));
        if (!unranked.empty()) {
            std::string names;
            for (size_t i = 0; i < unranked.size() && i < 5; ++i)
                names += (i ? ", " : "") + unranked[i];
            if (unranked.size() > 5) names += ", ...";
            log.info(fmt::format("{} trace{} of no MPI rank left out: {}", unranked.size(),
                                 unranked.size() == 1 ? "" : "s", names));
        }
        // A job whose ranks did not all leave a trace: the table is over those that did.
        for (const auto& [size, present] : sizes)
            if (present.size() < size) {
                std::string missing;
                for (uint32_t r = 0, shown = 0; r < size && shown < 8; ++r)
                    if (!present.count(r)) missing += (shown++ ? "," : "") + std::to_string(r);
                log.warn(fmt::format("{} of {} ranks have a trace (missing: {}{}); the min, mean "
                                     "and max are over those",
                                     present.size(), size, missing,
                                     size - present.size() > 8 ? ",..." : ""));
            }
        std::vector<std::vector<std::string>> groups;
        for (const auto& [rank, paths] : by_rank) groups.push_back(paths);
        auto sessions = read_groups(a, groups);
        std::vector<analysis::RankProfile> profiles;
        size_t i = 0;
        for (auto& [rank, rp] : ranks) {
            rp.profile = sessions[i++]->profile();
            profiles.push_back(std::move(rp));
        }
        analysis::RankComparison c = analysis::compare_ranks(std::move(profiles));
        if (!out.open(log)) return 1;
        render::print_ranks(out.file(), c, a.table, a.format);
        return out.close(log) ? 0 : 1;
    });
}

} // namespace prof::profreport
