// The samples of a running process counted as they come: see live_profile.hpp.
#include "sampling/live_profile.hpp"

#include <fmt/format.h>

#include <fstream>
#include <set>

namespace prof::sampling {
namespace {

std::string base_name(const std::string& path) {
    size_t s = path.rfind('/');
    return s == std::string::npos ? path : path.substr(s + 1);
}

// What a frame counts as: its function, or its module where no symbol names it.
std::pair<std::string, std::string> label(const NamedFrame& f) {
    if (!f.function.empty())
        return {f.function, f.file.empty() ? base_name(f.module) : base_name(f.file)};
    std::string module = f.module.empty() ? "unknown" : base_name(f.module);
    return {module.front() == '[' ? module : "[" + module + "]", module}; // [vdso] stays so
}

void add(LiveCounts& c, const std::vector<NamedFrame>& frames, uint64_t ns) {
    ++c.samples;
    c.ns += ns;
    std::set<std::string> seen;
    for (size_t i = 0; i < frames.size(); ++i) {
        auto [name, where] = label(frames[i]);
        if (!seen.insert(name).second) continue; // recursion: once per stack
        LiveFunction& f = c.functions[name];
        if (f.name.empty()) {
            f.name = name;
            f.where = where;
        }
        f.total_ns += ns;
        if (i == 0) f.self_ns += ns;
    }
}

} // namespace

LiveProfile::LiveProfile(pid_t pid) : pid_(pid), stacks_(pid, true) {}

void LiveProfile::on_sample(const Sample& s) {
    if (pid_t(s.pid) != pid_ || s.switch_out) return;
    if (maps_stale_) {
        stacks_.reload_maps();
        maps_stale_ = false;
    }
    StackCopy c;
    c.ip = s.ip;
    c.sp = s.sp;
    c.bp = s.bp;
    c.bp_known = s.regs;
    c.stack = s.stack;
    c.size = s.regs ? size_t(s.stack_size) : 0;
    c.chain = s.chain;
    c.chain_size = s.chain_size;
    if (!s.regs && s.chain_size) c.ip = s.chain[0];
    std::string end;
    bool complete = false;
    std::vector<NamedFrame> frames = stacks_.frames(stacks_.unwind(c, end, complete));
    add(interval_, frames, s.period_ns);
    add(cumulative_, frames, s.period_ns);
}

std::vector<LiveThread> LiveProfile::threads() const {
    std::vector<LiveThread> out;
    for (pid_t tid : threads_of(pid_)) {
        LiveThread t;
        t.tid = tid;
        std::ifstream comm(fmt::format("/proc/{}/task/{}/comm", pid_, tid));
        std::getline(comm, t.name);
        std::ifstream schedstat(fmt::format("/proc/{}/task/{}/schedstat", pid_, tid));
        schedstat >> t.cpu_ns;
        out.push_back(std::move(t));
    }
    return out;
}

} // namespace prof::sampling
