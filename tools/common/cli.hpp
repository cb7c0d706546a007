// The command lines of the tools, declared with CLI11 the way every libprof tool behaves.
//
// How a tool uses it: construct a `Cli` with the tool's name, its usage line and the
// explanatory text of its help; declare its options on `cli.app()` with CLI11 (bound to
// variables, with `type_name` for the value's name and descriptions wrapped by hand, as they
// appear under --help); declare which options cannot go together with `cli.excludes(a, b)` and
// which need another with `cli.needs(a, b)`, each with its one-line message; then call
// `cli.parse(argc, argv)`. It adds -h/--help, -V/--version and --log-format text|json (applied
// at once, so that even a usage error is reported in JSON), and returns the exit status when the
// tool is done (0 after --help or --version, 2 after a usage error, reported as one structured
// line through `cli.log()`), or nothing when the tool should go on. A usage error found only
// after parsing goes through `cli.usage_error(msg)` (also 2). A tool with subcommands creates
// them with `cli.add_subcommand` (each gets its own usage line and --help, and accepts the
// common options after its name); `cli.default_subcommand(sub)` makes a command line that names
// no subcommand mean that one (`profreport --sort cumtime TRACE` is `profreport report --sort
// cumtime TRACE`), and the tool's --help lists that one's options too. Options shared by
// several subcommands are declared by one function that takes the `CLI::App&` and the struct
// the values go to, called once per subcommand.
#pragma once

#include "common/tool_log.hpp"

#include <CLI/CLI.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prof::tools {

// Checks of a number given on the command line, for `->check(...)`. Their message is one
// sentence naming the value ("--pid: 0 is not a whole number above 0"), and the help shows the
// option's type name alone: CLI11's own checks add ":POSITIVE" or ":FLOAT in [1 - 20000]" to
// it, and print DBL_MAX in full when a value is refused.
// `what` names the value in the message ("a process ID"); by default, the range.
CLI::Validator whole_number(long long min, long long max, std::string what = {});
CLI::Validator number_above(double min); // strictly above
CLI::Validator number_between(double min, double max);

class Cli {
  public:
    // `usage` follows "usage: TOOL " on the first line of the help ("[options] TRACE...");
    // `description` is the explanatory text below it, as written (its line breaks kept).
    Cli(const char* tool, std::string usage, std::string description);
    Cli(const Cli&) = delete;
    Cli& operator=(const Cli&) = delete;

    CLI::App& app() { return app_; }
    ToolLog& log() { return log_; }

    // A subcommand, with its usage line (after "usage: TOOL NAME ") and help text.
    CLI::App* add_subcommand(std::string name, std::string usage, std::string description);
    // The subcommand meant when the command line names none. A command line then selects one
    // subcommand: after it, a subcommand's name is an argument like any other.
    void default_subcommand(CLI::App* sub);

    // `a` and `b` cannot be given together; `message` (default: "A cannot be used with B") is
    // the error. Declared to CLI11, which checks it.
    void excludes(CLI::Option* a, CLI::Option* b, std::string message = {});
    // `a` needs `b`; `message` defaults to "A needs B".
    void needs(CLI::Option* a, CLI::Option* b, std::string message = {});
    // The message when a required option or positional is missing (default: CLI11's).
    void required(CLI::Option* a, std::string message);

    // Presentation under --help: the left column's width (default 26), and another name for
    // an option's line (e.g. "--pack, --no-pack" for two flags shown as one; hide the other
    // one with `group("")`).
    void help_column(std::size_t width) { help_column_ = width; }
    // What --version prints (default: "TOOL VERSION").
    void version(std::string text) { version_ = std::move(text); }
    void help_name(const CLI::Option* opt, std::string name) { help_names_[opt] = std::move(name); }

    // Parses the command line: nothing when the tool goes on, else its exit status.
    std::optional<int> parse(int argc, char** argv);
    std::optional<int> parse(std::vector<std::string> args); // without the program name

    // Reports a usage error found after parsing; returns 2, the exit status for it.
    int usage_error(std::string_view msg) const;
    // "unknown option 'X' (see TOOL --help)", for a tool that reads the rest of its command
    // line itself (profrun's COMMAND).
    std::string unknown_option(std::string_view arg) const;

    // The --log-format given ("" when none), e.g. to pass it on to a child process.
    const std::string& log_format() const { return log_format_; }

    // The help text of an app (this tool or one of its subcommands), as --help prints it.
    std::string help(const CLI::App* app) const;

  private:
    struct Pair {
        CLI::Option *a, *b;
        std::string message;
    };
    void add_common_options();
    void insert_default_subcommand(std::vector<std::string>& args) const;
    std::string message_for(const CLI::ParseError& e) const;
    std::string help_hint() const;
    std::string option_line(const CLI::Option* opt) const;
    std::string options_block(const CLI::App* app, bool with_common,
                              bool without_help = false) const;

    std::string tool_;
    ToolLog log_;
    CLI::App app_;
    std::map<const CLI::App*, std::string> usages_;
    std::map<const CLI::Option*, std::string> help_names_;
    std::vector<Pair> excludes_, needs_;
    std::map<const CLI::Option*, std::string> required_;
    CLI::App* default_sub_ = nullptr;
    std::size_t help_column_ = 26;
    std::string log_format_;
    std::string version_;
    std::vector<std::string> args_;
};

} // namespace prof::tools
