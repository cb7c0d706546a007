// Children started with an environment of their own: `clean_env [NAME=VALUE...]` starts itself
// as `clean_env child K` through each call that takes an envp (execve, execle, execvpe, fexecve
// and execveat in a forked child; posix_spawn and posix_spawnp), K = 1..7 in that order, each
// with envp = {PATH=<its directory>, HOME=/tmp} plus the NAME=VALUE arguments (execvpe and
// posix_spawnp find it by name there). Child K calls child_work() K times (28 calls in all)
// and child_alloc() once, which mallocs K * 1000 bytes, and prints `child K preload=<its
// LD_PRELOAD, or ->`. The parent waits for each and exits 0 when all 7 exited 0, and prints one
// line per child. `clean_env large`: see large_environment().
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

void* volatile g_sink;

__attribute__((noinline)) void child_work(int i) {
    __asm__ volatile("" ::: "memory");
    (void)i;
}

__attribute__((noinline)) void child_alloc(int k) {
    g_sink = std::malloc(size_t(k) * 1000);
    std::free(g_sink);
}

// Waits for `pid`; true when it exited 0.
bool exited_ok(pid_t pid) {
    int status = 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// `clean_env large`: an envp of 200 variables (more than the interposers build on the stack).
// execve and posix_spawn of a missing file fail as the C library's do (-1 and errno ENOENT;
// ENOENT returned), then posix_spawn starts `clean_env child 1` with it. Exits 0 when all of
// that held, printing `large ok`.
int large_environment(char* self) {
    std::vector<std::string> vars;
    for (int i = 0; i < 200; ++i) vars.push_back("CLEAN_ENV_" + std::to_string(i) + "=1");
    std::vector<char*> envp;
    for (std::string& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    char missing[] = "/nonexistent/clean_env";
    char* none[] = {missing, nullptr};
    errno = 0;
    bool ok = execve(missing, none, envp.data()) == -1 && errno == ENOENT;
    pid_t pid = -1;
    errno = 0;
    ok &= posix_spawn(&pid, missing, nullptr, nullptr, none, envp.data()) == ENOENT;
    char child[] = "child", one[] = "1";
    char* args[] = {self, child, one, nullptr};
    ok &= posix_spawn(&pid, self, nullptr, nullptr, args, envp.data()) == 0 && exited_ok(pid);
    std::printf("large %s\n", ok ? "ok" : "failed");
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    if (argc == 3 && !std::strcmp(argv[1], "child")) {
        int k = std::atoi(argv[2]);
        for (int i = 0; i < k; ++i) child_work(i);
        child_alloc(k);
        const char* preload = std::getenv("LD_PRELOAD");
        std::printf("child %d preload=%s\n", k, preload ? preload : "-");
        return 0;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 2;
    self[n] = '\0';
    if (argc == 2 && !std::strcmp(argv[1], "large")) return large_environment(self);
    std::string dir(self, std::strrchr(self, '/') - self);
    const char* name = std::strrchr(self, '/') + 1;
    // execvpe and posix_spawnp search the caller's PATH, not the one they pass on.
    setenv("PATH", dir.c_str(), 1);
    std::string path = "PATH=" + dir;
    std::vector<char*> envp{path.data(), const_cast<char*>("HOME=/tmp")};
    for (int i = 1; i < argc; ++i) envp.push_back(argv[i]);
    envp.push_back(nullptr);
    char child[] = "child";
    const char* how[] = {"execve",   "execle",      "execvpe",     "fexecve",
                         "execveat", "posix_spawn", "posix_spawnp"};
    bool ok = true;
    for (int k = 1; k <= 7; ++k) {
        std::string number = std::to_string(k);
        char* args[] = {self, child, number.data(), nullptr};
        pid_t pid = -1;
        if (k <= 5) {
            pid = fork();
            if (pid == 0) {
                switch (k) {
                case 1:
                    execve(self, args, envp.data());
                    break;
                case 2:
                    execle(self, self, child, number.c_str(), nullptr, envp.data());
                    break;
                case 3: {
                    char* by_name[] = {const_cast<char*>(name), child, number.data(), nullptr};
                    execvpe(name, by_name, envp.data()); // found through the given PATH
                    break;
                }
                case 4: {
                    int fd = open(self, O_RDONLY | O_CLOEXEC);
                    fexecve(fd, args, envp.data());
                    break;
                }
                case 5:
                    execveat(AT_FDCWD, self, args, envp.data(), 0);
                    break;
                }
                std::fprintf(stderr, "%s: %s\n", how[k - 1], std::strerror(errno));
                _exit(127);
            }
        } else {
            int e = k == 6 ? posix_spawn(&pid, self, nullptr, nullptr, args, envp.data())
                           : posix_spawnp(&pid, name, nullptr, nullptr, args, envp.data());
            if (e != 0) {
                std::fprintf(stderr, "%s: %s\n", how[k - 1], std::strerror(e));
                pid = -1;
            }
        }
        bool done = pid > 0 && exited_ok(pid);
        std::printf("%s child=%d %s\n", how[k - 1], int(pid), done ? "ok" : "failed");
        ok &= done;
    }
    return ok ? 0 : 1;
}
