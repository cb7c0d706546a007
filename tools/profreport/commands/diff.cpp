// profreport diff BASE NEW (or BASE... --vs NEW...): per-function ncalls, tottime and cumtime,
// mean per run of each set; with --memory, the allocation sites.
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "analysis/model/diff.hpp"
#include "output.hpp"
#include "reading.hpp"
#include "render/diff.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace prof::profreport {

namespace {

// The gate and the metric: --fail-above, --metric (returned), --min-share.
CLI::Option* declare_diff_options(CLI::App& app, Args& a) {
    auto& d = a.diff.opts;
    value(
        app, "--fail-above", "PCT",
        [&d](const std::string& v) { d.fail_above = parse_percent("--fail-above", v); },
        "exit with status 3 when the total or a function (at least\n"
        "--min-share of the total) regressed by more than PCT percent\n"
        "and by more than its uncertainty: the sampling error of times\n"
        "from samples and, with 2 or more runs a side, their spread");
    CLI::Option* metric = value(
        app, "--metric", "KEY",
        [&a](const std::string& m) {
            auto metric = analysis::views::parse_diff_metric(m);
            if (!metric)
                refuse(fmt::format("unknown metric '{}' (expected cumtime, tottime or ncalls)", m));
            a.diff.opts.metric = *metric;
        },
        "cumtime (default), tottime or ncalls: what is compared and sorted");
    value(
        app, "--min-share", "PCT",
        [&d](const std::string& v) { d.min_share = parse_percent("--min-share", v); },
        "functions under PCT% of the total never fail the gate (default 1)");
    return metric;
}

} // namespace

CLI::App* add_diff(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "diff", "[options] BASE NEW       (or: BASE... --vs NEW...)",
        "Compares two traces or two sets of traces.\n"
        "\n"
        "Compares per-function ncalls, tottime and cumtime, mean per run of each set, each\n"
        "change with its uncertainty (95%). Give 3 or more runs a side for a gate: with one,\n"
        "the spread between runs is unknown.");
    declare_diff_options(*sub, a);
    CLI::Option* metric = sub->get_option("--metric");
    CLI::Option* traces = declare_traces(cli, *sub, a);
    // Triggered where it stands: the traces given before it are the base ones.
    sub->add_flag_callback(
           "--vs", [&a, traces] { a.diff.vs = traces->results().size(); },
           "separates the base traces from the new ones")
        ->trigger_on_parse();
    CLI::Option* memory = declare_memory_flag(
        *sub, a,
        "compare allocation sites instead (matched by their stacks' function\n"
        "names): allocations, bytes, bytes live at the peak and leaked bytes,\n"
        "and the totals; --fail-above checks all four (--weight W: only W, which\n"
        "also orders the sites)");
    CLI::Option* weight =
        declare_weight(*sub, a, "with --memory: bytes, allocations, leaked or peak");
    declare_limit(*sub, a);
    declare_precision(*sub, a);
    declare_format(*sub, a, {"text", "json", "csv"});
    declare_output(*sub, a);
    declare_reading(*sub, a);
    cli.excludes(memory, metric, "diff --memory takes --weight, not --metric");
    cli.needs(weight, memory, kWeightRule);
    sub->footer("Exit status 3 when --fail-above finds a regression.");
    sub->callback([&a] {
        a.diff.chosen = true;
        a.command = run_diff;
    });
    return sub;
}

int run_diff(const Args& a, const tools::ToolLog& log) {
    namespace views = analysis::views;
    const size_t vs = a.diff.vs; // the first new trace
    Output out(a.output);
    return guarded(out, log, [&] {
        if (a.memory) { // one report per run: sets are compared per run
            std::vector<analysis::MemoryReport> base, next;
            for (size_t i = 0; i < a.traces.size(); ++i) {
                Reading r(a, {a.traces[i]});
                warn_partial(log, *r.session);
                (i < vs ? base : next).push_back(r.session->memory());
            }
            views::MemoryDiffOptions o;
            o.measure = a.weight;
            o.fail_above = a.diff.opts.fail_above;
            o.min_share = a.diff.opts.min_share;
            o.limit = a.table.limit;
            views::MemoryDiffResult d;
            try {
                d = views::diff_memory(base, next, o);
            } catch (const std::invalid_argument& e) {
                log.error(e.what());
                return 1;
            }
            if (!out.open(log)) return 1;
            render::print_memory_diff(out.file(), d, o, a.format);
            if (!out.close(log)) return 1;
            std::vector<std::string> failures = views::memory_diff_failures(d, o);
            for (const std::string& f : failures) log.error("regression: " + f);
            return failures.empty() ? 0 : 3;
        }
        // One profile per run: the spread between the runs of a side is part of the noise.
        std::vector<analysis::Profile> base, next;
        for (size_t i = 0; i < a.traces.size(); ++i) {
            Reading r(a, {a.traces[i]});
            warn_partial(log, *r.session);
            (i < vs ? base : next).push_back(r.session->profile());
        }
        views::DiffOptions o = a.diff.opts;
        o.limit = a.table.limit;
        if (a.table.precision != 3) o.precision = a.table.precision;
        views::DiffResult d = views::diff_runs(base, next, o);
        if (!out.open(log)) return 1;
        render::print_diff(out.file(), d, o, a.format);
        if (!out.close(log)) return 1;
        for (const std::string& u : views::diff_undecided(d, o)) log.warn("undecided: " + u);
        std::vector<std::string> failures = views::diff_failures(d, o);
        for (const std::string& f : failures) log.error("regression: " + f);
        return failures.empty() ? 0 : 3;
    });
}

} // namespace prof::profreport
