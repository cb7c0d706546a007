/* Test program for the memory profiler's per-thread state.
 *   threads N: N threads, one after another, each allocating 100 bytes once in
 *              thread_alloc (freed), as a server that starts a thread per request.
 *   fork:      3 allocations of 100 bytes in repeat_alloc, then a fork; the child makes the
 *              same 3 allocations from the same call site (same stack), and exits. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) void* thread_alloc(void* arg) {
    (void)arg;
    void* volatile p = malloc(100);
    free(p);
    return NULL;
}

__attribute__((noinline)) void repeat_alloc(void) {
    for (int i = 0; i < 3; ++i) {
        void* volatile p = malloc(100);
        free(p);
    }
}

int main(int argc, char** argv) {
    if (argc > 2 && strcmp(argv[1], "threads") == 0) {
        int n = atoi(argv[2]);
        for (int i = 0; i < n; ++i) {
            pthread_t t;
            if (pthread_create(&t, NULL, thread_alloc, NULL) != 0) return 2;
            pthread_join(t, NULL);
        }
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {
        pid_t child = -1;
        for (int round = 0; round < 2; ++round) {
            if (round == 1 && (child = fork()) > 0) break;
            repeat_alloc(); /* one call site for both rounds */
        }
        if (child == 0) _exit(0);
        int status = 0;
        waitpid(child, &status, 0);
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 3;
    }
    return 1;
}
