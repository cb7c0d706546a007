// profrun --pid PID --dump: see dump.hpp; the dump itself is sampling/stack_dump.hpp's.
#include "profrun/dump.hpp"

#include "profrun/sampled.hpp"
#include "sampling/stack_dump.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace prof::tools {
namespace {

using sampling::DumpFrame;
using sampling::DumpThread;
using sampling::ProcessDump;

std::string basename_of(const std::string& p) {
    size_t s = p.rfind('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

// "running", "sleeping in read", "blocked in fsync", ...
std::string doing(const DumpThread& t) {
    std::string s = sampling::state_name(t.state);
    if (t.syscall >= 0) s += " in " + sampling::syscall_name(t.syscall);
    return s;
}

// A frame as gdb and py-spy print it: function (file:line), [inlined] after an inlined one;
// the module for code outside the program; module+offset where no symbol names the address.
std::string frame_text(const DumpFrame& f, const std::string& exe) {
    using text::printable;
    std::string module = basename_of(f.module);
    std::string s;
    if (f.function.empty())
        s = f.module.empty() ? fmt::format("0x{:x}", f.address)
                             : fmt::format("0x{:x} ({}+0x{:x})", f.address, printable(module),
                                           f.offset);
    else if (!f.file.empty())
        s = fmt::format("{} ({}:{})", printable(f.function), printable(basename_of(f.file)),
                        f.line);
    else
        s = fmt::format("{} ({})", printable(f.function), printable(module));
    if (f.inlined) s += " [inlined]";
    if (!f.function.empty() && !f.file.empty() && f.module != exe && !module.empty())
        s += fmt::format(" in {}", printable(module));
    return s;
}

void print_text(const ProcessDump& d) {
    using text::printable;
    std::string out = fmt::format("Process {}: {}\n", d.pid, printable(d.cmdline));
    if (!d.exe.empty()) out += fmt::format("Program: {}\n", printable(d.exe));
    for (const DumpThread& t : d.threads) {
        out += fmt::format("\nThread {} ({}): \"{}\"\n", t.tid, doing(t), printable(t.name));
        if (!t.error.empty()) out += fmt::format("    (no stack: {})\n", t.error);
        for (const DumpFrame& f : t.frames) out += "    " + frame_text(f, d.exe) + "\n";
        if (!t.stack_end.empty() && t.error.empty())
            out += fmt::format("    (the stack ends here: {})\n", t.stack_end);
    }
    std::fputs(out.c_str(), stdout);
}

void print_json(const ProcessDump& d) {
    using text::json_quoted;
    std::string out = fmt::format("{{\"pid\": {}, \"exe\": {}, \"cmdline\": {}, \"seconds\": {:.6f}, "
                                  "\"threads\": [",
                                  d.pid, json_quoted(d.exe), json_quoted(d.cmdline),
                                  double(d.elapsed_ns) / 1e9);
    for (size_t i = 0; i < d.threads.size(); ++i) {
        const DumpThread& t = d.threads[i];
        out += fmt::format(
            "{}\n  {{\"tid\": {}, \"name\": {}, \"state\": {}, \"syscall\": {}, \"stopped\": {}, "
            "\"stop_seconds\": {:.6f}, \"held_seconds\": {:.6f}, \"syscall_restarted\": {}, \"stack_end\": {}, \"error\": {}, "
            "\"frames\": [",
            i ? "," : "", t.tid, json_quoted(t.name), json_quoted(sampling::state_name(t.state)),
            t.syscall >= 0 ? json_quoted(sampling::syscall_name(t.syscall)) : "null",
            t.stopped ? "true" : "false", double(t.stop_ns) / 1e9, double(t.held_ns) / 1e9,
            t.syscall_restarted ? "true" : "false",
            t.stack_end.empty() ? "null" : json_quoted(t.stack_end),
            t.error.empty() ? "null" : json_quoted(t.error));
        for (size_t k = 0; k < t.frames.size(); ++k) {
            const DumpFrame& f = t.frames[k];
            out += fmt::format("{}\n    {{\"address\": \"0x{:x}\", \"module\": {}, \"offset\": "
                               "\"0x{:x}\", \"function\": {}, \"file\": {}, \"line\": {}, "
                               "\"inlined\": {}}}",
                               k ? "," : "", f.address,
                               f.module.empty() ? "null" : json_quoted(f.module), f.offset,
                               f.function.empty() ? "null" : json_quoted(f.function),
                               f.file.empty() ? "null" : json_quoted(f.file),
                               f.line ? std::to_string(f.line) : "null",
                               f.inlined ? "true" : "false");
        }
        out += t.frames.empty() ? "]}" : "\n  ]}";
    }
    out += "\n]}\n";
    std::fputs(out.c_str(), stdout);
}

} // namespace

int dump_stacks(pid_t pid, const std::string& format, const ToolLog& log) {
    if (auto why = check_attachable(pid)) {
        log.error(fmt::format("cannot dump: {}", *why));
        return 1;
    }
    ProcessDump d;
    std::string error;
    sampling::DumpOptions options;
    if (!sampling::dump_process(pid, options, d, error)) {
        log.error(fmt::format("cannot dump process {}: {}", pid, error));
        return 1;
    }
    if (format == "json")
        print_json(d);
    else
        print_text(d);
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        log.error("cannot write the dump to standard output");
        return 1;
    }
    return 0;
}

} // namespace prof::tools
