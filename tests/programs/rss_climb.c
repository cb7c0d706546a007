/* Test program: resident memory that grows with no allocator call. It allocates one 64 MiB
 * buffer (its first and only allocation), waits, writes its pages 1 MiB at a time with a
 * pause after each (about 1 s in all), waits again and frees it: the only RSS readings of
 * that stretch are the runtime's timer's. `fork`: the same in a fork child, while the parent
 * only waits for it (the child's timeline is its own, not its parent's). Nothing is printed
 * before the free, so that stdio allocates no buffer meanwhile.
 *
 * Built with RSS_TIMER_ONLY (test_rss_timer_only), for the sanitizer builds, where the
 * allocator interposers cannot run: the program is linked with libprof.so and says itself that
 * the memory profiler is loaded (which starts the timer), and two threads record regions
 * while the pages are written, so that the timer's records meet the threads' chunk openings,
 * the fork and the finish under the sanitizers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kMiB = 1 << 20, kBuffer = 64 * kMiB };

#ifdef RSS_TIMER_ONLY
#include <prof/prof.h>
#include <pthread.h>
#include <stdatomic.h>

void prof_mem_activate(void); /* libprof.so's, what libprofmem.so calls when it is loaded */

static atomic_int g_done;

static void* regions(void* arg) {
    (void)arg;
    struct timespec t = {0, 100000};
    while (!atomic_load(&g_done)) {
        PROF_REGION_BEGIN("tick");
        nanosleep(&t, NULL);
        PROF_REGION_END();
    }
    return NULL;
}
#endif

static void pause_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

static void climb(void) {
#ifdef RSS_TIMER_ONLY
    pthread_t threads[2];
    atomic_store(&g_done, 0);
    for (int i = 0; i < 2; ++i) pthread_create(&threads[i], NULL, regions, NULL);
#endif
    char* buffer = malloc(kBuffer);
    if (!buffer) exit(2);
    /* The pauses around the writes leave several timer readings before the first write and
     * after the last, whatever the scheduling: the rise between the first and the last point
     * of the stretch is then every page written. */
    pause_ms(150);
    for (size_t at = 0; at < kBuffer; at += kMiB) {
        memset(buffer + at, 1, kMiB);
        pause_ms(10);
    }
    pause_ms(150);
    volatile char sink = buffer[kBuffer - 1];
    (void)sink;
    free(buffer);
#ifdef RSS_TIMER_ONLY
    atomic_store(&g_done, 1);
    for (int i = 0; i < 2; ++i) pthread_join(threads[i], NULL);
#endif
}

int main(int argc, char** argv) {
#ifdef RSS_TIMER_ONLY
    prof_mem_activate();
#endif
    if (argc > 1 && strcmp(argv[1], "fork") == 0) {
        pid_t child = fork();
        if (child < 0) return 2;
        if (child == 0) {
            climb();
            exit(0); /* the child's runtime finishes the child's own trace */
        }
        int status = 0;
        waitpid(child, &status, 0);
        printf("child %s\n", WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "ok" : "failed");
        return 0;
    }
    climb();
    printf("climbed %d MiB\n", kBuffer / kMiB);
    return 0;
}
