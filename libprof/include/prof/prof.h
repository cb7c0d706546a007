/* libprof C API: what a program can ask the runtime it is linked with.
 *
 *   #include <prof/prof.h>
 *   if (prof_is_tracing()) printf("trace: %s\n", prof_trace_path());
 *
 * Link with prof::prof (CMake) or `pkg-config --libs libprof`. */
#ifndef PROF_PROF_H
#define PROF_PROF_H

#ifdef __cplusplus
extern "C" {
#endif

/* Non-zero while this process records a trace. */
int prof_is_tracing(void);

/* Path of the trace file this process writes (after a fork, the child's own file), or NULL
 * when it writes none. The string stays valid until the process exits. */
const char* prof_trace_path(void);

#ifdef __cplusplus
}
#endif

#endif /* PROF_PROF_H */
