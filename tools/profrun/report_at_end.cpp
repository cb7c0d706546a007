// profrun -s KEY: see report_at_end.hpp.
#include "profrun/report_at_end.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace prof::tools {

// Printed by profreport on standard error, where cProfile's -s would print it on standard
// output: the program's own output stays apart.
void print_report_at_end(const ReportAtEnd& o, const std::string& traces,
                         const std::string& tools_dir, const std::string& log_format,
                         const ToolLog& log) {
    struct stat st;
    if (o.sort.empty() || traces.empty() || stat(traces.c_str(), &st) != 0) return;
    std::string profreport = tools_dir + "/profreport";
    if (access(profreport.c_str(), X_OK) != 0) {
        log.warn(fmt::format("-s: cannot print the report: no profreport next to profrun ({})",
                             profreport));
        return;
    }
    std::string limit = std::to_string(o.limit);
    std::vector<std::vector<std::string>> commands{
        {profreport, "--sort", o.sort, "--limit", limit, traces}};
    if (o.memory) commands.push_back({profreport, "memory", "--limit", limit, traces});
    for (size_t k = 0; k < commands.size(); ++k) {
        std::vector<std::string>& command = commands[k];
        if (!log_format.empty()) command.insert(command.begin() + 1, {"--log-format", log_format});
        std::fflush(nullptr);
        pid_t pid = fork();
        if (pid < 0) {
            log.warn(fmt::format("-s: cannot print the report: {}", std::strerror(errno)));
            return;
        }
        if (pid == 0) {
            std::vector<char*> argv;
            for (std::string& a : command) argv.push_back(a.data());
            argv.push_back(nullptr);
            // What profrun set for COMMAND is not profreport's.
            if (o.preload_before)
                setenv("LD_PRELOAD", o.preload_before->c_str(), 1);
            else
                unsetenv("LD_PRELOAD");
            for (const char* name : {"PROF_OUT", "PROF_RUN_DIR", "PROF_RUN_ID"}) unsetenv(name);
            // The signals profrun ignored while COMMAND ran (Ctrl-C was COMMAND's) are the
            // report's again.
            for (int sig : {SIGINT, SIGQUIT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, nullptr);
            dup2(STDERR_FILENO, STDOUT_FILENO);
            execv(argv[0], argv.data());
            _exit(127);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
            log.warn(fmt::format("-s: cannot run {}", profreport));
            return;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return; // it said why itself
        if (k + 1 < commands.size()) std::fputs("\n", stderr);
    }
}

} // namespace prof::tools
