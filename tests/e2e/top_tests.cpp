// profrun --top on programs/spinners.cpp (built without instrumentation and without frame
// pointers): in tmux as a user drives it (keys to sort, switch, pause and quit; the terminal
// given back), the snapshot tables without a terminal, a launched COMMAND with its exit status,
// and the trace of what was seen.
#include "support/run.hpp"
#include "support/spinner.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <regex>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using prof::test::run;

namespace {

size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
}

bool have_tmux() { return access("/usr/bin/tmux", X_OK) == 0; }

// A tmux server of the test's own (its socket in the temporary directory), so that no other
// tmux is touched.
struct Tmux {
    std::string socket = prof::test::temp_path("tmux.sock");
    std::string session = "top";
    Tmux() {
        REQUIRE(run({"/usr/bin/tmux", "-S", socket, "new-session", "-d", "-s", session, "-x",
                     "120", "-y", "30", "/bin/sh"})
                    .exit_code == 0);
    }
    ~Tmux() { run({"/usr/bin/tmux", "-S", socket, "kill-server"}); }
    void keys(const std::vector<std::string>& k) {
        std::vector<std::string> argv{"/usr/bin/tmux", "-S", socket, "send-keys", "-t", session};
        argv.insert(argv.end(), k.begin(), k.end());
        REQUIRE(run(argv).exit_code == 0);
    }
    std::string screen() {
        return run({"/usr/bin/tmux", "-S", socket, "capture-pane", "-p", "-t", session}).out;
    }
    // The screen once it holds `text`, waiting at most `seconds`.
    std::string wait_for(const std::string& text, double seconds = 10) {
        std::string s;
        for (int i = 0; i < int(seconds * 20); ++i) {
            s = screen();
            if (s.find(text) != std::string::npos) return s;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        FAIL_CHECK("not on the screen: " << text << "\n" << s);
        return s;
    }
};

} // namespace

TEST_CASE("profrun --pid --top in tmux: keys sort, switch, pause and quit, the terminal back" *
          doctest::skip(!have_tmux())) {
    prof::test::SpinningProcess target;
    Tmux tmux;
    tmux.keys({std::string(PROFRUN) + " --pid " + std::to_string(target.pid) + " --top", "Enter"});
    std::string s = tmux.wait_for("forever_spin()");
    CHECK(s.find("profrun --top: process " + std::to_string(target.pid)) != std::string::npos);
    CHECK(s.find("last interval:") != std::string::npos);
    CHECK(s.find("sorted by self") != std::string::npos);
    CHECK(s.find("  %Self  %Total    Self s   Total s  Function") != std::string::npos);
    CHECK(s.find("q: quit") != std::string::npos);
    // The spinning function has the top self share, and forever_spin (its caller) 100% total.
    std::smatch m;
    REQUIRE(std::regex_search(s, m, std::regex(R"(\n +([0-9.]+) +([0-9.]+) +[0-9.]+ +[0-9.]+  (\S.*)\n)")));
    CHECK(m[3].str().find("burn") != std::string::npos);
    CHECK(std::regex_search(s, std::regex(R"( +[0-9.]+ +100\.0 +[0-9.]+ +[0-9.]+  \(anonymous namespace\)::forever_spin\(\))")));

    tmux.keys({"t"});
    tmux.wait_for("sorted by total");
    tmux.keys({"i"});
    tmux.wait_for("since start:");
    tmux.keys({"Space"});
    tmux.wait_for("PAUSED");
    tmux.keys({"q"});
    // Back on the shell's screen: the table of the whole time, and the terminal as it was
    // (what is typed is echoed again).
    s = tmux.wait_for("== process " + std::to_string(target.pid) + ": since start");
    CHECK(s.find("forever_spin()") != std::string::npos);
    tmux.keys({"echo typed-$((20+22))", "Enter"});
    s = tmux.wait_for("typed-42\n");
    CHECK(s.find("echo typed-$((20+22))") != std::string::npos);
    char state = prof::test::state_of(target.pid);
    CHECK((state == 'R' || state == 'S'));
}

TEST_CASE("profrun --top without a terminal: a table per second, then the whole time") {
    prof::test::SpinningProcess target;
    std::string pid = std::to_string(target.pid);
    auto r = run({PROFRUN, "--pid", pid, "--top", "--duration", "3.5", "-n", "4"});
    CHECK(r.exit_code == 0);
    CHECK(count(r.out, " process " + pid + " (" PROF_TEST_SPINNERS " forever): last ") >= 2);
    CHECK(count(r.out, "  %Self  %Total    Self s   Total s  Function\n") ==
          count(r.out, "\n== ") + 1);
    CHECK(r.out.find("== process " + pid + ": since start") != std::string::npos);
    // -n 4: four rows per table.
    std::string last = r.out.substr(r.out.find("== process " + pid + ": since start"));
    CHECK(count(last, "\n") == 2 + 4);
    CHECK(last.find("burn(double)") != std::string::npos);
    char state = prof::test::state_of(target.pid);
    CHECK((state == 'R' || state == 'S'));
}

TEST_CASE("profrun --top -- COMMAND: its exit status, and -o keeps the trace of what was seen") {
    std::string trace = prof::test::temp_path("top.trace");
    auto r = run({PROFRUN, "-q", "-f", "--top", "-o", trace, "--", PROF_TEST_SPINNERS, "inlined",
                  "0.6"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("host_cpu") != std::string::npos); // the program's own output
    CHECK(r.out.find(": since start, ") != std::string::npos);
    CHECK(r.out.find("inlined_host") != std::string::npos);
    auto report = run({PROFREPORT, trace});
    CHECK(report.exit_code == 0);
    CHECK(report.out.find("inlined_host") != std::string::npos);

    auto failing = run({PROFRUN, "--top", "--", "/bin/sh", "-c", "exit 7"});
    CHECK(failing.exit_code == 7);
    auto bad = run({PROFRUN, "--top"});
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("--top needs --pid PID or a COMMAND") != std::string::npos);
    auto sorted = run({PROFRUN, "--top", "-s", "tottime", "--", "/bin/true"});
    CHECK(sorted.exit_code == 2);
    auto mem = run({PROFRUN, "--top", "--mem", "--", "/bin/true"});
    CHECK(mem.exit_code == 2);
}

// Threads that start and end all the time while the process is watched and dumped.
TEST_CASE("profrun --top and --dump of a process whose threads come and go") {
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execl(PROF_TEST_SPINNERS, PROF_TEST_SPINNERS, "many", "1000000", nullptr);
        _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::string p = std::to_string(pid);
    for (int i = 0; i < 5; ++i) {
        auto d = run({PROFRUN, "--pid", p, "--dump"});
        CHECK_MESSAGE(d.exit_code == 0, d.err);
        CHECK(d.out.find("Thread " + p + " (") != std::string::npos);
        CHECK(d.out.find("(no stack") == std::string::npos);
    }
    auto t = run({PROFRUN, "--pid", p, "--top", "--duration", "2.5"});
    CHECK_MESSAGE(t.exit_code == 0, t.err);
    CHECK(t.out.find("== process " + p + ": since start") != std::string::npos);
    char state = prof::test::state_of(pid);
    CHECK((state == 'R' || state == 'S'));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
}
