// The CPU-time sampler (trace format 1.5 Sample records) on the programs of
// tests/programs/sampled.cpp: every thread sampled, its CPU time accounted for, no EINTR from
// blocking calls, the program's own signals and timers untouched, fork, exec, vfork, SIGKILL,
// samples that wait for room, and PROF_SAMPLE_HZ. Exact facts only: counts, orders, and the
// bounds the kernel's timers guarantee on CPU time (never on wall time).
#include "reader/trace_reader.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace prof;
using prof::test::run;
using prof::test::temp_path;

namespace {

// What the reader delivers of each stream: its samples, with the function open at each, and
// whether its times ever went back.
struct Samples : reader::EventSink {
    struct Stream {
        std::vector<uint64_t> functions; // by stream-local index
        std::vector<uint64_t> open;      // the open frames' functions
        std::vector<reader::SampleRecord> samples;
        std::vector<uint64_t> in; // per sample: the innermost open function, 0 for none
        // Per sample: it was taken before its chunk was opened (it waited for room).
        std::vector<bool> late;
        // Counting (1.9): the function of each call tree node, from which samples are named.
        bool counting = false;
        std::vector<uint64_t> node_functions{0};
        uint64_t last_ticks = 0;
        bool ordered = true;
    };
    std::map<uint32_t, Stream> streams;
    std::vector<std::pair<uint32_t, size_t>> in_chunk; // the samples of the chunk being read

    void at(Stream& s, uint64_t ticks) {
        if (ticks < s.last_ticks) s.ordered = false;
        s.last_ticks = ticks;
    }
    void on_calls(uint32_t stream, const reader::CallRecord* r, size_t n) override {
        Stream& s = streams[stream];
        for (size_t i = 0; i < n; ++i) {
            at(s, r[i].ticks);
            if (!r[i].exit)
                s.open.push_back(s.functions.at(r[i].fn));
            else if (!s.open.empty())
                s.open.pop_back();
        }
    }
    void on_function(uint32_t stream, uint32_t fn, uint64_t address) override {
        Stream& s = streams[stream];
        s.functions.resize(std::max<size_t>(s.functions.size(), fn + 1));
        s.functions[fn] = address;
    }
    void on_enter(uint32_t, uint32_t, uint64_t) override {}
    void on_exit(uint32_t, uint64_t) override {}
    void on_enter_address(uint32_t stream, uint64_t address, uint64_t ticks) override {
        at(streams[stream], ticks);
        streams[stream].open.push_back(address);
    }
    void on_scope_run(uint32_t stream, uint32_t, uint64_t ticks, uint64_t, uint64_t) override {
        at(streams[stream], ticks);
    }
    void on_abandon(uint32_t stream, uint32_t frames, uint64_t ticks) override {
        Stream& s = streams[stream];
        at(s, ticks);
        s.open.resize(s.open.size() > frames ? s.open.size() - frames : 0);
    }
    void on_thread_end(uint32_t stream, uint64_t ticks) override { at(streams[stream], ticks); }
    void on_counting(uint32_t stream, uint64_t ticks, uint64_t) override {
        Stream& s = streams[stream];
        at(s, ticks);
        s.counting = true;
    }
    void on_call_node(uint32_t stream, uint32_t node, uint32_t, uint32_t fn) override {
        Stream& s = streams[stream];
        s.node_functions.resize(node + 1);
        s.node_functions[node] = s.functions.at(fn);
    }
    void on_sample(uint32_t stream, const reader::SampleRecord& r) override {
        Stream& s = streams[stream];
        at(s, r.ticks);
        s.samples.push_back(r);
        if (r.at_node)
            s.in.push_back(s.node_functions.at(r.node));
        else
            s.in.push_back(s.open.empty() ? 0 : s.open.back());
        s.late.push_back(false);
        in_chunk.emplace_back(stream, s.samples.size() - 1);
    }
    // A sample written when it was taken is later than the opening of its chunk (the writer
    // reads `sync_ticks` then); one that waited for room was taken before.
    void on_chunk_done(uint64_t sync_ticks) override {
        for (auto [stream, i] : in_chunk) {
            Stream& s = streams[stream];
            s.late[i] = s.samples[i].ticks < sync_ticks;
        }
        in_chunk.clear();
    }
};

struct Trace {
    reader::TraceInfo info;
    Samples sink;

    explicit Trace(const std::string& path) {
        reader::TraceReader r(path);
        info = r.read(sink);
    }
    const Samples::Stream& of_tid(uint32_t tid) const {
        for (const auto& [stream, t] : info.threads)
            if (t.tid == tid) return sink.streams.at(stream);
        FAIL("no stream of thread ", tid);
        return sink.streams.begin()->second;
    }
    std::string name(uint64_t address) const {
        const reader::Symbol* s = info.symbol_at(address);
        return s ? s->name : "";
    }
    uint64_t samples_in(const Samples::Stream& s, const std::string& prefix) const {
        uint64_t n = 0;
        for (size_t i = 0; i < s.samples.size(); ++i)
            if (s.in[i] && name(s.in[i]).rfind(prefix, 0) == 0) n += s.samples[i].count;
        return n;
    }
};

uint64_t count_of(const Samples::Stream& s) {
    uint64_t n = 0;
    for (const auto& r : s.samples) n += r.count;
    return n;
}

// What every sampled stream must be: a first record of count 0, then records of count 1 or more
// whose CPU clock never goes back by more than their own time says, and times that never
// decrease. A last record may be of count 0: the thread's clocks when its timer stopped (1.11),
// with the samples of the profiler since the one before. Once the thread counts its calls (1.9),
// records of count 0 come anywhere: the clocks read after the thread was off CPU (or a sample of
// the profiler).
void check_stream(const Samples::Stream& s) {
    CHECK(s.ordered);
    REQUIRE(!s.samples.empty());
    CHECK(s.samples[0].count == 0);
    CHECK(s.samples[0].own_ns == 0);
    for (size_t i = 1; i < s.samples.size(); ++i) {
        CAPTURE(i);
        const reader::SampleRecord &r = s.samples[i], &before = s.samples[i - 1];
        // A sample of the profiler weighs the CPU time since the sample before it, which in a
        // counting thread may lie before the record before (the clocks read after a switch).
        CHECK(r.cpu_ns >= before.cpu_ns + (r.at_node ? 0 : r.own_ns));
        CHECK(r.ticks >= before.ticks);
        if (r.count == 0 && !r.at_node) CHECK(i + 1 == s.samples.size());
    }
}

// `key value value...` lines of a program's output.
std::vector<std::vector<std::string>> lines_of(const std::string& out, const std::string& key) {
    std::vector<std::vector<std::string>> found;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::vector<std::string> w;
        for (std::string x; words >> x;) w.push_back(x);
        if (!w.empty() && w[0] == key) found.push_back(w);
    }
    return found;
}

// The value of `name=` in a line of words.
std::string field(const std::vector<std::string>& words, const std::string& name) {
    for (const std::string& w : words)
        if (w.rfind(name + "=", 0) == 0) return w.substr(name.size() + 1);
    FAIL("no field ", name);
    return "";
}

std::string sampled(const std::string& name, const std::string& mode,
                    std::vector<std::pair<std::string, std::string>> env = {},
                    std::string* out = nullptr) {
    std::string trace = temp_path(name + ".trace");
    env.emplace_back("PROF_OUT", trace);
    auto r = run({PROF_TEST_SAMPLED, mode}, env);
    REQUIRE_MESSAGE(r.exit_code == 0, mode, ": exit ", r.exit_code, ": ", r.err);
    if (out) *out = r.out;
    return trace;
}

} // namespace

// Every thread of tests/programs/sampled.cpp ends its work by burning CPU time until a sample of
// it is recorded (sampled()), so each one that burns has at least one, however seldom the kernel
// fired its timer.
// Under a sanitizer, whose runtime interposes sigaction itself, libprof.so's interposer is not
// reached and the sampler stays off (by design): these tests need it.
#ifndef PROF_SANITIZER_BUILD
// What signals the samples (PROF_SAMPLE_TIMER), and the trace's name for it (Meta sample_clock).
// perf events of the thread's own user-mode CPU time are allowed up to perf_event_paranoid 2.
const std::pair<std::string, std::string> kTimers[] = {{"perf", "cpu-clock"},
                                                       {"posix", "thread_cputime"}};

TEST_CASE("CPU-time samples: every thread, its CPU time accounted to within one period") {
    for (auto [timer, clock] : kTimers) {
        CAPTURE(timer);
        std::string out;
        Trace t(sampled(std::string("sampled-threads-") + timer, "threads",
                        {{"PROF_SAMPLE_TIMER", timer}}, &out));
        CHECK(t.info.finished);
        CHECK(t.info.sample_hz == 1000);
        CHECK(t.info.meta.at("sample_clock") == clock);
        int signal = std::stoi(t.info.meta.at("sample_signal"));
        CHECK(signal >= SIGRTMIN);
        CHECK(signal <= SIGRTMAX);
        auto printed = lines_of(out, "cpu"); // main last: the early, the late, the main thread
        REQUIRE(printed.size() == 3);
        CHECK(t.info.threads.size() == 3);
        const uint64_t period = 1000000; // ns at 1000 Hz
        MESSAGE("samples ", t.info.samples, " (", t.info.own_samples, " in the profiler)");
        std::vector<const Samples::Stream*> streams;
        for (const auto& words : printed) {
            uint32_t tid = uint32_t(std::stoul(words[1]));
            uint64_t cpu = std::stoull(words[2]);
            CAPTURE(tid);
            const Samples::Stream& s = t.of_tid(tid);
            streams.push_back(&s);
            check_stream(s);
            // Each thread burned 40 to 120 ms of CPU time in burn() and leaf(), then in print_cpu()
            // until it was sampled (the functions of the program, in its anonymous namespace).
            CHECK(count_of(s) > 0);
            CHECK(t.samples_in(s, "(anonymous namespace)::") > 0);
            // The samples account for the thread's CPU time up to the one it waited for, which
            // came less than a sampling period before it read its clock.
            auto waited =
                std::find_if(s.samples.rbegin(), s.samples.rend(),
                             [&](const reader::SampleRecord& r) { return r.cpu_ns <= cpu; });
            REQUIRE(waited != s.samples.rend());
            CHECK(waited->count >= 1);
            CHECK(cpu - waited->cpu_ns < period);
            uint64_t last = s.samples.back().cpu_ns;
            // The program's and the profiler's CPU time add up to the clock's.
            uint64_t program = 0, own = 0;
            for (size_t i = 1; i < s.samples.size(); ++i) {
                program += s.samples[i].cpu_ns - s.samples[i - 1].cpu_ns - s.samples[i].own_ns;
                own += s.samples[i].own_ns;
            }
            CHECK(program + own == last - s.samples[0].cpu_ns);
            CHECK(program > own);
        }
        // The thread that ended early was sampled before the late one started.
        CHECK(streams[0]->samples.back().ticks < streams[1]->samples.front().ticks);
        // Both ended before the process finished; nothing of theirs is later than the end.
        CHECK(streams[0]->last_ticks <= t.info.end_ticks);
        CHECK(streams[1]->last_ticks <= t.info.end_ticks);
    }
}

TEST_CASE("samples that find no room in the chunk wait for the next one") {
    std::string out;
    // The program fills its chunk with calls: records of the traced mode.
    Trace t(sampled("sampled-pending", "pending", {{"PROF_TIME", "traced"}}, &out));
    REQUIRE(lines_of(out, "pending").size() == 1);
    REQUIRE(t.info.threads.size() == 2);
    for (const auto& [stream, s] : t.sink.streams) {
        CAPTURE(stream);
        check_stream(s);
        // Samples that waited were taken before the chunk they are in was opened, and were
        // written as its first record, at the point of the stream where they were taken: in
        // starve() in the main thread (whose next call opened the chunk), at no recorded frame
        // in the other thread (at its end).
        size_t late = 0;
        for (size_t i = 0; i < s.samples.size(); ++i) {
            if (!s.late[i]) continue;
            ++late;
            CHECK(s.samples[i].count >= 1);
            if (stream == 1)
                CHECK(t.name(s.in[i]) == "(anonymous namespace)::starve()");
            else
                CHECK(s.in[i] == 0);
        }
        // The main thread tried until it had such a sample; the other thread once (it has one
        // unless the kernel fired its timer in none of the 200 ms it burned with a full chunk).
        if (stream == 1) {
            CHECK(late >= 1);
        } else {
            MESSAGE("records of samples that waited until the thread ended: ", late);
        }
    }
}

TEST_CASE("counting threads: samples that find no room wait for the next hook, or the end") {
    std::string out;
    // The chunks fill with call paths met for the first time (64K chunks: a few thousand levels
    // of recursion each).
    Trace t(sampled("sampled-pending-counted", "pending",
                    {{"PROF_TIME", "sampled"}, {"PROF_CHUNK_SIZE", "64K"}}, &out));
    REQUIRE(lines_of(out, "pending").size() == 1);
    REQUIRE(t.info.threads.size() == 2);
    for (const auto& [stream, s] : t.sink.streams) {
        CAPTURE(stream);
        CHECK(s.counting);
        check_stream(s);
        // Samples that waited name the node they were taken in: the main thread's deepest
        // frame in starve_deeper(), whose next call wrote them; the other thread's deepest in
        // fill_deeper(), from which it ended. (The clocks that call then read, a record of
        // count 0, were read before the chunk opened too: not a sample that waited.)
        size_t late = 0;
        for (size_t i = 0; i < s.samples.size(); ++i) {
            if (!s.late[i] || s.samples[i].count == 0) continue;
            ++late;
            CHECK(s.samples[i].at_node);
            CHECK(t.name(s.in[i]) == (stream == 1
                                          ? "(anonymous namespace)::starve_deeper(long, int)"
                                          : "(anonymous namespace)::fill_deeper(int)"));
        }
        if (stream == 1) {
            CHECK(late >= 1);
        } else {
            MESSAGE("records of samples that waited until the thread ended: ", late);
        }
    }
}

TEST_CASE("no EINTR: blocking calls between bursts of CPU time are never interrupted") {
    for (auto [timer, clock] : kTimers) {
        CAPTURE(timer);
        std::string out;
        Trace t(sampled(std::string("sampled-eintr-") + timer, "eintr",
                        {{"PROF_SAMPLE_TIMER", timer}}, &out));
        CHECK(t.info.meta.at("sample_clock") == clock);
        for (std::string call :
             {"poll", "epoll_wait", "nanosleep", "read", "sem_wait", "waitpid"}) {
            CAPTURE(call);
            auto found = lines_of(out, call);
            REQUIRE(found.size() == 1);
            CHECK(field(found[0], "eintr") == "0");
            CHECK(std::stoi(field(found[0], "calls")) == (call == "waitpid" ? 50 : 300));
        }
        // Every thread that burned CPU time was sampled meanwhile. The main thread only waits
        // after its start, which can take a sample of the POSIX timer (whose CPU time counts
        // the kernel's) where starting the seven threads took over a period: it is left out.
        uint32_t main_tid = uint32_t(std::stoul(t.info.meta.at("pid")));
        size_t sampled_threads = 0;
        for (const auto& [stream, s] : t.sink.streams) {
            if (s.samples.empty()) continue;
            check_stream(s);
            auto thread = t.info.threads.find(stream);
            bool main = thread != t.info.threads.end() && thread->second.tid == main_tid;
            sampled_threads += !main && count_of(s) > 0;
        }
        CHECK(sampled_threads == 7);
        MESSAGE(t.info.samples, " samples in ", sampled_threads, " threads");
    }
}

// The sampler's handler blocks the signals the program handles (so that none of its handlers runs
// inside ours) and no other: blocked, a signal ignored by its disposition would be queued, and
// one sent to the process would wake another thread, whose epoll_wait fails with EINTR although
// no handler runs. The handler's mask follows the program's sigaction and signal calls.
TEST_CASE("the sampler's handler blocks the program's handled signals, and only those") {
    std::string out;
    Trace t(sampled("sampled-mask", "mask", {}, &out));
    CHECK(out == "start usr1=0 usr2=0 chld=0 pipe=0 kill=0\n"
                 "set usr1=1 usr2=1 chld=1 pipe=0 kill=0\n"
                 "reset usr1=0 usr2=0 chld=0 pipe=0 kill=0\n"
                 "kill usr1=0 usr2=0 chld=0 pipe=0 kill=0\n"
                 "kill_refused=1 raised=2\n");
}

// The case that found it: every child's SIGCHLD (ignored by default) goes to the thread that
// burns CPU between children, often while the sampler's handler runs at 5 kHz. With every signal
// blocked there, 1 to 20 of the epoll_wait calls of the thread that waits failed per run.
TEST_CASE("no EINTR in other threads from the SIGCHLD of children ending while a sample is taken") {
    for (auto [timer, clock] : kTimers) {
        CAPTURE(timer);
        std::string out;
        Trace t(sampled("sampled-children-" + timer, "children",
                        {{"PROF_SAMPLE_TIMER", timer}, {"PROF_SAMPLE_HZ", "5000"}}, &out));
        CHECK(t.info.meta.at("sample_clock") == clock);
        for (std::string call : {"epoll_wait", "poll"}) {
            CAPTURE(call);
            auto found = lines_of(out, call);
            REQUIRE(found.size() == 1);
            CHECK(field(found[0], "eintr") == "0");
            CHECK(field(found[0], "calls") == "1");
        }
        CHECK(out.find("children=400\n") != std::string::npos);
        // The perf_event timer samples at the rate asked for (at least a few hundred samples in the
        // children's time); the POSIX timer at most once per tick.
        if (timer == "perf") CHECK(t.info.samples >= 200);
        MESSAGE(t.info.samples, " samples");
    }
}

// A thread that blocks every signal while it burns CPU time: its sampling signals are not
// queued one per period (300 of them would count against the user's RLIMIT_SIGPENDING, and past
// it the kernel sends SIGIO, which would kill the program); and the sampler's descriptors leave
// the program the descriptor numbers it would have had.
TEST_CASE("a thread that blocks every signal queues at most one sample, descriptors kept free") {
    std::string unsampled;
    sampled("sampled-blocked-off", "blocked", {{"PROF_SAMPLE_HZ", "0"}}, &unsampled);
    int fd_alone = -1;
    long queued = -1;
    REQUIRE(std::sscanf(unsampled.c_str(), "queued=%ld fd=%d", &queued, &fd_alone) == 2);
    REQUIRE(fd_alone >= 3);
    for (auto [timer, clock] : kTimers) {
        CAPTURE(timer);
        std::string out;
        Trace t(sampled(std::string("sampled-blocked-") + timer, "blocked",
                        {{"PROF_SAMPLE_TIMER", timer}}, &out));
        CHECK(t.info.meta.at("sample_clock") == clock);
        int fd = -1;
        REQUIRE(std::sscanf(out.c_str(), "queued=%ld fd=%d", &queued, &fd) == 2);
        // Signals queued by the user's other processes may add a few.
        CHECK(queued >= 1);
        CHECK(queued <= 8);
        CHECK(fd == fd_alone);
        // The blocked signal was delivered when the thread unblocked it: one sample of it.
        CHECK(t.info.samples >= 1);
    }
}

TEST_CASE("the program's own SIGPROF and SIGALRM timers keep their signals") {
    std::string out;
    Trace t(sampled("sampled-signals", "signals", {}, &out));
    long prof = -1, alrm = -1;
    REQUIRE(std::sscanf(out.c_str(), "prof=%ld alrm=%ld", &prof, &alrm) == 2);
    CHECK(prof > 0);
    CHECK(alrm > 0);
    REQUIRE(t.info.threads.size() == 1);
    check_stream(t.sink.streams.at(1));
    CHECK(t.info.samples > 0);
}

TEST_CASE("a program that takes the sampler's signal for itself: its handler, its disposition") {
    for (const char* hz : {"1000", "0"}) {
        CAPTURE(hz);
        std::string out;
        Trace t(
            sampled(std::string("sampled-rtsig-") + hz, "rtsig", {{"PROF_SAMPLE_HZ", hz}}, &out));
        auto found = lines_of(out, "queued=1000");
        REQUIRE(found.size() == 1);
        // Every signal it queued reached its handler, and its own timer's too; ignored, the
        // signal did nothing. The samples went on meanwhile.
        CHECK(field(found[0], "handled") == "1000");
        CHECK(field(found[0], "timer") == "yes");
        if (std::string(hz) == "1000") {
            // It found the sampler's signal free (sigaction reports the program's view) and
            // took it: the case the interposers are for.
            CHECK(field(found[0], "signal") == t.info.meta.at("sample_signal"));
            check_stream(t.sink.streams.at(1));
            CHECK(t.info.samples > 0);
        } else {
            CHECK(t.info.samples == 0);
        }
    }
}

TEST_CASE("fork, exec and vfork: each process samples its own threads") {
    std::string trace = sampled("sampled-fork", "fork");
    std::string child = test::child_trace(trace);
    REQUIRE(!child.empty());
    for (const std::string& path : {trace, child}) {
        CAPTURE(path);
        Trace t(path);
        CHECK(t.info.finished);
        REQUIRE(t.info.threads.size() == 1);
        const Samples::Stream& s = t.sink.streams.at(1);
        check_stream(s);
        CHECK(count_of(s) > 0);
    }
    // The child's samples are its own: taken in child_work() (or what it calls), on its clock.
    Trace kid(child);
    CHECK(kid.samples_in(kid.sink.streams.at(1), "(anonymous namespace)::") > 0);
    CHECK(kid.info.meta.count("sample_signal") == 1);

    // exec: the first image's trace is left unfinished, the new image writes its own.
    std::string first = sampled("sampled-exec", "exec");
    std::vector<std::string> next = test::traces_next_to(first);
    REQUIRE(next.size() == 1);
    for (const std::string& path : {first, next[0]}) {
        CAPTURE(path);
        Trace t(path);
        CHECK(t.info.finished == (path != first));
        check_stream(t.sink.streams.at(1));
        CHECK(t.info.samples > 0);
    }

    // vfork: children that _exit or exec record nothing; the parent samples on.
    std::string parent = sampled("sampled-vfork", "vfork");
    CHECK(test::traces_next_to(parent).empty());
    Trace t(parent);
    CHECK(t.info.finished);
    check_stream(t.sink.streams.at(1));
    CHECK(t.info.samples > 0);
}

TEST_CASE("SIGKILL keeps the samples written so far") {
    std::string trace = temp_path("sampled-kill.trace");
    auto r = run({PROF_TEST_SAMPLED, "kill"}, {{"PROF_OUT", trace}});
    REQUIRE(r.exit_code == 128 + SIGKILL);
    Trace t(trace);
    CHECK(t.info.incomplete);
    check_stream(t.sink.streams.at(1));
    CHECK(t.info.samples > 0);
}

TEST_CASE(
    "PROF_SAMPLE_HZ: 0 writes no Sample record, a bad value is reported and the default used") {
    Trace off(sampled("sampled-off", "threads", {{"PROF_SAMPLE_HZ", "0"}}));
    CHECK(off.info.finished);
    CHECK(off.info.samples == 0);
    CHECK(off.info.sample_hz == 0);
    CHECK(off.info.meta.count("sample_signal") == 0);
    CHECK(off.info.minor_unknown_records == 0);
    for (const auto& [stream, s] : off.sink.streams) CHECK(s.samples.empty());

    for (const char* bad : {"often", "200000", "-1"}) {
        CAPTURE(bad);
        std::string trace = temp_path(std::string("sampled-bad-") + bad + ".trace");
        auto r = run({PROF_TEST_SAMPLED, "burn"}, {{"PROF_OUT", trace}, {"PROF_SAMPLE_HZ", bad}});
        REQUIRE(r.exit_code == 0);
        CHECK(r.err.find("event=bad_option") != std::string::npos);
        CHECK(r.err.find("name=PROF_SAMPLE_HZ") != std::string::npos);
        CHECK(r.err.find("using=1000") != std::string::npos);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        Trace t(trace);
        CHECK(t.info.sample_hz == 1000);
        CHECK(t.info.samples > 0);
    }
}
#endif // PROF_SANITIZER_BUILD
