// Test program: a thread that leaves with pthread_exit from inside nested calls, and a
// thread that returns normally. Counts: inner 2, leave_early 1, normal_worker 1, main 1.
#include <pthread.h>
#include <cstdio>

__attribute__((noinline)) int inner(int x) { return x + 1; }

__attribute__((noinline)) void leave_early() {
    inner(1);
    pthread_exit(nullptr); // the frames of leave_early and exiting_worker never return
}

__attribute__((noinline)) void* exiting_worker(void*) {
    leave_early();
    return nullptr;
}

__attribute__((noinline)) void* normal_worker(void*) {
    inner(2);
    return nullptr;
}

int main() {
    pthread_t a, b;
    pthread_create(&a, nullptr, exiting_worker, nullptr);
    pthread_join(a, nullptr);
    pthread_create(&b, nullptr, normal_worker, nullptr);
    pthread_join(b, nullptr);
    std::puts("done");
    return 0;
}
