/* libprof C API: marked regions for C programs, and what a program can ask the runtime.
 *
 *   #include <prof/prof.h>
 *   void step(void) {
 *       PROF_REGION_BEGIN("parse");      // a named region, timed per activation
 *       parse_input();
 *       PROF_REGION_END();
 *   }
 *
 * Link with prof::prof (CMake) or `pkg-config --libs libprof`. With -DPROF_DISABLE every
 * macro here compiles to nothing and the program does not reference the library. */
#ifndef PROF_PROF_H
#define PROF_PROF_H

#ifdef __cplusplus
extern "C" {
#endif

/* A marked source site. Built at compile time by the macros: the runtime keys everything by
 * the site's address, so events carry no strings. */
typedef struct prof_site {
    const char* file;
    const char* function;
    const char* label;    /* the statement (lines) or the name (scopes, regions) */
    unsigned line;
    unsigned kind;        /* 1 line, 2 scope, 3 function, 4 region */
    unsigned id;          /* assigned by the runtime on first use */
} prof_site;

#if defined(PROF_DISABLE)
/* Compiled out: nothing is traced, and no symbol of the library is referenced. */
static inline int prof_is_tracing(void) { return 0; }
static inline const char* prof_trace_path(void) { return 0; }
#else
/* Non-zero while this process records a trace. */
int prof_is_tracing(void);

/* Path of the trace file this process writes (after a fork, the child's own file), or NULL
 * when it writes none. The string stays valid until the process exits. */
const char* prof_trace_path(void);
#endif

/* Regions and scopes: timed per activation, shown as functions in profreport's tables and
 * call tree. A region ends with prof_region_end() on the same thread, innermost first, in the
 * function that began it: like a scope, a region still open when that function returns (in
 * code built with -finstrument-functions) ends there, and a later prof_region_end() then ends
 * the next region out. */
void prof_region_begin(prof_site* site);
void prof_region_end(void);
void prof_scope_enter(prof_site* site);
void prof_scope_exit(prof_site* site);
/* The same, for the C++ macros: `cfa` is the stack level the inline code saw, so that the
 * frame an inline enter opened is matched by an out-of-line exit and the other way round. */
void prof_scope_enter_at(prof_site* site, unsigned long cfa);
void prof_scope_exit_at(prof_site* site, unsigned long cfa);

/* Lines: one timed execution of a marked statement (ticks from prof_ticks()). */
unsigned long long prof_ticks(void);
void prof_line_record(prof_site* site, unsigned long long start, unsigned long long end);
/* One hit whose duration (end - start) stands for `weight` hits: itself and weight - 1 that were
 * not timed; weight 0: a hit that was not timed (start and end are not read). */
void prof_line_record_weighted(prof_site* site, unsigned long long start, unsigned long long end,
                               unsigned weight);
/* What the macros measure around a line besides its time, set by the runtime at start: 0, or
 * PROF_LINE_MEM_HEAP (the memory profiler is loaded) and PROF_LINE_MEM_RSS (PROF_LINE_RSS=1).
 * Programs built before the bits existed read the RSS and the heap whenever it is not 0. */
extern int prof_line_rss_enabled;
#define PROF_LINE_MEM_HEAP 1 /* the growth of the thread's heap (a thread-local counter) */
#define PROF_LINE_MEM_RSS 2  /* the resident set size before and after (two preads) */
unsigned long long prof_rss_bytes(void);
void prof_line_record_rss(prof_site* site, unsigned long long start, unsigned long long end,
                          unsigned long long rss_before, unsigned long long rss_after);
/* With the memory profiler loaded: also the heap bytes this thread allocated minus released. */
long long prof_heap_bytes(void);
void prof_line_record_mem(prof_site* site, unsigned long long start, unsigned long long end,
                          unsigned long long rss_before, unsigned long long rss_after,
                          long long heap_before);
/* The heap's growth only (the memory profiler without PROF_LINE_RSS=1). */
void prof_line_record_heap(prof_site* site, unsigned long long start, unsigned long long end,
                           long long heap_before);

#ifdef __cplusplus
}
#endif

#if defined(PROF_DISABLE)
#define PROF_REGION_BEGIN(name) ((void)0)
#define PROF_REGION_END() ((void)0)
#else
#define PROF_REGION_BEGIN(name)                                                             \
    do {                                                                                    \
        static prof_site prof_region_site_ = {__FILE__, __func__, name, __LINE__, 4, 0};    \
        prof_region_begin(&prof_region_site_);                                              \
    } while (0)
#define PROF_REGION_END() prof_region_end()
#endif

#endif /* PROF_PROF_H */
