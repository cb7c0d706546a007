// Runs a program with extra environment variables and captures its exit code and output.
#pragma once

#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <fstream>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

extern char** environ;

namespace prof::test {

struct RunResult {
    int exit_code = -1; // 128 + signal when killed
    std::string out, err;
};

inline std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A `NAME_ns=N` line a test program printed on stderr (with TEST_TIME_SLEEPS set: its own
// measure of the sleeps a test bounds), in seconds; 0 if there is none.
inline double seconds_printed(const std::string& err, const std::string& name) {
    size_t at = err.find(name + "_ns=");
    return at == std::string::npos ? 0 : std::stod(err.substr(at + name.size() + 4)) * 1e-9;
}

inline RunResult run(const std::vector<std::string>& argv,
                     const std::vector<std::pair<std::string, std::string>>& env = {}) {
    static int counter = 0;
    std::string out = temp_path("out." + std::to_string(++counter));
    std::string err = out + ".err";
    std::vector<std::string> envs;
    for (char** e = environ; *e; ++e) {
        std::string kv = *e;
        bool overridden = false;
        for (auto& [k, v] : env) overridden |= kv.rfind(k + "=", 0) == 0;
        if (!overridden && kv.rfind("PROF_", 0) != 0) envs.push_back(kv);
    }
    for (auto& [k, v] : env) envs.push_back(k + "=" + v);
    std::vector<char*> a, e;
    for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    for (auto& s : envs) e.push_back(const_cast<char*>(s.c_str()));
    e.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = -1;
    RunResult r;
    if (posix_spawn(&pid, a[0], &fa, nullptr, a.data(), e.data()) == 0) {
        int status = 0;
        waitpid(pid, &status, 0);
        r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    posix_spawn_file_actions_destroy(&fa);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

// Runs an instrumented program with its trace going to temp_path(name), which it returns; the
// program must succeed.
inline std::string trace_of(const std::string& name, const std::vector<std::string>& argv) {
    std::string p = temp_path(name);
    auto r = run(argv, {{"PROF_OUT", p}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return p;
}

// The number after `"key": ` in a JSON text (the first from `from`); the key must be there.
inline double json_number(const std::string& json, const std::string& key, size_t from = 0) {
    size_t at = json.find("\"" + key + "\": ", from);
    REQUIRE_MESSAGE(at != std::string::npos, key << " in " << json.substr(0, 400));
    return std::strtod(json.c_str() + at + key.size() + 4, nullptr);
}

} // namespace prof::test
