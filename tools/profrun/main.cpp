// profrun: runs a program with libprof's environment set and passes its exit status through.
#include "common/cli.hpp"
#include "common/tool_log.hpp"
#include "pack/trace_packer.hpp"
#include "profrun/dump.hpp"
#include "profrun/passed_signals.hpp"
#include "profrun/report_at_end.hpp"
#include "profrun/run_dir.hpp"
#include "profrun/sampled.hpp"
#include "profrun/top.hpp"
#include "reader/run_manifest.hpp"
#include "render/report.hpp"
#include "text/text.hpp"

#include <prof/trace_format.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <limits>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

// profrun's exit status when COMMAND succeeded but the trace it should have written is missing
// or unreadable (125: the tool's own failure, as timeout(1) and env(1) use it; COMMAND's own
// statuses pass through otherwise).
constexpr int kNoTrace = 125;

using prof::tools::ToolLog;

constexpr const char* kDescription =
    R"(Runs COMMAND with profiling enabled and writes its trace. COMMAND is a program built with
-finstrument-functions and linked with libprof (CMake target prof::instrument, or
pkg-config libprof-instrument); with --preload, any program built with
-finstrument-functions; with --mem (memory) or --sample (CPU time), any program. The exit
status of COMMAND is passed through (128+N when it was killed by signal N).
With --pid, samples a running process instead, until --duration ends, Ctrl-C, or its exit;
with --pid and --dump, prints every thread's stack now and leaves.)";

constexpr const char* kFooter =
    "Every PROF_* variable (docs/configuration.md) set in the environment is passed on as well.";

// What the command line asks for.
struct RunOptions {
    std::string output;
    std::string run_dir; // -d: the run's directory (absolute once prepared)
    CLI::Option *output_option = nullptr, *run_dir_option = nullptr;
    bool force = false, preload = false, quiet = false, mem = false;
    std::optional<bool> pack; // --pack or --no-pack, the last one given; else: not
    prof::pack::PackOptions pack_options;
    // Options that set a variable of the runtime (docs/configuration.md), when given.
    struct Variable {
        const char *option, *type, *help, *name;
        std::string value;
        CLI::Option* given = nullptr;
    };
    std::vector<Variable> variables{
        {"--exclude",
         "GLOBS",
         "do not record functions whose symbol matches one of the\n"
         "comma-separated globs (PROF_EXCLUDE)",
         "PROF_EXCLUDE",
         {},
         nullptr},
        {"--exclude-modules",
         "S",
         "do not record functions of objects whose path contains one of\n"
         "the comma-separated strings (PROF_EXCLUDE_MODULES)",
         "PROF_EXCLUDE_MODULES",
         {},
         nullptr},
        {"--chunk-size",
         "BYTES",
         "per-thread buffer size (PROF_CHUNK_SIZE, default 256K)",
         "PROF_CHUNK_SIZE",
         {},
         nullptr},
        {"--time",
         "SOURCE",
         "how the hooks time calls (counts and call tree are exact in\n"
         "each): auto (default): the clock per call until the run has\n"
         "100 CPU samples, then counted without it, times from the\n"
         "samples; traced: the clock per call throughout (timelines);\n"
         "sampled: counted without a clock from the start (cheapest)\n"
         "(PROF_TIME)",
         "PROF_TIME",
         {},
         nullptr}};
    std::vector<std::string> command; // COMMAND [ARGS...]
    // -s KEY: the report's table on standard error after the run, ordered by KEY; -n rows.
    std::string sort;
    unsigned long long limit = 0;
    CLI::Option *sort_option = nullptr, *limit_option = nullptr;
    // LD_PRELOAD as profrun found it: the report runs without the libraries added for COMMAND.
    std::optional<std::string> preload_before;
    // Sampling from outside (--sample, --pid).
    bool sample = false, subprocesses = false, idle = false;
    std::string sampler = "auto";
    bool dump = false;           // --dump: every thread's stack of --pid, once
    bool top = false;            // --top: the live view of --pid or of COMMAND, sampled
    CLI::Option* top_flag = nullptr;
    std::string format = "text"; // of the dump
    CLI::Option *dump_flag = nullptr, *format_option = nullptr;
    pid_t pid = 0;
    double rate = 999, duration = 0;
    unsigned stack_bytes = 8192;
    CLI::Option *sample_flag = nullptr, *pid_option = nullptr, *rate_option = nullptr,
                *duration_option = nullptr, *stack_option = nullptr, *subprocess_flag = nullptr, *idle_flag = nullptr, *sampler_option = nullptr,
                *mem_flag = nullptr, *preload_flag = nullptr;

    // Not by default, --mem included: packing reads the trace twice after the run, which made
    // `profrun --mem` 3.9x the program alone on perl (775k allocations) where writing alone is
    // 1.7x (docs/overhead.md). Big traces get a line that says how to pack them.
    bool packs() const { return pack.value_or(false); }
};

// The options' flags for --pack and --no-pack, to tell which came last.
struct PackFlags {
    CLI::Option *pack = nullptr, *no_pack = nullptr;
};

PackFlags declare(prof::tools::Cli& cli, RunOptions& o) {
    CLI::App& app = cli.app();
    cli.help_column(28);
    app.footer(kFooter);
    // COMMAND and everything after it are the program's, even what looks like an option.
    app.prefix_command();
    o.output_option =
        app.add_option("-o,--output", o.output,
                       "trace file (default: COMMAND's name + .trace); an existing file\n"
                       "is moved to FILE.old first, unless --force replaces it (only a\n"
                       "regular file: a directory or device there is an error)")
            ->type_name("FILE");
    o.run_dir_option =
        app.add_option("-d,--run-dir", o.run_dir,
                       "write every process of the run (forks, execs, pipelines, MPI\n"
                       "ranks) into DIR as PROGRAM.PID.trace, and its manifest\n"
                       "run.json; nothing goes into the working directory. DIR is\n"
                       "made if missing; the profruns of one MPI job may share it.\n"
                       "Read it with: profreport DIR")
            ->type_name("DIR");
    cli.excludes(o.output_option, o.run_dir_option,
                 "-o names one trace, -d DIR holds every trace of the run: choose one");
    app.add_flag("-f,--force", o.force, "replace an existing FILE");
    o.mem_flag = app.add_flag("--mem", o.mem,
                 "also profile memory: load libprofmem.so (the allocation\n"
                 "interposer) into COMMAND; works on unmodified programs");
    PackFlags flags;
    flags.pack = app.add_flag("--pack")->description(
        "after the run, pack each finished trace (profpack: several times\n"
        "smaller; memory times kept to 4 us), or keep it as written\n"
        "(the default; a trace of 256 MiB or more gets a line that says so)");
    flags.no_pack = app.add_flag("--no-pack")->group("");
    cli.help_name(flags.pack, "--pack, --no-pack");
    CLI::Option* exact =
        app.add_flag("--exact-times", o.pack_options.exact_times,
                     "pack with memory times to the tick (profpack --exact-times);\n"
                     "every report then reads as on the trace as written");
    cli.excludes(exact, flags.no_pack,
                 "--exact-times is an option of the packing, and --no-pack turns it off");
    o.preload_flag =
        app.add_flag("--preload", o.preload, "load libprof.so into COMMAND with LD_PRELOAD");
    for (RunOptions::Variable& v : o.variables) {
        v.given = app.add_option(v.option, v.value, v.help)->type_name(v.type);
        // The help lists the choices; CLI11 would append them to the value's name (":{...}").
        if (std::string_view(v.name) == "PROF_TIME")
            v.given->check(CLI::IsMember({"auto", "traced", "sampled"}).description(""));
    }
    o.sample_flag = app.add_flag("--sample", o.sample,
                                 "sample COMMAND from outside (perf_event cpu-clock): any\n"
                                 "program, no rebuild; times from samples, calls not counted");
    o.pid_option = app.add_option("-p,--pid", o.pid,
                                  "sample the running process PID (all its threads) instead\n"
                                  "of a COMMAND; it is never stopped or changed")
                       ->type_name("PID")
                       ->check(prof::tools::whole_number(1, std::numeric_limits<pid_t>::max(), "a process ID"));
    o.duration_option = app.add_option("--duration", o.duration,
                                       "with --pid: stop after SECONDS (default: at Ctrl-C or\n"
                                       "when the process exits)")
                            ->type_name("SECONDS")
                            ->check(prof::tools::number_above(0));
    o.rate_option = app.add_option("--rate", o.rate,
                                   "with --sample or --pid: samples per second of each thread's\n"
                                   "CPU time (default 999; 199 with --top)")
                        ->type_name("HZ")
                        ->check(prof::tools::number_between(1, 20000));
    o.stack_option = app.add_option("--stack-bytes", o.stack_bytes,
                                    "with --sample or --pid: user stack copied per sample for\n"
                                    "unwinding code without frame pointers (default 8192; 0:\n"
                                    "frame pointers only)")
                         ->type_name("BYTES")
                         ->check(prof::tools::whole_number(0, 65528));
    o.subprocess_flag = app.add_flag("--subprocesses", o.subprocesses,
                                     "with --sample: also sample the processes COMMAND starts,\n"
                                     "each into FILE.PID");
    o.sampler_option =
        app.add_option("--sampler", o.sampler,
                       "with --sample or --pid: perf (perf_event_open), ptrace\n"
                       "(stops each thread per sample; at most 100 Hz), or auto\n"
                       "(default: perf, ptrace where the kernel refuses perf)")
            ->type_name("KIND")
            ->check(CLI::IsMember({"auto", "perf", "ptrace"}).description("")); // as --time
    o.idle_flag = app.add_flag("--idle", o.idle,
                               "with --sample or --pid: also the time off CPU (sleeping,\n"
                               "blocked, waiting for a CPU), charged where each thread left\n"
                               "the CPU: cumtime becomes wall time");
    o.dump_flag = app.add_flag("--dump", o.dump,
                               "with --pid: print every thread's call stack now (state,\n"
                               "system call, function, file:line, inlined frames) and\n"
                               "leave; threads blocked in the kernel are not stopped, a\n"
                               "running one only to copy its registers and stack");
    o.format_option = app.add_option("--format", o.format, "with --dump: text (default) or json")
                          ->type_name("FORMAT")
                          ->check(CLI::Validator(
                              [](std::string& f) -> std::string {
                                  return f == "text" || f == "json"
                                             ? std::string()
                                             : "unknown format '" + f + "' (expected text or json)";
                              },
                              ""));
    o.top_flag = app.add_flag("--top", o.top,
                              "with --pid, or before -- COMMAND: where the CPU time goes now,\n"
                              "sampled from outside and refreshed every second (keys: s, t,\n"
                              "i, space, q); a table per second when not on a terminal; a\n"
                              "trace of what was seen with -o");
    cli.excludes(o.top_flag, o.dump_flag, "--dump prints the stacks once, --top watches: choose one");
    cli.needs(o.dump_flag, o.pid_option, "--dump reads a running process: give --pid PID");
    cli.needs(o.format_option, o.dump_flag,
              "--format is for --dump (traces are read with profreport)");
    cli.excludes(o.sample_flag, o.pid_option,
                 "--sample runs COMMAND, --pid attaches to a running process: choose one");
    for (CLI::Option* other : {o.mem_flag, o.preload_flag}) {
        cli.excludes(o.sample_flag, other, "--sample profiles without loading anything into "
                                           "the program: it cannot be used with --mem or --preload");
        cli.excludes(o.pid_option, other, "--pid attaches to a running process: nothing can be "
                                          "loaded into it (--mem, --preload)");
    }
    cli.needs(o.duration_option, o.pid_option, "--duration is for --pid");
    cli.excludes(o.pid_option, o.run_dir_option,
                 "-d DIR holds a command's run; --pid writes one trace (-o)");
    cli.needs(o.subprocess_flag, o.sample_flag, "--subprocesses is for --sample");
    o.sort_option =
        app.add_option("-s,--sort", o.sort,
                       "after the run, print the report's table to standard error,\n"
                       "ordered by KEY (as python -m cProfile -s KEY): cumtime,\n"
                       "tottime, ncalls, pcalls, name, file, line, nfl, stdname, or\n"
                       "a pstats alias (cumulative, time, calls, filename, module);\n"
                       "with --mem, the memory summary follows")
            ->type_name("KEY")
            ->check([](const std::string& key) -> std::string {
                if (prof::render::parse_sort_key(key)) return {};
                return fmt::format("unknown sort key '{}' (expected cumtime, tottime, ncalls, "
                                   "pcalls, name, file, line, nfl or stdname)",
                                   key);
            });
    o.limit_option = app.add_option("-n,--limit", o.limit,
                                    "with -s: print at most N rows (and N sites per memory\n"
                                    "section; default: all); with --top: rows of each table\n"
                                    "printed without a terminal (default 20)")
                         ->type_name("N")
                         ->check(prof::tools::whole_number(0, 1000000000, "a number of rows"));

    app.add_flag("-q,--quiet", o.quiet, "no message after the run (the report of -s is still printed)");
    return flags;
}

// After parsing: the command, which of --pack and --no-pack counts, and what the declarations
// cannot say (--exact-times needs one of two options). Nothing, or the exit status.
std::optional<int> finish_command_line(prof::tools::Cli& cli, RunOptions& o, PackFlags flags) {
    for (const CLI::Option* opt : cli.app().parse_order())
        if (opt == flags.pack || opt == flags.no_pack) o.pack = opt == flags.pack;
    o.command = cli.app().remaining();
    if (!o.command.empty() && o.command.front() == "--")
        o.command.erase(o.command.begin());
    else if (!o.command.empty() && o.command.front().rfind('-', 0) == 0)
        return cli.usage_error(cli.unknown_option(o.command.front()));
    if (o.limit_option->count() && !o.sort_option->count() && !o.top)
        return cli.usage_error("-n sets the rows of the report -s prints, or of --top's tables");
    if (o.top) {
        if (o.sort_option->count())
            return cli.usage_error("--top sorts with its keys (s: self, t: total); -s is the "
                                   "report after a run");
        if (o.idle) return cli.usage_error("--top shows CPU time: --idle is for traces");
        if (!o.pid_option->count() && o.command.empty())
            return cli.usage_error("--top needs --pid PID or a COMMAND");
        for (CLI::Option* other : {o.mem_flag, o.preload_flag, o.run_dir_option})
            if (other->count())
                return cli.usage_error(fmt::format("--top samples from outside: it cannot be used "
                                                   "with {}",
                                                   other->get_name()));
        o.sample = o.pid_option->count() == 0; // a COMMAND is sampled like --sample
    }
    bool sampling = o.sample || o.pid_option->count();
    if (!sampling &&
        (o.rate_option->count() || o.stack_option->count() || o.idle || o.sampler_option->count()))
        return cli.usage_error(fmt::format("{} is for --sample and --pid",
                                           o.rate_option->count()    ? "--rate"
                                           : o.stack_option->count() ? "--stack-bytes"
                                           : o.idle                  ? "--idle"
                                                                     : "--sampler"));
    if (sampling)
        for (const RunOptions::Variable& v : o.variables)
            if (v.given->count())
                return cli.usage_error(fmt::format(
                    "{} sets a variable of libprof.so, which {} does not load", v.option,
                    o.sample ? "--sample" : "--pid"));
    if (sampling && (o.pack.value_or(false) || o.pack_options.exact_times))
        return cli.usage_error("--pack is for traces of the runtime; sampled traces are small");
    if (o.pid_option->count()) {
        if (!o.command.empty())
            return cli.usage_error(fmt::format(
                "--pid samples a running process: give no COMMAND ('{}')", o.command[0]));
        if (o.dump)
            for (const CLI::Option* sampling_only :
                 {o.output_option, o.duration_option, o.rate_option, o.stack_option, o.idle_flag,
                  o.sampler_option, o.sort_option})
                if (sampling_only->count())
                    return cli.usage_error(
                        fmt::format("{} is for sampling; --dump prints each thread's stack once",
                                    sampling_only->get_name()));
        return std::nullopt;
    }
    if (o.command.empty()) return cli.usage_error("no command given (see profrun --help)");
    if (o.pack_options.exact_times && !o.packs())
        return cli.usage_error("--exact-times is an option of the packing, which --pack turns "
                               "on");
    return std::nullopt;
}

std::string self_dir() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    std::string p(buf, size_t(n));
    return p.substr(0, p.rfind('/'));
}

bool exists(const std::string& p) {
    struct stat st;
    return lstat(p.c_str(), &st) == 0;
}

// A library of ours next to this profrun: installed (bin/../lib) or in the build tree.
std::string find_runtime(const std::string& name = "libprof.so") {
    std::string dir = self_dir();
    for (const char* rel :
         {"/../lib/", "/../lib64/", "/../lib/x86_64-linux-gnu/", "/../libprof/"}) {
        std::string p = dir + rel + name;
        if (exists(p)) {
            char real[4096];
            if (realpath(p.c_str(), real)) return real;
            return p;
        }
    }
    return {};
}

std::string basename_of(const std::string& p) {
    size_t s = p.rfind('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

std::string dirname_of(const std::string& p) {
    size_t s = p.rfind('/');
    if (s == std::string::npos) return ".";
    return s == 0 ? "/" : p.substr(0, s);
}

// The program execvp would run, by PATH search for a bare name.
std::string resolve_command(const std::string& cmd) {
    if (cmd.find('/') != std::string::npos) return cmd;
    const char* env_path = std::getenv("PATH");
    std::string dirs = env_path ? env_path : "";
    size_t pos = 0;
    while (pos <= dirs.size()) {
        size_t end = dirs.find(':', pos);
        std::string dir =
            dirs.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        if (!dir.empty() && access((dir + "/" + cmd).c_str(), X_OK) == 0) return dir + "/" + cmd;
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    return cmd;
}

// What the program file says about why it might not trace: read from its ELF headers and
// dynamic string table area (a plain byte search for the library's soname is enough here).
struct ProgramFacts {
    bool elf = false, dynamic = false, uses_libprof = false;
};

ProgramFacts inspect_program(const std::string& path) {
    ProgramFacts f;
    FILE* in = std::fopen(path.c_str(), "rb");
    if (!in) return f;
    std::string data;
    char buf[1 << 16];
    size_t n;
    while (data.size() < (64u << 20) && (n = std::fread(buf, 1, sizeof buf, in)) > 0)
        data.append(buf, n);
    std::fclose(in);
    if (data.size() < 64 ||
        data.compare(0, 4,
                     "\x7f"
                     "ELF") != 0 ||
        data[4] != 2)
        return f;
    f.elf = true;
    uint64_t phoff;
    uint16_t phentsize, phnum;
    std::memcpy(&phoff, data.data() + 32, 8);
    std::memcpy(&phentsize, data.data() + 54, 2);
    std::memcpy(&phnum, data.data() + 56, 2);
    for (uint16_t k = 0; k < phnum; ++k) {
        uint64_t at = phoff + uint64_t(k) * phentsize;
        if (at + 4 > data.size()) break;
        uint32_t type;
        std::memcpy(&type, data.data() + at, 4);
        if (type == 3) f.dynamic = true; // PT_INTERP
    }
    f.uses_libprof = data.find("libprof.so.") != std::string::npos;
    return f;
}

// Traces the run's other processes wrote next to `output` (a forked child's
// `<output>.<pid>`, an exec'd image's `<output>.<pid>[.<n>]`), newer than `since`.
std::vector<std::string> other_traces(const std::string& output, time_t since) {
    std::vector<std::string> found;
    std::string dir = dirname_of(output), base = basename_of(output) + ".";
    DIR* d = opendir(dir.c_str());
    if (!d) return found;
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name.size() <= base.size() || name.compare(0, base.size(), base) != 0) continue;
        std::string rest = name.substr(base.size());
        if (rest.find_first_not_of("0123456789.") != std::string::npos || !std::isdigit(rest[0]))
            continue;
        std::string path =
            dir == "." && output.find('/') == std::string::npos ? name : dir + "/" + name;
        struct stat st;
        if (lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_mtime >= since)
            found.push_back(path);
    }
    closedir(d);
    std::sort(found.begin(), found.end());
    return found;
}

// Whether the runtime finished the trace at `path` (its header says so); true when the file
// is not a trace header at all (the reader will say what it is).
bool finished_trace(const std::string& path) {
    prof::format::FileHeader h{};
    FILE* in = std::fopen(path.c_str(), "rb");
    bool read = in && std::fread(&h, 1, sizeof h, in) == sizeof h;
    if (in) std::fclose(in);
    return !read || !prof::format::header_magic_ok(h) || (h.flags & prof::format::kFileFinished);
}

std::string list_some(const std::vector<std::string>& v, size_t shown = 4) {
    std::string s;
    for (size_t k = 0; k < v.size() && k < shown; ++k) s += (k ? ", " : "") + v[k];
    if (v.size() > shown) s += fmt::format(" and {} more", v.size() - shown);
    return s;
}

// The trace's path is free: only a regular file is ever replaced or moved aside (-o naming a
// directory or a device, a typo such as -o /tmp, must not move it). Nothing, or the exit status.
std::optional<int> prepare_output(const RunOptions& o, const ToolLog& log) {
    const std::string& output = o.output;
    struct stat st;
    if (stat(output.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        log.error(fmt::format(
            "{} exists and is not a regular file: choose another trace path with -o", output));
        return 2;
    }
    std::string out_dir = dirname_of(output);
    if (stat(out_dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
        log.error(fmt::format("cannot write the trace to {}: {} is not a directory", output,
                              out_dir));
        return 2;
    }
    if (access(out_dir.c_str(), W_OK | X_OK) != 0) {
        log.error(fmt::format("cannot write the trace to {}: {}: {}", output, out_dir,
                              std::strerror(errno)));
        return 2;
    }
    if (!exists(output)) return std::nullopt;
    if (o.force) {
        // Removed here rather than through PROF_FORCE, so that a program that writes no trace
        // is not reported with the old one, and children never inherit the force.
        if (unlink(output.c_str()) != 0) {
            log.error(fmt::format("cannot replace {}: {}", output, std::strerror(errno)));
            return 1;
        }
        return std::nullopt;
    }
    std::string old = output + ".old";
    if (std::rename(output.c_str(), old.c_str()) != 0) {
        log.error(fmt::format("{} exists and cannot be moved to {}: {}", output, old,
                              std::strerror(errno)));
        return 1;
    }
    if (!o.quiet) log.info(fmt::format("moved the existing {} to {}", output, old));
    return std::nullopt;
}

// The environment COMMAND runs in: the trace's path, the runtime's variables the options set,
// and the libraries to preload. Nothing, or the exit status.
std::optional<int> export_environment(const RunOptions& o, const std::string& log_format,
                                      const ToolLog& log) {
    if (o.run_dir.empty()) {
        setenv("PROF_OUT", o.output.c_str(), 1);
    } else {
        unsetenv("PROF_OUT"); // it would name one file for every process
        setenv("PROF_RUN_DIR", o.run_dir.c_str(), 1);
    }
    for (const RunOptions::Variable& v : o.variables)
        if (v.given->count()) setenv(v.name, v.value.c_str(), 1);
    if (!log_format.empty()) setenv("PROF_LOG_FORMAT", log_format.c_str(), 1);
    std::string preloads;
    for (auto [wanted, name] :
         {std::pair{o.preload, "libprof.so"}, std::pair{o.mem, "libprofmem.so"}}) {
        if (!wanted) continue;
        std::string lib = find_runtime(name);
        if (lib.empty()) {
            log.error(fmt::format("cannot find {} next to profrun", name));
            return 1;
        }
        preloads += (preloads.empty() ? "" : ":") + lib;
    }
    if (!preloads.empty()) {
        const char* prev = std::getenv("LD_PRELOAD");
        std::string v = prev && *prev ? preloads + ":" + prev : preloads;
        setenv("LD_PRELOAD", v.c_str(), 1);
    }
    return std::nullopt;
}

// Runs the command to its end; false when it could not be started.
bool run_command(const std::vector<std::string>& command, const ToolLog& log, int& status,
                 pid_t* started = nullptr) {
    std::vector<char*> argv;
    for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    prof::tools::PassedOnSignals signals;
    pid_t pid = fork();
    if (pid < 0) {
        signals.started(-1);
        log.error(fmt::format("cannot start {}: {}", command[0], std::strerror(errno)));
        return false;
    }
    if (pid == 0) {
        signals.in_child();
        execvp(argv[0], argv.data());
        log.error(fmt::format("cannot run {}: {}", command[0], std::strerror(errno)));
        _exit(127);
    }
    if (started) *started = pid;
    // The terminal's Ctrl-C reaches the program directly; profrun waits to report its end.
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGQUIT, SIG_IGN);
    signals.started(pid);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    signals.reaped();
    return true;
}

// A trace this big is said as it is packed, or when kept as written.
constexpr off_t kSuggestPacking = off_t(256) << 20;

// Traces kept as written: a big one gets a line saying how much smaller packing would make it.
void suggest_packing(const RunOptions& o, const std::vector<std::string>& others,
                     const ToolLog& log) {
    if (o.quiet) return;
    std::vector<std::string> all = others;
    if (!o.output.empty() && exists(o.output)) all.insert(all.begin(), o.output);
    for (const std::string& t : all) {
        struct stat st;
        if (finished_trace(t) && stat(t.c_str(), &st) == 0 && st.st_size >= kSuggestPacking)
            log.info(fmt::format("{} is {} as written: profpack {} packs it several times smaller "
                                 "(or profrun --pack, after the run)",
                                 t, prof::text::format_bytes(double(st.st_size)), t));
    }
}

// Packs the run's finished traces in place. A trace the process did not finish stays as
// written: its crash-safe form is the record of what happened (profreport reads it; profpack
// refuses it). Ctrl-C stops the packing again, and removes what it wrote; the traces stay as
// written.
void pack_traces(const RunOptions& o, const std::vector<std::string>& others, const ToolLog& log) {
    using prof::text::format_bytes;
    prof::pack::remove_partial_pack_on_signals();
    std::vector<std::string> all = others;
    if (!o.output.empty() && exists(o.output)) all.insert(all.begin(), o.output);
    for (const std::string& t : all) {
        if (!finished_trace(t)) continue;
        struct stat st;
        if (!o.quiet && stat(t.c_str(), &st) == 0 && st.st_size >= kSuggestPacking)
            log.info(fmt::format("packing {} ({})", t, format_bytes(double(st.st_size))));
        try {
            prof::pack::PackResult r = prof::pack::pack_trace(t, t, o.pack_options);
            if (!o.quiet)
                log.info(fmt::format("packed {}: {} -> {} (profpack)", t,
                                     format_bytes(double(r.bytes_in)),
                                     format_bytes(double(r.bytes_out))));
        } catch (const std::exception& e) {
            log.warn(fmt::format("not packed, kept as written: {}", e.what()));
        }
    }
}

// Why `command` wrote no trace at all, as far as its program file tells.
std::string why_no_trace(const RunOptions& o, const std::string& program, bool setuid_program) {
    const std::string& command = o.command[0];
    ProgramFacts facts = inspect_program(program);
    if (setuid_program) return fmt::format("{} wrote no trace: it is setuid/setgid (see above)", command);
    if (facts.elf && !facts.dynamic && (o.mem || o.preload))
        return fmt::format("{} wrote no trace: it is statically linked, and the loader can only "
                           "add libraries to dynamically linked programs",
                           command);
    if (facts.uses_libprof || o.mem || o.preload)
        return fmt::format("{} wrote no trace at {} although it loads libprof: see its messages "
                           "above (PROF_LOG=info shows more)",
                           command, o.output);
    return fmt::format("{} wrote no trace: build it with -finstrument-functions and "
                       "link libprof (CMake: prof::instrument), or run it with "
                       "profrun --preload or --mem",
                       command);
}

// A file that starts with a trace header (finished or not, packed or not): what profreport can
// open. A file cut inside its header, or overwritten, is not.
bool trace_header_readable(const std::string& path) {
    prof::format::FileHeader h{};
    FILE* in = std::fopen(path.c_str(), "rb");
    bool read = in && std::fread(&h, 1, sizeof h, in) == sizeof h;
    if (in) std::fclose(in);
    return read && prof::format::header_magic_ok(h);
}

// The messages after the run: where the traces are, or why there is none. The exit status:
// COMMAND's `code`, or kNoTrace when COMMAND succeeded and its trace is missing or unreadable
// (said in one line even with -q: a script must not take an untraced run for a traced one).
int report_traces(const RunOptions& o, int status, int code, const std::vector<std::string>& others,
                  const std::string& program, bool setuid_program, const ToolLog& log) {
    const std::string& command = o.command[0];
    if (exists(o.output) && !trace_header_readable(o.output)) {
        std::string msg = fmt::format("{} is not a readable trace (it does not start with a trace "
                                      "header): the run's trace is lost",
                                      o.output);
        if (code == 0) {
            log.error(msg);
            return kNoTrace;
        }
        if (!o.quiet) log.warn(msg);
        return code;
    }
    if (!exists(o.output) && others.empty()) {
        std::string msg = why_no_trace(o, program, setuid_program);
        if (code == 0) {
            log.error(msg);
            return kNoTrace;
        }
        if (!o.quiet) log.warn(msg);
        return code;
    }
    if (o.quiet) return code;
    if (WIFSIGNALED(status))
        log.warn(fmt::format("{} was killed by signal {} ({}); its trace holds what it recorded "
                             "until then",
                             command, WTERMSIG(status), strsignal(WTERMSIG(status))));
    if (exists(o.output)) {
        if (!WIFSIGNALED(status) && !finished_trace(o.output))
            log.warn(fmt::format("{} is not finished: {} ended without its exit handlers (_exit, "
                                 "exec) or recording stopped (see the messages above); it holds "
                                 "what was recorded until then",
                                 o.output, command));
        log.info(
            fmt::format("trace written to {}; read it with: profreport {}", o.output, o.output));
        if (!others.empty())
            log.info(fmt::format("{} more from other processes of the run (fork or exec): {}",
                                 others.size(), list_some(others)));
    } else {
        log.info(fmt::format("{} wrote no trace at {}; its processes wrote {}", command, o.output,
                             list_some(others)));
    }
    return code;
}

// -s KEY: the report after the run (report_at_end.hpp).
void print_report(const RunOptions& o, const std::string& traces, const std::string& log_format,
                  const ToolLog& log) {
    if (o.sort.empty()) return;
    prof::tools::ReportAtEnd r;
    r.sort = o.sort;
    r.limit = o.limit;
    r.memory = o.mem;
    r.preload_before = o.preload_before;
    prof::tools::print_report_at_end(r, traces, self_dir(), log_format, log);
}

// The dynamic loader ignores LD_PRELOAD for setuid/setgid programs.
bool preload_ignored(const RunOptions& o, const std::string& program, const ToolLog& log) {
    if (!o.mem && !o.preload) return false;
    struct stat st;
    bool setuid_program = stat(program.c_str(), &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID));
    if (setuid_program && !o.quiet)
        log.warn(fmt::format("{} is setuid/setgid: the loader ignores LD_PRELOAD for it, so it "
                             "will not be profiled",
                             o.command[0]));
    return setuid_program;
}

// What --sample, --pid and --top take from the command line.
prof::tools::SampleOptions sample_options(const RunOptions& o) {
    prof::tools::SampleOptions so;
    so.command = o.command;
    so.program = o.command.empty() ? std::string() : resolve_command(o.command[0]);
    so.pid = o.pid;
    so.duration = o.duration;
    so.output = o.output;
    so.rate = o.rate;
    so.stack_bytes = o.stack_bytes;
    so.subprocesses = o.subprocesses;
    so.idle = o.idle;
    so.sampler = o.sampler;
    so.quiet = o.quiet;
    return so;
}

// profrun -d DIR: the command's processes write into DIR; then the manifest. The exit status
// of COMMAND, or profrun's own.
int run_in_directory(RunOptions& o, const std::string& log_format, const std::string& run,
                     const ToolLog& log) {
    pid_t child = 0;
    int status = 0, code = 0;
    if (o.sample) {
        prof::tools::SampleOptions so = sample_options(o);
        so.output = o.run_dir + "/" + basename_of(o.command[0]) + ".trace";
        so.quiet = true; // the run's message below names the directory
        so.run_dir = o.run_dir;
        so.run_id = run;
        so.launched = &child;
        so.wait_status = &status;
        code = prof::tools::run_sampled(so, log);
        if (!child) return code;
    } else {
        std::string program = resolve_command(o.command[0]);
        preload_ignored(o, program, log);
        if (auto bad = export_environment(o, log_format, log)) return *bad;
        if (!run_command(o.command, log, status, &child)) return 1;
        code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (WIFSIGNALED(status) && !o.quiet)
            log.warn(fmt::format("{} was killed by signal {} ({}); the run holds what its "
                                 "processes recorded until then",
                                 o.command[0], WTERMSIG(status), strsignal(WTERMSIG(status))));
    }
    size_t processes = prof::tools::update_manifest(o.run_dir, run, child, o.command, status, log);
    if (o.packs()) {
        std::vector<std::string> traces;
        for (const std::string& name : prof::reader::run_traces(o.run_dir))
            traces.push_back(o.run_dir + "/" + name);
        o.output.clear();
        pack_traces(o, traces, log);
    } else if (o.mem) {
        std::vector<std::string> traces;
        for (const std::string& name : prof::reader::run_traces(o.run_dir))
            traces.push_back(o.run_dir + "/" + name);
        RunOptions each = o;
        each.output.clear();
        suggest_packing(each, traces, log);
    }
    // Under an MPI launcher, one message for the job: rank 0's (each rank has a profrun).
    if (!processes) {
        std::string msg = fmt::format("{} wrote no trace into {}: build it with "
                                      "-finstrument-functions and link libprof, or use --preload, "
                                      "--mem or --sample",
                                      o.command[0], o.run_dir);
        if (code == 0) {
            log.error(msg);
            return kNoTrace;
        }
        if (!o.quiet) log.warn(msg);
        return code;
    }
    if (!o.quiet && prof::tools::launcher_rank().value_or(0) == 0)
        log.info(fmt::format("run written to {}: {} trace{}; read it with: profreport {}",
                             o.run_dir, processes, processes == 1 ? "" : "s", o.run_dir));
    if (prof::tools::launcher_rank().value_or(0) == 0) print_report(o, o.run_dir, log_format, log);
    return code;
}

// --top: the live view; a trace only with -o.
int top(const RunOptions& o, const ToolLog& log) {
    if (!o.output.empty())
        if (auto status = prepare_output(o, log)) return *status;
    prof::tools::SampleOptions so = sample_options(o);
    // A view refreshed each second needs fewer samples than a trace: 199 a second of a busy
    // thread put a 10% share within +-4.2 points per interval (closer since the start), at a
    // fifth of the cost to the program (docs/overhead.md).
    so.rate = o.rate_option->count() ? o.rate : 199;
    prof::tools::TopOptions to;
    to.rows = size_t(o.limit);
    return prof::tools::run_top(so, to, log);
}

} // namespace

int main(int argc, char** argv) {
    prof::tools::Cli cli("profrun", "[options] [--] COMMAND [ARGS...]", kDescription);
    RunOptions o;
    PackFlags flags = declare(cli, o);
    if (const char* preload = std::getenv("LD_PRELOAD")) o.preload_before = preload;
    if (auto status = cli.parse(argc, argv)) return *status;
    if (auto status = finish_command_line(cli, o, flags)) return *status;
    const ToolLog& log = cli.log();

    if (o.dump) return prof::tools::dump_stacks(o.pid, o.format, log);
    if (o.top) return top(o, log);
    if (o.pid_option->count()) {
        if (auto why = prof::tools::check_attachable(o.pid)) {
            log.error(fmt::format("cannot attach: {}", *why));
            return 1;
        }
        if (o.output.empty()) o.output = prof::tools::default_attach_output(o.pid);
    }
    std::string run;
    if (!o.run_dir.empty()) {
        run = prof::tools::run_id();
        if (auto status = prof::tools::prepare_run_dir(o.run_dir, run, log)) return *status;
        char real[4096];
        if (realpath(o.run_dir.c_str(), real)) o.run_dir = real; // children may change directory
        setenv("PROF_RUN_ID", run.c_str(), 1);
        return run_in_directory(o, cli.log_format(), run, log);
    }
    if (o.output.empty()) o.output = basename_of(o.command[0]) + ".trace";
    if (o.sample || o.pid_option->count()) {
        if (auto status = prepare_output(o, log)) return *status;
        prof::tools::SampleOptions so = sample_options(o);
        int code = o.sample ? prof::tools::run_sampled(so, log) : prof::tools::attach_sampled(so, log);
        if (trace_header_readable(o.output)) print_report(o, o.output, cli.log_format(), log);
        return code;
    }
    std::string program = resolve_command(o.command[0]);
    bool setuid_program = preload_ignored(o, program, log);
    if (auto status = prepare_output(o, log)) return *status;
    if (auto status = export_environment(o, cli.log_format(), log)) return *status;

    time_t started = std::time(nullptr);
    int status = 0;
    if (!run_command(o.command, log, status)) return 1;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code == 127 && !exists(o.output)) return code;
    std::vector<std::string> others = other_traces(o.output, started);
    if (o.packs())
        pack_traces(o, others, log);
    else if (o.mem)
        suggest_packing(o, others, log);
    code = report_traces(o, status, code, others, program, setuid_program, log);
    if (trace_header_readable(o.output)) print_report(o, o.output, cli.log_format(), log);
    return code;
}
