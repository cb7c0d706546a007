// Test program: vfork. The parent calls parent_work 2 times before vfork() and 3 times after;
// the child, which shares the parent's memory, calls in_child (child_work 5 times) and then
// ends: `vforker _exit` with _exit(), `vforker exit` with exit() (which runs the atexit
// handlers and library destructors in the child, in the parent's memory), `vforker exec`
// with execv() of itself as `vforker after`. The child's exit status carries its result.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) int parent_work(int x) {
    return x + 1;
}
__attribute__((noinline)) int child_work(int x) {
    return x * 3;
}
__attribute__((noinline)) int after_exec(int x) {
    return x + 40;
}

__attribute__((noinline)) int in_child(int n) {
    int s = 0;
    for (int i = 0; i < n; ++i) s += child_work(i);
    return s; // 0 + 3 + 6 + 9 + 12 = 30 for n = 5
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "_exit";
    if (!strcmp(mode, "after")) return after_exec(2); // the exec'd image: status 42
    int s = 0;
    for (int i = 0; i < 2; ++i) s += parent_work(i);
    pid_t pid = vfork();
    if (pid == 0) {
        int r = in_child(5);
        if (!strcmp(mode, "exit")) exit(r);
        if (!strcmp(mode, "exec")) {
            char after[] = "after";
            char* args[] = {argv[0], after, nullptr};
            execv("/proc/self/exe", args);
        }
        _exit(r);
    }
    if (pid < 0) return 1;
    int status = 0;
    waitpid(pid, &status, 0);
    for (int i = 0; i < 3; ++i) s += parent_work(i);
    std::printf("parent %d child %d\n", s, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
