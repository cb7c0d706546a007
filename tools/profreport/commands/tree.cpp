// profreport tree (or --tree): the call tree in the terminal, or one CSV row per call path.
#include "commands/commands.hpp"

#include "analysis/engine/session.hpp"
#include "export_formats.hpp"
#include "output.hpp"
#include "reading.hpp"
#include "render/render.hpp"

namespace prof::profreport {

std::string refuse_tree(const Args& a) {
    return a.format == "json" ? format_json_refusal() : std::string();
}

namespace {

// --depth and --min-percent, on tree and with --tree on report; `context` leads their help.
void declare_tree_options(CLI::App& app, Args& a, const std::string& context = "") {
    value(
        app, "--depth", "N",
        [&a](const std::string& v) {
            a.tree.opts.max_depth = uint32_t(parse_number("--depth", v));
        },
        context + "down to depth N");
    value(
        app, "--min-percent", "P",
        [&a](const std::string& v) { a.tree.opts.min_percent = parse_percent("--min-percent", v); },
        context + "hide call paths under P% of the total time");
}

} // namespace

CLI::App* add_tree(tools::Cli& cli, Args& a) {
    CLI::App* sub = cli.add_subcommand(
        "tree", "[options] TRACE...",
        "The call tree in the terminal.\n"
        "\n"
        "The call tree in the terminal (uftrace graph-like) (the same as profreport --tree);\n"
        "--format csv gives one row per call path (id, parent, calls, total_ns, self_ns).");
    declare_tree_options(*sub, a);
    declare_threads(*sub, a);
    declare_format(*sub, a, {"text", "csv"});
    declare_output(*sub, a);
    declare_reading(*sub, a);
    declare_traces(cli, *sub, a);
    sub->callback([&a] {
        a.tree.chosen = true;
        a.command = run_tree;
        if (std::string refused = refuse_tree(a); !refused.empty())
            throw CLI::ValidationError(refused);
    });
    return sub;
}

CLI::Option* add_tree_flag(CLI::App& report, Args& a) {
    CLI::Option* tree = report.add_flag_callback(
        "--tree",
        [&a] {
            a.tree.chosen = true;
            a.command = run_tree;
        },
        "the call tree in the terminal (uftrace graph-like); --format csv\n"
        "gives one row per call path (id, parent, calls, total_ns, self_ns)\n"
        "(profreport tree)");
    declare_tree_options(report, a, "with --tree: ");
    return tree;
}

int run_tree(const Args& a, const tools::ToolLog& log) {
    Output out(a.output);
    return guarded(out, log, [&] {
        Reading r(a, a.traces);
        warn_partial(log, *r.session);
        analysis::views::CallTreeOptions co;
        if (!call_tree_options(a, log, *r.session, co)) return 1;
        analysis::views::CallTree tree = r.session->call_tree(co);
        if (!out.open(log)) return 1;
        render::TreeOptions o = a.tree.opts;
        o.csv = a.format == "csv";
        render::print_tree(out.file(), tree, o);
        return out.close(log) ? 0 : 1;
    });
}

} // namespace prof::profreport
