// Test program: calls a thread makes after its start routine returns. Its key's destructor
// runs twice (the first run sets the key again, which asks the C library for another round of
// destructors) and calls tsd_work each time: thread_main 1, tsd_dtor 2, tsd_work 2.
#include <pthread.h>
#include <stdio.h>

static pthread_key_t key;
static volatile int work_done;

__attribute__((noinline)) void tsd_work(int x) {
    work_done += x; // a call the optimizer must keep
}

void tsd_dtor(void* value) {
    tsd_work(1);
    if (value == (void*)1) pthread_setspecific(key, (void*)2); // once more
}

void* thread_main(void* arg) {
    pthread_setspecific(key, (void*)1);
    return arg;
}

int main(void) {
    if (pthread_key_create(&key, tsd_dtor) != 0) return 1;
    pthread_t thread;
    if (pthread_create(&thread, NULL, thread_main, NULL) != 0) return 1;
    pthread_join(thread, NULL);
    printf("done\n");
    return 0;
}
