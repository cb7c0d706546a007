// Test program for sampling from outside (profrun --sample, --pid), built without
// instrumentation and without frame pointers (as most -O2 code is). Modes:
//   spinners threads N SECONDS  N threads burn CPU in thread_spin() for SECONDS of CPU each,
//                               while main burns in main_spin(); a forked child burns in
//                               child_spin() (its own process); exit status 0
//   spinners many N             starts and joins N short-lived threads, one after the other
//   spinners forever            burns CPU in forever_spin() until killed (at most 60 s)
//   spinners naps N             N rounds of 10 ms of CPU in work() and a 20 ms sleep in nap(),
//                               while a second thread blocks in wait_for_pipe() on a read until
//                               main ends; prints its own measures: `nap_wall`, `work_cpu`,
//                               `work_wall`, `wait_wall` (seconds)
//   spinners inlined SECONDS    burns SECONDS of CPU in inlined_host(): half in its own loop,
//                               half in inlined_burn(), a function inlined into it (no
//                               out-of-line copy); prints `host_cpu` and `inlined_cpu`
//   spinners pingpong N         N round trips of a byte between main and a thread over two
//                               pipes: two context switches each (the cost of --idle)
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

double wall_seconds() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}

__attribute__((noipa)) void work() { burn(0.01); }

// clock_nanosleep itself: sleeping from here, with nothing of the program on CPU.
__attribute__((noipa)) void nap() {
    timespec d{0, 20000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &d, &d) != 0) {
    }
}

int g_pipe[2];
double g_wait_wall = 0;

__attribute__((noipa)) void wait_for_pipe() {
    char c;
    while (read(g_pipe[0], &c, 1) < 0) {
    }
}

void* waiter_main(void*) {
    double t0 = wall_seconds();
    wait_for_pipe();
    g_wait_wall = wall_seconds() - t0;
    return nullptr;
}

// Inlined into its caller, with no copy of its own: only the DWARF inline information says
// its instructions are its.
__attribute__((always_inline)) inline void inlined_burn(double seconds) {
    volatile unsigned long sink = 3;
    double until = cpu_seconds() + seconds;
    while (cpu_seconds() < until)
        for (int i = 0; i < 5000; ++i) sink = sink * 2862933555777941757UL + 7;
}

__attribute__((noipa)) void inlined_host(double seconds) {
    double c0 = cpu_seconds();
    inlined_burn(seconds / 2);
    double c1 = cpu_seconds();
    volatile unsigned long sink = 5;
    double until = c1 + seconds / 2;
    while (cpu_seconds() < until)
        for (int i = 0; i < 5000; ++i) sink = sink * 6364136223846793005UL + 3;
    std::printf("inlined_cpu %.6f\nhost_cpu %.6f\n", c1 - c0, cpu_seconds() - c1);
}

int g_ping[2], g_pong[2];

void* echo_main(void*) {
    char c;
    while (read(g_ping[0], &c, 1) == 1)
        if (write(g_pong[1], &c, 1) != 1) break;
    return nullptr;
}

int pingpong(int rounds) {
    if (pipe(g_ping) != 0 || pipe(g_pong) != 0) return 1;
    pthread_t echo;
    pthread_create(&echo, nullptr, echo_main, nullptr);
    char c = 'x';
    double w0 = wall_seconds();
    for (int i = 0; i < rounds; ++i)
        if (write(g_ping[1], &c, 1) != 1 || read(g_pong[0], &c, 1) != 1) return 1;
    double wall = wall_seconds() - w0;
    close(g_ping[1]);
    pthread_join(echo, nullptr);
    std::printf("round_trips %d\npingpong_wall %.6f\n", rounds, wall);
    return 0;
}

int naps(int rounds) {
    if (pipe(g_pipe) != 0) return 1;
    pthread_t waiter;
    pthread_create(&waiter, nullptr, waiter_main, nullptr);
    double nap_wall = 0, work_cpu = 0, work_wall = 0;
    for (int i = 0; i < rounds; ++i) {
        double c0 = cpu_seconds(), w = wall_seconds();
        work();
        work_cpu += cpu_seconds() - c0;
        work_wall += wall_seconds() - w;
        double w0 = wall_seconds();
        nap();
        nap_wall += wall_seconds() - w0;
    }
    if (write(g_pipe[1], "x", 1) != 1) return 1;
    pthread_join(waiter, nullptr);
    std::printf("nap_wall %.6f\nwork_cpu %.6f\nwork_wall %.6f\nwait_wall %.6f\n", nap_wall,
                work_cpu, work_wall, g_wait_wall);
    return 0;
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
    if (!std::strcmp(mode, "naps")) return naps(n);
    if (!std::strcmp(mode, "pingpong")) return pingpong(n);
    if (!std::strcmp(mode, "inlined")) {
        inlined_host(argc > 2 ? std::atof(argv[2]) : 1.0);
        return 0;
    }
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
