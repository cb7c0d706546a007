// Renderings of a Profile. The text table reproduces pstats' layout column for column.
#include "render/report.hpp"
#include "render/model.hpp"
#include "text/pattern.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace prof::render {

std::optional<SortKey> parse_sort_key(const std::string& s) {
    static const std::map<std::string, SortKey> keys = {
        {"cumtime", SortKey::kCumtime},   {"cumulative", SortKey::kCumtime},
        {"cum", SortKey::kCumtime},       {"tottime", SortKey::kTottime},
        {"time", SortKey::kTottime},      {"tot", SortKey::kTottime},
        {"ncalls", SortKey::kNcalls},     {"calls", SortKey::kNcalls},
        {"pcalls", SortKey::kPcalls},     {"name", SortKey::kName},
        {"file", SortKey::kFile},         {"filename", SortKey::kFile},
        {"module", SortKey::kFile},       {"line", SortKey::kLine},
        {"nfl", SortKey::kNfl},           {"stdname", SortKey::kStdname},
    };
    auto it = keys.find(s);
    if (it == keys.end()) return std::nullopt;
    return it->second;
}

const char* sort_description(SortKey k) {
    switch (k) {
    case SortKey::kCumtime: return "cumulative time";
    case SortKey::kTottime: return "internal time";
    case SortKey::kNcalls: return "call count";
    case SortKey::kPcalls: return "primitive call count";
    case SortKey::kName: return "function name";
    case SortKey::kFile: return "file name";
    case SortKey::kLine: return "line number";
    case SortKey::kNfl: return "name/file/line";
    case SortKey::kStdname: return "standard name";
    }
    return "";
}

std::vector<size_t> sorted_functions(const Profile& p, SortKey key) {
    std::vector<size_t> idx(p.functions.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    auto by = [&](auto proj, bool descending) {
        std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
            auto x = proj(p.functions[a]), y = proj(p.functions[b]);
            if (x != y) return descending ? y < x : x < y;
            return label(p.functions[a]) < label(p.functions[b]);
        });
    };
    switch (key) {
    case SortKey::kCumtime: by([](const Function& f) { return f.stats.cumtime; }, true); break;
    case SortKey::kTottime: by([](const Function& f) { return f.stats.tottime; }, true); break;
    case SortKey::kNcalls: by([](const Function& f) { return f.stats.ncalls; }, true); break;
    case SortKey::kPcalls: by([](const Function& f) { return f.stats.pcalls; }, true); break;
    case SortKey::kName: by([](const Function& f) { return f.name; }, false); break;
    case SortKey::kFile: by([](const Function& f) { return f.file.empty() ? f.module : f.file; }, false); break;
    case SortKey::kLine: by([](const Function& f) { return f.line; }, false); break;
    case SortKey::kNfl:
        by([](const Function& f) { return std::make_tuple(f.name, f.file, f.line); }, false);
        break;
    case SortKey::kStdname: by([](const Function& f) { return label(f, true); }, false); break;
    }
    return idx;
}

namespace {

std::vector<size_t> selected(const Profile& p, const TableOptions& o) {
    std::vector<size_t> rows = sorted_functions(p, o.sort);
    if (!o.filter.empty()) {
        text::Pattern re(o.filter);
        std::erase_if(rows, [&](size_t i) { return !re.search(label(p.functions[i], true)); });
    }
    if (o.limit && rows.size() > o.limit) rows.resize(o.limit);
    return rows;
}

// A profile whose every trace was sampled without hooks counted no call: its ncalls are
// unknown ("?"), never 0.
std::string ncalls_text(const Stats& s, bool counted = true) {
    if (!counted) return "?";
    return s.ncalls == s.pcalls ? fmt::format("{}", s.ncalls)
                                : fmt::format("{}/{}", s.ncalls, s.pcalls);
}

std::string fixed(double v, int precision, size_t width = 8) {
    return fmt::format("{:{}.{}f}", v, width, precision);
}

// Widths of the ncalls and time columns: pstats' 9 and 8, or wider when a value needs it
// (--precision 9, hours of time, billions of calls), so that values stay under their headers.
struct Widths {
    size_t ncalls = 9, time = 8;
    void fit(const Stats& s, int precision, bool per_call) {
        ncalls = std::max(ncalls, ncalls_text(s).size());
        double widest = std::max(s.tottime, s.cumtime);
        if (per_call) widest = std::max(widest, s.pcalls ? s.cumtime / double(s.pcalls) : 0);
        time = std::max(time, fmt::format("{:.{}f}", widest, precision).size());
    }
};

// Names in a trace come from the traced program: never let them reach the terminal raw.
std::string shown_label(const Function& f, bool full_paths) {
    return text::printable(label(f, full_paths));
}

} // namespace

namespace {

using text::grouped;

// The full names of the profile's functions at `indices`.
std::vector<std::string> names_of(const Profile& p, const std::vector<size_t>& indices) {
    std::vector<std::string> out;
    for (size_t i : indices) out.push_back(p.functions[i].name);
    return out;
}

} // namespace

std::string time_basis_text(const TimeBasis& t) {
    std::string text;
    if (t.sampled_traces && !t.samples) {
        // A PROF_TIME=sampled run shorter than a sampling period: the CPU clocks give the total,
        // nothing splits it.
        text = "times from 0 CPU samples: the run's CPU time is known, not how it splits among "
               "functions (the frame open at its end, or closed last, has it all)";
    } else if (t.sampled_traces) {
        // The sampling error alone: a run of the same program on a busy host varies more.
        text = fmt::format("times from {} CPU samples at {:.0f} Hz (sampling error: a 10% share "
                           "is within +-{:.1f} points, 95%)",
                           grouped(t.samples), t.hz(), t.points_at_10());
    }
    if (t.sampled_traces) {
        if (t.own_samples)
            text += fmt::format(
                "; {} samples in the profiler itself ({:.3f} s{}{}) left out",
                grouped(t.own_samples), t.own_seconds,
                t.hook_call_samples ? fmt::format(", {} of them at its calls in the program's code",
                                                  grouped(t.hook_call_samples))
                                    : "",
                t.marker_samples
                    ? fmt::format(", {} {} its line and scope markers' code in the program",
                                  grouped(t.marker_samples),
                                  t.hook_call_samples ? "in" : "of them in")
                    : "");
        if (t.idle_traces)
            text += fmt::format(
                "; {:.3f} s off CPU from {} context switches{}", t.off_cpu_seconds,
                grouped(t.off_cpu_records),
                t.idle_approximate_seconds >= 0.0005
                    ? fmt::format(" ({:.3f} s of it at the stack of the thread's last CPU sample: "
                                  "no stack of where it waited)",
                                  t.idle_approximate_seconds)
                    : "");
        if (t.traced_traces)
            text += fmt::format("; {} traces timed by their hooks", t.traced_traces);
        if (t.starved_threads)
            text += fmt::format(
                "; {} {} of {:.3f} s of CPU got under a tenth of their samples (a CPU shared with "
                "another busy thread: the kernel's CPU-time timer fired rarely), so their time "
                "is exact but its split among their functions coarse (PROF_SAMPLE_TIMER=perf "
                "samples them fully)",
                t.starved_threads, t.starved_threads == 1 ? "thread" : "threads",
                t.starved_seconds);
        // Counting from the start (PROF_TIME=sampled), or from the point where the run had
        // samples enough (PROF_TIME=auto, the default).
        uint64_t from_start = t.untimed_traces - t.switched_traces;
        if (from_start)
            text += from_start == t.sampled_traces
                        ? std::string("; hooks without a clock (PROF_TIME=sampled)")
                        : fmt::format("; {} traces with hooks without a clock (PROF_TIME=sampled)",
                                      from_start);
        if (t.switched_traces)
            text += t.switched_traces == t.sampled_traces
                        ? std::string("; calls counted without a clock once samples could time "
                                      "them")
                        : fmt::format("; {} traces counted calls without a clock once samples "
                                      "could time them",
                                      t.switched_traces);
    } else if (t.chosen == TimeSource::kTraced) {
        text = "times traced by the hooks, less their measured cost (--time traced)";
    } else if (t.too_few) {
        text = fmt::format("times traced by the hooks, less their measured cost: {} CPU samples "
                           "are too few to time by",
                           grouped(t.too_few));
    }
    return text;
}

std::string time_split_text(const TimeBasis& t) {
    if (!t.sampled_traces) return {};
    bool cpu = t.clock == Clock::kCpu;
    std::string text =
        fmt::format("{} {:.3f} s on CPU",
                    cpu ? "CPU time only (--clock cpu):" : "wall time:", t.on_cpu_seconds);
    std::string off;
    if (t.runnable_seconds >= 0.0005 || t.blocked_seconds >= 0.0005 || !t.off_cpu_unsplit_seconds)
        off = fmt::format("{:.3f} s waiting for a CPU, {:.3f} s blocked or sleeping",
                          t.runnable_seconds, t.blocked_seconds);
    if (t.off_cpu_unsplit_seconds >= 0.0005)
        off +=
            fmt::format("{}{:.3f} s off CPU{}", off.empty() ? "" : ", ", t.off_cpu_unsplit_seconds,
                        t.idle_traces ? "" : " (not split: a trace older than format 1.11)");
    text += cpu ? "; left out: " + off : ", " + off;
    if (t.own_runnable_seconds >= 0.0005)
        text += fmt::format("; {:.3f} s of waiting for the profiler's own CPU time left out",
                            t.own_runnable_seconds);
    return text;
}

namespace {

// A function's name without its return type and parameters (an anonymous namespace's
// parentheses are no parameter list).
std::string name_without_parameters(const std::string& name) {
    std::string n = function_display_name(name);
    int angle = 0;
    for (size_t i = 0; i < n.size(); ++i) {
        if (n[i] == '<') ++angle;
        if (n[i] == '>') --angle;
        if (n[i] == '(' && angle == 0 && n.compare(i, 21, "(anonymous namespace)") != 0) {
            n.resize(i);
            break;
        }
    }
    return n;
}

} // namespace

// A function's name for a list in a sentence: without its parameters, return type and
// anonymous namespaces.
std::string short_name(const std::string& name) {
    std::string n = name_without_parameters(name);
    for (size_t at; (at = n.find("(anonymous namespace)::")) != std::string::npos;) n.erase(at, 23);
    return n;
}

// A function's name as GCC's -finstrument-functions-exclude-function-list matches it: a
// substring of the qualified name without parameters, a class template's arguments included
// (GCC 12: "n::V<int>::get" leaves out that member, "get" every function whose name holds
// "get"). A function template's own arguments are cut ("n::tf" leaves out n::tf<long>), what
// follows an anonymous namespace is kept (GCC writes it "{anonymous}"), and a name the
// comma-separated list cannot hold as the demangler spells it (commas or spaces in template
// arguments) gives its last part when that is an identifier of six characters or more. Empty
// for an operator, a lambda or a short name in such a scope.
std::string gcc_exclusion_name(const std::string& full_name) {
    std::string n = name_without_parameters(full_name);
    if (size_t a = n.rfind("(anonymous namespace)::"); a != std::string::npos) n.erase(0, a + 23);
    if (!n.empty() && n.back() == '>') { // the function template's own arguments
        int depth = 0;
        for (size_t i = n.size(); i-- > 0;) {
            if (n[i] == '>') ++depth;
            if (n[i] == '<' && --depth == 0) {
                n.resize(i);
                break;
            }
        }
    }
    auto identifier = [](const std::string& s) {
        return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '~';
        });
    };
    size_t last = n.rfind("::");
    std::string base = last == std::string::npos ? n : n.substr(last + 2);
    if (!identifier(base) || base.compare(0, 8, "operator") == 0) return {};
    if (n.find_first_of(", (){}") != std::string::npos)
        return base.size() >= 6 ? base : std::string();
    return n;
}

namespace {

// GCC's exclusion list of the costly hooks' functions that it can name (costly_hooks): the
// list, how many names, and their calls' share of all calls; an empty list when none.
struct GccExclusions {
    CostlyHooks hooks;
    std::string list;
    size_t names = 0;
    double calls_share = 0;
};

GccExclusions gcc_exclusions(const Profile& p) {
    GccExclusions g;
    g.hooks = costly_hooks(p);
    uint64_t calls = 0;
    std::set<std::string> seen;
    std::set<size_t> listed(g.hooks.functions.begin(), g.hooks.functions.end());
    // GCC leaves out every function whose name holds an entry: an entry that another function
    // of the profile, not listed, holds too ("a" and main, "n::f" and n::fib) is left out of
    // the list. Functions the run did not call cannot be checked.
    auto held_elsewhere = [&](const std::string& n) {
        for (size_t k = 0; k < p.functions.size(); ++k) {
            if (listed.count(k) || p.functions[k].kind != "function") continue;
            std::string other = short_name(p.functions[k].name);
            if (other.find(n) != std::string::npos) return true;
        }
        return false;
    };
    for (size_t i : g.hooks.functions) {
        std::string n = gcc_exclusion_name(p.functions[i].name);
        if (n.empty() || held_elsewhere(n)) continue;
        calls += p.functions[i].stats.ncalls;
        if (!seen.insert(n).second) continue; // two instances of one template
        g.list += (g.names++ ? "," : "") + n;
    }
    if (g.names) g.calls_share = double(calls) / double(p.total_calls);
    return g;
}

std::string costly_hooks_text(const Profile& p) {
    GccExclusions g = gcc_exclusions(p);
    if (!g.names) return {};
    // Quoted for a shell when a name holds what it would act on (n::V<int*>::get).
    std::string flag = "-finstrument-functions-exclude-function-list=" + g.list;
    if (g.list.find_first_of("<>*&~") != std::string::npos) flag = "'" + flag + "'";
    return fmt::format(
        "hint: the hooks took {:.3f} s of CPU against the program's {:.3f} s, and {:.0f}% of the "
        "calls were to {} {} that {} less per call than the hooks cost ({:.1f} ns); built with "
        "GCC, {} leaves {} hooks out ({} time goes "
        "to {} callers); Clang's -finstrument-functions-after-inlining leaves none in inlined "
        "code",
        g.hooks.own_seconds, g.hooks.program_seconds, 100 * g.calls_share, g.names,
        g.names == 1 ? "function" : "functions", g.names == 1 ? "takes" : "take",
        g.hooks.hook_seconds_per_call * 1e9, flag, g.names == 1 ? "its" : "their",
        g.names == 1 ? "its" : "their", g.names == 1 ? "its" : "their");
}

std::string uncertain_text(const Profile& p) {
    UncertainTimes u = uncertain_times(p);
    if (u.empty()) return {};
    auto listed = [](const std::vector<std::string>& full_names) {
        std::string text;
        size_t shown = std::min<size_t>(full_names.size(), 4);
        for (size_t k = 0; k < shown; ++k) text += (k ? ", " : "") + short_name(full_names[k]);
        if (full_names.size() > shown)
            text += fmt::format(" and {} more", full_names.size() - shown);
        return text;
    };
    auto names = [&](const std::vector<size_t>& list) { return listed(names_of(p, list)); };
    std::string text;
    if (!u.functions.empty()) {
        bool one = u.functions.size() == 1;
        text = fmt::format(
            "{} {} less time per call than the hooks cost ({:.1f} ns), so {}{} may be several "
            "points off (hook code sits in {}; GCC keeps the hooks of inlined functions: "
            "exclude {} or build with Clang): {}",
            u.functions.size(), one ? "function takes" : "functions take",
            u.hook_seconds_per_call * 1e9, one ? "its time" : "their times",
            u.callers.empty() ? "" : (one ? " and its callers'" : " and their callers'"),
            one ? "it" : "them", one ? "it" : "them", names(u.functions));
        if (!u.callers.empty()) text += "; callers: " + names(u.callers);
    }
    if (!u.marked.empty()) {
        bool one = u.marked.size() == 1;
        text += fmt::format(
            "{}{} marked {} under ten clock reads ({:.1f} ns each) per activation, so {} "
            "measured no better than that (mark a larger block): {}",
            text.empty() ? "" : "; ", u.marked.size(), one ? "scope takes" : "scopes take",
            u.clock_read_seconds * 1e9, one ? "its time is" : "their times are", names(u.marked));
    }
    if (!u.marker_functions.empty()) {
        text +=
            fmt::format("{}the markers' own code took {:.0f}% of the samples, so the times "
                        "of the code around them may be off by a factor of 3 (a CPU charges a "
                        "sample to the instruction after a slow one, and the markers' clock "
                        "reads are slow; fewer markers in hot loops: one PROF_SCOPE around a "
                        "loop rather than a PROF_LINE in it): {}",
                        text.empty() ? "" : "; ", 100 * u.marker_share, listed(u.marker_functions));
    }
    if (u.traced_cost_share > 0) {
        // A tenth more or less of the cost subtracted moves what is left by this fraction.
        std::string moved =
            u.traced_cost_share >= 0.999
                ? std::string("nothing is left of the time, and the times shown are no measure")
                : fmt::format("a tenth more or less of that cost moves them by {:.0f}%",
                              100 * 0.1 * u.traced_cost_share / (1 - u.traced_cost_share));
        const TimeBasis& t = p.time;
        std::string way = t.chosen == TimeSource::kTraced
                              ? "without --time traced, a run with CPU samples enough is timed by "
                                "them"
                          : t.too_few ? fmt::format("a run long enough for {} CPU samples is "
                                                    "timed by them",
                                                    kEnoughSamples)
                                      : "the trace has no CPU samples to time it by";
        text += fmt::format(
            "{}the profiler's cost subtracted ({:.1f} ns per call, its hooks' cost measured at "
            "the start) was {:.0f}% of the traced time, so the times left are a small difference "
            "of large numbers: {} ({})",
            text.empty() ? "" : "; ", u.traced_cost_per_call * 1e9, 100 * u.traced_cost_share,
            moved, way);
    }
    return "uncertain: " + text;
}

// The functions whose frames forked children inherited open, by name: their ncalls leaves
// those frames out, their times keep them.
std::string inherited_text(const Profile& p) {
    std::vector<const Function*> fs;
    uint64_t frames = 0;
    for (const Function& f : p.functions)
        if (f.inherited) {
            fs.push_back(&f);
            frames += f.inherited;
        }
    if (fs.empty()) return {};
    std::sort(fs.begin(), fs.end(), [](const Function* a, const Function* b) {
        return a->stats.cumtime > b->stats.cumtime;
    });
    std::string names;
    size_t shown = std::min<size_t>(fs.size(), 4);
    for (size_t k = 0; k < shown; ++k) names += (k ? ", " : "") + short_name(fs[k]->name);
    if (fs.size() > shown) names += fmt::format(" and {} more", fs.size() - shown);
    if (frames == 1)
        return "inherited: 1 frame a forked child inherited open (its parent's call, continued: "
               "time of the child's, no call of its own): " +
               names;
    return fmt::format("inherited: {} frames forked children inherited open (their parents' calls, "
                       "continued: time of the children's, no calls of their own): {}",
                       frames, names);
}

} // namespace

std::vector<std::string> header_notes(const Profile& p) {
    std::vector<std::string> notes;
    for (std::string note :
         {time_split_text(p.time), uncertain_text(p), inherited_text(p), costly_hooks_text(p)})
        if (!note.empty()) notes.push_back(std::move(note));
    return notes;
}

void print_table(std::FILE* out, const Profile& p, const TableOptions& o) {
    if (!o.title.empty()) fmt::print(out, "{}\n", text::printable(o.title));
    const bool counted = p.time.calls_counted();
    if (!counted)
        fmt::print(out, "         ? function calls (not counted: sampled without instrumentation)");
    else
        fmt::print(out, "         {} function calls", p.total_calls);
    if (counted && p.primitive_calls != p.total_calls)
        fmt::print(out, " ({} primitive calls)", p.primitive_calls);
    fmt::print(out, " in {:.3f} seconds\n", p.total_time);
    if (std::string basis = time_basis_text(p.time); !basis.empty())
        fmt::print(out, "   {}\n", basis);
    for (const std::string& note : header_notes(p))
        fmt::print(out, "   {}\n", text::printable(note));
    fmt::print(out, "\n");
    fmt::print(out, "   Ordered by: {}\n", sort_description(o.sort));
    std::vector<size_t> rows = selected(p, o);
    if (!o.filter.empty() || (o.limit && rows.size() < p.functions.size()))
        fmt::print(out, "   List reduced from {} to {} due to restriction\n", p.functions.size(), rows.size());
    Widths w;
    for (size_t i : rows) w.fit(p.functions[i].stats, o.precision, true);
    fmt::print(out, "\n{:>{}} {:>{}} {:>{}} {:>{}} {:>{}} filename:lineno(function)\n", "ncalls",
               w.ncalls, "tottime", w.time, "percall", w.time, "cumtime", w.time, "percall",
               w.time);
    for (size_t i : rows) {
        const Function& f = p.functions[i];
        const Stats& s = f.stats;
        double per_tot = s.ncalls ? s.tottime / double(s.ncalls) : 0;
        double per_cum = s.pcalls ? s.cumtime / double(s.pcalls) : 0;
        std::string unknown = fmt::format("{:>{}}", "?", w.time);
        fmt::print(out, "{:>{}} {} {} {} {} {}\n", ncalls_text(s, counted), w.ncalls,
                   fixed(s.tottime, o.precision, w.time),
                   counted ? fixed(per_tot, o.precision, w.time) : unknown,
                   fixed(s.cumtime, o.precision, w.time),
                   counted ? fixed(per_cum, o.precision, w.time) : unknown,
                   shown_label(f, o.full_paths));
    }
    fmt::print(out, "\n");
}

void print_callers(std::FILE* out, const Profile& p, const TableOptions& o, bool callees) {
    std::vector<size_t> rows = selected(p, o);
    fmt::print(out, "   Ordered by: {}\n", sort_description(o.sort));
    if (!o.filter.empty())
        fmt::print(out, "   List reduced from {} to {} due to restriction <'{}'>\n",
                   p.functions.size(), rows.size(), text::printable(o.filter));
    fmt::print(out, "\n");
    size_t width = 0;
    for (size_t i : rows) width = std::max(width, shown_label(p.functions[i], o.full_paths).size());
    width = std::max<size_t>(width, 24);
    const char* arrow = callees ? "->" : "<-";
    Widths w;
    w.ncalls = 10;
    for (size_t i : rows)
        for (const Edge& e : p.edges)
            if ((callees ? e.caller : e.callee) == i) w.fit(e.stats, o.precision, false);
    fmt::print(out, "{:<{}}  {}\n", "Function", width + 3, callees ? "called..." : "was called by...");
    fmt::print(out, "{:<{}} {:>{}} {:>{}} {:>{}}\n", "", width + 3, "ncalls", w.ncalls, "tottime",
               w.time, "cumtime", w.time);
    for (size_t i : rows) {
        std::vector<const Edge*> links;
        for (const Edge& e : p.edges)
            if ((callees ? e.caller : e.callee) == i) links.push_back(&e);
        std::sort(links.begin(), links.end(), [&](const Edge* a, const Edge* b) {
            return a->stats.cumtime > b->stats.cumtime;
        });
        std::string head = shown_label(p.functions[i], o.full_paths);
        if (links.empty()) {
            fmt::print(out, "{:<{}} {}\n", head, width, arrow);
            continue;
        }
        bool first = true;
        for (const Edge* e : links) {
            size_t other = callees ? e->callee : e->caller;
            std::string name = other == kRoot ? std::string("<thread start>")
                                              : shown_label(p.functions[other], o.full_paths);
            fmt::print(out, "{:<{}} {} {:>{}} {} {}  {}\n", first ? head : "", width,
                       first ? arrow : "  ", ncalls_text(e->stats, p.time.calls_counted()),
                       w.ncalls,
                       fixed(e->stats.tottime, o.precision, w.time),
                       fixed(e->stats.cumtime, o.precision, w.time), name);
            first = false;
        }
    }
    fmt::print(out, "\n");
}

void print_csv(std::FILE* out, const Profile& p, const TableOptions& o) {
    fmt::print(out, "ncalls,primitive_calls,tottime,tottime_percall,cumtime,cumtime_percall,"
                    "name,file,line,module,symbol\n");
    // Calls not counted (sampled without instrumentation): empty fields, never 0.
    const bool counted = p.time.calls_counted();
    auto count = [&](uint64_t n) { return counted ? std::to_string(n) : std::string(); };
    auto per = [&](double t, uint64_t n) {
        return counted ? fmt::format("{:.9f}", n ? t / double(n) : 0) : std::string();
    };
    for (size_t i : selected(p, o)) {
        const Function& f = p.functions[i];
        const Stats& s = f.stats;
        fmt::print(out, "{},{},{:.9f},{},{:.9f},{},{},{},{},{},{}\n", count(s.ncalls),
                   count(s.pcalls), s.tottime, per(s.tottime, s.ncalls), s.cumtime,
                   per(s.cumtime, s.pcalls), text::csv_escape(f.name), text::csv_escape(f.file),
                   f.line, text::csv_escape(f.module), text::csv_escape(f.symbol));
    }
}

void print_json(std::FILE* out, const Profile& p, const TableOptions& o) {
    fmt::print(out, "{{\n  \"traces\": [");
    for (size_t t = 0; t < p.traces.size(); ++t) {
        const reader::TraceInfo& ti = p.traces[t];
        auto meta = [&](const char* k) {
            auto it = ti.meta.find(k);
            return it == ti.meta.end() ? std::string() : it->second;
        };
        fmt::print(out,
                   "{}\n    {{\"path\": \"{}\", \"pid\": {}, \"ppid\": {}, \"exe\": \"{}\", "
                   "\"cmdline\": \"{}\", \"format_version\": \"{}.{}\", \"finished\": {}, "
                   "\"incomplete\": {}{}}}",
                   t ? "," : "", text::json_escape(ti.path), ti.header.pid, ti.header.ppid,
                   text::json_escape(meta("exe")), text::json_escape(meta("cmdline")),
                   ti.header.major, ti.header.minor, ti.finished ? "true" : "false",
                   ti.incomplete ? "\"" + text::json_escape(ti.incomplete_reason) + "\"" : "null",
                   // Only for a file cut short: how much of the run its profile covers.
                   ti.partial ? fmt::format(", \"partial\": true, \"read_up_to_seconds\": {:.9f}",
                                            ti.read_up_to_seconds())
                              : std::string());
    }
    // Calls not counted (sampled without instrumentation): null, never 0.
    const bool counted = p.time.calls_counted();
    auto count = [&](uint64_t n) { return counted ? std::to_string(n) : std::string("null"); };
    fmt::print(out,
               "\n  ],\n  \"sort\": \"{}\",\n  \"total_calls\": {},\n  \"primitive_calls\": {},\n"
               "  \"total_time\": {:.9f},\n",
               sort_description(o.sort), count(p.total_calls), count(p.primitive_calls),
               p.total_time);
    // The sampled traces' time split (seconds), and which of it the functions' times hold.
    // Unknown (traces timed by their hooks): null; waiting and blocked are null where the
    // traces do not tell them apart (then off_cpu holds their sum).
    const TimeBasis& t = p.time;
    auto seconds = [&](double s, bool known) {
        return known ? fmt::format("{:.9f}", s) : std::string("null");
    };
    bool sampled = t.sampled_traces > 0, split = sampled && !t.off_cpu_unsplit_seconds;
    fmt::print(
        out,
        "  \"clock\": \"{}\",\n  \"time_split\": {{\"on_cpu\": {}, \"runnable\": {}, "
        "\"blocked\": {}, \"off_cpu\": {}}},\n",
        t.clock == Clock::kCpu ? "cpu" : "wall", seconds(t.on_cpu_seconds, sampled),
        seconds(t.runnable_seconds, split), seconds(t.blocked_seconds, split),
        seconds(t.runnable_seconds + t.blocked_seconds + t.off_cpu_unsplit_seconds, sampled));
    // Functions whose time cannot be vouched for (uncertain_times), by name.
    UncertainTimes u = uncertain_times(p);
    auto json_list = [](const std::vector<std::string>& full_names) {
        std::string text;
        for (const std::string& n : full_names)
            text += fmt::format("{}\"{}\"", text.empty() ? "" : ", ", text::json_escape(n));
        return "[" + text + "]";
    };
    auto name_list = [&](const std::vector<size_t>& list) { return json_list(names_of(p, list)); };
    if (!u.empty())
        fmt::print(out,
                   "  \"uncertain\": {{\"hook_seconds_per_call\": {:.12f}, \"functions\": {}, "
                   "\"callers\": {}, \"clock_read_seconds\": {:.12f}, \"marked\": {}, "
                   "\"marker_share\": {:.4f}, \"marker_functions\": {}, "
                   "\"traced_cost_share\": {:.4f}, \"traced_cost_seconds_per_call\": {:.12f}}},\n",
                   u.hook_seconds_per_call, name_list(u.functions), name_list(u.callers),
                   u.clock_read_seconds, name_list(u.marked), u.marker_share,
                   json_list(u.marker_functions), u.traced_cost_share, u.traced_cost_per_call);
    if (GccExclusions g = gcc_exclusions(p); g.names)
        fmt::print(out,
                   "  \"costly_hooks\": {{\"hook_seconds\": {:.9f}, \"program_seconds\": {:.9f}, "
                   "\"calls_share\": {:.4f}, \"gcc_exclude_function_list\": \"{}\"}},\n",
                   g.hooks.own_seconds, g.hooks.program_seconds, g.calls_share,
                   text::json_escape(g.list));
    fmt::print(out, "  \"functions\": [");
    bool first = true;
    for (size_t i : selected(p, o)) {
        const Function& f = p.functions[i];
        const Stats& s = f.stats;
        fmt::print(
            out,
            "{}\n    {{\"name\": \"{}\", \"symbol\": \"{}\", \"module\": \"{}\", "
            "\"file\": \"{}\", \"line\": {}, \"address\": \"0x{:x}\", \"kind\": \"{}\", "
            "\"ncalls\": {}, \"primitive_calls\": {}, \"tottime\": {:.9f}, \"cumtime\": {:.9f}{}}}",
            first ? "" : ",", text::json_escape(f.name), text::json_escape(f.symbol),
            text::json_escape(f.module), text::json_escape(f.file), f.line, f.address, f.kind,
            count(s.ncalls), count(s.pcalls), s.tottime, s.cumtime,
            // Frames forked children inherited open (their time is in it, no call).
            f.inherited ? fmt::format(", \"inherited\": {}", f.inherited) : std::string());
        first = false;
    }
    fmt::print(out, "\n  ],\n  \"threads\": [");
    for (size_t t = 0; t < p.threads.size(); ++t) {
        const ThreadSummary& th = p.threads[t];
        fmt::print(
            out,
            "{}\n    {{\"trace\": {}, \"stream\": {}, \"tid\": {}, \"name\": \"{}\", "
            "\"events\": {}, \"dropped\": {}, \"abandoned_frames\": {}, \"seconds\": {:.9f}}}",
            t ? "," : "", th.trace, th.stream, th.tid, text::json_escape(th.name), th.events,
            th.dropped, th.abandoned, th.seconds);
    }
    fmt::print(out, "\n  ]\n}}\n");
}

void print_thread_documents(std::FILE* out, const std::vector<ThreadDocument>& docs,
                            const std::string& format) {
    if (format == "csv") {
        bool header = false;
        for (const ThreadDocument& d : docs) {
            size_t at = 0;
            for (bool first = true; at < d.text.size(); first = false) {
                size_t nl = d.text.find('\n', at);
                if (nl == std::string::npos) nl = d.text.size();
                std::string_view line(d.text.data() + at, nl - at);
                at = nl + 1;
                if (first) { // each thread's document starts with the same header
                    if (!header) fmt::print(out, "tid,{}\n", line);
                    header = true;
                } else {
                    fmt::print(out, "{},{}\n", d.thread.tid, line);
                }
            }
        }
        return;
    }
    fmt::print(out, "{{\n  \"threads\": [");
    for (size_t i = 0; i < docs.size(); ++i) {
        const ThreadDocument& d = docs[i];
        std::string_view body = d.text;
        // The thread's own object without its braces: its fields follow the thread's.
        size_t open = body.find('{'), close = body.rfind('}');
        body = open == std::string_view::npos || close == std::string_view::npos || close < open
                   ? std::string_view()
                   : body.substr(open + 1, close - open - 1);
        while (!body.empty() && (body.back() == '\n' || body.back() == ' ')) body.remove_suffix(1);
        bool fields = body.find_first_not_of(" \n") != std::string_view::npos;
        fmt::print(out,
                   "{}\n  {{\"tid\": {}, \"stream\": {}, \"trace\": {}, \"name\": \"{}\"{}{}\n  }}",
                   i ? "," : "", d.thread.tid, d.thread.stream, d.thread.trace,
                   text::json_escape(d.thread.name), fields ? "," : "",
                   fields ? body : std::string_view());
    }
    fmt::print(out, "\n  ]\n}}\n");
}

std::string partial_warning(const reader::TraceInfo& t) {
    return fmt::format("{}: partial: read up to {:.3f} s of the run (incomplete trace: {})",
                       text::printable(t.path), t.read_up_to_seconds(), t.incomplete_reason);
}

std::vector<std::string> partial_warnings(const std::vector<reader::TraceInfo>& traces) {
    std::vector<std::string> out;
    for (const reader::TraceInfo& t : traces)
        if (t.partial) out.push_back(partial_warning(t));
    return out;
}

namespace {

std::string meta_of(const reader::TraceInfo& t, const std::string& key) {
    auto it = t.meta.find(key);
    return it == t.meta.end() ? std::string() : it->second;
}

// The latest start of each process (host, pid) among the traces. A trace that started before
// its process's latest is an image that exec'd another: the later trace goes on from there, and
// this one ends at the exec, unfinished, lacking nothing.
std::map<std::pair<std::string, uint32_t>, uint64_t>
latest_starts(const std::vector<reader::TraceInfo>& traces) {
    std::map<std::pair<std::string, uint32_t>, uint64_t> latest;
    for (const reader::TraceInfo& t : traces) {
        uint64_t& start = latest[{meta_of(t, "host"), t.header.pid}];
        start = std::max(start, t.header.start_real_ns);
    }
    return latest;
}

} // namespace

std::vector<std::string> data_warnings(const Profile& p) {
    std::vector<std::string> out;
    // Unfinished traces, by reason: one line for one trace, one line naming them all for
    // several (the processes of a shell pipeline end with _exit or a SIGPIPE as a rule).
    std::map<std::string, std::vector<std::string>> unfinished;
    std::vector<std::string> reasons; // in the order first seen
    const auto latest = latest_starts(p.traces);
    for (const reader::TraceInfo& t : p.traces) {
        bool execd = t.header.start_real_ns < latest.at({meta_of(t, "host"), t.header.pid});
        if (t.partial)
            out.push_back(partial_warning(t));
        else if (t.incomplete && !execd) {
            std::vector<std::string>& paths = unfinished[t.incomplete_reason];
            if (paths.empty()) reasons.push_back(t.incomplete_reason);
            paths.push_back(text::printable(t.path));
        }
        if (t.minor_unknown_records)
            out.push_back(fmt::format("{}: skipped {} records of a newer format version {}.{}",
                                      text::printable(t.path), t.minor_unknown_records,
                                      t.header.major, t.header.minor));
    }
    for (const std::string& reason : reasons) {
        const std::vector<std::string>& paths = unfinished[reason];
        if (paths.size() == 1) {
            out.push_back(fmt::format("{}: incomplete trace: {}", paths[0], reason));
            continue;
        }
        constexpr size_t kNamed = 4;
        std::string named;
        for (size_t i = 0; i < std::min(paths.size(), kNamed); ++i)
            named += (i ? ", " : "") + paths[i];
        if (paths.size() > kNamed) named += fmt::format(" and {} more", paths.size() - kNamed);
        out.push_back(fmt::format("{} incomplete traces ({}): {}", paths.size(), named, reason));
    }
    uint64_t dropped = 0;
    for (const ThreadSummary& th : p.threads) dropped += th.dropped;
    if (dropped)
        out.push_back(fmt::format("{} events dropped by the runtime (PROF_MAX_DEPTH reached, or "
                                  "signal handlers that interrupted its recording)",
                                  dropped));
    return out;
}

} // namespace prof::render
