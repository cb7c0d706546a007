// Test program: a thread whose first allocation happens inside pthread_getattr_np, which calls
// realloc while it holds the thread's lock (as Rust's threads do when they start). The memory
// profiler must not ask pthread_getattr_np about the thread from that realloc: it would wait
// for the lock forever. Prints the thread's stack size; then allocates 3 x 1000 bytes.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static void* worker(void* arg) {
    pthread_attr_t attr;
    void* addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return NULL;
    pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    for (int i = 0; i < 3; ++i) {
        void* volatile p = malloc(1000);
        free(p);
    }
    *(size_t*)arg = size;
    return NULL;
}

int main(void) {
    pthread_t t;
    size_t size = 0;
    if (pthread_create(&t, NULL, worker, &size) != 0) return 2;
    pthread_join(t, NULL);
    printf("thread stack: %zu bytes\n", size);
    return size ? 0 : 1;
}
