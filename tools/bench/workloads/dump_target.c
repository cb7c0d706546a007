// profrun --dump's benchmark target: N threads (default 64), a quarter spinning in a compute
// loop and the rest waiting in the kernel in equal parts: a read on a pipe, a condition
// variable (futex) and nanosleep in long steps. The spinners count their rounds, so the cost
// of a dump to the running threads can be seen. Prints "ready PID", then waits for a line on
// standard input, then prints "rounds N" (all spinners) and ends.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static unsigned long rounds;
static int pipe_fds[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int in_place;

__attribute__((noinline)) static unsigned mix(unsigned x) {
    for (int i = 0; i < 1000; ++i) x = x * 1664525u + 1013904223u;
    return x;
}

static void* spin(void* arg) {
    (void)arg;
    unsigned x = 1;
    unsigned long n = 0;
    __atomic_add_fetch(&in_place, 1, __ATOMIC_RELAXED);
    while (!stop) {
        x = mix(x);
        ++n;
    }
    __atomic_add_fetch(&rounds, n + (x & 0), __ATOMIC_RELAXED);
    return NULL;
}

static void* read_pipe(void* arg) {
    (void)arg;
    char c;
    __atomic_add_fetch(&in_place, 1, __ATOMIC_RELAXED);
    if (read(pipe_fds[0], &c, 1) < 0) perror("read");
    return NULL;
}

static void* wait_condition(void* arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    __atomic_add_fetch(&in_place, 1, __ATOMIC_RELAXED);
    while (!stop) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void* sleep_steps(void* arg) {
    (void)arg;
    __atomic_add_fetch(&in_place, 1, __ATOMIC_RELAXED);
    while (!stop) {
        struct timespec step = {0, 100 * 1000 * 1000};
        nanosleep(&step, NULL);
    }
    return NULL;
}

int main(int argc, char** argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    if (n < 4 || pipe(pipe_fds)) return 2;
    pthread_t* threads = calloc((size_t)n, sizeof *threads);
    void* (*bodies[])(void*) = {spin, read_pipe, wait_condition, sleep_steps};
    for (int i = 0; i < n; ++i)
        if (pthread_create(&threads[i], NULL, bodies[i % 4], NULL)) return 2;
    while (__atomic_load_n(&in_place, __ATOMIC_RELAXED) < n) usleep(1000);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[64];
    if (read(0, line, sizeof line) < 0) perror("read");
    stop = 1;
    for (int i = 0; i < n; ++i)
        if (write(pipe_fds[1], "x", 1) != 1) return 2;
    pthread_mutex_lock(&lock);
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; ++i) pthread_join(threads[i], NULL);
    printf("rounds %lu\n", rounds);
    return 0;
}
