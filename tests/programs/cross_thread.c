/* Test program: blocks allocated by one thread and freed by another. Each of 10 rounds starts a
 * thread that allocates 100 blocks of 1000 bytes; the main thread frees them after joining it.
 * Nothing leaks; at most 100 blocks (100000 bytes) are live at once. */
#include <pthread.h>
#include <stdlib.h>

static void* blocks[100];

static void* allocate(void* arg) {
    (void)arg;
    for (int i = 0; i < 100; ++i) blocks[i] = malloc(1000);
    return NULL;
}

int main(void) {
    for (int round = 0; round < 10; ++round) {
        pthread_t t;
        pthread_create(&t, NULL, allocate, NULL);
        pthread_join(t, NULL);
        for (int i = 0; i < 100; ++i) free(blocks[i]);
    }
    return 0;
}
