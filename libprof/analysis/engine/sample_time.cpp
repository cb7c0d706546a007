// The sample time room (sample_time.hpp): samples, counting threads' charges, spans off CPU
// and how each trace is timed.
#include "analysis/engine/sample_time.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

namespace prof::analysis::engine {

// A sample's CPU time to the node open where it was taken; one that names the instruction
// it interrupted waits for the end of the trace (place_samples).
void SampleTime::charge(ThreadReplay& t, uint32_t node, const reader::SampleRecord& r,
                        int64_t units, int64_t credit) {
    if (!r.ip) {
        give(t, node, units);
        count_samples(t, node, r.count);
        return;
    }
    t.placed.push_back(PlacedSample{node, r.ip, units, r.count, credit});
}
// The symbol table of the object on disk at a module's path, if it is the module's build.
const reader::ElfSymbols* SampleTime::symbols_of(const reader::Module& mod) {
    auto [it, fresh] = module_symbols.try_emplace(mod.path);
    if (fresh) {
        auto elf = std::make_unique<reader::ElfSymbols>(mod.path);
        // Another build at the same path is no help (the names would lie too).
        if (elf->ok() && (mod.build_id.empty() || elf->build_id() == mod.build_id))
            it->second = std::move(elf);
    }
    return it->second.get();
}
const reader::HookCode* SampleTime::hook_code_of(const reader::Module& mod) {
    auto [it, fresh] = module_hook_code.try_emplace(mod.path);
    if (fresh)
        if (const reader::ElfSymbols* elf = symbols_of(mod))
            it->second = std::make_unique<reader::HookCode>(mod.path, *elf);
    return it->second.get();
}
// A demangled name without its parameter list (and what follows it: " const").
static std::string without_parameters(const std::string& name) {
    size_t close = name.rfind(')');
    if (close == std::string::npos) return name;
    int depth = 0;
    for (size_t i = close + 1; i-- > 0;) {
        if (name[i] == ')') ++depth;
        if (name[i] == '(' && --depth == 0) return name.substr(0, i);
    }
    return name;
}
reader::DwarfLines* SampleTime::dwarf_of(const reader::Module& mod) {
    auto [it, fresh] = module_dwarf.try_emplace(mod.path);
    if (fresh) {
        // The symbol table's check of the build stands for the file's.
        if (symbols_of(mod)) it->second = std::make_unique<reader::DwarfLines>(mod.path);
    }
    return it->second.get();
}
// Whether `file` is one of libprof's public headers, whose inline code in the program is the
// markers' timers (prof/prof.hpp and what it includes).
static bool libprof_header(const std::string& file) {
    for (const char* h : {"/prof/prof.hpp", "/prof/prof_thread.h", "/prof/prof.h"}) {
        size_t n = std::strlen(h);
        if (file.size() >= n && file.compare(file.size() - n, n, h) == 0) return true;
    }
    return false;
}
// Whether two names of a source file are the same file: equal, or one is the other's path
// relative to some directory (__FILE__ as the compiler was given it, DWARF's with its
// directory).
static bool same_source(const std::string& a, const std::string& b) {
    const std::string& longer = a.size() >= b.size() ? a : b;
    const std::string& shorter = a.size() >= b.size() ? b : a;
    if (shorter.empty()) return false;
    size_t at = longer.size() - shorter.size();
    return longer.compare(at, std::string::npos, shorter) == 0 &&
           (at == 0 || longer[at - 1] == '/' || shorter.front() == '/');
}
// Whether code of `file` (its line table's), with `calls` inlined there, is the markers'.
static bool marker_code(const std::string& file,
                        const std::vector<reader::DwarfLines::InlinedCall>& calls) {
    if (libprof_header(file)) return true;
    for (const reader::DwarfLines::InlinedCall& call : calls)
        if (libprof_header(call.decl_file)) return true;
    return false;
}
// Whether the instruction at `vaddr` is code of libprof's headers (the markers' timers).
static bool marker_code(const reader::DwarfLines& dwarf, uint64_t vaddr) {
    std::string file;
    uint32_t line = 0;
    return dwarf.lookup(vaddr, file, line) && marker_code(file, dwarf.inlined(vaddr));
}
// A sample that stands for the instruction at `vaddr`, the markers' code, where only the
// program's branches lead: the branch's address (0 otherwise). After a branch the CPU
// mispredicted (a loop's exit, say), refetching falls on the first instruction there, and the
// samples of that time name the instruction after it: time the unmarked program spends too, on
// its own first instruction after the branch. Every way in must be known and be a branch of
// the program's code on one line (of the same inlined calls): an instruction that code runs on
// into without a branch, or that a jump table, another function or the markers' code leads
// to, keeps its samples the markers'.
uint64_t SampleTime::program_jump_into(const reader::Module& mod,
                                       const reader::ElfSymbols::Entry& fn,
                                       const reader::DwarfLines& dwarf, uint64_t vaddr) {
    auto [it, fresh] = module_flow.try_emplace(mod.path);
    if (fresh)
        if (const reader::ElfSymbols* elf = symbols_of(mod))
            it->second = std::make_unique<reader::CodeFlow>(mod.path, *elf);
    reader::CodeFlow* flow = it->second.get();
    if (!flow) return 0;
    const reader::ElfSymbols::Entry& hot = flow->hot_part(fn); // a cold part's: its function's
    if (!flow->decode(hot)) return 0;
    uint64_t first = flow->instruction_at(vaddr);
    if (!first || first == hot.start) return 0; // a function's start: called from anywhere
    auto in_function = [&](uint64_t a) { return flow->holds(hot, a); };
    reader::CodeFlow::Entry into = flow->entry(first);
    std::vector<uint64_t> ways = into.jumps;
    if (into.previous) {
        if (!into.previous_conditional) return 0; // run into without a branch
        ways.push_back(into.previous);
    }
    if (ways.empty()) return 0;
    std::string file0;
    uint32_t line0 = 0;
    std::vector<reader::DwarfLines::InlinedCall> calls0;
    for (size_t i = 0; i < ways.size(); ++i) {
        uint64_t from = ways[i];
        if (!in_function(from) || marker_code(dwarf, from)) return 0;
        std::string file;
        uint32_t line = 0;
        if (!dwarf.lookup(from, file, line)) return 0;
        std::vector<reader::DwarfLines::InlinedCall> calls = dwarf.inlined(from);
        if (i == 0) {
            file0 = file, line0 = line, calls0 = std::move(calls);
            continue;
        }
        if (file != file0 || line != line0 || calls.size() != calls0.size()) return 0;
        for (size_t k = 0; k < calls.size(); ++k)
            if (calls[k].symbol != calls0[k].symbol || calls[k].call_line != calls0[k].call_line)
                return 0;
    }
    return ways.front();
}
const SampleTime::CodeAt& SampleTime::code_at(uint64_t ip) {
    if (code_fns != fns) { // another trace: other function numbers
        code_fns = fns;
        hooked_by_name.clear();
        code_by_ip.clear();
        line_sites.clear();
        scope_sites = false;
        for (const auto& [address, site] : layout->sites) {
            if (site.kind == format::SiteKind::kLine) line_sites[site.line].push_back(address);
            scope_sites |= site.kind == format::SiteKind::kScope;
        }
    }
    auto [at, fresh] = code_by_ip.try_emplace(ip);
    CodeAt& code = at->second;
    if (!fresh) return code;
    size_t m = layout->module_index_at(ip);
    if (m == reader::kNoModule) return code;
    const reader::Module& mod = layout->modules[m];
    const reader::HookCode* hooks = hook_code_of(mod);
    if (hooks && hooks->holds(ip - mod.base)) {
        code.hook = true;
        return code;
    }
    const reader::ElfSymbols* elf = symbols_of(mod);
    const reader::ElfSymbols::Entry* holding = elf ? elf->find(ip - mod.base) : nullptr;
    if (!holding) return code;
    reader::DwarfLines* dwarf = dwarf_of(mod);
    // A timer interrupt lets the instruction in flight finish and names the one after it: a
    // sample stands for the instruction before the one it names. Where the markers' code and
    // the program's meet (traces with marked sites), a sample goes by that one: named after
    // the markers' code it is the profiler's (unless only branches of the program's lead
    // there: program_jump_into), named at the markers' first instruction it is the
    // program's code before them. Elsewhere the named instruction stands, as perf names it in
    // the unmarked program.
    uint64_t vaddr = ip - mod.base;
    if (dwarf && !layout->sites.empty()) {
        if (marker_code(*dwarf, vaddr - 1)) {
            uint64_t jump = program_jump_into(mod, *holding, *dwarf, vaddr - 1);
            if (!jump) {
                code.marker = true;
                return code;
            }
            vaddr = jump;
        } else if (marker_code(*dwarf, vaddr) && elf->find(vaddr - 1) == holding) {
            --vaddr;
        }
    }
    std::string file;
    uint32_t line = 0;
    if (dwarf && dwarf->lookup(vaddr, file, line)) {
        code.scoped = true;
        auto [names, first] = hooked_by_name.try_emplace(m);
        if (first) {
            for (size_t f = 0; f < fns->address.size(); ++f) {
                uint64_t a = fns->address[f];
                if (fns->module[f] != reader::kNoModule || a < mod.start || a >= mod.end) continue;
                if (const reader::ElfSymbols::Entry* e = elf->find(a - mod.base);
                    e && e->start == a - mod.base) {
                    names->second.emplace(e->name, uint32_t(f));
                    names->second.emplace(without_parameters(reader::demangle(e->name)),
                                          uint32_t(f));
                }
            }
        }
        std::vector<reader::DwarfLines::InlinedCall> calls = dwarf->inlined(vaddr);
        code.marker = marker_code(file, calls);
        if (code.marker) return code;
        for (size_t i = calls.size(); i-- > 0;) {
            auto f = names->second.find(calls[i].symbol);
            if (f != names->second.end()) code.functions.push_back(f->second);
        }
        // The marked lines it is code of: its own line, and the lines the functions inlined
        // there were called from.
        auto add_line = [&](const std::string& in, uint32_t number) {
            auto sites = line_sites.find(number);
            if (sites == line_sites.end()) return;
            for (uint64_t address : sites->second)
                if (same_source(layout->sites.at(address).file, in) &&
                    std::find(code.lines.begin(), code.lines.end(), address) == code.lines.end())
                    code.lines.push_back(address);
        };
        if (!line_sites.empty()) {
            add_line(file, line);
            for (const reader::DwarfLines::InlinedCall& call : calls)
                add_line(call.call_file, call.call_line);
        }
        // The marked scopes whose block holds it: their sites are static variables there.
        if (scope_sites)
            for (uint64_t variable : dwarf->block_statics(vaddr)) {
                uint64_t address = mod.base + variable;
                auto site = layout->sites.find(address);
                if (site == layout->sites.end() || site->second.kind != format::SiteKind::kScope)
                    continue;
                auto f = fns->index.find({address, reader::kNoModule});
                if (f != fns->index.end()) code.scopes.push_back(f->second);
            }
    }
    auto holder = fns->index.find({holding->start + mod.base, reader::kNoModule});
    if (holder != fns->index.end()) code.functions.push_back(holder->second);
    return code;
}
// Where a sample that named its instruction goes. The instruction is code of the functions
// with hooks inlined there, innermost first, then of the one holding it (code_at). The
// nearest of them open on the node's path takes it, through the functions inlined into it
// there (opened as its callees): the node's own code stays; code of an ancestor (GCC keeps
// the hooks of inlined functions, so a tiny inlined callee's frame is open while the code
// the compiler scheduled around its hooks runs, and its spills) goes to that ancestor, as
// perf charges the uninstrumented program's; code of an inlined callee outside its hooks
// goes to that callee. When none is on the path, the instruction is in the prologue or the
// epilogue of a function the node called (before its enter hook ran, or after its exit
// hook): the callee's. Without DWARF for the code, an ancestor's symbol may hold code of a
// function inlined into it, so a function on the path keeps the sample. Code of a function
// without hooks (the C library, an excluded function) stays the node's.
uint32_t SampleTime::place(ThreadReplay& t, uint32_t node, const CodeAt& code) {
    const std::vector<uint32_t>& at = code.functions;
    if (at.empty()) return node;
    size_t nearest = at.size();
    uint32_t open = node;
    for (size_t i = 0; i < at.size() && nearest == at.size(); ++i)
        for (uint32_t n = node; n; n = t.nodes[n].parent)
            if (t.nodes[n].function == at[i]) {
                nearest = i;
                open = n;
                break;
            }
    if (nearest == at.size())
        open = node;
    else if (!code.scoped)
        return node;
    for (size_t i = nearest; i-- > 0;) open = t.child(open, at[i]);
    return open;
}
// The samples that named their instruction, to their nodes. A scope run's samples landed in
// its parent (its records are written after it), and the run kept the time its clock reads
// measured, no better than their cost for a short scope (profile.hpp, UncertainTimes): where
// DWARF finds the blocks of every scope with runs in the thread (a sample landed in each),
// the samples in a block go to its scope instead, and the runs' measured time is taken back.
void SampleTime::place_samples(ThreadReplay& t) {
    bool by_samples = !t.run_given.empty();
    if (by_samples) {
        std::set<uint32_t> found;
        for (const PlacedSample& p : t.placed)
            for (uint32_t f : code_at(p.ip).scopes) found.insert(f);
        for (const auto& [node, units] : t.run_given)
            by_samples &= found.count(t.nodes[node].function) != 0;
    }
    t.runs_measured = !t.run_given.empty() && !by_samples;
    if (by_samples) {
        t.self.resize(t.nodes.size(), 0);
        for (const auto& [node, units] : t.run_given) t.self[node] -= units;
    }
    for (const PlacedSample& p : t.placed) {
        const CodeAt& code = code_at(p.ip);
        int64_t units = p.units + (by_samples ? p.credit : 0);
        if (code.hook || code.marker) { // the profiler's, as a sample inside the hooks is
            t.own += units;
            t.own_samples += p.samples;
            (code.hook ? t.hook_call_samples : t.marker_samples) += p.samples;
            t.samples -= std::min(t.samples, p.samples);
            continue;
        }
        uint32_t node = place(t, p.node, code);
        if (by_samples)
            for (uint32_t scope : code.scopes) { // outermost first: each opens in the one before
                bool open = false;
                for (uint32_t n = node; n && !open; n = t.nodes[n].parent)
                    open = t.nodes[n].function == scope;
                if (!open) node = t.child(node, scope);
            }
        give(t, node, units);
        count_samples(t, node, p.samples);
        for (uint64_t site : code.lines) {
            MarkedLine& l = marked_line_samples[{t.stream, site}];
            l.samples += p.samples;
            l.units += units;
        }
    }
    std::vector<PlacedSample>().swap(t.placed);
}
void SampleTime::sample(ThreadReplay& t, const reader::SampleRecord& r) {
    if (r.at_node) return counted_sample(t, r);
    bool first = !t.sampled;
    if (first) {
        t.sampled = true;
        t.span_ticks = t.first;
    }
    t.samples += r.count;
    t.own_samples += r.own_count;
    int64_t own = cpu_units(r.own_ns);
    t.own += own;
    int64_t cpu = cpu_units_between(r.cpu_ns, t.span_cpu_ns);
    uint32_t node = top(t);
    if (untimed_hooks) {
        count_samples(t, node, r.count); // 1.6: no ip, the node's
        // PROF_TIME=sampled: a record of count 0 after the first is the clocks the hooks
        // read after a switch. The span ends there, and its one interval longer than the
        // hooks' records carry is the one that holds the switch (its time off CPU). A
        // sample weighs all CPU time since the last sample charged.
        if (first || r.count) {
            int64_t weight = cpu_units_between(r.cpu_ns, t.charged_cpu_ns);
            if (!first) {
                t.sampled_cpu += weight;
                give(t, node, weight - own - t.own_waiting - t.scope_credit);
            }
            t.charged_cpu_ns = r.cpu_ns;
            t.own_waiting = 0;
        } else {
            t.own_waiting += own;
        }
        close_span(t, r.ticks, cpu, node);
        t.span_cpu_ns = r.cpu_ns;
        return;
    }
    // A record of count 0 is the clocks read when sampling began (the thread's first) or
    // ended: the first span is not sampled; the last one's CPU time goes to the frame open
    // at the end, or the one closed last.
    if (r.count) {
        t.sampled_cpu += cpu;
        charge(t, node, r, cpu - own - t.scope_credit, t.scope_credit);
        t.last_sample_node = node;
    } else if (!first && !t.spans_closed) {
        // The thread's last clocks (1.11: always written): its CPU time since the last sample
        // goes to the frame open at the end, or where no frame is, to where that sample landed
        // (or the frame closed last).
        uint32_t last = !t.stack.empty()     ? node
                        : t.last_sample_node ? t.last_sample_node
                                             : t.last_top;
        if (t.stack.empty()) node = t.last_top;
        t.sampled_cpu += cpu;
        give(t, last, cpu - own - t.scope_credit);
        t.spans_closed = true;
    }
    close_span(t, r.ticks, cpu, node);
    t.span_cpu_ns = r.cpu_ns;
}
// ---- counting threads (1.9): calls in a call tree, times from the samples alone ------
// Every Sample record of a counting thread carries its clocks and names the node it was
// written in. Between two such records the thread stayed in that node whenever it was off
// CPU (the runtime writes one at the first hook after the thread was descheduled, before
// that hook changes the node), so the wall time between them less their CPU time is that
// node's time off CPU. A sample (count > 0) weighs all CPU time since the last sample
// charged, less the profiler's, and gives it to its node, as the sampling estimator does;
// a record of count 0 charges nothing, its CPU time waits for the next sample.
void SampleTime::counted_sample(ThreadReplay& t, const reader::SampleRecord& r) {
    uint32_t node = tree_node(t, r.node);
    t.clock_node = node;
    if (r.count) t.last_sample_node = node;
    if (!t.sampled) { // a trace whose first record of the thread's clocks is this one
        t.sampled = true;
        t.span_ticks = r.ticks;
        t.span_cpu_ns = t.charged_cpu_ns = r.cpu_ns;
    }
    t.samples += r.count;
    t.own_samples += r.own_count;
    int64_t own = cpu_units(r.own_ns);
    t.own += own;
    int64_t wall = r.ticks > t.span_ticks ? int64_t((r.ticks - t.span_ticks) << kClockFraction) : 0;
    int64_t cpu = cpu_units_between(r.cpu_ns, t.span_cpu_ns);
    // (A CPU clock going back, in a damaged trace: no time off CPU.)
    defer_off(t, node, r.cpu_ns >= t.span_cpu_ns ? wall - cpu : 0);
    settle_off(t);
    if (r.count) {
        int64_t weight = cpu_units_between(r.cpu_ns, t.charged_cpu_ns);
        t.sampled_cpu += weight;
        charge(t, node, r, weight - own - t.own_waiting);
        t.charged_cpu_ns = r.cpu_ns;
        t.own_waiting = 0;
    } else {
        t.own_waiting += own;
    }
    t.span_ticks = std::max(t.span_ticks, r.ticks);
    t.span_cpu_ns = std::max(t.span_cpu_ns, r.cpu_ns);
}
// Ends the span at `ticks`, of which `cpu` was on CPU: its time off CPU goes to its long
// intervals, what they cannot hold to node `rest`.
void SampleTime::close_span(ThreadReplay& t, uint64_t ticks, int64_t cpu, uint32_t rest) {
    int64_t wall = ticks > t.span_ticks ? int64_t((ticks - t.span_ticks) << kClockFraction) : 0;
    int64_t off = wall - cpu;
    // Where the long intervals put it, until the next Waited record says how much of it was
    // spent waiting for a CPU (settle_off).
    if (off > 0) {
        std::vector<LongInterval>& l = t.long_intervals;
        int64_t in_long = 0;
        for (const LongInterval& i : l) in_long += i.length;
        // The short intervals ran on CPU; the CPU time left is spread over the long ones
        // up to a common level.
        int64_t left = std::clamp<int64_t>(cpu - (wall - in_long), 0, in_long);
        std::sort(l.begin(), l.end(),
                  [](const LongInterval& a, const LongInterval& b) { return a.length < b.length; });
        int64_t given = 0;
        for (size_t i = 0; i < l.size(); ++i) {
            int64_t level = left / int64_t(l.size() - i);
            int64_t on = std::min(l[i].length, level);
            left -= on;
            defer_off(t, l[i].node, l[i].length - on);
            given += l[i].length - on;
        }
        defer_off(t, rest, off - given);
    }
    settle_off(t);
    t.long_intervals.clear();
    t.scope_credit = 0;
    t.span_ticks = ticks;
}
// The part of the time off CPU spent waiting for a CPU, where the thread could have run, is
// charged in proportion to the CPU time at the end (time_trace); the rest, blocked or asleep,
// where the hooks' clock put it. The run delay is read with the samples only (a read per
// context switch cost a pipe ping-pong 15-25% of its time), so it covers all the spans since
// the last sample, and each of their places keeps its share of what was blocked.
void SampleTime::settle_off(ThreadReplay& t, bool last) {
    if (!t.waited_next && !last) return;
    int64_t runnable = 0;
    if (t.waited_next) {
        t.waited_next = false;
        bool had = t.waited;
        uint64_t before = t.waited_ns;
        t.waited = true;
        t.waited_ns = std::max(before, t.waited_next_ns);
        if (had && t.waited_next_ns > before)
            runnable = std::min(cpu_units(t.waited_next_ns - before), t.deferred_total);
    }
    for (const auto& [node, units] : t.deferred)
        give_off(t, node,
                 units - int64_t(__int128(units) * runnable / std::max<int64_t>(t.deferred_total, 1)));
    t.runnable += runnable;
    t.deferred.clear();
    t.deferred_total = 0;
}
// The last span of a sampled thread, from its last sample to its end: its CPU time is
// not measured, at most one sampling period, and goes to the frame open at the end (or
// the last one closed).
void SampleTime::close_last_span(ThreadReplay& t) {
    if (!t.sampled || t.spans_closed) return;
    t.spans_closed = true;
    if (t.counting) {
        // The CPU time since the last sample charged, to the node of the last clocks (the
        // runtime writes them when the thread ends or the process finishes), or where no frame
        // is open there (the thread's function returned), to where its last sample landed (a
        // thread starved of samples can have most of its CPU time here); after those clocks, a
        // killed thread's last moments are unknown.
        int64_t waiting = cpu_units_between(t.span_cpu_ns, t.charged_cpu_ns);
        t.sampled_cpu += waiting;
        give(t, t.clock_node ? t.clock_node : t.last_sample_node, waiting - t.own_waiting);
        t.own_waiting = 0;
        return;
    }
    int64_t wall = t.last > t.span_ticks ? int64_t((t.last - t.span_ticks) << kClockFraction) : 0;
    int64_t cpu = std::min(wall, sample_period);
    uint32_t node = t.stack.empty() ? t.last_top : top(t);
    // PROF_TIME=sampled: and the CPU time since the last sample, up to the last clocks.
    int64_t waiting = untimed_hooks ? cpu_units_between(t.span_cpu_ns, t.charged_cpu_ns) : 0;
    t.sampled_cpu += waiting;
    give(t, node, waiting - t.own_waiting + cpu - t.scope_credit);
    t.own_waiting = 0;
    close_span(t, t.last, cpu, node);
}
// How the traces that `filter` covers were timed.
TimeBasis SampleTime::time_basis(const ThreadFilter& filter) const {
    TimeBasis all;
    all.chosen = source;
    all.clock = clock;
    for (size_t i = 0; i < time_bases.size(); ++i)
        if (filter.all() || filter.trace == i) all.add(time_bases[i]);
    if (!filter.all() && filter.stream) {
        // What the trace is (sampled, counted, idle), and the thread's own sums.
        all = filter.trace < trace_kinds.size() ? trace_kinds[filter.trace] : TimeBasis{};
        all.chosen = source;
        all.clock = clock;
        if (auto it = thread_bases.find({filter.trace, filter.stream}); it != thread_bases.end())
            all.add(it->second);
    }
    return all;
}
// Whether the trace is timed by its samples, and its node totals from them if so.
void SampleTime::time_trace(const std::vector<std::unique_ptr<ThreadReplay>>& threads,
                            size_t first_thread) {
    TimeBasis b;
    // Samples in the profiler count too: the program's total is then known (the CPU
    // clock in the records is exact), only its split among functions is estimated.
    uint64_t samples = 0;
    for (size_t i = first_thread; i < threads.size(); ++i)
        samples += threads[i]->samples + threads[i]->own_samples;
    // A trace whose hooks read no clock has the samples' times only, however few.
    bool counted = false;
    for (size_t i = first_thread; i < threads.size(); ++i) counted |= threads[i]->counting;
    // Asked for, the samples time a trace cut short even without one: the part read may end
    // before the first, and the hooks' times of its calls are no sampled times of the run.
    // CPU time alone is only had from the samples: --clock cpu takes them however few.
    bool use = untimed_hooks || stack_sampled || counted ? true
               : source == TimeSource::kSampled || clock == Clock::kCpu
                   ? samples > 0 || layout->partial
               : source == TimeSource::kAuto ? samples >= kEnoughSamples
                                             : false;
    if (!use && clock == Clock::kCpu)
        throw reader::TraceError(layout->path,
                                 "has no CPU samples to tell CPU time by (written with "
                                 "PROF_SAMPLE_HZ=0, or too short): --clock cpu needs them");
    if (!use) {
        b.traced_traces = 1;
        if (samples) b.too_few = samples;
        // What the clock read and what the compensation took of it (session.cpp, the thread's
        // clock: ticks since the trace's start less the cost, from the thread's first record).
        double tps = layout->ticks_per_second > 0 ? layout->ticks_per_second : 1e9;
        uint64_t trace_start = layout->header.start_ticks;
        for (size_t i = first_thread; i < threads.size(); ++i) {
            const ThreadReplay& t = *threads[i];
            if (!t.started || t.last <= t.first) continue;
            int64_t begin =
                t.first > trace_start ? int64_t(t.first - trace_start) << kClockFraction : 0;
            double raw = double(t.last - t.first) / tps;
            double kept = double(std::max<int64_t>(t.clock - begin, 0)) * kClockUnit / tps;
            b.traced_raw_seconds += raw;
            b.traced_removed_seconds += std::max(raw - kept, 0.0);
            for (const PathNode& n : t.nodes) b.traced_calls += n.calls;
        }
        trace_kinds.push_back(b);
        time_bases.push_back(b);
        return;
    }
    b.sampled_traces = 1;
    b.untimed_traces = untimed_hooks || counted ? 1 : 0;
    b.switched_traces = counted && !untimed_hooks ? 1 : 0;
    b.uncounted_traces = stack_sampled ? 1 : 0;
    if (layout->meta.count("sample_idle")) {
        b.idle_traces = 1;
        if (auto a = layout->meta.find("off_cpu_approximate_ns"); a != layout->meta.end())
            b.idle_approximate_seconds = std::strtod(a->second.c_str(), nullptr) / 1e9;
    }
    double tps = layout->ticks_per_second > 0 ? layout->ticks_per_second : 1e9;
    double seconds_per_unit = kClockUnit / tps;
    trace_kinds.push_back(b);
    for (size_t i = first_thread; i < threads.size(); ++i) {
        ThreadReplay& t = *threads[i];
        // The thread's own part of the trace's basis (a one-thread view's), added to it.
        TimeBasis& own = thread_bases[{time_bases.size(), t.stream}];
        own.samples = t.samples;
        own.own_samples = t.own_samples;
        own.hook_call_samples = t.hook_call_samples;
        own.marker_samples = t.marker_samples;
        own.measured_run_threads = t.runs_measured ? 1 : 0;
        own.cpu_seconds = double(t.sampled_cpu) * seconds_per_unit;
        own.own_seconds = double(t.own) * seconds_per_unit;
        own.off_cpu_seconds = double(t.off_cpu) * seconds_per_unit;
        own.off_cpu_records = t.off_cpu_records;
        if (!t.sampled) { // too short to be sampled: the hooks' clock
            b.add(own);
            continue;
        }
        // A thread cut short (its trace's file ends before its ThreadEnd) has time off CPU
        // since its last Waited record that the next one, cut off, would have split: it stays
        // unplaced, as its CPU time since its last sample does; nothing after the cut is made
        // up, and no function gets more than the whole trace gives it.
        bool cut = layout->partial && !t.ended;
        settle_off(t, !cut);
        t.deferred.clear();
        t.deferred_total = 0;
        // The run delay goes where the program's CPU time is, less the profiler's part of it:
        // a thread that waits for a CPU in proportion to the CPU time it uses also waits for
        // the profiler's.
        int64_t program_cpu = std::max<int64_t>(t.sampled_cpu - t.own, 0);
        int64_t runnable =
            t.sampled_cpu > 0 ? int64_t(__int128(t.runnable) * program_cpu / t.sampled_cpu) : 0;
        // Starved of samples: at least 0.1 s of CPU time, and under a tenth of the samples its
        // rate asked for (sample_period: the clock units between two). A thread sampled from
        // outside (profrun --sample) has one sample per period by construction.
        double asked = sample_period > 0 ? double(t.sampled_cpu) / double(sample_period) : 0;
        if (!stack_sampled && double(t.sampled_cpu) * seconds_per_unit >= 0.1 &&
            double(t.samples + t.own_samples) < asked / 10) {
            own.starved_threads = 1;
            own.starved_seconds = own.cpu_seconds;
        }
        own.on_cpu_seconds = double(program_cpu) * seconds_per_unit;
        own.runnable_seconds = double(runnable) * seconds_per_unit;
        own.own_runnable_seconds = double(t.runnable - runnable) * seconds_per_unit;
        (t.waited ? own.blocked_seconds : own.off_cpu_unsplit_seconds) =
            double(t.off_located) * seconds_per_unit;
        b.add(own);
        t.self.resize(t.nodes.size(), 0);
        t.self_off.resize(t.nodes.size(), 0);
        // The wait for a CPU goes where the whole run's CPU time is, which a cut trace does
        // not know: there it stays in the split alone (a function's share from the part read
        // could exceed its share of the whole run).
        if (clock == Clock::kWall) {
            int64_t on_cpu = 0;
            for (int64_t units : t.self) on_cpu += std::max<int64_t>(units, 0);
            int64_t placed = layout->partial ? 0 : runnable;
            for (size_t n = 0; n < t.nodes.size(); ++n) {
                int64_t share = on_cpu > 0 && t.self[n] > 0
                                    ? int64_t(__int128(placed) * t.self[n] / on_cpu)
                                    : 0;
                t.self[n] += t.self_off[n] + share;
            }
        }
        std::vector<int64_t>().swap(t.self_off);
        // Own times to totals: children come after their parents.
        for (size_t n = t.nodes.size(); n-- > 1;) {
            t.nodes[n].total = t.self[n];
            t.self[t.nodes[n].parent] += t.self[n];
        }
        std::vector<int64_t>().swap(t.self);
    }
    time_bases.push_back(b);
}
// The thread begins counting at `ticks`, its CPU clock then `cpu_ns` (after its clock
// moved there): the span since its last sample closes.
void SampleTime::begin_counting(ThreadReplay& t, uint64_t ticks, uint64_t cpu_ns) {
    if (!t.sampled) {
        t.sampled = true;
        t.span_ticks = ticks;
        t.span_cpu_ns = t.charged_cpu_ns = cpu_ns;
        return;
    }
    int64_t cpu = cpu_units_between(cpu_ns, t.span_cpu_ns);
    t.charged_cpu_ns = t.span_cpu_ns;
    close_span(t, ticks, cpu, top(t));
    t.span_cpu_ns = std::max(t.span_cpu_ns, cpu_ns);
}
// The line tables of a trace sampled from outside, as the line view reads marked lines: a
// site per (function, source line) with the samples as its hits and their CPU time as its
// ticks (the clock is in nanoseconds). The sites' addresses are made up, above every
// user-space address, so that they name nothing else.
void SampleTime::add_sampled_lines(reader::TraceInfo& info) {
    uint64_t next = uint64_t(0xfffe) << 48;
    std::map<std::tuple<uint32_t, std::string, uint32_t>, uint64_t> site_of;
    for (const auto& [key, l] : sampled_lines) {
        const auto& [stream, fn, file, line] = key;
        auto [it, fresh] = site_of.try_emplace({fn, file, line}, next);
        if (fresh) {
            ++next;
            reader::Site site;
            site.kind = format::SiteKind::kLine;
            site.line = line;
            site.file = file;
            const reader::Symbol* sym = info.symbol_at(fns->address[fn & ~kReusedBit]);
            site.function = sym && !sym->name.empty() ? sym->name : "?";
            info.sites[it->second] = std::move(site);
        }
        reader::LineStats ls;
        ls.hits = l.samples;
        ls.ticks = l.ns;
        info.lines[{stream, it->second}].add(ls);
    }
}

// A trace timed by its samples: the samples that landed in marked lines' code are the lines'
// too, for every line of a source file where some did (its DWARF was read; lines.cpp decides
// which measure of a line to show).
void SampleTime::add_marked_line_samples(reader::TraceInfo& info) {
    double tps = info.ticks_per_second > 0 ? info.ticks_per_second : 1e9;
    bool timed = !time_bases.empty() && time_bases.back().sampled_traces;
    std::set<std::string> found;
    for (const auto& [key, l] : marked_line_samples) {
        auto site = info.sites.find(key.second);
        if (!timed || site == info.sites.end()) continue;
        found.insert(site->second.file);
        reader::LineStats ls;
        ls.samples = l.samples;
        ls.sampled_seconds = double(l.units) * kClockUnit / tps;
        info.lines[key].add(ls);
    }
    for (auto& [key, ls] : info.lines)
        if (auto site = info.sites.find(key.second);
            site != info.sites.end() && found.count(site->second.file))
            ls.sample_timed = true;
    marked_line_samples.clear();
}

} // namespace prof::analysis::engine
