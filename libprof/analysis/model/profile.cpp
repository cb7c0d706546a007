// The profile model's helpers: naming a trace's functions (FunctionResolver), thread
// summaries, labels and matching. The numbers come from the replay engine (engine/session.cpp).
#include "analysis/model/profile.hpp"

#include "reader/dwarf_lines.hpp"
#include "reader/elf_symbols.hpp"
#include "text/pattern.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace prof::analysis {

// Resolution of addresses to functions, per trace, with a cache of ELF files on disk.
struct FunctionResolver::Impl {
    std::map<std::string, std::unique_ptr<reader::ElfSymbols>> elf_cache;
    std::map<std::string, std::unique_ptr<reader::DwarfLines>> line_cache;
    // The functions inlined at an address of an object, by (path, address in the file).
    std::map<std::pair<std::string, uint64_t>, std::vector<reader::DwarfLines::InlinedCall>>
        inlined_cache;

    reader::DwarfLines& lines_of(const std::string& path) {
        auto& lines = line_cache[path];
        if (!lines) lines = std::make_unique<reader::DwarfLines>(path);
        return *lines;
    }

    Function describe(const reader::TraceInfo& info, uint64_t address, size_t module) {
        Function f;
        f.address = address;
        if (auto site = info.sites.find(address); site != info.sites.end()) {
            const reader::Site& s = site->second;
            f.file = s.file;
            f.line = s.line;
            f.context = function_display_name(s.function);
            switch (s.kind) {
            case format::SiteKind::kFunction:
                f.kind = "marked function";
                f.name = f.context;
                break;
            case format::SiteKind::kRegion: f.kind = "region"; break;
            default: f.kind = "scope"; break;
            }
            if (f.name.empty()) f.name = s.label.empty() ? f.context : s.label;
            return f;
        }
        const reader::Module* m =
            module < info.modules.size() ? &info.modules[module] : info.module_at(address);
        if (m) f.module = m->path;
        const reader::Symbol* sym = info.symbol_at(address, module);
        if (sym && !sym->name.empty()) {
            f.name = sym->name;
            f.symbol = sym->symbol;
            f.file = sym->file;
            f.line = sym->line;
        }
        if (m && (f.name.empty() || f.symbol.empty())) {
            auto& elf = elf_cache[m->path];
            if (!elf) elf = std::make_unique<reader::ElfSymbols>(m->path);
            bool same_build = m->build_id.empty() || elf->build_id().empty() ||
                              elf->build_id() == m->build_id;
            if (elf->ok() && same_build)
                if (const std::string* sym = elf->lookup(address - m->base)) {
                    if (f.symbol.empty()) f.symbol = *sym;
                    if (f.name.empty()) f.name = reader::demangle(*sym);
                }
            // And the source position from the file's DWARF, as the runtime would have given;
            // a function still unnamed (a local symbol of a stripped object) from the symbol
            // table libdwfl finds, the separate debug file's included.
            if (elf->ok() && same_build && (f.file.empty() || f.name.empty())) {
                reader::DwarfLines* lines = &lines_of(m->path);
                uint32_t line = 0;
                if (f.file.empty() && lines->lookup(address - m->base, f.file, line)) f.line = line;
                std::string raw;
                if (f.name.empty() && lines->function(address - m->base, raw)) {
                    if (f.symbol.empty()) f.symbol = raw;
                    f.name = reader::demangle(raw);
                }
            }
        }
        if (f.name.empty())
            f.name = m ? fmt::format("0x{:x}", address - m->base) : fmt::format("0x{:x}", address);
        // The symbol table's name is demangled with parameters; keep `symbol` the raw one.
        if (f.symbol.empty() && sym) f.symbol = sym->symbol;
        return f;
    }

    std::vector<Frame> describe_frames(const reader::TraceInfo& info, uint64_t address,
                                       size_t module) {
        std::vector<Frame> frames{Frame{describe(info, address, module), false}};
        Function& physical = frames.front().function;
        if (physical.kind != "function") return frames; // a marked site is its own frame
        // The calls inlined at the address, outermost first, as (function, caller's line).
        struct Inlined {
            Function function;
            std::string call_file;
            uint32_t call_line;
        };
        std::vector<Inlined> calls;
        std::string file = physical.file; // the address's own position
        uint32_t line = physical.line;
        if (auto loc = info.locations.find(address); loc != info.locations.end()) {
            file = loc->second.file;
            line = loc->second.line;
            for (const reader::InlinedCall& c : loc->second.inlined)
                calls.push_back(
                    {describe(info, c.function, reader::kNoModule), c.call_file, c.call_line});
        } else if (const reader::Module* m = module < info.modules.size()
                                                 ? &info.modules[module]
                                                 : info.module_at(address)) {
            auto& elf = elf_cache[m->path];
            if (!elf) elf = std::make_unique<reader::ElfSymbols>(m->path);
            if (!elf->ok() || (!m->build_id.empty() && !elf->build_id().empty() &&
                               elf->build_id() != m->build_id))
                return frames; // another build at that path: its DWARF is not this code's
            auto key = std::make_pair(m->path, address - m->base);
            auto it = inlined_cache.find(key);
            if (it == inlined_cache.end())
                it = inlined_cache.emplace(key, lines_of(m->path).inlined(key.second)).first;
            for (const reader::DwarfLines::InlinedCall& c : it->second) {
                Function f;
                f.symbol = c.symbol;
                f.name = reader::demangle(c.symbol);
                f.module = m->path;
                f.address = address;
                calls.push_back({std::move(f), c.call_file, c.call_line});
            }
        }
        if (calls.empty()) return frames;
        // The address's own position is the innermost function's; each function is at the
        // line of its caller where the next one in was inlined.
        std::vector<Frame> out;
        for (size_t i = calls.size(); i-- > 0;) {
            Function f = std::move(calls[i].function);
            f.file = file;
            f.line = line;
            out.push_back(Frame{std::move(f), true});
            file = calls[i].call_file;
            line = calls[i].call_line;
        }
        physical.file = file;
        physical.line = line;
        out.push_back(std::move(frames.front()));
        return out;
    }
};

FunctionResolver::FunctionResolver() : impl_(std::make_unique<Impl>()) {}
FunctionResolver::~FunctionResolver() = default;
Function FunctionResolver::describe(const reader::TraceInfo& info, uint64_t address,
                                    size_t module) {
    return impl_->describe(info, address, module);
}
std::vector<FunctionResolver::Frame>
FunctionResolver::describe_frames(const reader::TraceInfo& info, uint64_t address, size_t module) {
    return impl_->describe_frames(info, address, module);
}

ThreadSummary summarize_thread(const reader::TraceInfo& info, size_t trace, uint32_t stream) {
    ThreadSummary ts;
    ts.trace = trace;
    ts.stream = stream;
    if (auto it = info.threads.find(stream); it != info.threads.end()) {
        double tps = info.ticks_per_second > 0 ? info.ticks_per_second : 1e9;
        ts.tid = it->second.tid;
        ts.name = it->second.name;
        ts.events = it->second.events;
        ts.dropped = it->second.dropped;
        ts.abandoned = it->second.abandoned;
        ts.seconds = (it->second.last_ticks - it->second.first_ticks) / tps;
    }
    return ts;
}

double TimeBasis::points_at_10() const {
    return samples ? 100 * 1.96 * std::sqrt(0.1 * 0.9 / double(samples)) : 0;
}

void Profile::recount() {
    total_calls = primitive_calls = 0;
    total_time = 0;
    for (const Function& f : functions) {
        total_calls += f.stats.ncalls;
        primitive_calls += f.stats.pcalls;
        total_time += f.stats.tottime;
    }
}

std::string function_display_name(const std::string& pretty) {
    // The parameter list is the first '(' outside template brackets that follows a name;
    // the name starts after the last space outside brackets before it.
    int angle = 0;
    size_t open = std::string::npos;
    for (size_t i = 0; i < pretty.size(); ++i) {
        char c = pretty[i];
        if (c == '<') ++angle;
        else if (c == '>' && angle > 0) --angle;
        else if (c == '(' && angle == 0) {
            // "operator()" is a name, not a parameter list.
            if (i >= 8 && pretty.compare(i - 8, 8, "operator") == 0) {
                ++i;
                continue;
            }
            open = i;
            break;
        }
    }
    if (open == std::string::npos) return pretty;
    size_t start = 0;
    angle = 0;
    for (size_t i = open; i-- > 0;) {
        char c = pretty[i];
        if (c == '>') ++angle;
        else if (c == '<' && angle > 0) --angle;
        else if (c == ' ' && angle == 0) {
            start = i + 1;
            break;
        }
    }
    return pretty.substr(start);
}

std::string label(const Function& f, bool full_paths) {
    auto base = [&](const std::string& path) {
        if (full_paths) return path;
        size_t slash = path.rfind('/');
        return slash == std::string::npos ? path : path.substr(slash + 1);
    };
    std::string file = f.file.empty() ? base(f.module.empty() ? std::string("~") : f.module)
                                      : base(f.file);
    return fmt::format("{}:{}({})", file, f.line, f.name);
}

std::vector<size_t> Profile::match(const std::string& regex) const {
    text::Pattern re(regex);
    std::vector<size_t> out;
    for (size_t i = 0; i < functions.size(); ++i)
        if (re.search(label(functions[i], true))) out.push_back(i);
    return out;
}

CostlyHooks costly_hooks(const Profile& p) {
    CostlyHooks c;
    const TimeBasis& t = p.time;
    if (!t.sampled_traces || !t.all_calls_counted() || !p.total_calls) return c;
    c.own_seconds = t.own_seconds;
    c.program_seconds = t.cpu_seconds - t.own_seconds;
    c.hook_seconds_per_call = t.own_seconds / double(p.total_calls);
    if (c.own_seconds <= 0 || c.own_seconds < c.program_seconds) return c;
    std::vector<size_t> tiny;
    for (size_t i = 0; i < p.functions.size(); ++i) {
        const Function& f = p.functions[i];
        if (f.kind == "function" && f.stats.ncalls * 100 >= p.total_calls &&
            f.stats.tottime < c.hook_seconds_per_call * double(f.stats.ncalls))
            tiny.push_back(i);
    }
    std::stable_sort(tiny.begin(), tiny.end(), [&](size_t a, size_t b) {
        return p.functions[a].stats.ncalls > p.functions[b].stats.ncalls;
    });
    if (tiny.size() > 20) tiny.resize(20);
    uint64_t calls = 0;
    for (size_t i : tiny) calls += p.functions[i].stats.ncalls;
    c.functions = std::move(tiny);
    c.calls_share = double(calls) / double(p.total_calls);
    return c;
}

UncertainTimes uncertain_times(const Profile& p) {
    UncertainTimes u;
    for (const reader::TraceInfo& info : p.traces)
        if (info.ticks_per_second > 0)
            u.clock_read_seconds =
                std::max(u.clock_read_seconds, info.line_overhead / info.ticks_per_second);
    bool measured = p.time.traced_traces || p.time.measured_run_threads;
    if (measured && p.compensated && u.clock_read_seconds > 0 && p.total_time > 0) {
        for (size_t i = 0; i < p.functions.size(); ++i) {
            const Function& f = p.functions[i];
            if ((f.kind == "scope" || f.kind == "marked function") && f.stats.ncalls &&
                f.stats.cumtime >= 0.01 * p.total_time &&
                f.stats.cumtime < 10 * u.clock_read_seconds * double(f.stats.ncalls))
                u.marked.push_back(i);
        }
        std::sort(u.marked.begin(), u.marked.end(), [&](size_t a, size_t b) {
            return p.functions[a].stats.cumtime > p.functions[b].stats.cumtime;
        });
    }
    const TimeBasis& t = p.time;
    if (p.compensated && t.traced_raw_seconds > 0 && t.traced_calls &&
        t.traced_removed_seconds >= 0.5 * t.traced_raw_seconds) {
        u.traced_cost_share = t.traced_removed_seconds / t.traced_raw_seconds;
        u.traced_cost_per_call = t.traced_removed_seconds / double(t.traced_calls);
    }
    uint64_t seen = t.samples + t.marker_samples;
    if (t.sampled_traces && t.marker_samples && 2 * t.marker_samples >= seen) {
        u.marker_share = double(t.marker_samples) / double(seen);
        std::set<std::string> names;
        for (const reader::TraceInfo& info : p.traces)
            for (const auto& [address, site] : info.sites)
                if (site.kind == format::SiteKind::kLine || site.kind == format::SiteKind::kScope)
                    names.insert(function_display_name(site.function));
        u.marker_functions.assign(names.begin(), names.end());
    }
    if (!t.sampled_traces || !t.all_calls_counted() || !p.total_calls || t.own_seconds <= 0 ||
        p.total_time <= 0)
        return u;
    u.hook_seconds_per_call = t.own_seconds / double(p.total_calls);
    auto large = [&](size_t i) { return p.functions[i].stats.tottime >= 0.01 * p.total_time; };
    std::vector<bool> uncertain(p.functions.size(), false);
    for (size_t i = 0; i < p.functions.size(); ++i) {
        const Function& f = p.functions[i];
        if (f.kind != "function" || !f.stats.ncalls || !large(i)) continue;
        if (f.stats.tottime / double(f.stats.ncalls) < u.hook_seconds_per_call) {
            uncertain[i] = true;
            u.functions.push_back(i);
        }
    }
    std::vector<bool> caller(p.functions.size(), false);
    for (const Edge& e : p.edges)
        if (e.caller != kRoot && uncertain[e.callee] && !uncertain[e.caller] && large(e.caller) &&
            !caller[e.caller]) {
            caller[e.caller] = true;
            u.callers.push_back(e.caller);
        }
    auto by_time = [&](size_t a, size_t b) {
        return p.functions[a].stats.tottime > p.functions[b].stats.tottime;
    };
    std::sort(u.functions.begin(), u.functions.end(), by_time);
    std::sort(u.callers.begin(), u.callers.end(), by_time);
    return u;
}

} // namespace prof::analysis
