// Test program for the runtime's list of live threads (the finish collects the PROF_LINE sums
// of threads still running), with the line/scope macros only (no -finstrument-functions):
//   full:   12 threads run scopes while the trace file cannot grow past 4 MiB (RLIMIT_FSIZE,
//           a full disk): they stop recording and end before the finish. Exit 0.
//   late:   the first thread to record is a worker (it runs the start-up calibration) while
//           others start recording; one ends, a new thread reuses its stack, and three are
//           still running at the finish with 100 hits each of the `hit` line. Exit 0.
//   fork:   a worker hits the `parent` line 777 times and waits; the main thread, which has
//           recorded nothing, forks; the child hits the `child` line 5 times. Exit 0.
#include <prof/prof.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

volatile int g_sink;

void* spin(void*) {
    for (int i = 0; i < 2000000; ++i) {
        PROF_SCOPE("spin");
    }
    return nullptr;
}

std::atomic<int> g_started{0};
std::atomic<bool> g_release[5];

void* late_worker(void* arg) {
    long i = reinterpret_cast<long>(arg);
    if (i) usleep(200); // the first one records first: it runs the calibration
    for (int k = 0; k < 100; ++k) {
        PROF_LINE(g_sink = g_sink + 1); // hit
    }
    ++g_started;
    while (!g_release[i].load()) usleep(100);
    return nullptr;
}

std::atomic<bool> g_parent_done{false};

void* parent_worker(void*) {
    for (int k = 0; k < 777; ++k) {
        PROF_LINE(g_sink = g_sink + 1); // parent
    }
    g_parent_done = true;
    pause();
    return nullptr;
}

} // namespace

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    if (std::strcmp(mode, "full") == 0) {
        std::signal(SIGXFSZ, SIG_IGN);
        rlimit r = {4u << 20, 4u << 20};
        setrlimit(RLIMIT_FSIZE, &r);
        pthread_t t[12];
        for (auto& x : t) pthread_create(&x, nullptr, spin, nullptr);
        for (auto& x : t) pthread_join(x, nullptr);
        return 0;
    }
    if (std::strcmp(mode, "late") == 0) {
        pthread_t t[5];
        for (long i = 0; i < 4; ++i)
            pthread_create(&t[i], nullptr, late_worker, reinterpret_cast<void*>(i));
        while (g_started.load() < 4) usleep(100);
        g_release[0] = true; // the calibrating thread ends; a new one may get its stack
        pthread_join(t[0], nullptr);
        pthread_create(&t[4], nullptr, late_worker, reinterpret_cast<void*>(4L));
        while (g_started.load() < 5) usleep(100);
        g_release[4] = true;
        pthread_join(t[4], nullptr);
        return 0; // threads 1-3 are still running
    }
    if (std::strcmp(mode, "fork") == 0) {
        pthread_t t;
        pthread_create(&t, nullptr, parent_worker, nullptr);
        while (!g_parent_done.load()) usleep(1000);
        pid_t pid = fork();
        if (pid == 0) {
            for (int k = 0; k < 5; ++k) {
                PROF_LINE(g_sink = g_sink + 2); // child
            }
            std::exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        std::printf("%d\n", int(pid));
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    }
    std::fprintf(stderr, "usage: %s full|late|fork\n", argv[0]);
    return 2;
}
