// The tools' CLI11 setup: the common options, the help layout and usage errors as one line.
#include "common/cli.hpp"

#include <prof/version.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>

namespace prof::tools {

namespace {

bool given(const CLI::Option* o) {
    return o->count() > 0;
}

// Errors are told apart by type: CLI11 names some after the app that throws them.
template <class Type>
bool is(const CLI::Error& e) {
    return dynamic_cast<const Type*>(&e);
}

// "profreport lines": the names from the tool down to `app`.
std::string path_of(const CLI::App* app) {
    std::string path = app->get_name();
    for (const CLI::App* p = app->get_parent(); p; p = p->get_parent())
        path = p->get_name() + " " + path;
    return path;
}

// The deepest subcommand the command line selected (the tool itself when none).
const CLI::App* selected(const CLI::App* app) {
    while (!app->get_subcommands().empty()) app = app->get_subcommands().front();
    return app;
}

std::string with_newline(std::string s) {
    if (!s.empty() && s.back() != '\n') s += '\n';
    return s;
}

} // namespace

Cli::Cli(const char* tool, std::string usage, std::string description)
    : tool_(tool), log_(tool), app_(std::move(description), tool) {
    usages_[&app_] = std::move(usage);
    // Re-added by parse() after the tool's own options, so that --help lists them last.
    app_.set_help_flag();
    // An option given twice takes its last value, as the hand-written parsers did.
    app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app_.formatter_fn(
        [this](const CLI::App* app, std::string, CLI::AppFormatMode) { return help(app); });
}

CLI::App* Cli::add_subcommand(std::string name, std::string usage, std::string description) {
    CLI::App* sub = app_.add_subcommand(std::move(name), std::move(description));
    // The common options (--log-format, --version) may follow the subcommand's name.
    sub->fallthrough();
    usages_[sub] = std::move(usage);
    return sub;
}

void Cli::default_subcommand(CLI::App* sub) {
    default_sub_ = sub;
    app_.require_subcommand(0, 1);
}

void Cli::excludes(CLI::Option* a, CLI::Option* b, std::string message) {
    a->excludes(b);
    if (message.empty()) message = a->get_name() + " cannot be used with " + b->get_name();
    excludes_.push_back({a, b, std::move(message)});
}

void Cli::needs(CLI::Option* a, CLI::Option* b, std::string message) {
    a->needs(b);
    if (message.empty()) message = a->get_name() + " needs " + b->get_name();
    needs_.push_back({a, b, std::move(message)});
}

namespace {

std::string number_text(double v) { return fmt::format("{:g}", v); }

// The whole string as a number, or nothing ("1.5x", "", "abc", "inf" and "nan" are not).
std::optional<double> parse_number(const std::string& s) {
    if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
    return v;
}

} // namespace

CLI::Validator whole_number(long long min, long long max, std::string what) {
    return CLI::Validator(
        [min, max, what](std::string& s) -> std::string {
            std::string range = max == std::numeric_limits<long long>::max()
                                    ? fmt::format("a whole number from {}", min)
                                    : fmt::format("a whole number from {} to {}", min, max);
            if (min == 1 && max == std::numeric_limits<long long>::max())
                range = "a whole number above 0";
            char* end = nullptr;
            errno = 0;
            long long v = s.empty() || std::isspace(static_cast<unsigned char>(s[0]))
                              ? 0
                              : std::strtoll(s.c_str(), &end, 10);
            if (!end || end != s.c_str() + s.size() || errno == ERANGE || v < min || v > max)
                return fmt::format("{} is not {}", s, what.empty() ? range : what);
            return {};
        },
        ""); // no description: --help shows the type name alone
}

CLI::Validator number_above(double min) {
    return CLI::Validator(
        [min](std::string& s) -> std::string {
            std::optional<double> v = parse_number(s);
            if (!v || *v <= min) return fmt::format("{} is not a number above {}", s, number_text(min));
            return {};
        },
        "");
}

CLI::Validator number_between(double min, double max) {
    return CLI::Validator(
        [min, max](std::string& s) -> std::string {
            std::optional<double> v = parse_number(s);
            if (!v || *v < min || *v > max)
                return fmt::format("{} is not a number from {} to {}", s, number_text(min),
                                   number_text(max));
            return {};
        },
        "");
}

void Cli::required(CLI::Option* a, std::string message) {
    a->required();
    required_[a] = std::move(message);
}

void Cli::add_common_options() {
    if (app_.get_help_ptr()) return; // added by an earlier parse
    CLI::Option* format = app_.add_option_function<std::string>(
        "--log-format",
        [this](const std::string& f) {
            log_format_ = f;
            log_.json = f == "json";
        },
        "text (default) or json for messages on standard error");
    format->type_name("F")->trigger_on_parse()->check(CLI::Validator(
        [](std::string& f) -> std::string {
            return f == "text" || f == "json"
                       ? std::string()
                       : "unknown log format '" + f + "' (expected text or json)";
        },
        "")); // no description: --help shows the type name alone
    app_.set_help_flag("-h,--help", "show this help");
    app_.set_version_flag("-V,--version",
                         version_.empty() ? tool_ + " " + PROF_VERSION_STRING : version_,
                         "show the version");
    for (CLI::App* sub : app_.get_subcommands([](CLI::App*) { return true; }))
        sub->set_help_flag("-h,--help", "show this help");
}

std::optional<int> Cli::parse(int argc, char** argv) {
    return parse(std::vector<std::string>(argv + (argc > 0 ? 1 : 0), argv + argc));
}

std::optional<int> Cli::parse(std::vector<std::string> args) {
    add_common_options();
    args_ = args;
    insert_default_subcommand(args);
    std::reverse(args.begin(), args.end()); // CLI11 takes the arguments last first
    try {
        app_.parse(args);
    } catch (const CLI::CallForHelp&) {
        fmt::print("{}", help(selected(&app_)));
        return 0;
    } catch (const CLI::CallForVersion& e) {
        fmt::print("{}\n", e.what());
        return 0;
    } catch (const CLI::ParseError& e) {
        log_.error(message_for(e));
        return 2;
    }
    return std::nullopt;
}

int Cli::usage_error(std::string_view msg) const {
    log_.error(msg);
    return 2;
}

std::string Cli::unknown_option(std::string_view arg) const {
    return fmt::format("unknown option '{}' ({})", arg, help_hint());
}

std::string Cli::help_hint() const {
    return "see " + path_of(selected(&app_)) + " --help";
}

// Before the first argument that is neither an option of the tool itself (with its value) nor
// a subcommand's name; at the end when there is none, unless --help or --version is asked for.
void Cli::insert_default_subcommand(std::vector<std::string>& args) const {
    if (!default_sub_) return;
    auto is_subcommand = [&](const std::string& name) {
        return !app_.get_subcommands([&](const CLI::App* s) { return s->check_name(name); })
                    .empty();
    };
    bool asks_help = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a.size() > 1 && a[0] == '-' && a != "--") {
            bool long_name = a[1] == '-';
            size_t eq = a.find('=');
            std::string name = long_name ? a.substr(0, eq) : a.substr(0, 2);
            const CLI::Option* opt = app_.get_option_no_throw(name);
            if (opt) {
                asks_help |= opt == app_.get_help_ptr() || opt == app_.get_version_ptr();
                bool attached = long_name ? eq != std::string::npos : a.size() > 2;
                if (!attached) i += size_t(std::max(0, opt->get_items_expected_min()));
                continue;
            }
        } else if (a != "--" && is_subcommand(a)) {
            return;
        }
        args.insert(args.begin() + long(i), default_sub_->get_name());
        return;
    }
    if (!asks_help) args.push_back(default_sub_->get_name());
}

std::string Cli::message_for(const CLI::ParseError& e) const {
    if (is<CLI::ExcludesError>(e))
        for (const Pair& p : excludes_)
            if (given(p.a) && given(p.b)) return p.message;
    if (is<CLI::RequiresError>(e))
        for (const Pair& p : needs_)
            if (given(p.a) && !given(p.b)) return p.message;
    // An unknown option is the first thing wrong: "--bogus" alone is not "no trace given".
    if (is<CLI::RequiredError>(e))
        for (const std::string& extra : app_.remaining(true))
            if (extra != "--" && extra.size() > 1 && extra[0] == '-') return unknown_option(extra);
    // The selected command's own: another command's positional is missing too.
    if (is<CLI::RequiredError>(e))
        for (const CLI::Option* opt : selected(&app_)->get_options())
            if (auto it = required_.find(opt); it != required_.end() && !given(opt))
                return it->second;
    // A value missing can only be at the end of the command line (an option takes the next
    // argument whatever it looks like).
    if (is<CLI::ArgumentMismatch>(e) && !args_.empty() && args_.back().size() > 1 &&
        args_.back()[0] == '-')
        return fmt::format("option {} needs a value", args_.back());
    if (is<CLI::ExtrasError>(e))
        for (const std::string& extra : app_.remaining(true)) {
            if (extra == "--") continue;
            if (extra.size() > 1 && extra[0] == '-') return unknown_option(extra);
            return fmt::format("unexpected argument '{}' ({})", extra, help_hint());
        }
    return e.what();
}

std::string Cli::option_line(const CLI::Option* opt) const {
    std::string name;
    if (auto it = help_names_.find(opt); it != help_names_.end()) {
        name = (opt->get_snames().empty() ? "    " : "") + it->second;
    } else {
        std::vector<std::string> names;
        for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
        for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
        name = fmt::format("{}{}", opt->get_snames().empty() ? "    " : "", fmt::join(names, ", "));
        if (opt->get_items_expected_max() > 0 && !opt->get_type_name().empty())
            name += " " + opt->get_type_name();
    }
    std::string line = "  " + name;
    const std::string indent(help_column_, ' ');
    if (line.size() + 1 > help_column_)
        line += "\n" + indent;
    else
        line.resize(help_column_, ' ');
    const std::string& desc = opt->get_description();
    for (size_t at = 0, end; at <= desc.size(); at = end + 1) {
        end = std::min(desc.find('\n', at), desc.size());
        if (at) line += indent;
        line += desc.substr(at, end - at) + "\n";
        if (end == desc.size()) break;
    }
    return line;
}

// The options of `app` under their groups ("options:" for CLI11's default group); with
// `with_common`, the options of the tool itself that a subcommand accepts too; `without_help`
// leaves out the app's --help (the default subcommand's options in the tool's help).
std::string Cli::options_block(const CLI::App* app, bool with_common, bool without_help) const {
    std::vector<std::string> groups;
    std::map<std::string, std::string> lines;
    for (const CLI::Option* opt : app->get_options()) {
        const std::string& group = opt->get_group();
        if (group.empty() || opt->get_positional()) continue;    // hidden, or not an option
        if ((with_common || without_help) && opt == app->get_help_ptr()) continue; // its own
        std::string title = with_common ? "common options" : group == "Options" ? "options" : group;
        if (!lines.count(title)) groups.push_back(title);
        lines[title] += option_line(opt);
    }
    std::string out;
    for (const std::string& title : groups) out += "\n" + title + ":\n" + lines[title];
    return out;
}

std::string Cli::help(const CLI::App* app) const {
    auto usage = usages_.find(app);
    std::string out = fmt::format("usage: {} {}\n", path_of(app),
                                  usage == usages_.end() ? "[options]" : usage->second);
    if (!app->get_description().empty()) out += "\n" + with_newline(app->get_description());
    // The tool's help shows the default subcommand's options: they are the tool's own.
    if (app == &app_ && default_sub_) out += options_block(default_sub_, false, true);
    out += options_block(app, false);
    auto subs = app->get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); });
    if (!subs.empty()) {
        out += "\ncommands:\n";
        for (const CLI::App* s : subs) {
            std::string line = "  " + s->get_name();
            std::string desc = s->get_description().substr(0, s->get_description().find('\n'));
            if (s == default_sub_) desc += " (the default)";
            line.resize(std::max(help_column_, line.size() + 1), ' ');
            out += line + desc + "\n";
        }
    }
    if (app->get_parent() && app->get_fallthrough()) out += options_block(app->get_parent(), true);
    if (!app->get_footer().empty()) out += "\n" + with_newline(app->get_footer());
    return out;
}

} // namespace prof::tools
