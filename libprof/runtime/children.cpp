// How a process's children ended, as the wait family reports it to the process that reaps them.
// Only the parent learns that a pipeline's stage died by SIGPIPE, or that a child exited 3: its
// own trace ends unfinished (a signal) or says nothing of its status (exit). So the interposed
// waitpid, wait, wait3, wait4 and waitid write `Meta child_status.<pid>` ("exit N" or "signal
// N") into the reaper's trace, and a run directory's tools give each process its status.
//
// These run in the program's threads, often from a SIGCHLD handler: no allocation, no lock
// waited for (the trace's lock is tried; if it is held, this status is not recorded), errno and
// the call's result kept. The C library's functions are looked up when the runtime starts, not
// in a handler.
#include "runtime.hpp"
#include "thread_state.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace prof::rt;

#define PROF_API __attribute__((visibility("default"))) PROF_NOINSTR

namespace {

using Waitpid = pid_t (*)(pid_t, int*, int);
using Wait = pid_t (*)(int*);
using Wait3 = pid_t (*)(int*, int, struct rusage*);
using Wait4 = pid_t (*)(pid_t, int*, int, struct rusage*);
using Waitid = int (*)(idtype_t, id_t, siginfo_t*, int);

struct RealWaits {
    std::atomic<Waitpid> waitpid{nullptr};
    std::atomic<Wait> wait{nullptr};
    std::atomic<Wait3> wait3{nullptr};
    std::atomic<Wait4> wait4{nullptr};
    std::atomic<Waitid> waitid{nullptr};
};
constinit RealWaits g_real;

// From the C library itself (c_library_function): after libprof.so in the search order there
// may be nothing (it came in as libprofmem.so's dependency, after libc), as for dlclose.
// "child_status.<pid>" = "exit N" | "signal N", formatted by hand (async-signal-safe).
PROF_NOINSTR char* put_number(char* p, unsigned long v) {
    char digits[24];
    int n = 0;
    do digits[n++] = char('0' + v % 10);
    while ((v /= 10) != 0);
    while (n) *p++ = digits[--n];
    return p;
}

PROF_NOINSTR void note_child_end(pid_t child, bool exited, int code) {
    if (child <= 0 || !tracing_active()) return;
    int saved = errno;
    uint8_t prev = block_thread();
    char key[48] = "child_status.";
    *put_number(key + std::strlen(key), (unsigned long)child) = '\0';
    char value[32];
    const char* what = exited ? "exit " : "signal ";
    size_t len = std::strlen(what);
    std::memcpy(value, what, len);
    len = size_t(put_number(value + len, (unsigned long)code) - value);
    if (try_lock_global()) {
        if (tracing_active()) meta_record(key, value, len);
        unlock_global();
    }
    unblock_thread(prev);
    errno = saved;
}

PROF_NOINSTR void note_status(pid_t child, int status) {
    if (WIFEXITED(status))
        note_child_end(child, true, WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        note_child_end(child, false, WTERMSIG(status));
}

} // namespace

namespace prof::rt {

PROF_NOINSTR void* c_library_function(const char* name) {
    void* fn = nullptr;
    // Not before the C library's initializer has run (a first hook in a .preinit_array
    // function, `environ` still null): dlopen, even with RTLD_NOLOAD, runs an object's
    // initializer that has not run yet, there with no environment, and `environ` would stay
    // null for the life of the program. The library's constructor looks again (children_start).
    // The reference RTLD_NOLOAD takes is kept: libc is never unloaded, and dlclose here would
    // be the runtime's own, which takes the lock runtime_start holds.
    if (environ)
        if (void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD)) fn = dlsym(libc, name);
    if (!fn) fn = dlsym(RTLD_NEXT, name);
    return fn;
}

PROF_NOINSTR void children_start() {
    c_library_function(g_real.waitpid, "waitpid");
    c_library_function(g_real.wait, "wait");
    c_library_function(g_real.wait3, "wait3");
    c_library_function(g_real.wait4, "wait4");
    c_library_function(g_real.waitid, "waitid");
}

} // namespace prof::rt

// A status is recorded only when the caller did not ask for it to stay (WNOWAIT: the child is
// reaped by a later call, which records it then).
extern "C" {

PROF_API pid_t prof_waitpid(pid_t pid, int* status, int options) {
    Waitpid real = c_library_function(g_real.waitpid, "waitpid");
    if (!real) return errno = ENOSYS, -1;
    int local = 0;
    int* out = status ? status : &local;
    pid_t r = real(pid, out, options);
    if (r > 0) note_status(r, *out);
    return r;
}

PROF_API pid_t prof_wait(int* status) {
    Wait real = c_library_function(g_real.wait, "wait");
    if (!real) return errno = ENOSYS, -1;
    int local = 0;
    int* out = status ? status : &local;
    pid_t r = real(out);
    if (r > 0) note_status(r, *out);
    return r;
}

PROF_API pid_t prof_wait3(int* status, int options, struct rusage* usage) {
    Wait3 real = c_library_function(g_real.wait3, "wait3");
    if (!real) return errno = ENOSYS, -1;
    int local = 0;
    int* out = status ? status : &local;
    pid_t r = real(out, options, usage);
    if (r > 0) note_status(r, *out);
    return r;
}

PROF_API pid_t prof_wait4(pid_t pid, int* status, int options, struct rusage* usage) {
    Wait4 real = c_library_function(g_real.wait4, "wait4");
    if (!real) return errno = ENOSYS, -1;
    int local = 0;
    int* out = status ? status : &local;
    pid_t r = real(pid, out, options, usage);
    if (r > 0) note_status(r, *out);
    return r;
}

PROF_API int prof_waitid(idtype_t type, id_t id, siginfo_t* info, int options) {
    Waitid real = c_library_function(g_real.waitid, "waitid");
    if (!real) return errno = ENOSYS, -1;
    int r = real(type, id, info, options);
    if (r == 0 && info && info->si_pid > 0 && !(options & WNOWAIT)) {
        if (info->si_code == CLD_EXITED)
            note_child_end(info->si_pid, true, info->si_status);
        else if (info->si_code == CLD_KILLED || info->si_code == CLD_DUMPED)
            note_child_end(info->si_pid, false, info->si_status);
    }
    return r;
}

// libprof.so's own interposers, for a program linked with it or run with it preloaded; under
// libprofmem.so alone, that library exports the same names and forwards here.
PROF_API pid_t waitpid(pid_t pid, int* status, int options) {
    return prof_waitpid(pid, status, options);
}
PROF_API pid_t wait(int* status) {
    return prof_wait(status);
}
PROF_API pid_t wait3(int* status, int options, struct rusage* usage) {
    return prof_wait3(status, options, usage);
}
PROF_API pid_t wait4(pid_t pid, int* status, int options, struct rusage* usage) {
    return prof_wait4(pid, status, options, usage);
}
PROF_API int waitid(idtype_t type, id_t id, siginfo_t* info, int options) {
    return prof_waitid(type, id, info, options);
}

} // extern "C"
