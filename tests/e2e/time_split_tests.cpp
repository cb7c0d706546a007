// The time split and the clock (profreport --clock wall|cpu, JSON time_split) against what
// tests/programs/time_split.cpp measured itself: a thread asleep, one blocked on a pipe, one
// crowded off its CPU by a busy thread pinned beside it. Its own measures (wall and CPU clocks,
// the kernel's run delay per thread) are the truth; the bounds are relations to them, widened
// by the sampling error of a run of this length (a sample stands for up to 4 ms of CPU at the
// kernel's 250 Hz tick).
#include "support/figures.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include "analysis/engine/session.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace prof;
using namespace prof::test;

namespace {

const analysis::Stats& stats_of(const analysis::Profile& p, const std::string& name) {
    std::vector<size_t> m = p.match("\\(" + name + "\\(");
    REQUIRE_MESSAGE(m.size() == 1, name);
    return p.functions[m[0]].stats;
}

analysis::Profile profile_of(const std::string& trace, analysis::Clock clock) {
    analysis::SessionOptions o;
    o.clock = clock;
    analysis::Session session(o);
    session.add_trace(trace);
    return session.profile();
}

double seconds(const std::map<std::string, double>& truth, const std::string& key) {
    auto it = truth.find(key);
    REQUIRE_MESSAGE(it != truth.end(), key);
    return it->second * 1e-9;
}

// Up to a few sampling periods of CPU time may land off their function (the span a sample
// closes is charged where it lands).
constexpr double kSlack = 0.03;

// `placed`: the crowded thread's samples land where its CPU time goes (the perf_event timer). The
// POSIX timer, which the kernel checks only at its tick and only for the thread running then,
// may leave a thread that shares its CPU with a busy one unsampled for most of its run: its
// total is still exact (its last record has its clocks), but only its thread's root function
// can be held to it.
void check_split(const std::string& trace, const std::map<std::string, double>& truth,
                 bool placed) {
    auto t = [&](const std::string& k) { return seconds(truth, k); };
    // Blocked or asleep, by the threads' own clocks: wall less CPU less run delay.
    auto blocked = [&](const std::string& f) {
        return t(f + "_wall") - t(f + "_cpu") - t(f + "_waited");
    };
    double all_cpu =
        t("nap_cpu") + t("wait_on_pipe_cpu") + t("crowded_work_cpu") + t("hog_cpu") + t("main_cpu");
    double all_waited = t("nap_waited") + t("wait_on_pipe_waited") + t("crowded_work_waited") +
                        t("hog_waited") + t("main_waited");
    CAPTURE(all_cpu);
    CAPTURE(all_waited);

    analysis::Profile wall = profile_of(trace, analysis::Clock::kWall);
    analysis::Profile cpu = profile_of(trace, analysis::Clock::kCpu);
    const analysis::TimeBasis& split = wall.time;
    REQUIRE(split.sampled_traces == 1);
    CHECK(split.off_cpu_unsplit_seconds == 0);
    CAPTURE(split.on_cpu_seconds);
    CAPTURE(split.runnable_seconds);
    CAPTURE(split.blocked_seconds);
    // The split is the clock's business, not the reading's: both give the same one.
    CHECK(cpu.time.on_cpu_seconds == doctest::Approx(split.on_cpu_seconds));
    CHECK(cpu.time.runnable_seconds == doctest::Approx(split.runnable_seconds));
    CHECK(cpu.time.blocked_seconds == doctest::Approx(split.blocked_seconds));

    // On CPU: the threads' CPU time (main's is a few ms), the profiler's own left out.
    CHECK(split.on_cpu_seconds <= all_cpu + kSlack);
    CHECK(split.on_cpu_seconds >= 0.8 * all_cpu);
    // Waiting for a CPU: what the kernel says the threads waited, less the part charged to the
    // profiler's own CPU time; the crowded pair waited for each other on CPU 0.
    CHECK(split.runnable_seconds + split.own_runnable_seconds <= all_waited + kSlack);
    CHECK(split.runnable_seconds >= 0.8 * (t("crowded_work_waited") + t("hog_waited")) - kSlack);
    // Blocked or asleep: at least the sleep and the wait on the pipe (main's joins come on top).
    CHECK(split.blocked_seconds >= 0.95 * (blocked("nap") + blocked("wait_on_pipe")));

    // --clock wall: each function keeps its wall time, less the time it waited for a CPU, which
    // goes where the CPU time is: for the sleep and the read, after they woke up; for the
    // crowded thread, to crowded_work(), where its CPU time is.
    const char* crowded_fn = placed ? "crowded_work" : "crowded";
    for (const char* f : {"nap", "wait_on_pipe", "crowded_work"}) {
        CAPTURE(f);
        bool crowded = std::string(f) == "crowded_work";
        double got = stats_of(wall, crowded ? crowded_fn : f).cumtime;
        double want = t(std::string(f) + "_wall");
        double waited = crowded ? 0 : t(std::string(f) + "_waited");
        CHECK(got <= want * 1.02 + kSlack);
        CHECK(got >= (want - waited) * 0.9 - kSlack);
    }
    // --clock cpu: only the CPU time; the sleep, the wait on the pipe and the waits for a CPU
    // are gone.
    for (const char* f : {"nap", "wait_on_pipe"}) {
        CAPTURE(f);
        CHECK(stats_of(cpu, f).cumtime <= t(std::string(f) + "_cpu") + kSlack);
    }
    double crowded = stats_of(cpu, crowded_fn).cumtime;
    CHECK(crowded <= t("crowded_work_cpu") * 1.1 + kSlack);
    CHECK(crowded >= t("crowded_work_cpu") * 0.85 - kSlack);
    CHECK(cpu.total_time <= all_cpu + kSlack);
    CHECK(cpu.total_time < wall.total_time);
    // Counts are the clock's business neither.
    CHECK(stats_of(cpu, "nap").ncalls == 1);
    CHECK(stats_of(wall, "crowded_work").ncalls == 1);

    // One thread's view gives that thread's split: the sleeper's is its sleep.
    analysis::Session session;
    session.add_trace(trace);
    size_t sleepers = 0;
    for (const analysis::ThreadSummary& th : session.profile().threads) {
        analysis::Profile one = session.profile({th.trace, th.stream});
        if (one.match("\\(nap\\(").empty()) continue;
        ++sleepers;
        CAPTURE(one.time.blocked_seconds);
        CHECK(one.time.blocked_seconds >= 0.95 * blocked("nap"));
        CHECK(one.time.blocked_seconds <= t("nap_wall") + kSlack);
        CHECK(one.time.on_cpu_seconds <= t("nap_cpu") + kSlack);
        CHECK(one.time.runnable_seconds <= t("nap_waited") + kSlack);
    }
    CHECK(sleepers == 1);
}

} // namespace

// Under a sanitizer, whose runtime interposes sigaction itself, the sampler stays off (by
// design): the split needs its samples.
#ifndef PROF_SANITIZER_BUILD
TEST_CASE("the time split: on CPU, waiting for a CPU, blocked, and --clock cpu keeps the first") {
    for (std::string timer : {"perf", "posix"})
        for (std::string mode : {"auto", "sampled"}) {
            CAPTURE(timer);
            CAPTURE(mode);
            std::string trace = temp_path("split-" + timer + "-" + mode + ".trace");
            auto r = run({PROF_TEST_TIME_SPLIT, "0.6"},
                         {{"PROF_OUT", trace}, {"PROF_TIME", mode}, {"PROF_SAMPLE_TIMER", timer}});
            REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            std::map<std::string, double> truth = figures(r.out);
            CAPTURE(r.out);
            check_split(trace, truth, timer == "perf");
        }
}

TEST_CASE("profreport --clock: JSON time_split, and the clock's refusals") {
    std::string trace = temp_path("split.trace");
    auto r = run({PROF_TEST_TIME_SPLIT, "0.2"}, {{"PROF_OUT", trace}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto json = run({PROFREPORT, "--format", "json", "--clock", "cpu", trace});
    REQUIRE_MESSAGE(json.exit_code == 0, json.err);
    CHECK(json.out.find("\"clock\": \"cpu\"") != std::string::npos);
    CHECK(json_number(json.out, "on_cpu") > 0);
    CHECK(json_number(json.out, "blocked") > 0.2); // the nap's 200 ms at least
    CHECK(json.out.find("\"runnable\": null") == std::string::npos);
    // (--time sampled: a run this short may have too few samples for the default.)
    auto text = run({PROFREPORT, "--time", "sampled", trace});
    REQUIRE(text.exit_code == 0);
    CHECK(text.out.find("wall time: ") != std::string::npos);
    CHECK(text.out.find("waiting for a CPU") != std::string::npos);

    auto bad = run({PROFREPORT, "--clock", "gpu", trace});
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("--clock expects wall or cpu, got 'gpu'") != std::string::npos);
    auto both = run({PROFREPORT, "--clock", "cpu", "--time", "traced", trace});
    CHECK(both.exit_code == 2);
    CHECK(both.err.find("give one of them") != std::string::npos);
    auto chrome = run({PROFREPORT, "export", "chrome", "--clock", "cpu", "-o",
                       temp_path("split-chrome.json"), trace});
    CHECK(chrome.exit_code != 0);
    CHECK(chrome.err.find("--clock cpu") != std::string::npos);
}

TEST_CASE("--clock cpu refuses a trace without CPU samples") {
    std::string trace = temp_path("split-nosamples.trace");
    auto r = run({PROF_TEST_TIME_SPLIT, "0.05"},
                 {{"PROF_OUT", trace}, {"PROF_SAMPLE_HZ", "0"}, {"PROF_TIME", "traced"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto cpu = run({PROFREPORT, "--clock", "cpu", trace});
    CHECK(cpu.exit_code == 1);
    CHECK(cpu.err.find("--clock cpu needs them") != std::string::npos);
    auto wall = run({PROFREPORT, trace});
    CHECK(wall.exit_code == 0);
}
#endif
