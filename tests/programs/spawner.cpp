// Test program for process chains. `spawner exec`: calls before_exec() then execs itself as
// `spawner after`, which calls after_exec() (same pid, a new program image: a trace of its
// own). `spawner spawn`: posix_spawn()s `spawner child`, which calls spawned() 3 times.
// `spawner dlopen PLUGIN`: dlopen, 2 calls of plugin_work, dlclose, dlopen again, 3 calls.
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

__attribute__((noinline)) void before_exec() {}
__attribute__((noinline)) void after_exec() {}
__attribute__((noinline)) void spawned(int) {}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "exec")) {
        before_exec();
        char arg[] = "after";
        char* args[] = {argv[0], arg, nullptr};
        execv("/proc/self/exe", args);
        return 1;
    }
    if (!strcmp(mode, "after")) {
        after_exec();
        std::printf("pid %d\n", int(getpid()));
        return 0;
    }
    if (!strcmp(mode, "spawn")) {
        char arg[] = "child";
        char* args[] = {argv[0], arg, nullptr};
        pid_t pid;
        if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, args, environ) != 0) return 1;
        waitpid(pid, nullptr, 0);
        std::printf("child %d\n", int(pid));
        return 0;
    }
    if (!strcmp(mode, "child")) {
        for (int i = 0; i < 3; ++i) spawned(i);
        return 0;
    }
    if (!strcmp(mode, "dlopen") && argc > 2) {
        int sum = 0;
        for (int round = 0; round < 2; ++round) {
            void* h = dlopen(argv[2], RTLD_NOW);
            if (!h) return 1;
            auto work = reinterpret_cast<int (*)(int)>(dlsym(h, "plugin_work"));
            for (int i = 0; i < 2 + round; ++i) sum += work(i);
            dlclose(h);
        }
        std::printf("%d\n", sum);
        return 0;
    }
    return 2;
}
