// A program to sample from outside: programs/spinners.cpp burning CPU in forever_spin() (at
// most 60 s), started for a test and killed at the end of its scope; and the state letter of a
// process, to see that profiling it left it running.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace prof::test {

// The state letter of /proc/PID/stat (R, S, T, Z...), or 0.
inline char state_of(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(in, line)) return 0;
    size_t close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : 0;
}

// `spinners forever`, its output thrown away.
struct SpinningProcess {
    pid_t pid = -1;
    SpinningProcess() {
        pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            execl(PROF_TEST_SPINNERS, PROF_TEST_SPINNERS, "forever", nullptr);
            _exit(127);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ~SpinningProcess() {
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
    }
    SpinningProcess(const SpinningProcess&) = delete;
    SpinningProcess& operator=(const SpinningProcess&) = delete;
};

} // namespace prof::test
