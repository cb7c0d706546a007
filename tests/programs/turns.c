// Test program: two threads take turns under a mutex and a condition variable. Each turn
// allocates 1 MiB, writes to it, releases it and hands the turn over, so that at most one of
// these blocks is ever live: the memory profiler's peak heap must be 1 MiB plus what the
// program holds besides (the threads' own blocks, allocated when they were created). With
// argument "apart", the two threads are pinned to two different CPUs; "together", to one.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kTurns = 200, kBlock = 1 << 20 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t handed = PTHREAD_COND_INITIALIZER;
static int turn = 0;
static int cpus[2];

static void* player(void* arg) {
    int me = (int)(long)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[me], &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) return (void*)1L;
    for (int i = 0; i < kTurns; ++i) {
        pthread_mutex_lock(&lock);
        while (turn != me) pthread_cond_wait(&handed, &lock);
        char* block = malloc(kBlock);
        memset(block, 1, 4096);
        __asm__ volatile("" : : "r"(block) : "memory"); // the block is used
        free(block);
        turn = 1 - me;
        pthread_cond_broadcast(&handed);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char** argv) {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 2;
    int found = 0;
    for (int c = 0; c < CPU_SETSIZE && found < 2; ++c)
        if (CPU_ISSET(c, &allowed)) cpus[found++] = c;
    int apart = argc > 1 && strcmp(argv[1], "apart") == 0;
    if (apart && found < 2) return 3; // one CPU only: nothing to test apart
    if (!apart) cpus[1] = cpus[0];
    pthread_t threads[2];
    for (long i = 0; i < 2; ++i)
        if (pthread_create(&threads[i], NULL, player, (void*)i) != 0) return 2;
    void* failed[2];
    for (int i = 0; i < 2; ++i) pthread_join(threads[i], &failed[i]);
    return failed[0] || failed[1] ? 4 : 0;
}
