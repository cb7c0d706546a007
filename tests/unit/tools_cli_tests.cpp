// The tools' command-line helper (tools/common/cli.hpp) on a tool shaped like profreport:
// subcommands with a default one, options shared by two of them, the common options after a
// subcommand's name, refusals declared to CLI11.
#include "common/cli.hpp"

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

namespace {

using Args = std::vector<std::string>;

struct Values {
    std::string sort = "stdname", thread;
    Args traces;
    bool tree = false, csv = false;
};

// Declared once, for each subcommand that has it.
void declare_thread(CLI::App& sub, Values& v) {
    sub.add_option("--thread", v.thread, "only the calls of thread TID")->type_name("TID");
}

struct Tool {
    prof::tools::Cli cli{"tool", "[options] TRACE...", "Reads traces."};
    Values v;
    CLI::App* report = cli.add_subcommand("report", "[options] TRACE...", "Prints the table.");
    CLI::App* lines = cli.add_subcommand("lines", "[options] TRACE...", "Prints marked lines.");

    Tool() {
        report->add_option("-s,--sort", v.sort, "sort by KEY")->type_name("KEY");
        CLI::Option* tree = report->add_flag("--tree", v.tree, "the call tree");
        CLI::Option* csv = report->add_flag("--csv", v.csv, "as CSV");
        cli.excludes(tree, csv);
        report->add_option("TRACE", v.traces);
        declare_thread(*report, v);
        lines->add_option("TRACE", v.traces);
        declare_thread(*lines, v);
        cli.default_subcommand(report);
    }
    std::optional<int> parse(Args args) { return cli.parse(std::move(args)); }
};

} // namespace

TEST_CASE("tools' command lines: no subcommand named is the default one") {
    Tool t;
    REQUIRE(t.parse({"--sort", "cumtime", "a.trace", "b.trace"}) == std::nullopt);
    CHECK(t.report->parsed());
    CHECK(t.v.sort == "cumtime");
    CHECK(t.v.traces == Args{"a.trace", "b.trace"});

    Tool bare;
    REQUIRE(bare.parse({"a.trace"}) == std::nullopt);
    CHECK(bare.report->parsed());
    CHECK(bare.v.traces == Args{"a.trace"});

    // The common options come before or after the subcommand's name; an option value that
    // names a subcommand stays a value.
    Tool before;
    REQUIRE(before.parse({"--log-format", "json", "--thread=7", "lines"}) == std::nullopt);
    CHECK(before.report->parsed());
    CHECK(before.cli.log_format() == "json");
    CHECK(before.v.thread == "7");
    CHECK(before.v.traces == Args{"lines"});

    Tool named;
    REQUIRE(named.parse({"--log-format", "json", "lines", "--thread", "3", "a.trace"}) ==
            std::nullopt);
    CHECK(named.lines->parsed());
    CHECK_FALSE(named.report->parsed());
    CHECK(named.v.thread == "3");
    CHECK(named.cli.log_format() == "json");

    Tool after;
    REQUIRE(after.parse({"lines", "a.trace", "--log-format=json"}) == std::nullopt);
    CHECK(after.cli.log_format() == "json");
    CHECK(after.v.traces == Args{"a.trace"});

    // After --, every argument is a trace.
    Tool dashes;
    REQUIRE(dashes.parse({"--", "-odd.trace"}) == std::nullopt);
    CHECK(dashes.v.traces == Args{"-odd.trace"});
}

TEST_CASE("tools' command lines: usage errors exit with 2, --help and --version with 0") {
    CHECK(Tool().parse({"lines", "--sort", "cumtime", "a.trace"}) == 2); // report's option
    CHECK(Tool().parse({"--tree", "--csv", "a.trace"}) == 2);            // declared exclusive
    CHECK(Tool().parse({"--tree", "a.trace"}) == std::nullopt);
    CHECK(Tool().parse({"--log-format", "xml", "a.trace"}) == 2);
    CHECK(Tool().parse({"--frobnicate", "a.trace"}) == 2);
    CHECK(Tool().parse({"a.trace", "--sort"}) == 2);
    CHECK(Tool().parse({"--help"}) == 0);
    CHECK(Tool().parse({"lines", "-h"}) == 0);
    CHECK(Tool().parse({"--sort", "x", "--help"}) == 0);
    CHECK(Tool().parse({"-V"}) == 0);
}

TEST_CASE("tools' command lines: --help of a subcommand and of the tool") {
    Tool t;
    REQUIRE(t.parse({"a.trace"}) == std::nullopt);
    std::string lines = t.cli.help(t.lines);
    CHECK(lines.rfind("usage: tool lines [options] TRACE...\n\nPrints marked lines.\n", 0) == 0);
    CHECK(lines.find("\noptions:\n      --thread TID") != std::string::npos);
    CHECK(lines.find("  -h, --help") != std::string::npos);
    CHECK(lines.find("\ncommon options:\n      --log-format F") != std::string::npos);
    CHECK(lines.find("-V, --version") != std::string::npos);
    CHECK(lines.find("--sort") == std::string::npos);
    std::string tool = t.cli.help(&t.cli.app());
    CHECK(tool.rfind("usage: tool [options] TRACE...\n\nReads traces.\n", 0) == 0);
    CHECK(tool.find("\ncommands:\n  report") != std::string::npos);
    CHECK(tool.find("Prints the table. (the default)") != std::string::npos);
}
