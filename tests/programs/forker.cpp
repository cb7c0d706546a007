// Test program: fork. The parent calls parent_work 3 times, the child child_work 2 times;
// both called common() once before the fork (it is still on the stack in the child).
#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) int child_work(int x) { return x * 3; }
__attribute__((noinline)) int parent_work(int x) { return x + 1; }

__attribute__((noinline)) int common() {
    pid_t pid = fork();
    if (pid == 0) {
        int s = 0;
        for (int i = 0; i < 2; ++i) s += child_work(i);
        return s;
    }
    int s = 0;
    for (int i = 0; i < 3; ++i) s += parent_work(i);
    int status = 0;
    waitpid(pid, &status, 0);
    return s;
}

int main() {
    int r = common();
    std::printf("%d\n", r);
    return 0;
}
