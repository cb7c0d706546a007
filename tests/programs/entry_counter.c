// An independent entry counter for the call tests: -finstrument-functions hooks that add 1 per
// entry of each function, per process image. A forked child starts from zero (its inherited
// frames were entered by its parent); at exit each process writes `NAME COUNT` lines to
// $ENTRY_COUNTS_DIR/<pid>.txt (names through dladdr: link the program with -rdynamic).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINSTR __attribute__((no_instrument_function))

static struct {
    void* fn;
    unsigned long count;
} table[512];
static int dumping; // the counter's own calls (its file's malloc) are not the program's

NOINSTR void __cyg_profile_func_enter(void* fn, void* call_site) {
    (void)call_site;
    if (dumping) return;
    for (int i = 0; i < 512; ++i) {
        if (table[i].fn == fn || !table[i].fn) {
            table[i].fn = fn;
            ++table[i].count;
            return;
        }
    }
}

NOINSTR void __cyg_profile_func_exit(void* fn, void* call_site) {
    (void)fn;
    (void)call_site;
}

static NOINSTR void forked(void) {
    for (int i = 0; i < 512; ++i) table[i].count = 0;
}

static NOINSTR __attribute__((constructor)) void start(void) {
    pthread_atfork(NULL, NULL, forked);
}

static NOINSTR __attribute__((destructor)) void dump(void) {
    const char* dir = getenv("ENTRY_COUNTS_DIR");
    if (!dir) return;
    dumping = 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.txt", dir, (int)getpid());
    FILE* out = fopen(path, "w");
    if (!out) return;
    for (int i = 0; i < 512 && table[i].fn; ++i) {
        Dl_info info;
        if (table[i].count && dladdr(table[i].fn, &info) && info.dli_sname)
            fprintf(out, "%s %lu\n", info.dli_sname, table[i].count);
    }
    fclose(out);
}
