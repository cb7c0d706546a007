// Session: one pass over each trace; per thread a calling context tree with exact counts and
// times on the thread's clock (session.hpp), and the allocations replayed in time order. The
// profile, the call tree and the memory report are derived from what it kept.
#include "analysis/engine/session.hpp"
#include "analysis/engine/derive.hpp"
#include "analysis/engine/heap_replay.hpp"
#include "analysis/engine/read_parallel.hpp"
#include "analysis/engine/sample_time.hpp"
#include "analysis/engine/thread_replay.hpp"

#include "reader/elf_symbols.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>

namespace prof::analysis {
using namespace engine;
namespace {} // namespace

struct Session::Impl : reader::EventSink {
    SessionOptions options;
    std::vector<reader::TraceInfo> traces;
    std::vector<TraceFunctions> functions; // by trace
    std::vector<std::unique_ptr<ThreadReplay>> threads;
    std::unordered_map<uint32_t, ThreadReplay*> current; // stream id -> thread, this trace
    uint32_t last_stream = UINT32_MAX;
    ThreadReplay* last_thread = nullptr;
    size_t trace_index = 0;
    uint64_t events_read = 0;
    // Where the reading is in the trace, as (chunks read, lookups in this chunk): threads and
    // functions remember it, so that streams read apart on several cores merge in the order
    // one reader would have met them.
    uint64_t chunks_read = 0;
    uint32_t definitions = 0;
    uint64_t order_key() { return chunks_read << 32 | definitions++; }

    // The trace being read: its process records, from a first pass over its process stream
    // (an object's Unload record can lie later in the file than the events it separates; the
    // clock's frequency is in the End record).
    reader::TraceInfo layout;
    std::unique_ptr<reader::AddressHistory> history;
    TraceFunctions* fns = nullptr;
    uint64_t start_ticks = 0, end_ticks = 0;
    double ns_per_tick = 1;
    // The costs compensated (ticks): per call inside the callee, per call outside it, per
    // activation of a scope run.
    int64_t cost_in = 0, cost_out = 0, cost_line = 0; // on the clock's scale
    // Intervals longer than this (clock units) are noted for the time off CPU; INT64_MAX
    // until the trace shows samples.
    int64_t long_interval = INT64_MAX;
    // A trace sampled without instrumentation: its addresses' functions, by sampled address.
    std::unordered_map<uint64_t, uint32_t> sampled_functions; // address -> define()
    std::unordered_map<uint64_t, uint32_t> inlined_functions; // inlined call's id -> define()

    explicit Impl(SessionOptions o) : options(std::move(o)) {}

    bool reused(uint64_t address) const { return history->reused(address); }

    void begin_trace(const std::string& path) {
        reader::TraceReader meta(path);
        refuse_counted_unread(meta.info());
        begin_trace(meta.read_metadata());
    }
    bool needs_every_call_time() const {
        return options.time == TimeSource::kTraced ||
               (options.observer && !options.observer_takes_counted);
    }
    // A trace whose hooks stopped reading the clock per call `seconds` into the run
    // (PROF_TIME=auto) has no time for its later calls: no timeline, no traced times.
    [[noreturn]] void refuse_counted(const std::string& path, double seconds) const {
        std::string when = fmt::format("the hooks stopped reading the clock per call at {:.3f} s, "
                                       "once the run had samples enough to time it "
                                       "(PROF_TIME=auto)",
                                       seconds);
        throw reader::TraceError(
            path, options.observer
                      ? fmt::format("{}: {} every call's time ({})", when, options.observer_needs,
                                    options.observer_hint)
                      : when + ", so it has no traced times after that (leave out --time "
                               "traced, or record with PROF_TIME=traced)");
    }
    // The same from a finished trace's header (FileHeader::counting_ticks, 1.10), before a
    // record is read: the refusal comes at once, not after reading up to the switch.
    void refuse_counted_unread(const reader::TraceInfo& header_only) const {
        const format::FileHeader& h = header_only.header;
        if (!needs_every_call_time() || !h.counting_ticks || !(h.flags & format::kFileFinished))
            return;
        double tps = h.ticks_per_second ? double(h.ticks_per_second) : 1e9;
        refuse_counted(header_only.path, h.counting_ticks > h.start_ticks
                                             ? double(h.counting_ticks - h.start_ticks) / tps
                                             : 0.0);
    }
    void begin_trace(const reader::TraceInfo& process) {
        layout = process;
        chunks_read = 0;
        definitions = 0;
        history = std::make_unique<reader::AddressHistory>(layout);
        trace_index = traces.size();
        functions.emplace_back();
        fns = &functions.back();
        timing.layout = &layout;
        timing.fns = fns;
        timing.source = options.time;
        timing.clock = options.clock;
        heap.begin_trace(trace_index, *history, *fns);
        current.clear();
        last_stream = UINT32_MAX;
        last_thread = nullptr;
        start_ticks = layout.header.start_ticks;
        end_ticks = layout.end_ticks;
        double tps = layout.ticks_per_second > 0 ? layout.ticks_per_second : 1e9;
        ns_per_tick = 1e9 / tps;
        bool c = options.compensate;
        auto scaled = [&](double ticks) {
            return c && ticks > 0 ? int64_t(std::llround(ticks * (1 << kClockFraction))) : 0;
        };
        cost_in = scaled(layout.overhead_in);
        cost_out = scaled(layout.overhead_out);
        cost_line = scaled(layout.line_overhead);
        timing.units_per_ns = tps / 1e9 * (1 << kClockFraction);
        double hz = 0;
        if (auto it = layout.meta.find("sample_hz"); it != layout.meta.end())
            hz = std::strtod(it->second.c_str(), nullptr);
        timing.sample_period = int64_t((hz > 0 ? 1e9 / hz : 1e6) * timing.units_per_ns);
        long_interval = hz > 0 && options.time != TimeSource::kTraced ? timing.long_interval_units()
                                                                      : INT64_MAX;
        // PROF_TIME=sampled: the hooks read the clock only after the thread was off CPU, so
        // the intervals between events are no call's duration and only the samples time it.
        auto time = layout.meta.find("time");
        timing.untimed_hooks = time != layout.meta.end() && time->second == "sampled";
        timing.stack_sampled = layout.meta.count("sampler") != 0;
        sampled_functions.clear();
        inlined_functions.clear();
        timing.sampled_lines.clear();
        if (timing.stack_sampled && options.time == TimeSource::kTraced)
            throw reader::TraceError(layout.path,
                                     "sampled without instrumentation (profrun --sample or "
                                     "--pid): it has no traced times (leave out --time traced)");
        if (timing.stack_sampled && options.observer)
            throw reader::TraceError(
                layout.path,
                fmt::format("sampled without instrumentation (profrun --sample or --pid): {} the "
                            "calls' own times ({})",
                            options.observer_needs, options.observer_hint));
        // Nor do they give a timeline (an observer) the calls' own times.
        if (timing.untimed_hooks && options.time == TimeSource::kTraced)
            throw reader::TraceError(layout.path,
                                     "recorded with PROF_TIME=sampled: its hooks read no clock "
                                     "per call, so it has no traced times (leave out --time "
                                     "traced)");
        if (timing.untimed_hooks && options.observer && !options.observer_takes_counted)
            throw reader::TraceError(
                layout.path, fmt::format("recorded with PROF_TIME=sampled, its hooks read no clock "
                                         "per call: {} them ({})",
                                         options.observer_needs, options.observer_hint));
    }

    ThreadReplay& thread(uint32_t id) {
        if (id == last_stream && last_thread) return *last_thread; // UINT32_MAX: none yet
        auto it = current.find(id);
        if (it == current.end()) {
            threads.push_back(std::make_unique<ThreadReplay>());
            ThreadReplay* t = threads.back().get();
            t->trace = trace_index;
            t->stream = id;
            t->index = threads.size() - 1;
            t->seen = order_key();
            if (auto in = layout.meta.find("inherited_frames." + std::to_string(id));
                in != layout.meta.end())
                t->inherited_left = uint32_t(std::strtoul(in->second.c_str(), nullptr, 10));
            it = current.emplace(id, t).first;
            if (options.observer)
                options.observer->thread_started(t->index, ThreadFilter{trace_index, id});
        }
        last_stream = id;
        last_thread = it->second;
        return *it->second;
    }

    // Counts `n` events read, the last at `ticks`; every 4 M events the tool hears of it.
    void tick_progress(uint64_t ticks, uint64_t n = 1) {
        uint64_t before = events_read;
        events_read += n;
        if (!options.progress || (before >> 22) == (events_read >> 22)) return;
        Progress p;
        p.path = &layout.path;
        p.events = events_read;
        if (end_ticks > start_ticks)
            p.fraction =
                std::clamp(double(ticks - start_ticks) / double(end_ticks - start_ticks), 0.0, 1.0);
        options.progress(p);
    }

    uint64_t ns(int64_t clock) const {
        return clock > 0 ? uint64_t(double(clock) * kClockUnit * ns_per_tick) : 0;
    }

    // The interval since the thread's last event goes to the frame on top, less the cost the
    // hooks spent in it.
    void start(ThreadReplay& t, uint64_t ticks) {
        t.started = true;
        t.first = t.last = ticks;
        t.clock = ticks > start_ticks ? int64_t(ticks - start_ticks) << kClockFraction : 0;
    }
    // `keep_pending`: a record that is no event (a CPU sample) moves the clock without taking
    // the profiler's cost still due: what the interval up to it did not cover stays due for
    // the next event, so that the events' times are the same with the samples read or not (a
    // timeline reads the trace as traced, without them).
    void advance(ThreadReplay& t, uint64_t ticks, bool keep_pending = false) {
        if (!t.started) return start(t, ticks);
        if (ticks < t.last) ticks = t.last;
        int64_t elapsed = int64_t((ticks - t.last) << kClockFraction) - t.pending;
        if (elapsed > 0) {
            t.clock += elapsed;
            if (elapsed > long_interval) note_long(t, elapsed);
        }
        t.pending = keep_pending && elapsed < 0 ? -elapsed : 0;
        t.last = ticks;
    }

    // ---- sampled time: the sample time room (sample_time.hpp) ----------------------------
    SampleTime timing;
    void on_sample(uint32_t id, const reader::SampleRecord& r) override {
        if (options.time == TimeSource::kTraced) return;
        if (long_interval == INT64_MAX) long_interval = timing.long_interval_units();
        ThreadReplay& t = thread(id);
        advance(t, r.ticks, true);
        timing.sample(t, r);
    }
    void note_long(ThreadReplay& t, int64_t elapsed) {
        t.long_intervals.push_back(LongInterval{top(t), elapsed});
    }
    // The thread begins counting at `ticks`, its CPU clock then `cpu_ns`. The span since its
    // last sample closes here as a traced span (its time off CPU to its long intervals); its CPU
    // time is charged by the next sample, as every counting span's.
    void on_counting(uint32_t id, uint64_t ticks, uint64_t cpu_ns) override {
        ThreadReplay& t = thread(id);
        // PROF_TIME=auto: the thread's calls have their times up to here only (a trace whose
        // threads all count from their start was refused by begin_trace already).
        if (!timing.untimed_hooks && needs_every_call_time())
            refuse_counted(layout.path,
                           ticks > start_ticks ? double(ticks - start_ticks) * ns_per_tick * 1e-9
                                               : 0.0);
        advance(t, ticks, true);
        t.counting = true;
        if (options.observer) options.observer->counting_began(t.index);
        t.position = t.clock_node = top(t);
        if (options.time == TimeSource::kTraced) return;
        if (long_interval == INT64_MAX) long_interval = timing.long_interval_units();
        timing.begin_counting(t, ticks, cpu_ns);
    }
    void on_call_node(uint32_t id, uint32_t node, uint32_t parent, uint32_t fn) override {
        ThreadReplay& t = thread(id);
        if (fn >= t.fn_map.size() || t.fn_map[fn] == kUndefined) return;
        uint32_t path = t.child(tree_node(t, parent), resolve(t, t.fn_map[fn], t.last));
        if (t.tree.size() <= node) t.tree.resize(size_t(node) + 1, 0);
        t.tree[node] = path;
    }
    void on_call_counts(uint32_t id, uint32_t first, const std::vector<uint64_t>& calls) override {
        ThreadReplay& t = thread(id);
        if (t.tree_calls.size() < first + calls.size()) t.tree_calls.resize(first + calls.size());
        std::copy(calls.begin(), calls.end(), t.tree_calls.begin() + first);
        uint64_t n = 0;
        for (uint64_t c : calls) n += 2 * c;
        tick_progress(t.last, n);
    }
    // 1.13: a counted path's timed calls, kept with the ticks' length in this trace.
    void on_call_latency(uint32_t id, uint32_t node, const reader::CallLatencyRecord& r) override {
        ThreadReplay& t = thread(id);
        if (node >= t.tree.size() || !t.tree[node]) return; // a function not read (undefined)
        t.latency.push_back(PathLatency{t.tree[node], ns_per_tick, start_ticks, r});
    }
    void on_waited(uint32_t id, uint64_t run_delay_ns) override {
        SampleTime::waited(thread(id), run_delay_ns);
    }
    void on_position(uint32_t id, uint32_t node) override {
        ThreadReplay& t = thread(id);
        t.position = tree_node(t, node);
    }
    // A forked child's thread enters the frames it inherited open again at the fork, so that
    // their exits match: its first Enter records, as many as the Meta record
    // inherited_frames.<stream> says, continue the parent's calls and are no calls of their
    // own. They made the thread's first nodes, each the child of the one before.
    static void uncount_inherited(ThreadReplay& t, const reader::TraceInfo& info) {
        auto it = info.meta.find("inherited_frames." + std::to_string(t.stream));
        if (it == info.meta.end()) return;
        uint64_t depth = std::strtoull(it->second.c_str(), nullptr, 10);
        for (uint32_t node = 1; node <= depth && node < t.nodes.size(); ++node) {
            if (t.nodes[node].parent != node - 1 || t.nodes[node].calls == 0) break;
            --t.nodes[node].calls;
            t.inherited_nodes.push_back(node);
        }
    }
    // The counts of a counting thread's call tree join its paths' (once, when its trace ends).
    static void add_tree_calls(ThreadReplay& t) {
        for (size_t i = 1; i < t.tree.size() && i < t.tree_calls.size(); ++i)
            if (t.tree[i]) t.nodes[t.tree[i]].calls += t.tree_calls[i];
        std::vector<uint64_t>().swap(t.tree_calls);
    }

    // A sampled call stack (profrun --sample): the path of its functions, outermost first, gets
    // the CPU time the sample stands for. No call is counted: the trace has none.
    void on_stack_sample(uint32_t id, uint64_t ticks, uint32_t stack, uint64_t cpu_ns) override {
        ThreadReplay& t = thread(id);
        int64_t weight = charge_stack(t, id, ticks, stack, cpu_ns, true);
        ++t.samples;
        SampleTime::count_samples(t, t.charged_node, 1);
        t.sampled_cpu += weight;
    }
    // A stretch off CPU of a sampled thread (profrun --idle): like a sample, with the wall time
    // it lasted (cProfile's cumtime is wall time), and no hit on the lines.
    // Spent waiting for a CPU (1.11: the thread was preempted), it goes where the CPU time is
    // at the end, as in an instrumented trace (SampleTime::time_trace).
    void on_off_cpu(uint32_t id, uint64_t ticks, uint32_t stack, uint64_t ns,
                    int runnable) override {
        ThreadReplay& t = thread(id);
        ++t.off_cpu_records;
        if (runnable >= 0) t.waited = true;
        if (runnable == 1) {
            advance(t, ticks);
            t.sampled = t.spans_closed = true;
            int64_t units = timing.cpu_units(ns);
            t.runnable += units;
            t.off_cpu += units;
            return;
        }
        t.off_cpu += charge_stack(t, id, ticks, stack, ns, false);
    }
    // Gives `ns` to the path of Stack `stack` (its innermost function's own time) and to its
    // lines; returns it in clock units.
    int64_t charge_stack(ThreadReplay& t, uint32_t id, uint64_t ticks, uint32_t stack, uint64_t ns,
                         bool hit) {
        advance(t, ticks);
        t.sampled = t.spans_closed = true;
        uint32_t node = 0;
        struct LineAt {
            uint32_t fn;
            const std::string* file;
            uint32_t line;
        };
        thread_local std::vector<LineAt> lines;
        lines.clear();
        auto add_line = [&](uint32_t fn, const std::string& file, uint32_t line) {
            if (!line) return;
            for (const LineAt& l : lines) // recursion: a line counts once per sample
                if (l.fn == fn && l.line == line && *l.file == file) return;
            lines.push_back(LineAt{fn, &file, line});
        };
        if (auto it = t.memory.unwound.find(stack); it != t.memory.unwound.end())
            for (size_t i = it->second.size(); i-- > 0;) {
                uint64_t address = it->second[i];
                uint32_t fn = sampled_function(t, address, ticks);
                node = t.child(node, fn);
                auto loc = layout.locations.find(address);
                if (loc == layout.locations.end()) continue;
                // Functions inlined there are frames of their own, each at the line of its
                // caller it was inlined at; the address's own line is the innermost one's.
                static const std::vector<reader::InlinedCall> none;
                const std::vector<reader::InlinedCall>& calls =
                    options.inlined ? loc->second.inlined : none;
                for (const reader::InlinedCall& call : calls) {
                    add_line(fn, call.call_file, call.call_line);
                    fn = inlined_function(t, call.function, ticks);
                    node = t.child(node, fn);
                }
                add_line(fn, loc->second.file, loc->second.line);
            }
        for (const LineAt& at : lines) {
            uint32_t fn = at.fn;
            SampleTime::SampledLine& l = timing.sampled_lines[{id, fn, *at.file, at.line}];
            l.samples += hit ? 1 : 0;
            l.ns += ns;
        }
        int64_t weight = timing.cpu_units(ns);
        (hit ? SampleTime::give : SampleTime::give_off)(t, node, weight);
        t.charged_node = node;
        tick_progress(ticks);
        return weight;
    }
    // An inlined function's id (a Location record's inlined call) as a trace function.
    uint32_t inlined_function(ThreadReplay& t, uint64_t id, uint64_t ticks) {
        auto [it, fresh] = inlined_functions.try_emplace(id, 0);
        if (fresh) it->second = define(id);
        uint32_t f = resolve(t, it->second, ticks);
        if (f < fns->inlined.size()) fns->inlined[f] = true;
        return f;
    }
    // The function of a sampled address: its Location record's, else the address itself.
    uint32_t sampled_function(ThreadReplay& t, uint64_t address, uint64_t ticks) {
        auto [it, fresh] = sampled_functions.try_emplace(address, 0);
        if (fresh) {
            auto loc = layout.locations.find(address);
            uint64_t entry = loc != layout.locations.end() && loc->second.function
                                 ? loc->second.function
                                 : address;
            it->second = define(entry);
        }
        return resolve(t, it->second, ticks);
    }
    // The trace function that a call of stream function `fn` at `ticks` is.
    uint32_t resolve(ThreadReplay&, uint32_t mapped, uint64_t ticks) {
        if (!(mapped & kReusedBit)) return mapped;
        uint64_t address = fns->address[mapped & ~kReusedBit];
        return fns->of(address, history->module_at(address, ticks), order_key());
    }
    uint32_t define(uint64_t address) {
        uint32_t f = fns->of(address, reader::kNoModule, order_key());
        return reused(address) ? f | kReusedBit : f;
    }

    // The activations an opened frame stands for, as the observer hears it: none for a frame
    // a forked child inherited open (its call was the parent's).
    static uint64_t observed_activations(ThreadReplay& t, uint64_t count) {
        if (__builtin_expect(t.inherited_left == 0, 1)) return count;
        --t.inherited_left;
        return 0;
    }
    void open(ThreadReplay& t, uint32_t function, uint64_t count) {
        uint32_t parent = t.stack.empty() ? 0 : t.stack.back().node;
        uint32_t node = t.child(parent, function);
        t.nodes[node].calls += count;
        t.stack.push_back(Frame{node, t.clock});
        if (options.observer)
            options.observer->opened(t.index, function, ns(t.clock),
                                     observed_activations(t, count));
    }
    void close(ThreadReplay& t) {
        Frame f = t.stack.back();
        t.stack.pop_back();
        t.nodes[f.node].total += t.clock - f.start;
        if (t.stack.empty()) t.last_top = f.node;
        t.pending = cost_out;
        if (options.observer) options.observer->closed(t.index, ns(t.clock));
    }
    void close_all(ThreadReplay& t) {
        while (!t.stack.empty()) close(t);
    }

    void on_function(uint32_t id, uint32_t fn, uint64_t address) override {
        ThreadReplay& t = thread(id);
        if (t.fn_map.size() <= fn) t.fn_map.resize(fn + 1, kUndefined);
        t.fn_map[fn] = define(address);
    }
    void on_enter(uint32_t id, uint32_t fn, uint64_t ticks) override {
        tick_progress(ticks);
        ThreadReplay& t = thread(id);
        advance(t, ticks);
        if (fn >= t.fn_map.size() || t.fn_map[fn] == kUndefined) {
            if (t.inherited_left) --t.inherited_left; // an Enter record all the same
            return;
        }
        open(t, resolve(t, t.fn_map[fn], ticks), 1);
        t.pending = cost_in;
    }
    void on_enter_address(uint32_t id, uint64_t address, uint64_t ticks) override {
        tick_progress(ticks);
        ThreadReplay& t = thread(id);
        advance(t, ticks);
        auto [it, fresh] = t.address_fn.try_emplace(address, 0);
        if (fresh) it->second = define(address);
        open(t, resolve(t, it->second, ticks), 1);
        t.pending = cost_in;
    }
    // The bulk of the replay: the clock and the stack top stay in registers for a batch.
    void on_calls(uint32_t id, const reader::CallRecord* r, size_t n) override {
        ThreadReplay& t = thread(id);
        tick_progress(r[n - 1].ticks, n);
        if (!t.started) start(t, r[0].ticks);
        int64_t clock = t.clock, pending = t.pending;
        uint64_t last = t.last;
        ActivationObserver* observer = options.observer;
        for (size_t i = 0; i < n; ++i) {
            uint64_t ticks = std::max(r[i].ticks, last);
            int64_t elapsed = int64_t((ticks - last) << kClockFraction) - pending;
            clock += elapsed > 0 ? elapsed : 0;
            if (__builtin_expect(elapsed > long_interval, 0)) note_long(t, elapsed);
            last = ticks;
            pending = 0;
            if (r[i].exit) {
                if (t.stack.empty()) {
                    ++t.unmatched_exits;
                    continue;
                }
                Frame f = t.stack.back();
                t.stack.pop_back();
                t.nodes[f.node].total += clock - f.start;
                if (t.stack.empty()) t.last_top = f.node;
                pending = cost_out;
                if (observer) observer->closed(t.index, ns(clock));
            } else {
                uint32_t fn = r[i].fn;
                if (fn >= t.fn_map.size() || t.fn_map[fn] == kUndefined) {
                    if (t.inherited_left) --t.inherited_left; // an Enter record all the same
                    continue;
                }
                uint32_t mapped = t.fn_map[fn];
                uint32_t function = mapped & kReusedBit ? resolve(t, mapped, ticks) : mapped;
                uint32_t parent = t.stack.empty() ? 0 : t.stack.back().node;
                uint32_t node = t.child(parent, function);
                ++t.nodes[node].calls;
                t.stack.push_back(Frame{node, clock});
                pending = cost_in;
                if (observer)
                    observer->opened(t.index, function, ns(clock), observed_activations(t, 1));
            }
        }
        t.clock = clock;
        t.pending = pending;
        t.last = last;
    }
    void on_exit(uint32_t id, uint64_t ticks) override {
        tick_progress(ticks);
        ThreadReplay& t = thread(id);
        advance(t, ticks);
        if (t.stack.empty()) {
            ++t.unmatched_exits;
            return;
        }
        close(t);
    }
    // `count` leaf activations that took `total` ticks together, timed by the macros' inline
    // path: each costs about what a PROF_LINE around an empty statement measures.
    void on_scope_run(uint32_t id, uint32_t fn, uint64_t ticks, uint64_t count,
                      uint64_t total) override {
        tick_progress(ticks, 2 * count);
        ThreadReplay& t = thread(id);
        advance(t, ticks);
        if (fn >= t.fn_map.size() || t.fn_map[fn] == kUndefined) return;
        open(t, resolve(t, t.fn_map[fn], ticks), count);
        // Saturated: a damaged record's count or total must not overflow (a fuzzer's find).
        int64_t cost = 0, run = 0;
        if (count > uint64_t(INT64_MAX) || __builtin_mul_overflow(cost_line, int64_t(count), &cost))
            cost = INT64_MAX;
        if (__builtin_sub_overflow(int64_t(total << kClockFraction), cost, &run)) run = 0;
        run = std::max<int64_t>(0, run);
        t.clock += run;
        // Samples taken during the run landed in the scope's parent (the run's record is
        // written after it): sampled, the run keeps the time it measured.
        if (long_interval != INT64_MAX) {
            SampleTime::give(t, top(t), run);
            t.scope_credit += run;
            t.run_given[top(t)] += run;
        }
        close(t);
        t.last = ticks + total > t.last ? ticks + total : t.last;
        if (count > uint64_t(INT64_MAX) ||
            __builtin_mul_overflow(cost_out, int64_t(count), &t.pending))
            t.pending = INT64_MAX;
    }
    void on_pause(uint32_t id, uint64_t ticks) override {
        if (options.compensate) thread(id).pending += int64_t(ticks << kClockFraction);
    }
    void on_abandon(uint32_t id, uint32_t frames, uint64_t ticks) override {
        ThreadReplay& t = thread(id);
        advance(t, ticks);
        for (uint32_t i = 0; i < frames && !t.stack.empty(); ++i) close(t);
    }
    void on_thread_begin(uint32_t id, uint64_t ticks) override { advance(thread(id), ticks); }
    void on_thread_end(uint32_t id, uint64_t ticks) override {
        ThreadReplay& t = thread(id);
        t.ended = true;
        advance(t, ticks);
        timing.close_last_span(t);
        close_all(t);
    }

    // ---- memory: the heap replay (heap_replay.hpp) -------------------------------------
    HeapReplay heap;
    void on_alloc(uint32_t id, uint64_t ticks, uint64_t ptr, uint64_t size, uint32_t stack,
                  format::AllocKind kind, uint64_t alignment) override {
        heap.on_alloc(thread(id), id, ticks, ptr, size, stack, kind, alignment);
    }
    void on_free(uint32_t id, uint64_t ticks, uint64_t ptr, format::FreeKind kind,
                 uint64_t alignment) override {
        heap.on_free(thread(id), id, ticks, ptr, kind, alignment);
    }
    void on_realloc(uint32_t id, uint64_t ticks, uint64_t old_ptr, uint64_t ptr, uint64_t size,
                    uint32_t stack) override {
        heap.on_realloc(thread(id), id, ticks, old_ptr, ptr, size, stack);
    }
    void on_stack(uint32_t id, uint32_t stack, const std::vector<uint64_t>& pcs) override {
        heap.on_stack(thread(id), stack, pcs);
    }
    void on_rss(uint32_t id, uint64_t ticks, uint64_t bytes) override {
        heap.on_rss(id, ticks, bytes);
    }
    void on_chunk_done(uint64_t sync_ticks) override {
        ++chunks_read;
        definitions = 0;
        heap.chunk_done(sync_ticks);
    }
    FunctionResolver resolver;
    Replayed replayed() { return Replayed{traces, functions, threads, resolver}; }

    // The end of a trace: frames still open (the thread ended without unwinding: exit() from
    // deep inside, a thread killed with the process) close at its end. In a trace whose file
    // is cut short (partial), each thread's stream stops at its own last whole record: its
    // frames close there, and the CPU time since its last sample, which the next sample (cut
    // off) would have placed, stays unplaced; nothing after the cut is made up. A thread cut
    // before its first sample is no thread too short to be sampled (its samples may have been
    // cut off): timed by samples, it has none yet, rather than the hooks' times.
    void end_trace(const reader::TraceInfo& info, size_t first_thread, bool name_sites = true) {
        for (size_t i = first_thread; i < threads.size(); ++i) {
            ThreadReplay& t = *threads[i];
            uncount_inherited(t, info);
            add_tree_calls(t);
            timing.place_samples(t);
            if (info.partial) {
                if (!t.ended) t.sampled = true;
                t.spans_closed = true;
            } else if (!t.stack.empty())
                advance(t, std::max(info.end_ticks, t.last));
            timing.close_last_span(t);
            close_all(t);
        }
        timing.time_trace(threads, first_thread);
        if (options.observer) options.observer->trace_done(trace_index);
        if (options.memory) heap.finish_memory(info);
        traces.push_back(info);
        if (timing.stack_sampled) timing.add_sampled_lines(traces.back());
        timing.add_marked_line_samples(traces.back());
        // Name the frames of the memory sites found in this trace, and merge alike stacks.
        if (options.memory && name_sites) heap.merge_sites(traces, resolver);
    }

    // Reads one trace to its end (`process`: its process records, when already read).
    void read_trace(const std::string& path, bool name_sites = true,
                    const reader::TraceInfo* process = nullptr) {
        if (process)
            begin_trace(*process);
        else
            begin_trace(path);
        reader::TraceReader r(path);
        size_t first = threads.size();
        const reader::TraceInfo& info = r.read(*this);
        end_trace(info, first, name_sites);
    }

    // Reads one trace with its thread streams spread over up to `jobs` cores: each core
    // replays the streams given to it (their calls and times depend on nothing else), and
    // the threads and functions are merged in the order a single reader would have met them,
    // so the result is the one read_trace gives. Memory records need one time order across
    // threads, and an observer sees every event in file order: such traces are read by one
    // core.
    void read_trace_streams(const std::string& path, unsigned jobs) {
        reader::TraceReader probe(path);
        refuse_counted_unread(probe.info());
        const reader::TraceInfo process = probe.read_metadata();
        std::vector<reader::StreamExtent> streams = probe.stream_extents();
        bool memory_trace = options.memory && process.meta.count("memory_profiler");
        jobs = unsigned(std::min<size_t>(jobs, streams.size()));
        // A trace sampled from outside gets its line tables from its samples, across threads.
        bool sampled_stacks = process.meta.count("sampler") != 0;
        if (jobs <= 1 || options.observer || memory_trace || sampled_stacks)
            return read_trace(path, true, &process);
        std::unordered_map<uint32_t, unsigned> core_of = assign_streams(streams, jobs);
        SessionOptions one = options;
        one.memory = false;
        std::mutex progress_lock;
        std::vector<uint64_t> progress_seen(jobs, 0);
        uint64_t progress_total = events_read;
        std::vector<std::unique_ptr<Impl>> parts(jobs);
        std::vector<reader::TraceInfo> infos(jobs);
        std::vector<std::exception_ptr> errors(jobs);
        auto work = [&](unsigned c) {
            try {
                SessionOptions mine = one;
                if (options.progress)
                    mine.progress = [&, c](const Progress& p) {
                        std::lock_guard<std::mutex> hold(progress_lock);
                        progress_total += p.events - progress_seen[c];
                        progress_seen[c] = p.events;
                        Progress all = p;
                        all.events = progress_total;
                        options.progress(all);
                    };
                auto part = std::make_unique<Impl>(mine);
                part->begin_trace(process);
                reader::TraceReader r(path);
                r.select_streams([&, c](uint32_t stream) {
                    auto it = core_of.find(stream);
                    return it != core_of.end() && it->second == c;
                });
                infos[c] = r.read(*part);
                parts[c] = std::move(part);
            } catch (...) {
                errors[c] = std::current_exception();
            }
        };
        std::vector<std::thread> workers;
        for (unsigned c = 1; c < jobs; ++c) workers.emplace_back(work, c);
        work(0);
        for (std::thread& w : workers) w.join();
        rethrow_first(errors);
        // A trace the writer did not finish can hold memory records without saying so.
        if (options.memory)
            for (const reader::TraceInfo& i : infos)
                if (i.memory_records) return read_trace(path, true, &process);
        begin_trace(process);
        size_t first = threads.size();
        std::vector<StreamPart> read;
        for (unsigned c = 0; c < jobs; ++c)
            read.push_back(StreamPart{parts[c]->functions.front(), parts[c]->threads});
        merge_streams(read, *fns, trace_index, threads);
        reader::TraceInfo info = merge_infos(infos, process);
        for (unsigned c = 0; c < jobs; ++c) events_read += parts[c]->events_read;
        end_trace(info, first);
    }

    // Takes over what `other` read of its one trace, as if this had read it next.
    void absorb(Impl& other) {
        size_t trace = traces.size();
        traces.push_back(std::move(other.traces.front()));
        functions.push_back(std::move(other.functions.front()));
        // How the trace was timed: without it, the merge reads as if no trace counted calls.
        timing.time_bases.insert(timing.time_bases.end(), other.timing.time_bases.begin(),
                                 other.timing.time_bases.end());
        timing.trace_kinds.insert(timing.trace_kinds.end(), other.timing.trace_kinds.begin(),
                                  other.timing.trace_kinds.end());
        for (const auto& [key, basis] : other.timing.thread_bases) // its threads' own parts
            timing.thread_bases[{trace + key.first, key.second}] = basis;
        for (auto& t : other.threads) {
            t->trace = trace;
            t->index = threads.size();
            threads.push_back(std::move(t));
        }
        events_read += other.events_read;
        if (!options.memory) return;
        heap.absorb(other.heap, trace);
        heap.merge_sites(traces, resolver);
    }
};

Session::Session(SessionOptions o) : impl_(std::make_unique<Impl>(std::move(o))) {}
Session::~Session() = default;

const reader::TraceInfo& Session::add_trace(const std::string& path) {
    impl_->read_trace(path);
    return impl_->traces.back();
}

void Session::add_traces(const std::vector<std::string>& paths, unsigned jobs) {
    Impl& s = *impl_;
    if (jobs == 0) jobs = std::max(1u, std::thread::hardware_concurrency());
    // One trace: its thread streams share the cores.
    if (paths.size() == 1) return s.read_trace_streams(paths[0], jobs);
    jobs = unsigned(std::min<size_t>(jobs, paths.size()));
    // An observer sees every trace's events in order: one trace at a time.
    if (jobs <= 1 || s.options.observer) {
        for (const std::string& p : paths) s.read_trace(p);
        return;
    }
    // Traces are independent until they are merged: each is read by a session of its own,
    // on a core of its own, and merged in the order given, so the result does not depend on
    // which finished first.
    SessionOptions one = s.options;
    std::mutex progress_lock;
    if (s.options.progress)
        one.progress = [&](const Progress& p) {
            std::lock_guard<std::mutex> hold(progress_lock);
            s.options.progress(p);
        };
    std::vector<std::unique_ptr<Impl>> read(paths.size());
    std::vector<std::exception_ptr> errors(paths.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t i; (i = next.fetch_add(1)) < paths.size();) {
            try {
                auto r = std::make_unique<Impl>(one);
                r->read_trace(paths[i], false);
                read[i] = std::move(r);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        }
    };
    std::vector<std::thread> workers;
    for (unsigned j = 1; j < jobs; ++j) workers.emplace_back(work);
    work();
    for (std::thread& w : workers) w.join();
    for (size_t i = 0; i < paths.size(); ++i) {
        if (errors[i]) std::rethrow_exception(errors[i]);
        s.absorb(*read[i]);
        read[i].reset();
    }
}

const std::vector<reader::TraceInfo>& Session::traces() const {
    return impl_->traces;
}

std::vector<ThreadFilter> Session::thread_list() const {
    std::vector<ThreadFilter> out;
    for (const auto& t : impl_->threads) out.push_back(ThreadFilter{t->trace, t->stream});
    return out;
}

ThreadSummary Session::thread(size_t index) const {
    const ThreadReplay& t = *impl_->threads.at(index);
    const reader::TraceInfo& info =
        t.trace < impl_->traces.size() ? impl_->traces[t.trace] : impl_->layout;
    ThreadSummary ts = summarize_thread(info, t.trace, t.stream);
    ts.unmatched_exits = t.unmatched_exits;
    return ts;
}

std::optional<ThreadFilter> Session::find_thread(uint32_t tid) const {
    for (const auto& t : impl_->threads) {
        const reader::TraceInfo& info = impl_->traces.at(t->trace);
        auto it = info.threads.find(t->stream);
        if (it != info.threads.end() && it->second.tid == tid)
            return ThreadFilter{t->trace, t->stream};
    }
    return std::nullopt;
}

Profile Session::profile(const ThreadFilter& filter) const {
    return build_profile(impl_->replayed(), filter, impl_->options.compensate,
                         impl_->timing.time_basis(filter));
}
views::CallTree Session::call_tree(const views::CallTreeOptions& o) const {
    return build_tree(impl_->replayed(), o, impl_->timing.time_basis(o.thread));
}
TimeBasis Session::time_basis(const ThreadFilter& filter) const {
    return impl_->timing.time_basis(filter);
}
const MemoryReport& Session::memory() const {
    return impl_->heap.memory;
}

uint64_t Session::function_address(size_t trace, uint32_t function) const {
    return impl_->functions.at(trace).address.at(function);
}
size_t Session::function_module(size_t trace, uint32_t function) const {
    return impl_->functions.at(trace).module.at(function);
}
size_t Session::current_trace() const {
    return impl_->trace_index;
}
std::vector<CallPathLatency> Session::call_latencies() const {
    std::vector<CallPathLatency> out;
    for (const auto& t : impl_->threads)
        for (const PathLatency& l : t->latency) {
            CallPathLatency c;
            c.thread = t->index;
            c.trace = t->trace;
            for (uint32_t n = l.path; n; n = t->nodes[n].parent)
                c.path.push_back(t->nodes[n].function);
            std::reverse(c.path.begin(), c.path.end());
            c.path_calls = t->nodes[l.path].calls;
            c.calls = l.record.calls;
            c.sum_ns = double(l.record.sum_ticks) * l.ns_per_tick;
            c.max_ns = double(l.record.max_ticks) * l.ns_per_tick;
            uint64_t max_start = l.record.max_end_ticks - l.record.max_ticks;
            c.max_start_ns =
                max_start > l.start_ticks ? double(max_start - l.start_ticks) * l.ns_per_tick : 0.0;
            c.ns_per_tick = l.ns_per_tick;
            c.buckets = l.record.buckets;
            out.push_back(std::move(c));
        }
    return out;
}

const reader::TraceInfo& Session::trace_info(size_t trace) const {
    return trace < impl_->traces.size() ? impl_->traces[trace] : impl_->layout;
}
uint64_t Session::events() const {
    return impl_->events_read;
}

} // namespace prof::analysis
