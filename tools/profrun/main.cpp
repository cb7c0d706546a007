// profrun: runs a program with libprof's environment set and passes its exit status through.
#include "common/tool_log.hpp"
#include "pack/trace_packer.hpp"
#include "render/memory_report.hpp"

#include <prof/trace_format.hpp>
#include <prof/version.h>

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
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

constexpr const char* kUsage = R"(usage: profrun [options] [--] COMMAND [ARGS...]

Runs COMMAND with profiling enabled and writes its trace. COMMAND is a program built with
-finstrument-functions and linked with libprof (CMake target prof::instrument, or
pkg-config libprof-instrument); with --preload, any program built with
-finstrument-functions. The exit status of COMMAND is passed through (128+N when it was
killed by signal N).

options:
  -o, --output FILE         trace file (default: COMMAND's name + .trace); an existing file
                            is moved to FILE.old first, unless --force replaces it (only a
                            regular file: a directory or device there is an error)
  -f, --force               replace an existing FILE
      --mem                 also profile memory: load libprofmem.so (the allocation
                            interposer) into COMMAND; works on unmodified programs
      --pack, --no-pack     after the run, pack each finished trace (profpack: several times
                            smaller; memory times kept to 4 us), or keep it as written;
                            default: pack with --mem
      --exact-times         pack with memory times to the tick (profpack --exact-times);
                            every report then reads as on the trace as written
      --preload             load libprof.so into COMMAND with LD_PRELOAD
      --exclude GLOBS       do not record functions whose symbol matches one of the
                            comma-separated globs (PROF_EXCLUDE)
      --exclude-modules S   do not record functions of objects whose path contains one of
                            the comma-separated strings (PROF_EXCLUDE_MODULES)
      --chunk-size BYTES    per-thread buffer size (PROF_CHUNK_SIZE, default 256K)
  -q, --quiet               no message after the run
      --log-format F        text (default) or json for messages on standard error
  -h, --help                show this help
  -V, --version             show the version

Every PROF_* variable (docs/configuration.md) set in the environment is passed on as well.
)";

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

} // namespace

int main(int argc, char** argv) {
    prof::tools::ToolLog log("profrun");
    std::string output;
    bool force = false, preload = false, quiet = false, mem = false;
    int pack = -1; // -1: with --mem
    prof::pack::PackOptions pack_options;
    int i = 1;
    auto value = [&](const char* opt) -> const char* {
        if (i + 1 >= argc) {
            log.error(fmt::format("option {} needs a value", opt));
            std::exit(2);
        }
        return argv[++i];
    };
    for (; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a.empty() || a[0] != '-') break;
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (a == "-V" || a == "--version") {
            fmt::print("profrun {}\n", PROF_VERSION_STRING);
            return 0;
        } else if (a == "-o" || a == "--output")
            output = value("-o");
        else if (a == "-f" || a == "--force")
            force = true;
        else if (a == "--preload")
            preload = true;
        else if (a == "--mem")
            mem = true;
        else if (a == "--pack" || a == "--no-pack")
            pack = a == "--pack";
        else if (a == "--exact-times")
            pack_options.exact_times = true;
        else if (a == "-q" || a == "--quiet")
            quiet = true;
        else if (a == "--exclude")
            setenv("PROF_EXCLUDE", value("--exclude"), 1);
        else if (a == "--exclude-modules")
            setenv("PROF_EXCLUDE_MODULES", value("--exclude-modules"), 1);
        else if (a == "--chunk-size")
            setenv("PROF_CHUNK_SIZE", value("--chunk-size"), 1);
        else if (a == "--log-format") {
            std::string f = value("--log-format");
            if (f != "text" && f != "json") {
                log.error(fmt::format("unknown log format '{}' (expected text or json)", f));
                return 2;
            }
            log.json = f == "json";
            setenv("PROF_LOG_FORMAT", f.c_str(), 1);
        } else {
            log.error(fmt::format("unknown option '{}' (see profrun --help)", a));
            return 2;
        }
    }
    if (i >= argc) {
        log.error("no command given (see profrun --help)");
        return 2;
    }
    if (pack_options.exact_times && (pack == 0 || (pack == -1 && !mem))) {
        log.error(pack == 0
                      ? "--exact-times is an option of the packing, and --no-pack turns it off"
                      : "--exact-times is an option of the packing, which is on with --mem "
                        "or --pack");
        return 2;
    }
    if (output.empty()) output = basename_of(argv[i]) + ".trace";
    std::string program = resolve_command(argv[i]);
    bool setuid_program = false;
    if (mem || preload) {
        // The dynamic loader ignores LD_PRELOAD for setuid/setgid programs.
        struct stat st;
        setuid_program = stat(program.c_str(), &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID));
        if (setuid_program && !quiet)
            log.warn(fmt::format("{} is setuid/setgid: the loader ignores LD_PRELOAD for it, so it "
                                 "will not be profiled",
                                 argv[i]));
    }

    // Only a regular file is ever replaced or moved aside: -o naming a directory or a device
    // (a typo such as -o /tmp) must not move it.
    struct stat out_st;
    if (stat(output.c_str(), &out_st) == 0 && !S_ISREG(out_st.st_mode)) {
        log.error(fmt::format(
            "{} exists and is not a regular file: choose another trace path with -o", output));
        return 2;
    }
    std::string out_dir = dirname_of(output);
    if (access(out_dir.c_str(), W_OK | X_OK) != 0) {
        log.error(fmt::format("cannot write the trace to {}: {}: {}", output, out_dir,
                              std::strerror(errno)));
        return 2;
    }

    if (exists(output)) {
        if (force) {
            // Removed here rather than through PROF_FORCE, so that a program that writes no
            // trace is not reported with the old one, and children never inherit the force.
            if (unlink(output.c_str()) != 0) {
                log.error(fmt::format("cannot replace {}: {}", output, std::strerror(errno)));
                return 1;
            }
        } else {
            std::string old = output + ".old";
            if (std::rename(output.c_str(), old.c_str()) != 0) {
                log.error(fmt::format("{} exists and cannot be moved to {}: {}", output, old,
                                      std::strerror(errno)));
                return 1;
            }
            if (!quiet) log.info(fmt::format("moved the existing {} to {}", output, old));
        }
    }
    setenv("PROF_OUT", output.c_str(), 1);
    std::string preloads;
    for (auto [wanted, name] :
         {std::pair{preload, "libprof.so"}, std::pair{mem, "libprofmem.so"}}) {
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

    time_t started = std::time(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
        log.error(fmt::format("cannot start {}: {}", argv[i], std::strerror(errno)));
        return 1;
    }
    if (pid == 0) {
        execvp(argv[i], argv + i);
        log.error(fmt::format("cannot run {}: {}", argv[i], std::strerror(errno)));
        _exit(127);
    }
    // The terminal's Ctrl-C reaches the program directly; profrun waits to report its end.
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGQUIT, SIG_IGN);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (WIFSIGNALED(status) && !quiet)
        log.warn(fmt::format("{} was killed by signal {} ({}); its trace holds what it recorded "
                             "until then",
                             argv[i], WTERMSIG(status), strsignal(WTERMSIG(status))));
    if (code == 127 && !exists(output)) return code;
    std::vector<std::string> others = other_traces(output, started);
    if (pack == 1 || (pack == -1 && mem)) {
        // A trace the process did not finish stays as written: its crash-safe form is the
        // record of what happened (profreport reads it; profpack refuses it). Ctrl-C stops
        // the packing again, and removes what it wrote; the traces stay as written.
        prof::pack::remove_partial_pack_on_signals();
        std::vector<std::string> all = others;
        if (exists(output)) all.insert(all.begin(), output);
        for (const std::string& t : all) {
            if (!finished_trace(t)) continue;
            struct stat st;
            if (!quiet && stat(t.c_str(), &st) == 0 && st.st_size >= (off_t(256) << 20))
                log.info(fmt::format("packing {} ({})", t,
                                     prof::analysis::format_bytes(double(st.st_size))));
            try {
                prof::pack::PackResult r = prof::pack::pack_trace(t, t, pack_options);
                if (!quiet)
                    log.info(fmt::format("packed {}: {} -> {} (profpack)", t,
                                         prof::analysis::format_bytes(double(r.bytes_in)),
                                         prof::analysis::format_bytes(double(r.bytes_out))));
            } catch (const std::exception& e) {
                log.warn(fmt::format("not packed, kept as written: {}", e.what()));
            }
        }
    }
    if (quiet) return code;
    if (exists(output)) {
        if (!WIFSIGNALED(status) && !finished_trace(output))
            log.warn(fmt::format("{} is not finished: {} ended without its exit handlers (_exit, "
                                 "exec) or recording stopped (see the messages above); it holds "
                                 "what was recorded until then",
                                 output, argv[i]));
        log.info(fmt::format("trace written to {}; read it with: profreport {}", output, output));
        if (!others.empty())
            log.info(fmt::format("{} more from other processes of the run (fork or exec): {}",
                                 others.size(), list_some(others)));
        return code;
    }
    if (!others.empty()) {
        log.info(fmt::format("{} wrote no trace at {}; its processes wrote {}", argv[i], output,
                             list_some(others)));
        return code;
    }
    ProgramFacts facts = inspect_program(program);
    if (setuid_program)
        log.warn(fmt::format("{} wrote no trace: it is setuid/setgid (see above)", argv[i]));
    else if (facts.elf && !facts.dynamic && (mem || preload))
        log.warn(fmt::format("{} wrote no trace: it is statically linked, and the loader can only "
                             "add libraries to dynamically linked programs",
                             argv[i]));
    else if (facts.uses_libprof || mem || preload)
        log.warn(fmt::format("{} wrote no trace although it loads libprof: see its messages "
                             "above (PROF_LOG=info shows more)",
                             argv[i]));
    else
        log.warn(fmt::format("{} wrote no trace: build it with -finstrument-functions and "
                             "link libprof (CMake: prof::instrument), or run it with "
                             "profrun --preload or --mem",
                             argv[i]));
    return code;
}
