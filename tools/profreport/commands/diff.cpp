// profreport diff BASE NEW (or BASE... --vs NEW...): per-function ncalls, tottime and cumtime,
// mean per run of each set; with --memory, the allocation sites.
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "analysis/model/diff.hpp"
#include "analysis/model/latency.hpp"
#include "output.hpp"
#include "reader/trace_reader.hpp"
#include "reading.hpp"
#include "render/diff.hpp"
#include "render/diff_views.hpp"

#include <fmt/format.h>

#include <functional>
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
                refuse(fmt::format("unknown metric '{}' (expected cumtime, tottime, ncalls or p99)",
                                   m));
            a.diff.opts.metric = *metric;
        },
        "cumtime (default), tottime, ncalls or p99: what is compared and sorted;\n"
        "p99 compares each function's calls' 99th percentile (needs every call's\n"
        "time: PROF_TIME=traced), with its p50, for functions whose p99 is 1 us or more");
    value(
        app, "--min-share", "PCT",
        [&d](const std::string& v) { d.min_share = parse_percent("--min-share", v); },
        "functions under PCT% of the total never fail the gate (default 1)");
    return metric;
}

// The pictures: --html, --flamegraph (with --widths, --icicle), --folded.
std::vector<CLI::Option*> declare_pictures(CLI::App& app, Args& a) {
    std::vector<CLI::Option*> pictures;
    pictures.push_back(
        app.add_option("--html", a.html.file,
                       "one self-contained page: an icicle of both sides' call paths coloured\n"
                       "by change (red slower, blue faster, grey within the noise), the table\n"
                       "of both sides with each change's uncertainty, and a function's\n"
                       "callers and callees on both sides on click")
            ->type_name("FILE"));
    pictures.push_back(
        app.add_option("--flamegraph", a.flamegraph.file,
                       "a differential flame graph (SVG): widths of the new runs (--widths),\n"
                       "colour by change as in --html; hover for both sides' times")
            ->type_name("FILE"));
    pictures.push_back(
        app.add_option("--folded", a.diff.folded,
                       "the folded stacks of both sides, `a;b;c <base ns> <new ns>` per\n"
                       "call path (difffolded.pl's lines: flamegraph.pl draws them)")
            ->type_name("FILE"));
    value(
        app, "--widths", "SIDE",
        [&a](const std::string& w) {
            if (w != "new" && w != "base")
                refuse(fmt::format("--widths expects new or base, got '{}'", w));
            a.diff.base_widths = w == "base";
        },
        "--flamegraph: the widths of the new runs (default) or of the base ones\n"
        "(where what the new runs no longer call shows)");
    app.add_flag("--icicle", a.flamegraph.icicle, "--flamegraph: the root on top");
    declare_title(app, a, "the title of --html and --flamegraph");
    return pictures;
}

// Writes `file` with `write`; false (said in one line) when it could not be written.
bool write_picture(const std::string& file, const tools::ToolLog& log,
                   const std::function<void(std::FILE*)>& write) {
    Output out(file);
    return guarded(out, log, [&] {
               if (!out.open(log)) return 1;
               write(out.file());
               return out.close(log) ? 0 : 1;
           }) == 0;
}

std::string file_name(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

namespace {

namespace views = analysis::views;

// --html, --flamegraph and --folded, from every function (no --limit) of the runs.
bool write_pictures(const Args& a, const tools::ToolLog& log, const views::DiffOptions& o,
                    const std::vector<analysis::Profile>& base,
                    const std::vector<analysis::Profile>& next,
                    const std::vector<views::CallTree>& base_trees,
                    const std::vector<views::CallTree>& new_trees) {
    views::DiffTree tree = views::diff_call_trees(base_trees, base, new_trees, next);
    if (!a.diff.folded.empty() && !write_picture(a.diff.folded, log, [&](std::FILE* f) {
            render::write_diff_folded(f, tree);
        }))
        return false;
    if (!a.flamegraph.file.empty()) {
        render::FlameOptions fo;
        fo.title = a.title;
        fo.icicle = a.flamegraph.icicle;
        fo.min_width = a.flamegraph.min_width;
        if (!write_picture(a.flamegraph.file, log, [&](std::FILE* f) {
                render::write_diff_flamegraph(f, tree, fo, a.diff.base_widths);
            }))
            return false;
    }
    if (!a.html.file.empty()) {
        views::DiffOptions all = o;
        all.limit = 0;
        views::DiffResult d = views::diff_runs(base, next, all);
        std::vector<views::DiffEdge> edges = views::diff_edges(d, base, next);
        render::DiffPageOptions page;
        page.title = a.title;
        for (size_t i = 0; i < a.traces.size(); ++i)
            (i < a.diff.vs ? page.base_traces : page.new_traces).push_back(file_name(a.traces[i]));
        if (page.title.empty() && !base.empty() && !base.front().traces.empty()) {
            const auto& meta = base.front().traces.front().meta;
            if (auto exe = meta.find("exe"); exe != meta.end()) page.title = file_name(exe->second);
        }
        if (!write_picture(a.html.file, log, [&](std::FILE* f) {
                render::write_diff_html(f, d, edges, tree, all, page);
            }))
            return false;
    }
    return true;
}

// The table, then the gate's verdict: one line per undecided change and per regression, and the
// exit status (3 on a regression).
int print_verdict(const Args& a, const tools::ToolLog& log, Output& out, const views::DiffResult& d,
                  const views::DiffOptions& o) {
    if (!out.open(log)) return 1;
    render::print_diff(out.file(), d, o, a.format);
    if (!out.close(log)) return 1;
    for (const std::string& u : views::diff_undecided(d, o)) log.warn("undecided: " + u);
    std::vector<std::string> failures = views::diff_failures(d, o);
    for (const std::string& f : failures) log.error("regression: " + f);
    return failures.empty() ? 0 : 3;
}

// diff --metric p99: one latency report per run.
int run_tail_diff(const Args& a, const tools::ToolLog& log, Output& out) {
    if (!a.html.file.empty() || !a.flamegraph.file.empty() || !a.diff.folded.empty()) {
        log.error("diff's pictures are of times: --metric p99 draws none");
        return 2;
    }
    std::vector<views::LatencyReport> base, next;
    for (size_t i = 0; i < a.traces.size(); ++i) {
        views::LatencyOptions lo;
        lo.tail = false;
        lo.open = [&](analysis::ActivationObserver& observer) {
            analysis::SessionOptions so = session_options(a);
            so.observer = &observer;
            so.observer_needs = "--metric p99 needs";
            so.observer_hint = "record with PROF_TIME=traced: profrun --time traced";
            auto session = std::make_unique<analysis::Session>(so);
            session->add_trace(a.traces[i]);
            warn_partial(log, *session);
            return session;
        };
        try {
            (i < a.diff.vs ? base : next).push_back(views::latency(lo));
        } catch (const reader::TraceError& e) {
            log.error(e.what());
            return 1;
        }
    }
    views::DiffOptions o = a.diff.opts;
    o.limit = a.table.limit;
    if (a.table.precision != 3) o.precision = a.table.precision;
    return print_verdict(a, log, out, views::diff_tails(base, next, o), o);
}

} // namespace

CLI::App* add_diff(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "diff", "[options] BASE NEW       (or: BASE... --vs NEW...)",
        "Compares two traces or two sets of traces.\n"
        "\n"
        "Compares per-function ncalls, tottime and cumtime, mean per run of each set, each\n"
        "change with its uncertainty (95%). Give 3 or more runs a side for a gate: with one,\n"
        "the spread between runs is unknown. --html and --flamegraph draw the change of each\n"
        "call path.");
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
    for (CLI::Option* picture : declare_pictures(*sub, a))
        cli.excludes(memory, picture, "diff's pictures are of the time diff, not of --memory");
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
    for (const std::string* picture : {&a.html.file, &a.flamegraph.file, &a.diff.folded})
        if (*picture == "-") {
            log.error("diff's pictures are files: standard output holds the table");
            return 2;
        }
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
        if (a.diff.opts.metric == views::DiffMetric::kP99) return run_tail_diff(a, log, out);
        // One profile per run: the spread between the runs of a side is part of the noise.
        const bool pictures =
            !a.html.file.empty() || !a.flamegraph.file.empty() || !a.diff.folded.empty();
        std::vector<analysis::Profile> base, next;
        std::vector<views::CallTree> base_trees, new_trees;
        for (size_t i = 0; i < a.traces.size(); ++i) {
            Reading r(a, {a.traces[i]});
            warn_partial(log, *r.session);
            (i < vs ? base : next).push_back(r.session->profile());
            if (pictures) (i < vs ? base_trees : new_trees).push_back(r.session->call_tree());
        }
        views::DiffOptions o = a.diff.opts;
        if (a.table.precision != 3) o.precision = a.table.precision;
        views::DiffOptions shown = o;
        shown.limit = a.table.limit;
        // The verdict first: a picture that cannot be written is said after it (status 1).
        int status = print_verdict(a, log, out, views::diff_runs(base, next, shown), shown);
        if (status == 1) return 1;
        if (pictures && !write_pictures(a, log, o, base, next, base_trees, new_trees)) return 1;
        return status;
    });
}

} // namespace prof::profreport
