// profpack: rewrites finished traces in the packed form (format 2.1), which profreport reads
// like any other.
#include "render/memory_report.hpp"
#include "common/tool_log.hpp"
#include "pack/trace_packer.hpp"
#include "reader/trace_reader.hpp"

#include <prof/version.h>

#include <fmt/format.h>

#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

constexpr const char* kUsage = R"(usage: profpack [options] TRACE...

Rewrites each finished trace in the packed form (trace format 2.1): its chunks compressed
with zstd, and the memory profiler's records as references to blocks (no pointers), their
times kept to the largest power of two of clock ticks not above 4 us. Calls, scopes and lines
keep their exact times, and profreport reads from the packed file what it read from the
trace, except that allocations and releases of a block its own thread allocated happen up
to 4 us earlier (the peak heap of a multi-threaded program can move by the blocks of such a
moment). A trace whose process did not finish stays as it is (its crash-safe form is the
record of what happened); a trace packed already is left alone. profrun --mem packs its
traces itself.

options:
  -o, --output FILE     write the packed trace to FILE (one TRACE only) instead of replacing
                        TRACE once the packed file is complete; an existing FILE is kept
                        unless --force
  -f, --force           replace an existing FILE
  -l, --level N         zstd level, 1 (fastest) to 19 (smallest); default 9
      --exact-times     keep the times of memory records to the clock tick
  -q, --quiet           no message per trace
      --log-format F    text (default) or json for messages on standard error
  -h, --help            show this help
  -V, --version         show the version
)";

std::string bytes(uint64_t n) { return prof::analysis::format_bytes(double(n)); }

// Whether two paths name the same file.
bool same_file(const std::string& a, const std::string& b) {
    struct stat sa, sb;
    return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

} // namespace

int main(int argc, char** argv) {
    prof::tools::ToolLog log("profpack");
    std::string output;
    std::vector<std::string> traces;
    prof::pack::PackOptions options;
    bool quiet = false, force = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i], inline_value;
        bool has_inline = false;
        if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) { // --option=value
            inline_value = a.substr(a.find('=') + 1);
            a = a.substr(0, a.find('='));
            has_inline = true;
        }
        auto value = [&]() -> std::string {
            if (has_inline) return inline_value;
            if (i + 1 >= argc) {
                log.error(fmt::format("option {} needs a value", a));
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (a == "-V" || a == "--version") {
            fmt::print("profpack {}\n", PROF_VERSION_STRING);
            return 0;
        } else if (a == "-o" || a == "--output") {
            output = value();
        } else if (a == "-f" || a == "--force") {
            force = true;
        } else if (a == "-l" || a == "--level") {
            std::string v = value();
            char* end = nullptr;
            long level = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || !std::isdigit(static_cast<unsigned char>(v[0])) || *end || level < 1 ||
                level > 19) {
                log.error(fmt::format("--level wants a number from 1 to 19, not '{}'", v));
                return 2;
            }
            options.level = int(level);
        } else if (a == "--exact-times") {
            options.exact_times = true;
        } else if (a == "-q" || a == "--quiet") {
            quiet = true;
        } else if (a == "--log-format") {
            std::string f = value();
            if (f != "text" && f != "json") {
                log.error(fmt::format("unknown log format '{}' (expected text or json)", f));
                return 2;
            }
            log.json = f == "json";
        } else if (a == "--") {
            for (++i; i < argc; ++i) traces.emplace_back(argv[i]);
        } else if (!a.empty() && a[0] == '-') {
            log.error(fmt::format("unknown option '{}' (see profpack --help)", argv[i]));
            return 2;
        } else {
            traces.push_back(a);
        }
    }
    if (traces.empty()) {
        log.error("no trace given (see profpack --help)");
        return 2;
    }
    if (!output.empty() && traces.size() > 1) {
        log.error("--output takes one trace only");
        return 2;
    }
    prof::pack::remove_partial_pack_on_signals();
    int status = 0;
    for (const std::string& trace : traces) {
        const std::string& out = output.empty() ? trace : output;
        try {
            {
                prof::reader::TraceReader header(trace);
                if (header.info().header.flags & prof::format::kFilePacked) {
                    if (!output.empty())
                        throw std::runtime_error(trace + ": already packed");
                    if (!quiet) log.info(fmt::format("{}: already packed, left as it is", trace));
                    continue;
                }
            }
            struct stat st;
            if (!output.empty() && !force && stat(out.c_str(), &st) == 0 && !same_file(out, trace))
                throw std::runtime_error(out + ": exists (--force replaces it)");
            // In place, the packed file takes the trace's name: its other names (hard links)
            // keep the trace as written.
            if (output.empty() && stat(trace.c_str(), &st) == 0 && st.st_nlink > 1)
                log.warn(fmt::format("{} has {} other hard link{} the trace as written", trace,
                                     st.st_nlink - 1,
                                     st.st_nlink > 2 ? "s, which keep" : ", which keeps"));
            prof::pack::PackResult r = prof::pack::pack_trace(trace, out, options);
            if (quiet) continue;
            std::string memory =
                r.memory_records
                    ? fmt::format(", {} memory records ({} releases of another thread's block), "
                                  "their times to {:.2f} us",
                                  r.memory_records, r.remote_frees, r.time_unit_seconds * 1e6)
                    : std::string();
            log.info(fmt::format("{}: {} -> {} ({:.1f}x smaller), {} chunks{}", out,
                                 bytes(r.bytes_in), bytes(r.bytes_out),
                                 r.bytes_out ? double(r.bytes_in) / double(r.bytes_out) : 0.0,
                                 r.chunks, memory));
        } catch (const std::exception& e) {
            log.error(e.what());
            status = 1;
        }
    }
    return status;
}
