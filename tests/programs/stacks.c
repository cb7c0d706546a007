// A process whose threads sit in known places, for profrun --dump: one spins in
// spin_outer -> spin_inner, and the others wait in the kernel, each in its own function: a
// read on a pipe, a nanosleep loop, an epoll_wait, a condition variable. Every wait checks
// its result: a call that failed (EINTR from a stop) is counted, and the exit status is the
// count. It prints "ready" once every thread is in place, then waits for a line on standard
// input (or for its end) to finish.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

static int stop; // read and written atomically (the program runs under TSan too)
static int failures;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int pipe_fds[2], event_fds[2], epoll_fd;
static volatile int in_place;

static void failed(const char* call, int err) {
    fprintf(stderr, "%s failed: %s\n", call, strerror(err));
    __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
}

__attribute__((noinline)) static unsigned spin_inner(unsigned x) {
    for (int i = 0; i < 1000; ++i) x = x * 1664525u + 1013904223u;
    return x;
}

__attribute__((noinline)) static unsigned spin_outer(void) {
    unsigned x = 1;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) x = spin_inner(x);
    return x;
}

static void* spinner(void* arg) {
    (void)arg;
    __atomic_add_fetch(&in_place, 1, __ATOMIC_RELAXED);
    return (void*)(unsigned long)spin_outer();
}

__attribute__((noinline)) static void read_pipe(void) {
    char c;
    __atomic_add_fetch(&in_place, 1, __ATOMIC_RELAXED);
    ssize_t n = read(pipe_fds[0], &c, 1);
    if (n != 1) failed("read", n < 0 ? errno : EIO);
}

static void* reader(void* arg) {
    (void)arg;
    read_pipe();
    return NULL;
}

// Long steps, so that a dump never finds it awake; the end wakes it with SIGUSR1.
__attribute__((noinline)) static void sleep_in_steps(void) {
    __atomic_add_fetch(&in_place, 1, __ATOMIC_RELAXED);
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        struct timespec step = {10, 0};
        if (nanosleep(&step, NULL) != 0 &&
            !(errno == EINTR && __atomic_load_n(&stop, __ATOMIC_RELAXED)))
            failed("nanosleep", errno);
    }
}

static void wake(int sig) {
    (void)sig;
}

static void* sleeper(void* arg) {
    (void)arg;
    sleep_in_steps();
    return NULL;
}

__attribute__((noinline)) static void wait_events(void) {
    struct epoll_event ev;
    __atomic_add_fetch(&in_place, 1, __ATOMIC_RELAXED);
    int n = epoll_wait(epoll_fd, &ev, 1, -1);
    if (n != 1) failed("epoll_wait", n < 0 ? errno : EIO);
}

static void* poller(void* arg) {
    (void)arg;
    wait_events();
    return NULL;
}

__attribute__((noinline)) static void wait_condition(void) {
    pthread_mutex_lock(&lock);
    __atomic_add_fetch(&in_place, 1, __ATOMIC_RELAXED);
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static void* waiter(void* arg) {
    (void)arg;
    wait_condition();
    return NULL;
}

int main(void) {
    if (pipe(pipe_fds) || pipe(event_fds)) return 100;
    struct sigaction wake_up = {.sa_handler = wake}; // no SA_RESTART: nanosleep returns
    sigaction(SIGUSR1, &wake_up, NULL);
    epoll_fd = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    if (epoll_fd < 0 || epoll_ctl(epoll_fd, EPOLL_CTL_ADD, event_fds[0], &ev)) return 100;
    void* (*bodies[])(void*) = {spinner, reader, sleeper, poller, waiter};
    const char* names[] = {"spinner", "reader", "sleeper", "poller", "waiter"};
    enum { kThreads = sizeof bodies / sizeof bodies[0] };
    pthread_t threads[kThreads];
    for (int i = 0; i < kThreads; ++i) {
        if (pthread_create(&threads[i], NULL, bodies[i], NULL)) return 100;
        pthread_setname_np(threads[i], names[i]);
    }
    while (__atomic_load_n(&in_place, __ATOMIC_RELAXED) < kThreads) usleep(1000);
    usleep(50 * 1000); // into their waits
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[64];
    for (;;) {
        ssize_t n = read(0, line, sizeof line);
        int err = errno;
        if (n >= 0) break;
        failed("read (main)", err);
        if (err != EINTR) break;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    if (write(pipe_fds[1], "x", 1) != 1 || write(event_fds[1], "x", 1) != 1) return 100;
    pthread_mutex_lock(&lock);
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    pthread_kill(threads[2], SIGUSR1);
    for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
    printf("failures %d\n", failures);
    return failures;
}
