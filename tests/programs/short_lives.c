/* Test program for the memory profiler's per-thread state.
 *   threads N: N threads, one after another, each allocating 100 bytes once in
 *              thread_alloc (freed), as a server that starts a thread per request.
 *   fork:      3 allocations of 100 bytes in repeat_alloc, then a fork; the child makes the
 *              same 3 allocations from the same call site (same stack), and exits.
 *   bogus:     (x86-64) one malloc(64) from bogus_frame_alloc called with rbp pointing at a
 *              fake frame whose return address is text ("python3."), as code built without
 *              frame pointers can leave rbp; freed. */
#include <pthread.h>
#include <stdint.h>
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

#if defined(__x86_64__)
/* `fake_frame` lies in a caller's frame, above this one, as a real frame would. */
__attribute__((noinline)) void* bogus_frame_alloc(size_t n, uintptr_t* fake_frame) {
    void* p;
    __asm__ volatile("mov %%rsp, %%r12\n\t"
                     "and $-16, %%rsp\n\t"
                     "mov %%rbp, %%r13\n\t"
                     "mov %[frame], %%rbp\n\t"
                     "mov %[n], %%rdi\n\t"
                     "call malloc@PLT\n\t"
                     "mov %%r13, %%rbp\n\t"
                     "mov %%r12, %%rsp\n\t"
                     : "=a"(p)
                     : [frame] "r"(fake_frame), [n] "r"(n)
                     : "rdi", "rsi", "rdx", "rcx", "r8", "r9", "r10", "r11", "r12", "r13", "memory",
                       "cc");
    return p;
}
#endif

int main(int argc, char** argv) {
#if defined(__x86_64__)
    if (argc > 1 && strcmp(argv[1], "bogus") == 0) {
        volatile uintptr_t fake_frame[2] = {0, 0x2e336e6f68747970u}; /* next 0: walk ends */
        free(bogus_frame_alloc(64, (uintptr_t*)fake_frame));
        return 0;
    }
#endif
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
