// Test program for sampling from outside (profrun --sample, --pid), built without
// instrumentation and without frame pointers (as most -O2 code is). Modes:
//   spinners threads N SECONDS  N threads burn CPU in thread_spin() for SECONDS of CPU each,
//                               while main burns in main_spin(); a forked child burns in
//                               child_spin() (its own process); exit status 0
//   spinners many N             starts and joins N short-lived threads, one after the other
//   spinners forever            burns CPU in forever_spin() until killed (at most 60 s)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

volatile unsigned long g_sink;

double cpu_seconds() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}

// Each call on its own variable: the threads burn at once, and share nothing.
__attribute__((noinline)) void burn(double seconds) {
    volatile unsigned long sink = 1;
    double until = cpu_seconds() + seconds;
    while (cpu_seconds() < until)
        for (int i = 0; i < 5000; ++i) sink = sink * 6364136223846793005UL + 1;
}

double g_seconds = 0.3;

// noipa: identical bodies that GCC would otherwise fold into one function (-fipa-icf).
__attribute__((noipa)) void thread_spin() { burn(g_seconds); }
__attribute__((noipa)) void main_spin() { burn(g_seconds); }
__attribute__((noipa)) void child_spin() { burn(g_seconds); }

void* thread_main(void*) {
    thread_spin();
    return nullptr;
}

void* short_thread(void*) {
    g_sink = g_sink + 1;
    return nullptr;
}

__attribute__((noinline)) void forever_spin() {
    timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        burn(0.01);
        timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 60) return;
    }
}

} // namespace

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "threads";
    if (!std::strcmp(mode, "forever")) {
        std::printf("ready\n");
        std::fflush(stdout);
        forever_spin();
        return 0;
    }
    int n = argc > 2 ? std::atoi(argv[2]) : 2;
    if (!std::strcmp(mode, "many")) {
        for (int i = 0; i < n; ++i) {
            pthread_t t;
            if (pthread_create(&t, nullptr, short_thread, nullptr) != 0) return 1;
            pthread_join(t, nullptr);
        }
        std::printf("started %d threads\n", n);
        return 0;
    }
    if (argc > 3) g_seconds = std::atof(argv[3]);
    pid_t child = fork();
    if (child == 0) {
        child_spin();
        _exit(0);
    }
    std::vector<pthread_t> threads(size_t(n > 0 ? n : 0));
    for (pthread_t& t : threads) pthread_create(&t, nullptr, thread_main, nullptr);
    main_spin();
    for (pthread_t& t : threads) pthread_join(t, nullptr);
    int status = 0;
    waitpid(child, &status, 0);
    std::printf("spun %d threads and a child\n", n);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
