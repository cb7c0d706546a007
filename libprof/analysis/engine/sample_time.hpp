// The sample time room of the engine: a thread's time from its samples (sampled, counting and
// stack-sampled traces), the time off CPU located in long intervals between events, and how
// each trace was timed (session.hpp, "the time model").
#pragma once

#include "analysis/engine/session.hpp"
#include "analysis/engine/thread_replay.hpp"
#include "reader/code_flow.hpp"
#include "reader/dwarf_lines.hpp"
#include "reader/elf_symbols.hpp"
#include "reader/hook_code.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace prof::analysis::engine {

class SampleTime {
  public:
    // The trace being read (set by the session when a trace begins).
    const reader::TraceInfo* layout = nullptr;
    TraceFunctions* fns = nullptr;
    TimeSource source = TimeSource::kAuto;
    Clock clock = Clock::kWall;
    double units_per_ns = 0;    // clock units per nanosecond
    int64_t sample_period = 0;  // clock units between samples the runtime asked for
    bool untimed_hooks = false; // the trace's hooks read no clock per call (PROF_TIME=sampled)
    // The trace holds sampled call stacks and no hooks' records (profrun --sample, --pid):
    // times from the samples, no call counts.
    bool stack_sampled = false;
    // Its line tables: samples and CPU ns per (stream, function, source line), each sample
    // counted once on every line of its stack (line_profiler's time: the line and its callees).
    struct SampledLine {
        uint64_t samples = 0, ns = 0;
    };
    std::map<std::tuple<uint32_t, uint32_t, std::string, uint32_t>, SampledLine> sampled_lines;
    // How each trace read was timed (Profile::time), by trace.
    std::vector<TimeBasis> time_bases;
    // Each thread's own part of its trace's basis (its samples, CPU time and time split), by
    // (trace, stream), and what each trace is without them (sampled, counted, idle): a
    // one-thread view's header gives its thread's, not its process's.
    std::map<std::pair<size_t, uint32_t>, TimeBasis> thread_bases;
    std::vector<TimeBasis> trace_kinds;

    // On CPU, a sample stands for the thread's CPU time since the one before it (its clock is
    // in the record) and goes to the frame open where it was taken. Off CPU (sleeping,
    // blocked, preempted), the time of a span less its CPU time was spent in the span's long
    // intervals between events: the CPU time the short ones leave is spread over them as
    // evenly as their lengths allow, and the rest of each is its time off CPU.
    int64_t long_interval_units() const { return int64_t(20e3 * units_per_ns); } // 20 us
    // CPU nanoseconds as clock units, at most kMaxCpuUnits: a damaged trace's CPU clock can
    // jump by up to 2^64 ns, which no int64_t of units holds.
    int64_t cpu_units(uint64_t ns) const {
        double units = double(ns) * units_per_ns;
        return units < double(kMaxCpuUnits) ? int64_t(units) : kMaxCpuUnits;
    }
    // The CPU time from `earlier` to `later` in clock units; 0 when the clock went back.
    int64_t cpu_units_between(uint64_t later, uint64_t earlier) const {
        return later > earlier ? cpu_units(later - earlier) : 0;
    }
    static void count_samples(ThreadReplay& t, uint32_t node, uint64_t n) {
        if (!n) return;
        if (t.node_samples.size() <= node) t.node_samples.resize(t.nodes.size(), 0);
        t.node_samples[node] += n;
    }
    static void give(ThreadReplay& t, uint32_t node, int64_t units) {
        if (units <= 0) return;
        if (t.self.size() <= node) t.self.resize(t.nodes.size(), 0);
        t.self[node] += units;
    }
    // Time off CPU located at `node`: kept apart from the CPU time, so that --clock cpu can
    // leave it out and the split can be told.
    static void give_off(ThreadReplay& t, uint32_t node, int64_t units) {
        if (units <= 0) return;
        if (t.self_off.size() <= node) t.self_off.resize(t.nodes.size(), 0);
        t.self_off[node] += units;
        t.off_located += units;
    }
    // A Waited record (1.11): the thread's run delay at its next Sample record.
    static void waited(ThreadReplay& t, uint64_t run_delay_ns) {
        t.waited_next = true;
        t.waited_next_ns = run_delay_ns;
    }
    // Time off CPU located at `node`, whose split waits for the next Waited record.
    static void defer_off(ThreadReplay& t, uint32_t node, int64_t units) {
        if (units <= 0) return;
        if (!t.deferred.empty() && t.deferred.back().first == node)
            t.deferred.back().second += units;
        else
            t.deferred.emplace_back(node, units);
        t.deferred_total += units;
    }
    // At a Sample record: with a Waited record before it, the run delay since the last one is
    // the part of the time off CPU deferred since then that was spent waiting for a CPU (at most
    // all of it); each place keeps its share of the rest, blocked or asleep. `last`: the
    // thread's end, where what is left is given whole.
    void settle_off(ThreadReplay& t, bool last = false);
    // A Sample record of thread `t`, whose clock the session moved to it.
    void sample(ThreadReplay& t, const reader::SampleRecord& r);
    // A counting thread's Sample record (format 1.9).
    void counted_sample(ThreadReplay& t, const reader::SampleRecord& r);
    // Thread `t` begins counting at `ticks`, its CPU clock then `cpu_ns`.
    void begin_counting(ThreadReplay& t, uint64_t ticks, uint64_t cpu_ns);
    // A sample's CPU time to the node open where it was taken (or later, by place_samples).
    // `credit`: scope runs' measured time taken off `units` (a sample in a scope's block gives
    // it back, place_samples).
    void charge(ThreadReplay& t, uint32_t node, const reader::SampleRecord& r, int64_t units,
                int64_t credit = 0);
    // The samples that named their instruction, to their nodes (at the end of the trace).
    void place_samples(ThreadReplay& t);
    // Ends the span at `ticks`, of which `cpu` was on CPU: its time off CPU goes to its long
    // intervals, what they cannot hold to node `rest`.
    void close_span(ThreadReplay& t, uint64_t ticks, int64_t cpu, uint32_t rest);
    // The last span of a sampled thread, from its last sample to its end.
    void close_last_span(ThreadReplay& t);
    // How the traces that `filter` covers were timed.
    TimeBasis time_basis(const ThreadFilter& filter) const;
    // Whether the trace is timed by its samples, and its node totals from them if so.
    void time_trace(const std::vector<std::unique_ptr<ThreadReplay>>& threads, size_t first_thread);
    // The line tables of a trace sampled from outside, as sites of `info`.
    void add_sampled_lines(reader::TraceInfo& info);
    // The samples of the trace just timed that landed in marked lines' code, to `info`'s lines
    // (LineStats::samples, sampled_seconds), if it was timed by its samples.
    void add_marked_line_samples(reader::TraceInfo& info);

  private:
    // What the instruction at `ip` is, read once per address of a trace: the profiler's (a
    // hook's call or the loads of its arguments, reader/hook_code.hpp), or code of the functions
    // with hooks in this trace listed innermost first: those DWARF says are inlined there, then
    // the one holding it. `scoped`: the DWARF of the code covers `ip`, so a function left out
    // is not there.
    // `marker`: code of libprof's headers inlined in the program (the timers of PROF_LINE,
    // PROF_SCOPE and PROF_FUNCTION), the profiler's as the hooks' calls are. `lines`: the
    // PROF_LINE sites (addresses in the trace's sites) whose line the instruction is code of,
    // the line itself or one a function inlined there was called from.
    struct CodeAt {
        bool hook = false;
        bool marker = false;
        std::vector<uint32_t> functions;
        bool scoped = false;
        std::vector<uint64_t> lines;
        std::vector<uint32_t> scopes; // marked scopes whose block holds it (their functions)
    };
    const CodeAt& code_at(uint64_t ip);
    uint32_t place(ThreadReplay& t, uint32_t node, const CodeAt& code);
    reader::DwarfLines* dwarf_of(const reader::Module& mod);
    const reader::ElfSymbols* symbols_of(const reader::Module& mod);
    const reader::HookCode* hook_code_of(const reader::Module& mod);
    uint64_t program_jump_into(const reader::Module& mod, const reader::ElfSymbols::Entry& fn,
                               const reader::DwarfLines& dwarf, uint64_t vaddr);
    // The symbol tables of the trace's objects on disk, by path, for place_samples (null: none
    // usable).
    std::unordered_map<std::string, std::unique_ptr<reader::ElfSymbols>> module_symbols;
    // Their hooks' code, by path.
    std::unordered_map<std::string, std::unique_ptr<reader::HookCode>> module_hook_code;
    // Their DWARF, by path (null: not this build's).
    std::unordered_map<std::string, std::unique_ptr<reader::DwarfLines>> module_dwarf;
    // Their instructions and jumps, by path: a function's decoded when a sample falls at a
    // seam of its markers' code.
    std::unordered_map<std::string, std::unique_ptr<reader::CodeFlow>> module_flow;
    // This trace's: the functions with hooks by symbol, per module (their names as the
    // symbol table gives them, and demangled without parameters, as DWARF names functions
    // of internal linkage); code_at's answers by ip.
    const TraceFunctions* code_fns = nullptr;
    std::unordered_map<size_t, std::unordered_map<std::string, uint32_t>> hooked_by_name;
    std::unordered_map<uint64_t, CodeAt> code_by_ip;
    // This trace's PROF_LINE sites by source line, and their samples by (stream, site); its
    // PROF_SCOPE sites.
    std::unordered_map<uint32_t, std::vector<uint64_t>> line_sites;
    bool scope_sites = false;
    struct MarkedLine {
        uint64_t samples = 0;
        int64_t units = 0;
    };
    std::map<std::pair<uint32_t, uint64_t>, MarkedLine> marked_line_samples;
};

} // namespace prof::analysis::engine
