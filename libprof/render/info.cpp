// The report's notes on the traces themselves: --info, no marked lines, source directories.
#include "render/info.hpp"
#include "render/model.hpp"

#include "reader/trace_reader.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

namespace prof::render {

void print_info(std::FILE* out, const Profile& p) {
    for (const reader::TraceInfo& t : p.traces) {
        auto meta = [&](const char* k) {
            auto it = t.meta.find(k);
            return it == t.meta.end() ? std::string("?") : text::printable(it->second);
        };
        fmt::print(out, "trace:     {}\n", text::printable(t.path));
        if (t.header.flags & format::kFilePacked)
            fmt::print(out,
                       "format:    {}.{} packed ({} bytes, {} chunks of up to {} KiB; memory "
                       "times to {:.2f} us)\n",
                       t.header.major, t.header.minor, t.bytes, t.chunks,
                       t.header.chunk_size / 1024,
                       t.seconds(uint64_t(1) << t.header.memory_time_shift) * 1e6);
        else
            fmt::print(out, "format:    {}.{}  ({} bytes, {} chunks of {} KiB)\n", t.header.major,
                       t.header.minor, t.bytes, t.chunks, t.header.chunk_size / 1024);
        fmt::print(out, "process:   pid {} (parent {})  {}\n", t.header.pid, t.header.ppid,
                   meta("cmdline"));
        fmt::print(out, "clock:     {} at {:.6f} GHz\n",
                   t.header.clock_kind == uint32_t(format::ClockKind::kTsc) ? "tsc" : "monotonic",
                   t.ticks_per_second / 1e9);
        fmt::print(out, "state:     {}\n",
                   t.incomplete ? "incomplete: " + t.incomplete_reason : "complete");
        if (t.meta.count("sampler"))
            fmt::print(out,
                       "sampled:   from outside ({}, {}) at {} Hz, {} bytes of stack per sample, "
                       "{}{}; no calls counted\n",
                       meta("sampler"), meta("sampled"), meta("sample_hz"),
                       meta("sample_stack_bytes"),
                       meta("sample_kernel") == "1" ? "user and system time" : "user time only",
                       t.meta.count("lost_samples") ? ", " + meta("lost_samples") + " samples lost"
                                                    : std::string());
        if (t.meta.count("sample_idle"))
            fmt::print(out, "idle:      {:.3f} s off CPU in {} stretches, stacks {}{}\n",
                       double(t.off_cpu_ns) / 1e9, t.off_cpu_records,
                       meta("sample_idle") == "switch"
                           ? "from the context switches"
                           : "read from /proc while the threads waited (the context switches' "
                             "need root or kernel.perf_event_paranoid <= 1)",
                       t.meta.count("off_cpu_approximate_ns")
                           ? fmt::format("; {:.3f} s at the last CPU sample's stack",
                                         std::strtod(meta("off_cpu_approximate_ns").c_str(),
                                                     nullptr) / 1e9)
                           : std::string());
        if (t.meta.count("line_clock_every"))
            fmt::print(out,
                       "lines:     the clock read around one in {} executions of a short "
                       "PROF_LINE or of a scope's run, its time counted for the others\n",
                       meta("line_clock_every"));
        fmt::print(out, "symbols:   {}   modules: {}\n", t.symbols.size(), t.modules.size());
        for (const auto& [stream, th] : t.threads)
            fmt::print(out, "thread:    {} tid {} '{}' {}{}{}\n", stream, th.tid,
                       text::printable(th.name),
                       // A thread sampled from outside has samples and no events.
                       th.events || (!th.samples && !t.meta.count("sampler"))
                           ? fmt::format("{} events{}{}", th.events,
                                         th.counting ? " (calls counted in its call tree)" : "",
                                         th.samples ? fmt::format(", {} samples", th.samples) : "")
                           : fmt::format("{} samples", th.samples),
                       th.dropped ? fmt::format(", {} dropped", th.dropped) : "",
                       th.abandoned ? fmt::format(", {} frames abandoned", th.abandoned) : "");
        for (const reader::Module& m : t.modules)
            fmt::print(out, "module:    {:#x}-{:#x} {} {}{}\n", m.start, m.end,
                       text::printable(m.path), m.build_id,
                       m.unload_ticks == UINT64_MAX
                           ? ""
                           : fmt::format("  unloaded at {:.6f} s",
                                         t.seconds(m.unload_ticks - t.header.start_ticks)));
        fmt::print(out, "\n");
    }
}

// "No marked lines" unless the counts may have been lost: before format 1.3 they were written
// when each thread ended, so a process that did not finish (killed, crashed) left none; since,
// only the hits that sample the resident set size are.
std::string no_lines_text(const Profile& p) {
    for (const reader::TraceInfo& t : p.traces)
        if (t.meta.count("sampler"))
            return "No source lines: the sampled code has no line information (build it with -g, "
                   "or install its debug files under /usr/lib/debug).";
    for (const reader::TraceInfo& t : p.traces) {
        if (t.finished && !t.incomplete) continue;
        if (t.header.major == 1 && t.header.minor < 3)
            return fmt::format(
                "No line counts in this trace: they are written when each thread ends, and {} "
                "is incomplete ({}).",
                text::printable(t.path), t.incomplete_reason);
        return fmt::format("No marked lines in this trace. {} is incomplete ({}): the counts of "
                           "lines that sample the resident set size (PROF_LINE_RSS=1, the "
                           "memory profiler) are written when each thread ends.",
                           text::printable(t.path), t.incomplete_reason);
    }
    return "No marked lines in this trace: mark code with PROF_LINE, PROF_SCOPE or "
           "PROF_FUNCTION (see <prof/prof.hpp>).";
}

std::vector<std::string> source_dirs(const Profile& p, std::vector<std::string> given) {
    for (const reader::TraceInfo& t : p.traces)
        if (auto cwd = t.meta.find("cwd"); cwd != t.meta.end()) given.push_back(cwd->second);
    return given;
}

} // namespace prof::render
