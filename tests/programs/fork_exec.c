// Test program: entries across fork, fork then exec, and vfork then exec.
//   fork_exec fork    3 forked children, each calls child_work twice and returns from main
//   fork_exec exec    a forked child execs this program with "leaf"
//   fork_exec vfork   a vforked child execs this program with "leaf"
//   fork_exec leaf    calls child_work once
// Built with libprof's hooks (test_fork_exec) and with entry_counter.c's (test_fork_exec_counted),
// which counts entries per process image: the truth the tests compare with.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) int child_work(int x) {
    return x * 3;
}

static int spawn(const char* self, int use_vfork) {
    pid_t pid = use_vfork ? vfork() : fork();
    if (pid == 0) {
        execl(self, self, "leaf", (char*)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    const char* mode = argv[1];
    if (strcmp(mode, "leaf") == 0) return child_work(1) == 3 ? 0 : 1;
    if (strcmp(mode, "exec") == 0 || strcmp(mode, "vfork") == 0)
        return spawn("/proc/self/exe", strcmp(mode, "vfork") == 0);
    if (strcmp(mode, "fork") != 0) return 2;
    for (int i = 0; i < 3; ++i) {
        pid_t pid = fork();
        if (pid == 0) {
            int s = child_work(i) + child_work(i + 1);
            printf("%d\n", s);
            return 0;
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    }
    return 0;
}
