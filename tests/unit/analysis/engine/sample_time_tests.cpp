// Time from samples (analysis/engine/sample_time.hpp): sampled, counting and placed samples on
// traces built record by record (1 ns clock), and the room's arithmetic on threads built by hand.
#include "unit/analysis/analysis_support.hpp"

#include "analysis/engine/sample_time.hpp"
#include "reader/dwarf_lines.hpp"
#include "reader/elf_symbols.hpp"
#include "reader/trace_reader.hpp"
#include "support/run.hpp"

#include <cmath>
#include <fstream>
#include <link.h>
#include <map>
#include <memory>
#include <unistd.h>

using namespace prof;
using namespace prof::test;

namespace {

// main 0..10 ms calls a 1..4 ms and b 4..10 ms; b is off CPU for 4 ms. Samples (CPU clock in
// the record): armed at 0; at 2 ms (CPU 2 ms, in a); at 3.5 ms (CPU 3.5 ms, in a, 0.5 ms of it
// in the profiler); at 9 ms (CPU 5 ms, in b). 1 tick = 1 ns. `waited` (1.11): a Waited record
// before each sample, b's span (3.5 to 9 ms) waiting 3 ms for a CPU.
std::string sampled_trace(bool waited = false) {
    TraceBuilder b;
    b.chunk(0);
    b.meta("sample_hz", "1000");
    b.chunk(1, 0);
    define_functions(b, 3);
    auto wait = [&](uint64_t run_delay_ns) -> TraceBuilder& {
        return waited ? b.waited(run_delay_ns) : b;
    };
    b.enter(0, 0);
    wait(0).sample(0, 0, 0, 0, 0);
    b.enter(1, 1000000);
    wait(0).sample(1000000, 2000000, 0, 0, 1);
    wait(0).sample(1500000, 3500000, 500000, 1, 1);
    b.exit(500000).enter(2, 0);
    wait(3000000).sample(5000000, 5000000, 0, 0, 1);
    b.exit(1000000).exit(0);
    b.chunk(0);
    name_functions(b, {"main", "a", "b"}).end_record(10000000);
    return save_trace(b, waited ? "waited.trace" : "sampled.trace");
}

analysis::Profile timed(const std::string& path, analysis::TimeSource time) {
    analysis::SessionOptions o;
    o.time = time;
    analysis::Session s(o);
    s.add_trace(path);
    return s.profile();
}

} // namespace

// A damaged trace (the fuzzer's find): a Sample record's CPU clock jumps by 2^63 ns, then its
// profiler time by 2^64 - 1 ns, more than any int64_t of clock units holds. A step of the
// samples stands for at most 2^58 units (2^50 ns at 1 tick per ns), and nothing overflows
// (the unchecked conversion was undefined, and gave `a` no time at all here).
TEST_CASE("sampled time: a CPU clock that jumps past what clock units hold is capped") {
    TraceBuilder b;
    b.chunk(0);
    b.meta("sample_hz", "1000");
    b.chunk(1, 0);
    define_functions(b, 2);
    b.enter(0, 0).sample(0, 0, 0, 0, 0);
    b.enter(1, 1000000).sample(1000000, uint64_t(1) << 63, 0, 0, 1);
    b.sample(1000000, (uint64_t(1) << 63) + 1000000, UINT64_MAX, 1, 1);
    b.exit(1000000).exit(0);
    b.chunk(0);
    name_functions(b, {"main", "a"}).end_record(4000000);
    std::string path = save_trace(b, "cpu-jump.trace");
    const double cap_ns = double(uint64_t(1) << 50);
    // Timed by its samples: the first stands for the cap, not for the CPU clock's 2^63 ns.
    analysis::Profile p = timed(path, analysis::TimeSource::kSampled);
    check_stats(stats(p, "a"), 1, 1, cap_ns, cap_ns);
    check_stats(stats(p, "main"), 1, 1, 1e6, cap_ns + 1e6);
    // Two samples are too few for the default: the hooks' times.
    analysis::Profile traced = timed(path, analysis::TimeSource::kAuto);
    check_stats(stats(traced, "a"), 1, 1, 3e6, 3e6);
    check_stats(stats(traced, "main"), 1, 1, 1e6, 4e6);
}

TEST_CASE("sampled time: CPU from the samples' clock, off CPU in the long intervals") {
    std::string path = sampled_trace();
    analysis::Profile p = timed(path, analysis::TimeSource::kSampled);
    // a: the first sample's 2 ms (main's first millisecond included: a sample stands for the
    // CPU time since the one before) and 1.5 - 0.5 ms of the second. b: the third sample's
    // 1.5 ms and the 4 ms the span from 3.5 to 9 ms was off CPU, all in b's interval (a's
    // 0.5 ms interval of that span is short enough to have run). main: the last span, after
    // the last sample, 1 ms at most one period of CPU, in the frame closed last.
    check_stats(stats(p, "a"), 1, 1, 3e6, 3e6);
    check_stats(stats(p, "b"), 1, 1, 5.5e6, 5.5e6);
    check_stats(stats(p, "main"), 1, 1, 1e6, 9.5e6);
    CHECK(p.time.sampled_traces == 1);
    CHECK(p.time.samples == 3);
    CHECK(p.time.own_samples == 1);
    CHECK(same_time(p.time.own_seconds, 0.5e6));
    CHECK(same_time(p.time.cpu_seconds, 5e6));

    // The hooks' clock, asked for or because 3 samples are too few.
    for (analysis::TimeSource t : {analysis::TimeSource::kTraced, analysis::TimeSource::kAuto}) {
        analysis::Profile traced = timed(path, t);
        check_stats(stats(traced, "a"), 1, 1, 3e6, 3e6);
        check_stats(stats(traced, "b"), 1, 1, 6e6, 6e6);
        check_stats(stats(traced, "main"), 1, 1, 1e6, 10e6);
        CHECK(traced.time.sampled_traces == 0);
        CHECK(traced.time.too_few == (t == analysis::TimeSource::kAuto ? 4 : 0)); // 3 + 1 own
    }

    // The call tree and the profile agree.
    analysis::SessionOptions o;
    o.time = analysis::TimeSource::kSampled;
    analysis::Session s(o);
    s.add_trace(path);
    analysis::views::CallTree tree = s.call_tree();
    CHECK(tree.nodes[node_at(tree, {"main"})].total_ns == 9500000);
    CHECK(tree.nodes[node_at(tree, {"main", "b"})].total_ns == 5500000);
    CHECK(tree.time.samples == 3);
}

namespace {

// A thread traced until 1 ms, counting from then on (1 tick = 1 ns): main (entered traced),
// main > work (3 calls), main > work > helper (5 calls); samples and clock records name nodes.
std::string counted_trace() {
    TraceBuilder b;
    b.chunk(0).meta("sample_hz", "1000");
    b.chunk(1, 0);
    define_functions(b, 2);
    b.sample(0, 0, 0, 0, 0); // t 0: armed, CPU clock 0
    b.enter(0, 0);           // main, traced
    b.counting(1000000, 1000000);
    b.call_counts(1, {0, 3}).call_node(1, 0, 0).call_node(2, 1, 1);
    b.node_sample(2000000, 3000000, 0, 0, 1, 2); // t 3 ms in work: CPU 0 .. 3 ms
    b.function(0x3000).call_counts(3, {5}).call_node(3, 2, 2);
    b.position(3);
    b.alloc(1000000, 0x5000, 64, 0, format::AllocKind::kMalloc); // t 4 ms in helper
    // t 9 ms: the first hook after a switch, in main: 6 ms since the last clocks, 1 ms on CPU.
    b.node_sample(5000000, 4000000, 0, 0, 0, 1);
    // t 10 ms in helper: 2 ms of CPU since the last sample charged, 0.2 of it the profiler's.
    b.node_sample(1000000, 5000000, 200000, 1, 1, 3);
    // t 11 ms: the clocks at the thread's end, in main: 0.5 ms on CPU, 0.5 ms off.
    b.node_sample(1000000, 5500000, 0, 0, 0, 1);
    b.thread_end(0);
    b.chunk(0);
    name_functions(b, {"main", "work", "helper"}).end_record(11000000);
    return save_trace(b, "counted.trace");
}

} // namespace

TEST_CASE("counting threads (1.9): the tree's counts, times from samples and clock records") {
    std::string path = counted_trace();
    for (analysis::TimeSource source :
         {analysis::TimeSource::kAuto, analysis::TimeSource::kSampled}) {
        CAPTURE(int(source));
        analysis::SessionOptions o;
        o.time = source;
        analysis::Session s(o);
        s.add_trace(path);
        analysis::Profile p = s.profile();
        // work: the first sample's 3 ms (the traced millisecond of main included); helper: 2 ms
        // less the profiler's 0.2; main: 5 ms off CPU before 9 ms, 0.5 ms off and the 0.5 ms
        // on CPU after the last sample at the end.
        check_stats(stats(p, "main"), 1, 1, 6e6, 10.8e6);
        check_stats(stats(p, "work"), 3, 3, 3e6, 4.8e6);
        check_stats(stats(p, "helper"), 5, 5, 1.8e6, 1.8e6);
        CHECK(edge(p, "work", "helper").ncalls == 5);
        CHECK(p.time.sampled_traces == 1);
        CHECK(p.time.untimed_traces == 1);
        CHECK(p.time.switched_traces == 1); // no Meta time=sampled: it began counting mid-way
        CHECK(p.time.samples == 2);
        CHECK(p.time.own_samples == 1);
        CHECK(same_time(p.total_time, 10.8e6));
        // The allocation at the Position's node.
        const analysis::MemoryReport& m = s.memory();
        REQUIRE(m.sites.size() == 1);
        REQUIRE(m.sites[0].stack.size() == 3);
        CHECK(m.sites[0].stack[0].name == "helper");
        CHECK(m.sites[0].stack[2].name == "main");
    }
}

namespace {

// Two functions of this test binary, to be named by its symbol table on disk.
__attribute__((noinline)) void placed_caller() {
    __asm__ volatile("nop; nop; nop");
}
__attribute__((noinline)) void placed_callee() {
    __asm__ volatile("nop; nop; nop");
}

// A function inlined into placed_host with an out-of-line copy (its address is taken), as GCC
// leaves a function whose hooks it keeps in its inlined copies; the host has code of its own
// before and after the inlined body.
inline __attribute__((always_inline)) int placed_inlined(int x) {
    int y;
    __asm__ volatile("imul $3, %1, %0; nop; nop; nop; nop; nop; nop; nop; nop" : "=r"(y) : "r"(x));
    return y + 1;
}
__attribute__((noinline)) int placed_host(int n) {
    int s = 0;
    __asm__ volatile("nop; nop; nop; nop; nop; nop; nop; nop" ::: "memory");
    for (int i = 0; i < n; ++i) s += placed_inlined(i);
    __asm__ volatile("nop; nop; nop; nop; nop; nop; nop; nop" ::: "memory");
    return s;
}
int (*volatile placed_inlined_copy)(int) = placed_inlined;

struct ProgramImage {
    uint64_t bias = 0, start = UINT64_MAX, end = 0;
    std::string path;
};

// The stats of the function at `address` in `p` (one must be there).
const analysis::Stats& stats_at(const analysis::Profile& p, uint64_t address) {
    for (const analysis::Function& f : p.functions)
        if (f.address == address) return f.stats;
    FAIL("no function at " << address);
    return p.functions.front().stats;
}
// Within the wall time around a test's samples (a few tens of ns, off CPU in the frames open).
bool near(double seconds, double want) {
    return std::abs(seconds - want) < 100e-9;
}

int find_program(dl_phdr_info* info, size_t, void* data) {
    auto* image = static_cast<ProgramImage*>(data);
    if (info->dlpi_name && info->dlpi_name[0]) return 0; // the program is the nameless one
    image->bias = info->dlpi_addr;
    for (size_t i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        image->start = std::min<uint64_t>(image->start, info->dlpi_addr + ph.p_vaddr);
        image->end = std::max<uint64_t>(image->end, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
    }
    return 1;
}

// This test binary: where it is loaded, and its file.
ProgramImage this_program() {
    ProgramImage image;
    dl_iterate_phdr(find_program, &image);
    char exe[4096] = {};
    REQUIRE(readlink("/proc/self/exe", exe, sizeof exe - 1) > 0);
    image.path = exe;
    return image;
}

} // namespace

// A sample that interrupted an instrumented function other than its frame's (its prologue
// before the enter hook ran, its epilogue after the exit hook) is the callee's code: it goes to
// the callee called from the frame. One in the frame's own function stays, and so does one in
// no known code. (Code of an ancestor while a callee is open: the DWARF test below.)
TEST_CASE("samples in a callee's code outside its hooks go to the callee (1.9 ip)") {
    ProgramImage image = this_program();
    const std::string& exe = image.path;
    auto caller = reinterpret_cast<uint64_t>(&placed_caller);
    auto callee = reinterpret_cast<uint64_t>(&placed_callee);
    reader::ElfSymbols elf(exe);
    REQUIRE(elf.ok());
    REQUIRE(elf.find(callee + 2 - image.bias));
    REQUIRE(elf.find(callee + 2 - image.bias)->start + image.bias == callee);

    TraceBuilder b;
    b.chunk(0).meta("sample_hz", "1000").module(0, image.start, image.end, exe, image.bias);
    b.chunk(1, 0).function(caller).function(callee);
    b.sample(0, 0, 0, 0, 0);                   // t 0: armed
    b.enter(0, 0).enter(1, 10);                // caller calls callee
    b.sample(1000000, 1000000, 0, 0, 1, 0x10); // 1 ms: no known code, callee open
    b.exit(10);
    b.sample(1000000, 2000000, 0, 0, 1, callee + 2); // 1 ms: in callee's code, frame caller
    b.sample(1000000, 3000000, 0, 0, 1, caller + 1); // 1 ms: in caller's own code
    b.sample(1000000, 4000000, 0, 0, 1, 0x10);       // 1 ms: no known code
    b.exit(10).thread_end(0);
    b.chunk(0).end_record(5000000);
    analysis::Profile p = timed(save_trace(b, "placed.trace"), analysis::TimeSource::kSampled);
    auto fn = [&](uint64_t address) { return stats_at(p, address); };
    CHECK(p.functions.size() == 2); // no path caller > callee > caller made up
    CHECK(fn(callee).ncalls == 1);
    CHECK(near(fn(callee).tottime, 2e-3));
    CHECK(near(fn(caller).tottime, 2e-3));
    CHECK(near(fn(caller).cumtime, 4e-3));
}

namespace {

using analysis::engine::kClockFraction;
using analysis::engine::SampleTime;
using analysis::engine::ThreadReplay;

// Ticks on a thread's clock, in its fixed-point units.
constexpr int64_t units(int64_t ticks) {
    return ticks << kClockFraction;
}

// A thread of call paths main (node 1) > a (node 2) and main > b (node 3).
struct SampledThread {
    ThreadReplay t;
    uint32_t main = t.child(0, 0), a = t.child(main, 1), b = t.child(main, 2);
};

} // namespace

TEST_CASE("sample time: CPU nanoseconds as clock units, capped, never negative") {
    SampleTime st;
    st.units_per_ns = double(1 << kClockFraction); // 1 tick per ns
    CHECK(st.long_interval_units() == units(20000));
    CHECK(st.cpu_units(1000) == units(1000));
    CHECK(st.cpu_units((uint64_t(1) << 50) - 1) == units((int64_t(1) << 50) - 1));
    CHECK(st.cpu_units(uint64_t(1) << 50) == analysis::engine::kMaxCpuUnits);
    CHECK(st.cpu_units(UINT64_MAX) == analysis::engine::kMaxCpuUnits);
    CHECK(st.cpu_units_between(1500, 1000) == units(500));
    CHECK(st.cpu_units_between(1000, 1500) == 0); // the clock went back
    CHECK(st.cpu_units_between(1000, 1000) == 0);
    st.units_per_ns = 2.5 * (1 << kClockFraction); // 2.5 GHz
    CHECK(st.long_interval_units() == units(50000));
    CHECK(st.cpu_units(1000) == units(2500));

    SampledThread s;
    SampleTime::give(s.t, s.a, units(7));
    SampleTime::give(s.t, s.a, units(3));
    SampleTime::give(s.t, s.b, -units(5)); // nothing to give
    SampleTime::give(s.t, s.b, 0);
    CHECK(s.t.self == std::vector<int64_t>{0, 0, units(10), 0});
    SampleTime::count_samples(s.t, s.b, 2);
    SampleTime::count_samples(s.t, s.b, 0);
    SampleTime::count_samples(s.t, s.main, 1);
    CHECK(s.t.node_samples == std::vector<uint64_t>{0, 1, 0, 2});
}

TEST_CASE("sample time: a span's time off CPU goes to its long intervals, up to a level") {
    // (Time off CPU is kept apart from the CPU time, self_off, once settled: settle_off.)
    SampleTime st;
    SUBCASE("the short intervals ran; the CPU time left is spread evenly over the long ones") {
        // A span of 1000 ticks, 400 on CPU; long intervals of 300 (in a) and 500 (in b): the
        // short ones (200) ran, 200 are left, 100 to each; off CPU: a 200, b 400.
        SampledThread s;
        s.t.long_intervals = {{s.b, units(500)}, {s.a, units(300)}};
        st.close_span(s.t, 1000, units(400), s.main);
        st.settle_off(s.t, true);
        CHECK(s.t.self_off == std::vector<int64_t>{0, 0, units(200), units(400)});
    }
    SUBCASE("a long interval shorter than the level runs all the time, the rest share the left") {
        // Long intervals of 50 (in a) and 500 (in b), 300 ticks of CPU left after the short
        // ones (450): a's 50 ran, b ran 250 of its 500.
        SampledThread s;
        s.t.long_intervals = {{s.a, units(50)}, {s.b, units(500)}};
        st.close_span(s.t, 1000, units(450 + 300), s.main);
        st.settle_off(s.t, true);
        CHECK(s.t.self_off == std::vector<int64_t>{0, 0, 0, units(250)});
    }
    SUBCASE("less CPU than the short intervals: the long ones were off CPU, the rest to `rest`") {
        SampledThread s;
        s.t.long_intervals = {{s.a, units(300)}, {s.b, units(500)}};
        st.close_span(s.t, 1000, units(100), s.main);
        st.settle_off(s.t, true);
        CHECK(s.t.self_off == std::vector<int64_t>{0, units(100), units(300), units(500)});
    }
    SUBCASE("no long interval: the time off CPU is the rest's") {
        SampledThread s;
        s.t.span_ticks = 400;
        st.close_span(s.t, 1000, units(250), s.b);
        st.settle_off(s.t, true);
        CHECK(s.t.self_off == std::vector<int64_t>{0, 0, 0, units(350)});
    }
    SUBCASE("all on CPU: nothing off CPU") {
        SampledThread s;
        s.t.long_intervals = {{s.a, units(300)}};
        st.close_span(s.t, 1000, units(1000), s.main);
        CHECK(s.t.self.empty());
        CHECK(s.t.self_off.empty());
    }
    SUBCASE("the next span starts at its end, with none of its intervals") {
        SampledThread s;
        s.t.long_intervals = {{s.a, units(300)}};
        s.t.scope_credit = units(20);
        st.close_span(s.t, 1000, units(100), s.main);
        CHECK(s.t.span_ticks == 1000);
        CHECK(s.t.long_intervals.empty());
        CHECK(s.t.scope_credit == 0);
    }
}

TEST_CASE("sample time: which clock times a trace, by its samples and the source asked for") {
    reader::TraceInfo layout;
    layout.ticks_per_second = 1e9;
    auto basis = [&](analysis::TimeSource source, uint64_t samples, uint64_t own_samples) {
        SampleTime st;
        st.layout = &layout;
        st.source = source;
        std::vector<std::unique_ptr<ThreadReplay>> threads;
        threads.push_back(std::make_unique<ThreadReplay>()); // of an earlier trace
        threads[0]->samples = 1000;
        threads.push_back(std::make_unique<ThreadReplay>());
        threads[1]->samples = samples;
        threads[1]->own_samples = own_samples;
        st.time_trace(threads, 1);
        REQUIRE(st.time_bases.size() == 1);
        return st.time_bases[0];
    };
    using analysis::TimeSource;
    analysis::TimeBasis few = basis(TimeSource::kAuto, 98, 1); // 99: one too few
    CHECK(few.traced_traces == 1);
    CHECK(few.sampled_traces == 0);
    CHECK(few.too_few == 99);
    analysis::TimeBasis enough = basis(TimeSource::kAuto, 99, 1);
    CHECK(enough.sampled_traces == 1);
    CHECK(enough.traced_traces == 0);
    CHECK(enough.samples == 99);
    CHECK(enough.own_samples == 1);
    CHECK(enough.too_few == 0);
    CHECK(basis(TimeSource::kSampled, 1, 0).sampled_traces == 1);
    CHECK(basis(TimeSource::kSampled, 0, 0).traced_traces == 1);
    CHECK(basis(TimeSource::kSampled, 0, 0).too_few == 0);
    analysis::TimeBasis traced = basis(TimeSource::kTraced, 5000, 0);
    CHECK(traced.traced_traces == 1);
    CHECK(traced.too_few == 5000);
}

TEST_CASE("sample time: a sampled thread's node totals are its own times summed upwards") {
    reader::TraceInfo layout;
    layout.ticks_per_second = 1e9;
    layout.meta["sample_idle"] = "1";
    layout.meta["off_cpu_approximate_ns"] = "2500";
    SampleTime st;
    st.layout = &layout;
    st.untimed_hooks = true; // PROF_TIME=sampled: the samples' times, however few
    std::vector<std::unique_ptr<ThreadReplay>> threads;
    threads.push_back(std::make_unique<ThreadReplay>());
    ThreadReplay& t = *threads[0];
    uint32_t main = t.child(0, 0), a = t.child(main, 1), b = t.child(main, 2);
    uint32_t c = t.child(a, 2);
    t.sampled = true;
    t.samples = 3;
    t.own_samples = 1;
    t.sampled_cpu = units(4000);
    t.own = units(500);
    t.off_cpu = units(700);
    t.off_cpu_records = 2;
    t.self = {0, units(10), units(20), units(40)}; // c's own time not given: none
    st.time_trace(threads, 0);
    CHECK(t.nodes[c].total == 0);
    CHECK(t.nodes[b].total == units(40));
    CHECK(t.nodes[a].total == units(20));
    CHECK(t.nodes[main].total == units(70));
    CHECK(t.self.empty());
    REQUIRE(st.time_bases.size() == 1);
    const analysis::TimeBasis& tb = st.time_bases[0];
    CHECK(tb.sampled_traces == 1);
    CHECK(tb.untimed_traces == 1);
    CHECK(tb.switched_traces == 0);
    CHECK(tb.uncounted_traces == 0);
    CHECK(tb.samples == 3);
    CHECK(tb.own_samples == 1);
    CHECK(same_time(tb.cpu_seconds, 4000));
    CHECK(same_time(tb.own_seconds, 500));
    CHECK(same_time(tb.off_cpu_seconds, 700));
    CHECK(tb.off_cpu_records == 2);
    CHECK(tb.idle_traces == 1);
    CHECK(same_time(tb.idle_approximate_seconds, 2500));

    // A second trace, traced: how each was timed, by trace and together.
    threads.push_back(std::make_unique<ThreadReplay>());
    st.untimed_hooks = false;
    st.source = analysis::TimeSource::kTraced;
    st.time_trace(threads, 1);
    CHECK(st.time_basis({}).sampled_traces == 1);
    CHECK(st.time_basis({}).traced_traces == 1);
    CHECK(st.time_basis({}).samples == 3);
    CHECK(st.time_basis({}).chosen == analysis::TimeSource::kTraced);
    CHECK(st.time_basis(analysis::ThreadFilter{1, 0}).sampled_traces == 0);
    CHECK(st.time_basis(analysis::ThreadFilter{1, 0}).traced_traces == 1);
    CHECK(st.time_basis(analysis::ThreadFilter{0, 0}).samples == 3);
}

// Format 1.11: the run delay with each sample splits the time off CPU. The trace of
// sampled_trace() with Waited records: b's span (3.5 to 9 ms, 4 ms off CPU) waited 3 ms of it
// for a CPU, so 1 ms was blocked. --clock wall charges the 3 ms in proportion to the CPU time
// (a 3, b 1.5, main 1 ms), less the profiler's part (0.5 of the 5 ms sampled: 0.3 ms);
// --clock cpu leaves both out.
TEST_CASE("the time split (1.11): waiting for a CPU goes where the CPU time is, or nowhere") {
    std::string path = sampled_trace(true);
    auto read = [&](analysis::Clock clock) {
        analysis::SessionOptions o;
        o.time = analysis::TimeSource::kSampled;
        o.clock = clock;
        analysis::Session s(o);
        s.add_trace(path);
        return s.profile();
    };
    analysis::Profile wall = read(analysis::Clock::kWall);
    const double waiting = 2.7e6, on_cpu = 5.5e6;
    check_stats(stats(wall, "a"), 1, 1, 3e6 + waiting * 3e6 / on_cpu, 3e6 + waiting * 3e6 / on_cpu);
    check_stats(stats(wall, "b"), 1, 1, 1.5e6 + 1e6 + waiting * 1.5e6 / on_cpu,
                1.5e6 + 1e6 + waiting * 1.5e6 / on_cpu);
    check_stats(stats(wall, "main"), 1, 1, 1e6 + waiting * 1e6 / on_cpu, 9.2e6);
    const analysis::TimeBasis& t = wall.time;
    CHECK(same_time(t.on_cpu_seconds, 4.5e6));
    CHECK(same_time(t.runnable_seconds, 2.7e6));
    CHECK(same_time(t.own_runnable_seconds, 0.3e6));
    CHECK(same_time(t.blocked_seconds, 1e6));
    CHECK(t.off_cpu_unsplit_seconds == 0);

    analysis::Profile cpu = read(analysis::Clock::kCpu);
    check_stats(stats(cpu, "a"), 1, 1, 3e6, 3e6);
    check_stats(stats(cpu, "b"), 1, 1, 1.5e6, 1.5e6);
    check_stats(stats(cpu, "main"), 1, 1, 1e6, 5.5e6);
    CHECK(cpu.time.clock == analysis::Clock::kCpu);
    CHECK(same_time(cpu.time.blocked_seconds, 1e6));

    // Without Waited records (sampled_trace(), before 1.11) the time off CPU is not split.
    analysis::SessionOptions o;
    o.time = analysis::TimeSource::kSampled;
    analysis::Session old(o);
    old.add_trace(sampled_trace());
    analysis::Profile p = old.profile();
    CHECK(same_time(p.time.off_cpu_unsplit_seconds, 4e6));
    CHECK(p.time.runnable_seconds == 0);
    CHECK(p.time.blocked_seconds == 0);
}

// A file cut anywhere (an interrupted copy) is read up to its last whole record, and no function
// gets more time from the part read than from the whole trace: not the time off CPU since the
// last Waited record (the next one, cut off, would have moved part of it to the wait for a
// CPU), and not a share of the wait for a CPU by the CPU time read so far. Every cut of
// sampled_trace(true), byte by byte.
TEST_CASE("the time split of a trace cut anywhere: no function above the whole trace") {
    std::string path = sampled_trace(true);
    auto read = [](const std::string& trace) {
        analysis::SessionOptions o;
        o.time = analysis::TimeSource::kSampled;
        analysis::Session s(o);
        s.add_trace(trace);
        return s.profile();
    };
    analysis::Profile whole = read(path);
    std::map<uint64_t, analysis::Stats> whole_by_address;
    for (const analysis::Function& f : whole.functions) whole_by_address[f.address] = f.stats;
    std::string bytes = slurp(path);
    size_t read_some = 0;
    for (size_t size = 1; size < bytes.size(); ++size) {
        // (A cut in a chunk's unused end, zeros, reads as the cut before them.)
        if (bytes[size - 1] == 0 && size + 1 < bytes.size()) continue;
        CAPTURE(size);
        std::string cut = temp_path("waited-cut.trace");
        std::ofstream(cut, std::ios::binary | std::ios::trunc)
            .write(bytes.data(), std::streamsize(size));
        analysis::Profile p;
        try {
            p = read(cut);
        } catch (const std::exception&) {
            continue; // too short to be a trace: refused, which is no made-up profile
        }
        if (!p.functions.empty()) ++read_some;
        CHECK(p.total_time <= whole.total_time + 1e-12);
        for (const analysis::Function& f : p.functions) {
            CAPTURE(f.name);
            auto w = whole_by_address.find(f.address);
            REQUIRE(w != whole_by_address.end());
            CHECK(f.stats.tottime <= w->second.tottime + 1e-12);
            CHECK(f.stats.cumtime <= w->second.cumtime + 1e-12);
            CHECK(f.stats.ncalls <= w->second.ncalls);
        }
    }
    CHECK(read_some > 0);
}

// A thread whose CPU-time timer fired rarely (a CPU shared with a busy thread): 300 ms of CPU
// time at 1000 Hz in 3 samples. Its total stays exact; the header says its split is coarse.
TEST_CASE("sample time: a thread starved of samples is counted, with its CPU time") {
    TraceBuilder b;
    b.chunk(0);
    b.meta("sample_hz", "1000");
    b.chunk(1, 0);
    define_functions(b, 2);
    b.enter(0, 0).sample(0, 0, 0, 0, 0);
    b.enter(1, 1000000).sample(100000000, 100000000, 0, 0, 1);
    b.sample(100000000, 200000000, 0, 0, 1);
    b.exit(50000000).sample(50000000, 300000000, 0, 0, 1);
    b.exit(0);
    b.chunk(0);
    name_functions(b, {"main", "a"}).end_record(302000000);
    analysis::Profile p = timed(save_trace(b, "starved.trace"), analysis::TimeSource::kSampled);
    CHECK(p.time.starved_threads == 1);
    CHECK(same_time(p.time.starved_seconds, 300e6));
    // The sampled trace above has 3 samples for 5 ms: not starved.
    CHECK(timed(sampled_trace(), analysis::TimeSource::kSampled).time.starved_threads == 0);
}

// GCC keeps the hooks of a function it inlines, so the inlined function's frame is open while
// code scheduled around its hooks runs, and its host's frame while the inlined body runs
// outside them. DWARF's inlined scopes say whose code an instruction is: a sample in the
// inlined body goes to the inlined function called from the frame, one in the host's own code
// to the host, whichever frame was open.
TEST_CASE("samples go to the function whose code DWARF says they interrupted (inlined scopes)") {
    ProgramImage image = this_program();
    const std::string& exe = image.path;
    auto host = reinterpret_cast<uint64_t>(&placed_host);
    auto inlined = reinterpret_cast<uint64_t>(placed_inlined_copy);
    reader::ElfSymbols elf(exe);
    REQUIRE(elf.ok());
    const reader::ElfSymbols::Entry* host_symbol = elf.find(host - image.bias);
    REQUIRE(host_symbol);
    REQUIRE(elf.find(inlined - image.bias));
    // An address of the host in the inlined body, and one in the host's own code.
    reader::DwarfLines dwarf(exe);
    uint64_t in_body = 0, in_host = 0;
    for (uint64_t a = host_symbol->start; a < host_symbol->start + host_symbol->size; ++a) {
        std::string file;
        uint32_t line = 0;
        if (!dwarf.lookup(a, file, line)) continue;
        auto calls = dwarf.inlined(a);
        bool body = calls.size() == 1 &&
                    reader::demangle(calls[0].symbol).find("placed_inlined") != std::string::npos;
        if (body && !in_body) in_body = a + image.bias;
        if (calls.empty() && a > host_symbol->start && !in_host) in_host = a + image.bias;
    }
    REQUIRE(in_body);
    REQUIRE(in_host);

    TraceBuilder b;
    b.chunk(0).meta("sample_hz", "1000").module(0, image.start, image.end, exe, image.bias);
    b.chunk(1, 0).function(host).function(inlined);
    b.sample(0, 0, 0, 0, 0);                      // t 0: armed
    b.enter(0, 0).enter(1, 10).exit(10);          // the host, an inlined call
    b.sample(1000000, 1000000, 0, 0, 1, in_body); // 1 ms: the inlined body, host's frame
    b.enter(1, 10);                               // another inlined call
    b.sample(2000000, 3000000, 0, 0, 1, in_host); // 2 ms: the host's code, inlined's frame
    b.sample(1000000, 4000000, 0, 0, 1, in_body); // 1 ms: the inlined body, its frame
    b.exit(10).exit(10).thread_end(0);
    b.chunk(0).end_record(5000000);
    analysis::Profile p = timed(save_trace(b, "inlined.trace"), analysis::TimeSource::kSampled);
    auto fn = [&](uint64_t address) { return stats_at(p, address); };
    CHECK(p.functions.size() == 2);
    CHECK(fn(inlined).ncalls == 2);
    CHECK(near(fn(inlined).tottime, 2e-3));
    CHECK(near(fn(host).tottime, 2e-3));
    CHECK(near(fn(host).cumtime, 4e-3));
}

// A one-thread view's header is that thread's: its samples (the precision line), the
// profiler's samples and CPU time in it (the hooks' cost per call of its own calls), not the
// process's sums, which the view of every thread keeps.
TEST_CASE("sample time: one thread's basis is its own samples and the profiler's time in it") {
    TraceBuilder b;
    b.chunk(0).meta("sample_hz", "1000");
    b.chunk(1, 0);
    define_functions(b, 1);
    b.enter(0, 0);
    b.sample(0, 0, 0, 0, 0);
    b.sample(1000000, 2000000, 500000, 1, 1); // 2 ms of CPU, 0.5 of them the profiler's
    b.sample(1000000, 4000000, 0, 0, 2);
    b.exit(1000000);
    b.chunk(2, 0);
    b.tag(format::Tag::kThreadBegin).uleb(0).u32(777).str("worker");
    define_functions(b, 1);
    b.enter(0, 0);
    b.sample(0, 0, 0, 0, 0);
    b.sample(1000000, 1000000, 250000, 1, 1);
    b.exit(1000000);
    b.chunk(0);
    name_functions(b, {"main"}).end_record(10000000);
    std::string path = save_trace(b, "two-sampled.trace");
    analysis::SessionOptions o;
    o.time = analysis::TimeSource::kSampled;
    analysis::Session s(o);
    s.add_trace(path);
    analysis::TimeBasis all = s.time_basis();
    CHECK(all.samples == 4);
    CHECK(all.own_samples == 2);
    CHECK(same_time(all.cpu_seconds, 5e6));
    CHECK(same_time(all.own_seconds, 0.75e6));
    std::optional<analysis::ThreadFilter> worker = s.find_thread(777);
    REQUIRE(worker);
    analysis::TimeBasis one = s.time_basis(*worker);
    CHECK(one.sampled_traces == 1);
    CHECK(one.samples == 1);
    CHECK(one.own_samples == 1);
    CHECK(same_time(one.cpu_seconds, 1e6));
    CHECK(same_time(one.own_seconds, 0.25e6));
    analysis::Profile p = s.profile(*worker);
    CHECK(p.time.samples == 1);
    CHECK(same_time(p.time.own_seconds, 0.25e6));

    // Two traces read on two cores, then merged: the second's worker is its own too.
    analysis::Session two(o);
    two.add_traces({path, path}, 2);
    CHECK(two.time_basis().samples == 8);
    analysis::TimeBasis second = two.time_basis(analysis::ThreadFilter{1, 2});
    CHECK(second.sampled_traces == 1);
    CHECK(second.samples == 1);
    CHECK(same_time(second.own_seconds, 0.25e6));
}
