// profpack: rewrites finished traces in the packed form (format 2.x), which profreport reads
// like any other.
#include "common/cli.hpp"
#include "common/tool_log.hpp"
#include "pack/trace_packer.hpp"
#include "reader/trace_reader.hpp"
#include "text/text.hpp"

#include <prof/trace_format.hpp>

#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

// The first words of the help name the packed format's version from the format header, the
// one source of every version shown.
constexpr const char* kDescription =
    R"(Rewrites each finished trace in the packed form (trace format {}.{}): its chunks compressed
with zstd, and the memory profiler's records as references to blocks (no pointers), their
times kept to the largest power of two of clock ticks not above 4 us. Calls, scopes and lines
keep their exact times, and profreport reads from the packed file what it read from the
trace, except that allocations and releases of a block its own thread allocated happen up
to 4 us earlier (the peak heap of a multi-threaded program can move by the blocks of such a
moment). A trace whose process did not finish stays as it is (its crash-safe form is the
record of what happened); a trace packed already is left alone. profrun --pack packs its
traces after the run.)";

struct Options {
    std::vector<std::string> traces;
    std::string output;
    bool force = false, quiet = false;
    prof::pack::PackOptions pack;
};

// "1" to "19", in decimal ("09" is 9; CLI11 alone would read it as octal); rewritten to its
// plain form for the conversion.
std::string check_level(std::string& v) {
    char* end = nullptr;
    long level = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || !std::isdigit(static_cast<unsigned char>(v[0])) || *end || level < 1 ||
        level > 19)
        return "expected a number from 1 to 19, not '" + v + "'";
    v = std::to_string(level);
    return {};
}

void declare(prof::tools::Cli& cli, Options& o) {
    CLI::App& app = cli.app();
    cli.help_column(24);
    app.add_option("-o,--output", o.output,
                   "write the packed trace to FILE (one TRACE only) instead of replacing\n"
                   "TRACE once the packed file is complete; an existing FILE is kept\n"
                   "unless --force")
        ->type_name("FILE");
    app.add_flag("-f,--force", o.force, "replace an existing FILE");
    app.add_option("-l,--level", o.pack.level,
                   "zstd level, 1 (fastest) to 19 (smallest); default 9")
        ->type_name("N")
        ->transform(CLI::Validator(check_level, ""));
    app.add_flag("--exact-times", o.pack.exact_times,
                 "keep the times of memory records to the clock tick");
    app.add_flag("-q,--quiet", o.quiet, "no message per trace");
    cli.required(app.add_option("TRACE", o.traces, "the traces to pack"),
                 "no trace given (see profpack --help)");
}

// Whether two paths name the same file.
bool same_file(const std::string& a, const std::string& b) {
    struct stat sa, sb;
    return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

std::string summary(const std::string& out, const prof::pack::PackResult& r) {
    using prof::text::format_bytes;
    std::string memory =
        r.memory_records
            ? fmt::format(", {} memory records ({} releases of another thread's block), "
                          "their times to {:.2f} us",
                          r.memory_records, r.remote_frees, r.time_unit_seconds * 1e6)
            : std::string();
    return fmt::format("{}: {} -> {} ({:.1f}x smaller), {} chunks{}", out,
                       format_bytes(double(r.bytes_in)), format_bytes(double(r.bytes_out)),
                       r.bytes_out ? double(r.bytes_in) / double(r.bytes_out) : 0.0, r.chunks,
                       memory);
}

// Packs one trace to `o.output` or in place; throws with the message for the user.
void pack_one(const std::string& trace, const Options& o, const prof::tools::ToolLog& log) {
    const std::string& out = o.output.empty() ? trace : o.output;
    {
        prof::reader::TraceReader header(trace);
        if (header.info().header.flags & prof::format::kFilePacked) {
            if (!o.output.empty()) throw std::runtime_error(trace + ": already packed");
            if (!o.quiet) log.info(fmt::format("{}: already packed, left as it is", trace));
            return;
        }
    }
    struct stat st;
    if (!o.output.empty() && !o.force && stat(out.c_str(), &st) == 0 && !same_file(out, trace))
        throw std::runtime_error(out + ": exists (--force replaces it)");
    // In place, the packed file takes the trace's name: its other names (hard links) keep the
    // trace as written.
    if (o.output.empty() && stat(trace.c_str(), &st) == 0 && st.st_nlink > 1)
        log.warn(fmt::format("{} has {} other hard link{} the trace as written", trace,
                             st.st_nlink - 1, st.st_nlink > 2 ? "s, which keep" : ", which keeps"));
    prof::pack::PackResult r = prof::pack::pack_trace(trace, out, o.pack);
    if (!o.quiet) log.info(summary(out, r));
}

} // namespace

int main(int argc, char** argv) {
    prof::tools::Cli cli("profpack", "[options] TRACE...",
                         fmt::format(kDescription, prof::format::kPackedMajor,
                                     prof::format::kPackedMinor));
    Options o;
    declare(cli, o);
    if (auto status = cli.parse(argc, argv)) return *status;
    if (!o.output.empty() && o.traces.size() > 1)
        return cli.usage_error("--output takes one trace only");
    prof::pack::remove_partial_pack_on_signals();
    int status = 0;
    for (const std::string& trace : o.traces) {
        try {
            pack_one(trace, o, cli.log());
        } catch (const std::exception& e) {
            cli.log().error(e.what());
            status = 1;
        }
    }
    return status;
}
