// Sampling from outside (profrun --sample, --pid) on programs built without instrumentation
// and without frame pointers: shares against the program's own CPU measure, the exit status and
// output passed through, threads and processes followed, attaching without stopping or harming
// the target, two profilers at once, profrun killed mid-run, the PIDs that cannot be sampled,
// and every view of the trace with its calls shown as unknown.
#include "support/figures.hpp"
#include "support/run.hpp"
#include "support/spinner.hpp"
#include "support/temp_dir.hpp"

#include "analysis/engine/session.hpp"
#include "reader/trace_reader.hpp"

#include <doctest/doctest.h>

#include <linux/perf_event.h>
#include <sys/syscall.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

using namespace prof;
using namespace prof::test;

namespace {

// A trace read to its end (every record checked), its events ignored.
reader::TraceInfo read_whole(const std::string& trace) {
    struct None : reader::EventSink {
        void on_function(uint32_t, uint32_t, uint64_t) override {}
        void on_enter(uint32_t, uint32_t, uint64_t) override {}
        void on_enter_address(uint32_t, uint64_t, uint64_t) override {}
        void on_exit(uint32_t, uint64_t) override {}
        void on_scope_run(uint32_t, uint32_t, uint64_t, uint64_t, uint64_t) override {}
        void on_abandon(uint32_t, uint32_t, uint64_t) override {}
    } none;
    reader::TraceReader reader(trace);
    return reader.read(none);
}

// Whether this kernel lets us open a cpu-clock event on ourselves (perf_event_paranoid <= 2,
// no seccomp filter): everything below needs it.
bool perf_events_allowed() {
    perf_event_attr a{};
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd < 0) return false;
    close(int(fd));
    return true;
}

const analysis::Function& function_named(const analysis::Profile& p, const std::string& name) {
    // "file:line(name)", "file:line(name(args))", "file:line((anonymous namespace)::name())".
    std::vector<size_t> m = p.match("[(:]" + name + "(\\(|\\)$)");
    REQUIRE_MESSAGE(m.size() == 1, name);
    return p.functions[m[0]];
}

using Target = SpinningProcess;

std::string one_line(const std::string& s) {
    return s.substr(0, s.find('\n'));
}

} // namespace

#define REQUIRE_PERF_EVENTS()                                                                      \
    if (!perf_events_allowed()) {                                                                  \
        MESSAGE("perf_event_open is refused here (perf_event_paranoid > 2 or seccomp): skipped");  \
        return;                                                                                    \
    }

TEST_CASE("profrun --sample: CPU shares of an unmodified program against its own measure") {
    REQUIRE_PERF_EVENTS();
    std::string trace = temp_path("outside-true-time.trace");
    auto plain = run({PROF_TEST_TRUE_TIME_PLAIN, "0.1"});
    auto r = run({PROFRUN, "-q", "--sample", "-o", trace, "--", PROF_TEST_TRUE_TIME_PLAIN, "1.5"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    // The program's output is its own: the same figures a run without profrun prints.
    std::map<std::string, double> truth = figures(r.out);
    CHECK(truth.size() == figures(plain.out).size());
    REQUIRE(truth.count("share_60"));

    analysis::Session session;
    session.add_trace(trace);
    analysis::Profile p = session.profile();
    CHECK(p.time.uncounted_traces == 1);
    CHECK_FALSE(p.time.calls_counted());
    CHECK(p.time.samples > 1000);
    double measured = truth.at("share_60") + truth.at("share_30") + truth.at("share_10");
    double profiled = 0;
    for (const char* f : {"share_60", "share_30", "share_10"})
        profiled += function_named(p, f).stats.cumtime;
    double sigma = 100 * std::sqrt(0.6 * 0.4 / double(p.time.samples));
    for (const char* f : {"share_60", "share_30", "share_10"}) {
        double want = 100 * truth.at(f) / measured;
        double got = 100 * function_named(p, f).stats.cumtime / profiled;
        CAPTURE(f);
        CHECK(std::abs(got - want) < std::max(3.0, 4 * sigma));
        // No call was counted: the model says 0 and every view says unknown.
        CHECK(function_named(p, f).stats.ncalls == 0);
    }
    // The samples' CPU time is the burners' (measured by the program) and tiny()'s loop, within
    // a sampling period per function and the start.
    double cpu = measured * 1e-9 + truth.at("tiny") * 1e7 * 1e-9;
    CHECK(p.total_time > 0.9 * cpu);
    CHECK(p.total_time < 1.1 * cpu + 0.05);
    // A callee's cumtime never above its caller's; main holds all of the burners.
    const analysis::Function& main_fn = function_named(p, "main");
    for (const char* f : {"share_60", "share_30", "share_10"})
        CHECK(function_named(p, f).stats.cumtime <= main_fn.stats.cumtime);
    CHECK(main_fn.stats.cumtime >= profiled);

    auto table = run({PROFREPORT, trace});
    REQUIRE(table.exit_code == 0);
    CHECK(table.out.find("? function calls (not counted: sampled without instrumentation)") !=
          std::string::npos);
    CHECK(table.out.find(" 0 function calls") == std::string::npos);
    auto json = run({PROFREPORT, "--format", "json", trace});
    CHECK(json.out.find("\"ncalls\": null") != std::string::npos);
    CHECK(json.out.find("\"ncalls\": 0") == std::string::npos);
}

TEST_CASE("profrun --sample: exit status and output passed through") {
    REQUIRE_PERF_EVENTS();
    std::string trace = temp_path("outside-status.trace");
    auto r = run({PROFRUN, "-q", "--sample", "-o", trace, "--", "sh", "-c", "echo hello; exit 7"});
    CHECK(r.exit_code == 7);
    CHECK(r.out == "hello\n");
    auto k = run({PROFRUN, "-q", "-f", "--sample", "-o", trace, "--", "sh", "-c", "kill -TERM $$"});
    CHECK(k.exit_code == 128 + SIGTERM);
    // A shell that execs the program: the trace follows the new image.
    auto ex = run({PROFRUN, "-q", "-f", "--sample", "-o", trace, "--", "sh", "-c",
                   std::string("exec ") + PROF_TEST_SPINNERS + " threads 1 0.2"});
    REQUIRE_MESSAGE(ex.exit_code == 0, ex.err);
    {
        analysis::Session session;
        session.add_trace(trace);
        CHECK(function_named(session.profile(), "main_spin").stats.cumtime > 0.1);
        CHECK(session.traces().at(0).meta.at("cmdline").find("test_spinners threads 1") !=
              std::string::npos);
    }
    auto missing = run({PROFRUN, "-q", "-f", "--sample", "-o", trace, "--", "/nonexistent/prog"});
    CHECK(missing.exit_code == 127);
    CHECK(missing.err.find("cannot run /nonexistent/prog") != std::string::npos);
}

TEST_CASE("profrun --sample: every thread, and with --subprocesses each process its own trace") {
    REQUIRE_PERF_EVENTS();
    std::string trace = temp_path("outside-threads.trace");
    auto r = run({PROFRUN, "--sample", "--subprocesses", "-o", trace, "--", PROF_TEST_SPINNERS,
                  "threads", "3", "0.2"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out == "spun 3 threads and a child\n");
    analysis::Session session;
    session.add_trace(trace);
    analysis::Profile p = session.profile();
    // Three threads of 0.2 s each in thread_spin, main's 0.2 s in main_spin; the child's
    // function is not in the parent's trace.
    CHECK(function_named(p, "thread_spin").stats.cumtime > 0.45);
    CHECK(function_named(p, "thread_spin").stats.cumtime < 0.75);
    CHECK(function_named(p, "main_spin").stats.cumtime > 0.15);
    CHECK(p.match("child_spin").empty());
    size_t spinning = 0;
    for (const analysis::ThreadFilter& t : session.thread_list()) {
        analysis::Profile tp = session.profile(t);
        if (!tp.match("[(:]thread_spin\\(").empty()) ++spinning;
    }
    CHECK(spinning == 3);
    // The child's trace, named after its pid.
    std::vector<std::string> children;
    for (const auto& e : std::filesystem::directory_iterator(temp_path("")))
        if (e.path().filename().string().rfind("outside-threads.trace.", 0) == 0)
            children.push_back(e.path().string());
    // The forked child's (a sanitizer's runtime may start a task of its own at exit, which is
    // a process to the kernel and gets a trace too).
    REQUIRE(!children.empty());
    size_t with_child_spin = 0;
    for (const std::string& c : children) {
        analysis::Session child;
        child.add_trace(c);
        analysis::Profile cp = child.profile();
        if (cp.match("[(:]child_spin\\(").empty()) continue;
        ++with_child_spin;
        CHECK(function_named(cp, "child_spin").stats.cumtime > 0.15);
    }
    CHECK(with_child_spin == 1);
    CHECK(r.err.find("more from the run's other processes") != std::string::npos);

    // Thousands of short-lived threads.
    auto many = run({PROFRUN, "-q", "-f", "--sample", "-o", trace, "--", PROF_TEST_SPINNERS,
                     "many", "2000"});
    REQUIRE_MESSAGE(many.exit_code == 0, many.err);
    CHECK(many.out == "started 2000 threads\n");
    reader::TraceInfo info = read_whole(trace);
    CHECK(info.finished);
    CHECK_FALSE(info.incomplete);
}

TEST_CASE("profrun --pid: attaches without stopping the target, twice at once, and when killed") {
    REQUIRE_PERF_EVENTS();
    Target target;
    REQUIRE(state_of(target.pid) != 0);
    std::string a = temp_path("attach-a.trace"), b = temp_path("attach-b.trace");
    std::string pid = std::to_string(target.pid);
    // The target's CPU time around both runs: what their samples can stand for at most.
    clockid_t target_cpu;
    REQUIRE(clock_getcpuclockid(target.pid, &target_cpu) == 0);
    auto cpu_seconds = [&] {
        timespec ts{};
        REQUIRE(clock_gettime(target_cpu, &ts) == 0);
        return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
    };
    double cpu_before = cpu_seconds();
    // Two profilers on one target, at the same time.
    std::thread second([&] {
        auto r2 = run({PROFRUN, "-q", "--pid", pid, "--duration", "1", "-o", b});
        CHECK(r2.exit_code == 0);
    });
    auto r = run({PROFRUN, "--pid", pid, "--duration", "1", "-o", a});
    second.join();
    double target_seconds = cpu_seconds() - cpu_before;
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.find("sampling process " + pid) != std::string::npos);
    for (const std::string& t : {a, b}) {
        analysis::Session session;
        session.add_trace(t);
        analysis::Profile p = session.profile();
        CAPTURE(t);
        // Most of the target's CPU time in forever_spin: each window is a second of the
        // runs' span (which adds profrun's start and end), and a sample stands for at most a
        // period (1 ms) more than the CPU time it follows.
        double spin = function_named(p, "forever_spin").stats.cumtime;
        CAPTURE(target_seconds);
        CHECK(spin > 0.25 * target_seconds);
        CHECK(spin < target_seconds + 0.01);
        CHECK(session.traces().at(0).meta.at("sampled") == "attach");
    }
    // The target was never stopped and runs on.
    char s = state_of(target.pid);
    CHECK((s == 'R' || s == 'S'));

    // profrun killed with SIGKILL mid-run: the target runs on unaffected, and the trace holds
    // what profrun had written (about once a second).
    std::string killed = temp_path("attach-killed.trace");
    pid_t profrun = fork();
    if (profrun == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        execl(PROFRUN, PROFRUN, "--pid", pid.c_str(), "-o", killed.c_str(), nullptr);
        _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    kill(profrun, SIGKILL);
    int st;
    waitpid(profrun, &st, 0);
    CHECK(WIFSIGNALED(st));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    s = state_of(target.pid);
    CHECK((s == 'R' || s == 'S'));
    analysis::Session partial;
    partial.add_trace(killed);
    CHECK(partial.traces().at(0).incomplete);
    CHECK(partial.profile().time.samples > 100);
}

TEST_CASE("profrun --pid: the processes that cannot be sampled get one line each") {
    REQUIRE_PERF_EVENTS();
    std::string out = temp_path("attach-bad.trace");
    auto missing = run({PROFRUN, "--pid", "99999999", "-o", out});
    CHECK(missing.exit_code == 1);
    CHECK(one_line(missing.err).find("cannot attach: no process 99999999") != std::string::npos);
    CHECK(missing.err.find('\n') == missing.err.size() - 1);

    pid_t zombie = fork();
    if (zombie == 0) _exit(0);
    while (state_of(zombie) != 'Z') std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto z = run({PROFRUN, "--pid", std::to_string(zombie), "-o", out});
    CHECK(z.exit_code == 1);
    CHECK(z.err.find("is a zombie") != std::string::npos);
    int st;
    waitpid(zombie, &st, 0);

    auto kthread = run({PROFRUN, "--pid", "2", "-o", out}); // kthreadd
    CHECK(kthread.exit_code == 1);
    CHECK(kthread.err.find("is a kernel thread") != std::string::npos);

    // Another user's process (as root: the target runs as root, profrun as nobody).
    if (geteuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0) {
        Target target;
        auto other = run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          PROFRUN, "--pid", std::to_string(target.pid), "-o",
                          "/tmp/libprof-attach-other.trace"});
        CHECK(other.exit_code == 1);
        CAPTURE(other.err);
        // One error naming both refusals: no warning that promises the ptrace fallback first.
        CHECK(other.err.find('\n') == other.err.size() - 1);
        CHECK(other.err.find("level=error") != std::string::npos);
        CHECK(other.err.find("belongs to another user") != std::string::npos);
        CHECK(other.err.find("and the ptrace fallback: ptrace of process") != std::string::npos);
    }

    auto both = run({PROFRUN, "--pid", "1", "--", "true"});
    CHECK(both.exit_code == 2);
    auto duration = run({PROFRUN, "--duration", "1", "--", "true"});
    CHECK(duration.exit_code == 2);
    auto mem = run({PROFRUN, "--sample", "--mem", "--", "true"});
    CHECK(mem.exit_code == 2);
}

TEST_CASE("a sampled trace in every view, timelines and traced times refuse it") {
    REQUIRE_PERF_EVENTS();
    std::string trace = temp_path("outside-views.trace");
    auto r = run({PROFRUN, "-q", "--sample", "-o", trace, "--", PROF_TEST_TRUE_TIME_PLAIN, "0.5"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    analysis::Session session;
    session.add_trace(trace);
    double total = session.profile().total_time;

    // --info: each thread's samples (the trace has no events); they add up to the trace's.
    {
        reader::TraceInfo info = read_whole(trace);
        REQUIRE(info.stack_samples > 0);
        auto shown = run({PROFREPORT, "--info", trace});
        REQUIRE(shown.exit_code == 0);
        std::istringstream lines(shown.out);
        uint64_t listed = 0;
        for (std::string line; std::getline(lines, line);) {
            if (line.rfind("thread:", 0) != 0) continue;
            CHECK(line.find(" events") == std::string::npos);
            size_t end = line.rfind(" samples");
            REQUIRE(end != std::string::npos);
            size_t start = line.rfind(' ', end - 1) + 1;
            listed += std::stoull(line.substr(start, end - start));
        }
        CHECK(listed == info.stack_samples);
    }

    auto tree = run({PROFREPORT, "--tree", trace});
    CHECK(tree.exit_code == 0);
    CHECK(tree.out.find("calls not counted") != std::string::npos);
    CHECK(tree.out.find("share_60") != std::string::npos);
    for (const char* what : {"collapsed", "callgrind", "speedscope"}) {
        std::string out = temp_path(std::string("outside.") + what);
        auto e = run({PROFREPORT, "--export", what, "-o", out, trace});
        CAPTURE(what);
        CHECK(e.exit_code == 0);
        CHECK(slurp(out).find("share_60") != std::string::npos);
    }
    // Collapsed stacks: their weights add up to the table's total.
    std::string collapsed = slurp(temp_path("outside.collapsed"));
    std::istringstream lines(collapsed);
    std::string line;
    double sum = 0;
    while (std::getline(lines, line)) sum += std::stod(line.substr(line.rfind(' ') + 1));
    CHECK(sum > 0);
    std::string svg = temp_path("outside.svg"), html = temp_path("outside.html");
    CHECK(run({PROFREPORT, "flamegraph", "-o", svg, trace}).exit_code == 0);
    CHECK(slurp(svg).find("share_60") != std::string::npos);
    CHECK(run({PROFREPORT, "html", "-o", html, trace}).exit_code == 0);
    CHECK(slurp(html).find("share_60") != std::string::npos);
    // Its script shows "?" for calls when the data says they were not counted.
    CHECK(slurp(html).find("\"calls_counted\":false") != std::string::npos);
    // Two traces merge; a diff of a trace with itself changes nothing.
    analysis::Session twice;
    twice.add_traces({trace, trace}, 1);
    CHECK(std::abs(twice.profile().total_time - 2 * total) < 1e-6);
    auto diff = run({PROFREPORT, "diff", trace, trace});
    CHECK(diff.exit_code == 0);

    // Lines without macros: share_60's one line (its call of burn) holds all of its samples,
    // and the text table shows the source.
    auto line_json = run({PROFREPORT, "--lines", "--format", "json", "--match", "share_60", trace});
    REQUIRE(line_json.exit_code == 0);
    double share_60 = function_named(session.profile(), "share_60").stats.cumtime;
    size_t at = line_json.out.find("\"time\": ");
    REQUIRE(at != std::string::npos);
    CHECK(std::abs(std::stod(line_json.out.substr(at + 8)) - share_60) < 1e-6);
    CHECK(line_json.out.find("\"line\": 55") != std::string::npos); // true_time.cpp: burn(ns)
    CHECK(line_json.out.find("\"sampled\": true") != std::string::npos);
    auto lines_text = run({PROFREPORT, "--lines", "--match", "share_60", trace});
    CHECK(lines_text.out.find("burn(ns);") != std::string::npos);
    // Its counts are CPU samples, each standing for the CPU time since the one before: no
    // time per hit (that would be the sampling period on every line).
    CHECK(lines_text.out.find("Line #   Samples         Time  Per Hit") != std::string::npos);
    size_t row = lines_text.out.find("burn(ns);");
    size_t row_start = lines_text.out.rfind('\n', row) + 1;
    std::istringstream fields(lines_text.out.substr(row_start, row - row_start));
    std::vector<std::string> cells;
    for (std::string c; fields >> c;) cells.push_back(c);
    CHECK(cells.size() == 4); // line, samples, time, % time: no per-hit cell

    // Packed, it reads the same.
    std::string packed = temp_path("outside-views.packed.trace");
    REQUIRE(run({PROFPACK, "-o", packed, trace}).exit_code == 0);
    CHECK(run({PROFREPORT, packed}).out == run({PROFREPORT, trace}).out);

    auto chrome = run({PROFREPORT, "--export", "chrome", "-o", temp_path("outside.json"), trace});
    CHECK(chrome.exit_code == 1);
    CHECK(chrome.err.find("sampled without instrumentation") != std::string::npos);
    auto traced = run({PROFREPORT, "--time", "traced", trace});
    CHECK(traced.exit_code == 1);
    CHECK(traced.err.find("no traced times") != std::string::npos);
}

TEST_CASE("profrun --pid: a binary replaced while it runs is said, and shown by object") {
    REQUIRE_PERF_EVENTS();
    std::string copy = temp_path("spinners-copy");
    std::filesystem::copy_file(PROF_TEST_SPINNERS, copy);
    std::filesystem::permissions(copy, std::filesystem::perms::owner_all);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execl(copy.c_str(), copy.c_str(), "forever", nullptr);
        _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::thread replace([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        std::filesystem::copy_file(PROF_TEST_TRUE_TIME_PLAIN, copy + ".new");
        std::filesystem::rename(copy + ".new", copy);
    });
    std::string trace = temp_path("replaced.trace");
    auto r = run({PROFRUN, "--pid", std::to_string(pid), "--duration", "1.5", "-o", trace});
    replace.join();
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.find(copy + " was replaced or removed after process") != std::string::npos);
    analysis::Session session;
    session.add_trace(trace);
    analysis::Profile p = session.profile();
    // No name from the new file: the program's code is its object's.
    CHECK(p.match("forever_spin").empty());
    CHECK(p.match("share_").empty());
    CHECK_FALSE(p.match("\\[spinners-copy\\]").empty());
}

namespace {

// A function's cumtime, 0 when nothing of it was sampled.
double cumtime_of(const analysis::Profile& p, const std::string& name) {
    std::vector<size_t> m = p.match("[(:]" + name + "(\\(|\\)$)");
    REQUIRE(m.size() <= 1);
    return m.empty() ? 0 : p.functions[m[0]].stats.cumtime;
}

// The off-CPU checks of a `spinners naps` trace against the program's own measures: nap()
// slept `nap_wall`, wait_for_pipe() blocked `wait_wall`, work() burned `work_cpu`.
// `own_stacks`: each stretch off CPU has the stack it was taken at (root samples the switch
// out); without, the stacks are read from /proc while the threads wait, and a stretch the read
// missed (too short, or the sampler not scheduled in time) goes to the thread's last CPU sample,
// counted in idle_approximate_seconds.
void check_naps(const std::string& trace, const std::map<std::string, double>& truth, bool idle,
                bool own_stacks) {
    analysis::Session session;
    session.add_trace(trace);
    analysis::Profile p = session.profile();
    double nap = cumtime_of(p, "nap");
    double work = function_named(p, "work").stats.cumtime;
    double nap_wall = truth.at("nap_wall"), wait_wall = truth.at("wait_wall");
    CAPTURE(nap);
    CAPTURE(nap_wall);
    // work() runs on CPU: its time is its CPU time without --idle, and with it its wall time
    // (preempted on a busy machine, it waits for a CPU: that is off-CPU time too).
    CHECK(work > 0.8 * truth.at("work_cpu"));
    CHECK(work < 1.1 * (idle ? truth.at("work_wall") : truth.at("work_cpu")) + 0.01);
    if (!idle) {
        CHECK(p.time.idle_traces == 0);
        CHECK(nap < 0.05 * nap_wall);
        return;
    }
    CHECK(p.time.idle_traces == 1);
    CHECK(p.time.off_cpu_records >= 20);
    double approximate = p.time.idle_approximate_seconds;
    CAPTURE(approximate);
    // The kernel's switch times bound each sleep exactly; the program's clock reads add a few
    // microseconds per round. What was not placed at nap() is in the approximate part.
    double placed = own_stacks ? nap : nap + approximate;
    CHECK(placed > 0.97 * nap_wall - 0.002);
    CHECK(nap < 1.03 * nap_wall + 0.005);
    if (!own_stacks) CHECK(nap > 0.5 * nap_wall);
    // Inside nap(): clock_nanosleep, its own time.
    const analysis::Function& sleep = function_named(p, "clock_nanosleep");
    double slept = sleep.stats.tottime + (own_stacks ? 0 : approximate);
    CHECK(slept > 0.95 * nap_wall - 0.002);
    // The waiting thread was sampled never or hardly: its time is the stretch off CPU, at the
    // read it blocked in.
    double wait = function_named(p, "read").stats.cumtime;
    CAPTURE(wait);
    CAPTURE(wait_wall);
    CHECK(wait > 0.95 * wait_wall - 0.01);
    CHECK(wait < 1.03 * wait_wall + 0.01);
    // And above it, the program's own frames. (In a sanitizer build the interceptor around
    // read() keeps a frame pointer, which a stack read from /proc cannot follow: /proc gives
    // the stack and instruction pointers only.)
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    CHECK(function_named(p, "wait_for_pipe").stats.cumtime == doctest::Approx(wait).epsilon(0.01));
#endif
    // cumtime is wall time now: main holds both of its parts, and no callee exceeds it.
    const analysis::Function& main_fn = function_named(p, "main");
    CHECK(main_fn.stats.cumtime >= nap + work - 0.001);
    CHECK(nap <= main_fn.stats.cumtime);
    // The sleeps and the blocked read had their own stacks: what went to a last CPU sample's
    // stack is at most the rest (preemptions, which /proc cannot show).
    CHECK(p.time.idle_approximate_seconds <=
          p.time.off_cpu_seconds - 0.95 * (nap_wall + wait_wall) + 0.01);
}

} // namespace

TEST_CASE("profrun --sample --idle: time off CPU where the threads waited, root or not") {
    REQUIRE_PERF_EVENTS();
    std::string trace = temp_path("outside-naps.trace");
    SUBCASE("CPU time only without --idle") {
        auto r = run({PROFRUN, "-q", "--sample", "-o", trace, "--", PROF_TEST_SPINNERS, "naps", "20"});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        check_naps(trace, figures(r.out), false, true);
    }
    SUBCASE("--idle as this user") {
        auto r = run({PROFRUN, "--sample", "--idle", "-o", trace, "--", PROF_TEST_SPINNERS, "naps",
                      "20"});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.err.find("s off CPU in ") != std::string::npos);
        // Root samples each switch out with its stack; another user reads the stacks from /proc.
        CHECK(r.err.find(geteuid() == 0 ? "the stacks the threads left the CPU with"
                                        : "stacks read from /proc") != std::string::npos);
        check_naps(trace, figures(r.out), true, geteuid() == 0);
        auto info = run({PROFREPORT, "--info", trace});
        CHECK(info.out.find("idle:      ") != std::string::npos);
        auto table = run({PROFREPORT, trace});
        CHECK(table.out.find("s off CPU from ") != std::string::npos);
    }
    SUBCASE("--idle as another user: the stacks read from /proc while the threads wait") {
        if (geteuid() != 0) {
            MESSAGE("not root: the run as another user is skipped");
            return;
        }
        // A directory the other user may reach and write into (the test's own is 0700).
        std::string tmpl = (std::filesystem::temp_directory_path() / "libprof-other-XXXXXX").string();
        REQUIRE(mkdtemp(tmpl.data()));
        struct Remove {
            std::string dir;
            ~Remove() {
                std::error_code ec;
                std::filesystem::remove_all(dir, ec);
            }
        } remove{tmpl};
        std::filesystem::permissions(tmpl, std::filesystem::perms::all);
        std::string out = tmpl + "/naps.trace";
        auto r = run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PROFRUN,
                      "--sample", "--idle", "-o", out, "--", PROF_TEST_SPINNERS, "naps", "20"});
        if (r.exit_code == 126 || r.exit_code == 127 || !std::filesystem::exists(out)) {
            MESSAGE("the build cannot be run by uid 65534 here: skipped (rc " << r.exit_code << ": "
                                                                          << one_line(r.err) << ")");
            return;
        }
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.err.find("stacks read from /proc") != std::string::npos);
        check_naps(out, figures(r.out), true, false);
    }
}

TEST_CASE("profrun --pid --idle: a thread blocked since before the attach has its stack") {
    REQUIRE_PERF_EVENTS();
    std::string trace = temp_path("outside-naps-attach.trace");
    std::string out = temp_path("outside-naps-attach.out");
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        execl(PROF_TEST_SPINNERS, PROF_TEST_SPINNERS, "naps", "60", nullptr);
        _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto t0 = std::chrono::steady_clock::now();
    auto r = run({PROFRUN, "--pid", std::to_string(pid), "--idle", "--duration", "0.6", "-o", trace});
    double profrun_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int st = 0;
    waitpid(pid, &st, 0);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    REQUIRE(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
    analysis::Session session;
    session.add_trace(trace);
    analysis::Profile p = session.profile();
    // The waiter blocked in its read the whole window: 0.6 s and the end of the run (no more
    // than profrun took), at wait_for_pipe().
    double wait = function_named(p, "read").stats.cumtime;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    CHECK(function_named(p, "wait_for_pipe").stats.cumtime == doctest::Approx(wait).epsilon(0.01));
#endif
    CAPTURE(wait);
    CAPTURE(profrun_seconds);
    CHECK(wait > 0.55);
    CHECK(wait < profrun_seconds);
    // main slept 20 ms a round (its rounds of work last longer on a busy machine), and its
    // time over the window is wall time.
    double nap = function_named(p, "nap").stats.cumtime, work = function_named(p, "work").stats.cumtime;
    CAPTURE(nap);
    CAPTURE(work);
    CHECK(nap > 0.15);
    CHECK(nap + work > 0.5);
    CHECK(nap + work < profrun_seconds);
}

TEST_CASE("profrun --idle needs --sample or --pid") {
    auto r = run({PROFRUN, "--idle", "--", "true"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--idle is for --sample and --pid") != std::string::npos);
}

TEST_CASE("profrun --sample: a function inlined without a copy of its own is a frame, with its lines") {
    REQUIRE_PERF_EVENTS();
    std::string trace = temp_path("outside-inlined.trace");
    auto r = run({PROFRUN, "-q", "--sample", "-o", trace, "--", PROF_TEST_SPINNERS, "inlined", "1"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::map<std::string, double> truth = figures(r.out);
    double share = truth.at("inlined_cpu") / (truth.at("inlined_cpu") + truth.at("host_cpu"));

    analysis::Session session;
    session.add_trace(trace);
    analysis::Profile p = session.profile();
    const analysis::Function& host = function_named(p, "inlined_host");
    const analysis::Function& burn = function_named(p, "inlined_burn");
    // Half of the host's time is the inlined function's, as the program measured it.
    double sigma = std::sqrt(0.25 / double(p.time.samples));
    CAPTURE(burn.stats.cumtime);
    CAPTURE(host.stats.cumtime);
    CHECK(std::abs(burn.stats.cumtime / host.stats.cumtime - share) < std::max(0.03, 4 * sigma));
    CHECK(burn.stats.cumtime <= host.stats.cumtime);
    // Its caller is the function it was inlined into, and what it inlined in turn is its callee.
    size_t host_index = size_t(&host - p.functions.data()), burn_index = size_t(&burn - p.functions.data());
    bool called_by_host = false, calls_cpu_seconds = false;
    const analysis::Function& clock = function_named(p, "cpu_seconds");
    size_t clock_index = size_t(&clock - p.functions.data());
    for (const analysis::Edge& e : p.edges) {
        called_by_host |= e.caller == host_index && e.callee == burn_index;
        calls_cpu_seconds |= e.caller == burn_index && e.callee == clock_index;
    }
    CHECK(called_by_host);
    CHECK(calls_cpu_seconds);
    // Its lines, with no macro: the loop's body holds most of its samples.
    auto lines = run({PROFREPORT, "--lines", trace});
    REQUIRE(lines.exit_code == 0);
    size_t table = lines.out.find("Function: (anonymous namespace)::inlined_burn");
    REQUIRE(table != std::string::npos);
    CHECK(lines.out.find("sink * 2862933555777941757UL", table) != std::string::npos);
    // --no-inline: the machine code's functions only; the host has the time.
    analysis::SessionOptions physical;
    physical.inlined = false;
    analysis::Session flat(physical);
    flat.add_trace(trace);
    analysis::Profile q = flat.profile();
    CHECK(q.match("inlined_burn").empty());
    CHECK(function_named(q, "inlined_host").stats.cumtime == doctest::Approx(host.stats.cumtime));
}

namespace {

// The TracerPid line of /proc/PID/status (0: not traced), or -1.
int tracer_of(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("TracerPid:", 0) == 0) return std::stoi(line.substr(10));
    return -1;
}

} // namespace

TEST_CASE("profrun --sampler ptrace: the fallback follows threads, passes the exit status, detaches") {
    std::string trace = temp_path("outside-ptrace.trace");
    SUBCASE("launch: every thread, its CPU time, the exit status") {
        // LeakSanitizer cannot run in a traced process (a sanitizer build of the program).
        auto r = run({PROFRUN, "--sample", "--sampler", "ptrace", "-o", trace, "--",
                      PROF_TEST_SPINNERS, "threads", "2", "0.4"},
                     {{"ASAN_OPTIONS", "detect_leaks=0"}});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.out.find("spun 2 threads and a child") != std::string::npos);
        CHECK(r.err.find("at 100 Hz") != std::string::npos);
        analysis::Session session;
        session.add_trace(trace);
        analysis::Profile p = session.profile();
        CHECK(p.traces[0].meta.at("sampler") == "ptrace");
        // Each sample weighs the CPU time its thread used since the one before: two threads and
        // main burned 0.4 s each.
        double threads = function_named(p, "thread_spin").stats.cumtime;
        double main_spin = function_named(p, "main_spin").stats.cumtime;
        CAPTURE(threads);
        CAPTURE(main_spin);
        CHECK(threads > 0.6);
        CHECK(threads < 1.0);
        CHECK(main_spin > 0.3);
        CHECK(main_spin < 0.5);
        CHECK(p.threads.size() >= 3);
        auto failing = run({PROFRUN, "-q", "--sample", "--sampler", "ptrace", "-o", trace, "--",
                            "/bin/sh", "-c", "exit 7"});
        CHECK(failing.exit_code == 7);
    }
    SUBCASE("attach: the target runs on, and is no longer traced when profrun is killed") {
        Target target;
        auto r = run({PROFRUN, "--pid", std::to_string(target.pid), "--sampler", "ptrace",
                      "--duration", "0.5", "-o", trace});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        char state = state_of(target.pid);
        CHECK((state == 'R' || state == 'S'));
        CHECK(tracer_of(target.pid) == 0);
        analysis::Session session;
        session.add_trace(trace);
        // Its CPU time over the window (less on a busy machine), nearly all in forever_spin.
        analysis::Profile p = session.profile();
        CHECK(p.total_time > 0.1);
        CHECK(function_named(p, "forever_spin").stats.cumtime > 0.9 * p.total_time);

        pid_t profrun = fork();
        if (profrun == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 2);
            execl(PROFRUN, PROFRUN, "-q", "--pid", std::to_string(target.pid).c_str(), "--sampler",
                  "ptrace", "-o", trace.c_str(), nullptr);
            _exit(127);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        CHECK(tracer_of(target.pid) == profrun);
        kill(profrun, SIGKILL);
        int st;
        waitpid(profrun, &st, 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        CHECK(tracer_of(target.pid) == 0);
        state = state_of(target.pid);
        CHECK((state == 'R' || state == 'S'));
    }
    SUBCASE("--idle needs perf events") {
        auto r = run({PROFRUN, "--sample", "--sampler", "ptrace", "--idle", "--", "true"});
        CHECK(r.exit_code != 0);
        CHECK(r.err.find("--idle needs perf events") != std::string::npos);
    }
}
