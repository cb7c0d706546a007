// Test program for process-life cases, one per mode (argv[1]), each with exact call counts:
//   threads200  200 threads started and ended quickly, each calling tick() 10 times
//   deep        recursion 100000 frames deep (descend() called 100000 times)
//   signals     a SIGALRM handler calls in_handler() while main loops calling spin()
//               (prints how many handler calls ran)
//   sigjmp      longjmp out of a signal handler, 5 times; after_jump() is then main's callee
//   cancel      a thread blocked in nap() is cancelled; the tree stays balanced
//   mtfork      fork from a process with 3 running threads; the child calls child_only() 7 times
#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

static std::atomic<long> g_sink{0}; // atomic: tick() and background() run in several threads
static std::atomic<long> g_handled{0};
static sigjmp_buf g_env;
static std::atomic<bool> g_stop{false};

__attribute__((noinline)) void tick(int i) { g_sink += i; }
__attribute__((noinline)) long descend(long n) { return n == 0 ? 0 : 1 + descend(n - 1); }
__attribute__((noinline)) void in_handler() { g_sink += 1; }
__attribute__((noinline)) void spin(int i) { // mostly outside the hooks: a signal seldom lands in one
    for (int k = 0; k < 300; ++k) g_sink += i ^ k;
}
__attribute__((noinline)) void on_alarm(int) {
    in_handler();
    g_handled.fetch_add(1);
}
__attribute__((noinline)) void jump_handler(int) { siglongjmp(g_env, 1); }
__attribute__((noinline)) void wait_for_signal() {
    for (;;) pause();
}
__attribute__((noinline)) void after_jump() { g_sink += 2; }
__attribute__((noinline)) void nap() {
    for (;;) sleep(1); // a cancellation point
}
__attribute__((noinline)) void* cancelled_thread(void*) {
    nap();
    return nullptr;
}
__attribute__((noinline)) void child_only(int i) { g_sink += i; }
__attribute__((noinline)) void background() {
    while (!g_stop.load()) tick(1);
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "threads200")) {
        for (int round = 0; round < 20; ++round) {
            std::vector<std::thread> ts;
            for (int i = 0; i < 10; ++i)
                ts.emplace_back([] {
                    for (int k = 0; k < 10; ++k) tick(k);
                });
            for (auto& t : ts) t.join();
        }
    } else if (!strcmp(mode, "deep")) {
        std::printf("%ld\n", descend(100000));
    } else if (!strcmp(mode, "signals")) {
        std::signal(SIGALRM, on_alarm);
        itimerval it{{0, 200}, {0, 200}};
        setitimer(ITIMER_REAL, &it, nullptr);
        for (int i = 0; i < 200000; ++i) spin(i);
        it = {};
        setitimer(ITIMER_REAL, &it, nullptr);
        std::printf("handled %ld\n", g_handled.load());
    } else if (!strcmp(mode, "sigjmp")) {
        struct sigaction sa {};
        sa.sa_handler = jump_handler;
        sigaction(SIGUSR1, &sa, nullptr);
        for (int i = 0; i < 5; ++i) {
            if (sigsetjmp(g_env, 1) == 0) {
                std::thread([] {
                    usleep(20000);
                    kill(getpid(), SIGUSR1);
                }).detach();
                wait_for_signal();
            }
            after_jump();
        }
        usleep(50000);
    } else if (!strcmp(mode, "cancel")) {
        pthread_t t;
        pthread_create(&t, nullptr, cancelled_thread, nullptr);
        usleep(50000);
        pthread_cancel(t);
        pthread_join(t, nullptr);
    } else if (!strcmp(mode, "mtfork")) {
        std::vector<std::thread> ts;
        for (int i = 0; i < 3; ++i) ts.emplace_back(background);
        usleep(20000);
        pid_t pid = fork();
        if (pid == 0) {
            for (int i = 0; i < 7; ++i) child_only(i);
            _exit(0);
        }
        waitpid(pid, nullptr, 0);
        g_stop = true;
        for (auto& t : ts) t.join();
    }
    return 0;
}
