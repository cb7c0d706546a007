// profrun --pid PID --dump on a process whose threads sit in known places (programs/stacks.c):
// one spinning, the others blocked in read, nanosleep, epoll_wait and a condition variable,
// built without frame pointers and at -O0 with them. Each frame's function and line is
// checked against the source, every wait against failing (the program counts its EINTRs),
// and a process the user stopped stays stopped.
#include "support/run.hpp"
#include "support/spinner.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <poll.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using prof::test::run;

namespace {

#ifdef PROF_SANITIZER_BUILD
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif

// programs/stacks.c running, with a pipe to its standard input (a line there ends it) and
// one from its standard output ("ready PID" once its threads are in place).
struct StacksProgram {
    pid_t pid = -1;
    int to = -1, from = -1;
    std::string errors = prof::test::temp_path("stacks.err"); // its standard error
    explicit StacksProgram(const char* path) {
        int in[2], out[2];
        REQUIRE(pipe2(in, O_CLOEXEC) == 0);
        REQUIRE(pipe2(out, O_CLOEXEC) == 0);
        pid = fork();
        if (pid == 0) {
            dup2(in[0], 0);
            dup2(out[1], 1);
            int err = open(errors.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(err, 2);
            execl(path, path, nullptr);
            _exit(127);
        }
        close(in[0]);
        close(out[1]);
        to = in[1];
        from = out[0];
        std::string line = read_line(10000);
        REQUIRE_MESSAGE(line.rfind("ready ", 0) == 0, line);
        wait_blocked();
    }
    // Until every thread but the spinner waits in the kernel (the main thread may still be on
    // its way from printing "ready" to its read, a thread stopped by a dump restarting its call).
    void wait_blocked() {
        for (int i = 0; i < 500; ++i) {
            bool all = true;
            for (const auto& task : std::filesystem::directory_iterator(
                     "/proc/" + std::to_string(pid) + "/task")) {
                std::string dir = task.path().string();
                if (prof::test::slurp(dir + "/comm") == "spinner\n") continue;
                all &= prof::test::slurp(dir + "/syscall").rfind("running", 0) != 0;
            }
            if (all) return;
            usleep(10 * 1000);
        }
        FAIL("the threads did not reach their waits");
    }
    // A line of its output, waiting at most `ms`.
    std::string read_line(int ms) {
        std::string line;
        char c;
        pollfd p{from, POLLIN, 0};
        while (poll(&p, 1, ms) == 1 && read(from, &c, 1) == 1 && c != '\n') line += c;
        return line;
    }
    // Ends it: its exit status is the number of its waits that failed, and its standard
    // error names them.
    int finish(std::string& failed) {
        REQUIRE(write(to, "go\n", 3) == 3);
        CHECK(read_line(10000).rfind("failures ", 0) == 0);
        int status = 0;
        waitpid(pid, &status, 0);
        pid = -1;
        failed = prof::test::slurp(errors);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    ~StacksProgram() {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
        close(to);
        close(from);
    }
};

// The line of stacks.c that holds `text` (once).
unsigned source_line(const std::string& text) {
    std::ifstream in(std::string(PROF_SOURCE_DIR) + "/tests/programs/stacks.c");
    std::string line;
    unsigned n = 0, found = 0;
    while (std::getline(in, line)) {
        ++n;
        if (line.find(text) != std::string::npos) {
            REQUIRE_MESSAGE(found == 0, text);
            found = n;
        }
    }
    REQUIRE_MESSAGE(found != 0, text);
    return found;
}

// The text dump's block of the thread named `name`: its header line and frames.
std::string thread_block(const std::string& dump, const std::string& name) {
    size_t at = dump.find("): \"" + name + "\"\n");
    REQUIRE_MESSAGE(at != std::string::npos, name << " in\n" << dump);
    size_t start = dump.rfind("\nThread ", at);
    size_t end = dump.find("\nThread ", at);
    return dump.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
}

// `frames` appear in the block in this order, each on a line of its own.
void check_frames(const std::string& block, const std::vector<std::string>& frames) {
    CAPTURE(block);
    size_t at = 0;
    for (const std::string& f : frames) {
        size_t found = block.find("\n    " + f, at);
        CHECK_MESSAGE(found != std::string::npos, f);
        if (found != std::string::npos) at = found + 1;
    }
    CHECK(block.find("(the stack ends here") == std::string::npos);
    CHECK(block.find("(no stack") == std::string::npos);
}

void check_dump(const char* program, bool blocked_stay_running) {
    StacksProgram target(program);
    std::string pid = std::to_string(target.pid);
    auto at = [](const std::string& function, const std::string& text) {
        return function + " (stacks.c:" + std::to_string(source_line(text)) + ")";
    };
    for (int round = 0; round < 3; ++round) {
        CAPTURE(round);
        target.wait_blocked();
        auto r = run({PROFRUN, "--pid", pid, "--dump"});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.err.empty());
        CHECK(r.out.rfind("Process " + pid + ": " + program, 0) == 0);
        // Each blocked thread at the line of its call, with the system call it waits in.
        std::string reader = thread_block(r.out, "reader");
        CHECK(reader.find("(sleeping in read)") != std::string::npos);
        check_frames(reader, {"read (read.c:", at("read_pipe", "ssize_t n = read(pipe_fds[0]"),
                              at("reader", "read_pipe();"), "start_thread ("});
        std::string sleeper = thread_block(r.out, "sleeper");
        CHECK((sleeper.find("(sleeping in clock_nanosleep)") != std::string::npos ||
               sleeper.find("(sleeping in restart_syscall)") != std::string::npos));
        check_frames(sleeper, {at("sleep_in_steps", "if (nanosleep(&step"),
                               at("sleeper", "sleep_in_steps();"), "start_thread ("});
        std::string poller = thread_block(r.out, "poller");
        CHECK(poller.find("(sleeping in epoll_wait)") != std::string::npos);
        check_frames(poller, {"epoll_wait (", at("wait_events", "int n = epoll_wait("),
                              at("poller", "wait_events();"), "start_thread ("});
        std::string waiter = thread_block(r.out, "waiter");
        CHECK(waiter.find("(sleeping in futex)") != std::string::npos);
        check_frames(waiter, {"pthread_cond_wait (", at("wait_condition", "pthread_cond_wait(&cond"),
                              at("waiter", "wait_condition();"), "start_thread ("});
        // libc's functions inlined into read's wrapper are frames of their own.
        CHECK(reader.find("[inlined] in libc.so.6") != std::string::npos);
        std::string main_thread = r.out.substr(r.out.find("\nThread " + pid + " "));
        main_thread = main_thread.substr(1, main_thread.find("\nThread ", 1));
        check_frames(main_thread, {at("main", "ssize_t n = read(0, line"), "__libc_start_main ("});
        // The spinning thread, somewhere in its loop.
        std::string spinner = thread_block(r.out, "spinner");
        CHECK(spinner.find("(running)") != std::string::npos);
        check_frames(spinner, {"spin_outer (stacks.c:", at("spinner", "return (void*)(unsigned long)spin_outer()"),
                               "start_thread ("});

        target.wait_blocked();
        auto j = run({PROFRUN, "--pid", pid, "--dump", "--format", "json"});
        REQUIRE_MESSAGE(j.exit_code == 0, j.err);
        CHECK(j.out.find("\"name\": \"poller\", \"state\": \"sleeping\", \"syscall\": \"epoll_wait\"") !=
              std::string::npos);
        CHECK(j.out.find("\"function\": \"read_pipe\", \"file\": \"") != std::string::npos);
        CHECK(j.out.find("\"inlined\": true") != std::string::npos);
        if (blocked_stay_running && !kSanitizerBuild) {
            // Built without frame pointers, a blocked thread's stack unwinds from /proc's
            // registers alone: it is never stopped. (Not under a sanitizer: its interceptors of
            // read, epoll_wait and the others are built with frame pointers, so the thread is
            // stopped once, as any waiting in such code.)
            for (const char* name : {"reader", "sleeper", "poller", "waiter"}) {
                size_t at = j.out.find(std::string("\"name\": \"") + name + "\"");
                REQUIRE(at != std::string::npos);
                std::string head = j.out.substr(at, j.out.find("\"frames\"", at) - at);
                CHECK_MESSAGE(head.find("\"stopped\": false") != std::string::npos, head);
            }
        }
    }
    // No wait failed: the stops (of the spinner, and at -O0 of the waiting threads whose
    // frame pointer /proc does not show) made no call return EINTR.
    std::string failed;
    CHECK(target.finish(failed) == 0);
    CHECK(failed == "");
}

} // namespace

TEST_CASE("profrun --pid --dump: every thread's stack at its lines, built without frame pointers") {
    check_dump(PROF_TEST_STACKS, true);
}

TEST_CASE("profrun --pid --dump: every thread's stack at its lines, -O0 with frame pointers") {
    check_dump(PROF_TEST_STACKS_FP, false);
}

// profrun killed (SIGKILL) at random moments of its dumps: the kernel detaches whatever it had
// stopped, so no thread is left stopped, and no wait of the program failed.
TEST_CASE("profrun --pid --dump killed mid-dump leaves no thread stopped") {
    StacksProgram target(PROF_TEST_STACKS_FP); // its waiting threads are stopped too
    std::string pid = std::to_string(target.pid);
    for (int i = 0; i < 20; ++i) {
        pid_t dumper = fork();
        if (dumper == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            dup2(null, 2);
            execl(PROFRUN, PROFRUN, "--pid", pid.c_str(), "--dump", nullptr);
            _exit(127);
        }
        usleep(useconds_t(1000 + (i * 7919) % 60000)); // 1 to 61 ms into it
        kill(dumper, SIGKILL);
        waitpid(dumper, nullptr, 0);
        usleep(20 * 1000);
        for (const auto& task : std::filesystem::directory_iterator("/proc/" + pid + "/task")) {
            std::string stat = prof::test::slurp(task.path().string() + "/stat");
            char state = stat[stat.rfind(')') + 2];
            CHECK_MESSAGE(state != 't', task.path().string());
            CHECK_MESSAGE(state != 'T', task.path().string());
        }
    }
    std::string failed;
    CHECK(target.finish(failed) == 0);
    CHECK(failed == "");
}

TEST_CASE("profrun --pid --dump: a stopped process is dumped and stays stopped") {
    StacksProgram target(PROF_TEST_STACKS);
    REQUIRE(kill(target.pid, SIGSTOP) == 0);
    usleep(100 * 1000);
    auto r = run({PROFRUN, "--pid", std::to_string(target.pid), "--dump"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("(stopped): \"spinner\"") != std::string::npos);
    check_frames(thread_block(r.out, "spinner"), {"spin_outer (stacks.c:", "start_thread ("});
    CHECK(prof::test::state_of(target.pid) == 'T');
    REQUIRE(kill(target.pid, SIGCONT) == 0);
    // The stop signal itself makes epoll_wait fail with EINTR once resumed, as signal(7)
    // says of stop signals; the dump adds no failure of its own.
    std::string failed;
    CHECK(target.finish(failed) == 1);
    CHECK(failed == "epoll_wait failed: Interrupted system call\n");
}

TEST_CASE(
    "profrun --pid --dump: stripped code by module and offset, named through .gnu_debuglink") {
    // Copies of the program: stripped, and stripped with its debug information beside it.
    std::string dir = prof::test::temp_path("dump-strip");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::string stripped = dir + "/stripped", linked = dir + "/linked";
    for (const std::vector<std::string>& step :
         {std::vector<std::string>{"/usr/bin/strip", "--strip-all", "-o", stripped,
                                   PROF_TEST_STACKS},
          {"/usr/bin/objcopy", "--only-keep-debug", PROF_TEST_STACKS, dir + "/linked.debug"},
          {"/usr/bin/strip", "--strip-all", "-o", linked, PROF_TEST_STACKS},
          {"/usr/bin/objcopy", "--add-gnu-debuglink=" + dir + "/linked.debug", linked}})
        REQUIRE(run(step).exit_code == 0);
    // The reader thread's frame in read_pipe: "0x... (stripped+0xOFFSET)" in the stripped copy,
    // and read_pipe at the same offset in the linked one.
    auto reader_frame = [](const std::string& program, const std::string& json_key) {
        StacksProgram target(program.c_str());
        auto r = run({PROFRUN, "--pid", std::to_string(target.pid), "--dump"});
        auto j = run({PROFRUN, "--pid", std::to_string(target.pid), "--dump", "--format", "json"});
        std::string failed;
        CHECK(target.finish(failed) == 0);
        REQUIRE(r.exit_code == 0);
        REQUIRE(j.exit_code == 0);
        std::string block = thread_block(r.out, "reader");
        // The JSON frame of the program's own code nearest the read: its offset.
        size_t at = j.out.find("\"name\": \"reader\"");
        REQUIRE(at != std::string::npos);
        at = j.out.find(json_key, at);
        REQUIRE_MESSAGE(at != std::string::npos, json_key);
        size_t open = j.out.rfind('{', at);
        std::string frame = j.out.substr(open, j.out.find('}', at) - open);
        size_t offset = frame.find("\"offset\": \"");
        REQUIRE(offset != std::string::npos);
        offset += 11;
        return std::make_pair(block, frame.substr(offset, frame.find('"', offset) - offset));
    };
    auto [stripped_block, stripped_offset] =
        reader_frame(stripped, "\"module\": \"" + stripped + "\"");
    auto [linked_block, linked_offset] = reader_frame(linked, "\"function\": \"read_pipe\"");
    CHECK(stripped_block.find(" (stripped+" + stripped_offset + ")") != std::string::npos);
    CHECK(linked_block.find(
              "read_pipe (stacks.c:" + std::to_string(source_line("ssize_t n = read(pipe_fds[0]")) +
              ")") != std::string::npos);
    CHECK(stripped_offset == linked_offset);
}

TEST_CASE("profrun --dump: what cannot be dumped gets one line and a non-zero exit") {
    auto no_pid = run({PROFRUN, "--dump"});
    CHECK(no_pid.exit_code == 2);
    CHECK(no_pid.err.find("--dump reads a running process: give --pid PID") != std::string::npos);
    auto with_output = run({PROFRUN, "--pid", "1", "--dump", "-o", "/tmp/x.trace"});
    CHECK(with_output.exit_code == 2);
    CHECK(with_output.err.find("--output is for sampling") != std::string::npos);
    auto format_alone = run({PROFRUN, "--pid", "1", "--format", "json"});
    CHECK(format_alone.exit_code == 2);
    auto bad_format = run({PROFRUN, "--pid", "1", "--dump", "--format", "xml"});
    CHECK(bad_format.exit_code == 2);
    auto missing = run({PROFRUN, "--pid", "99999999", "--dump"});
    CHECK(missing.exit_code == 1);
    CHECK(missing.err.find("no process 99999999") != std::string::npos);
    for (const auto& r : {no_pid, with_output, format_alone, bad_format, missing}) {
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(r.out.empty());
    }
    // Another user's process (as root: the target runs as root, profrun as nobody).
    if (geteuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0) {
        StacksProgram target(PROF_TEST_STACKS);
        auto other = run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          PROFRUN, "--pid", std::to_string(target.pid), "--dump"});
        CHECK(other.exit_code == 1);
        CHECK(std::count(other.err.begin(), other.err.end(), '\n') == 1);
        CHECK(other.err.find("belongs to another user (uid 0), and only root (or CAP_SYS_PTRACE)") !=
              std::string::npos);
        std::string failed;
        CHECK(target.finish(failed) == 0);
    }
}
