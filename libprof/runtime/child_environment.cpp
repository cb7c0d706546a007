// Children started with an environment of their own stay in the run. execve, execle, execvpe,
// fexecve, execveat, posix_spawn and posix_spawnp take the child's envp from the caller, often a
// minimal one ({PATH, HOME}): without the run's PROF_OUT or PROF_RUN_DIR the child would write
// ./prof.<pid>.trace, and without LD_PRELOAD the memory profiler would not be loaded in it. The
// interposers give that envp the PROF_* variables the process started with (not PROF_FORCE,
// which is never passed on) and libprof's own LD_PRELOAD entries, unless the envp sets them
// itself: a value the caller chose wins, so PROF_DISABLE=1 there still disables the child.
// execl, execv, execvp, system and popen use the process's own environ: nothing to do there.
//
// These run between fork and exec, in vfork children (the parent's memory) and from signal
// handlers: no allocation, no lock, no dlsym (the C library's functions are looked up when the
// runtime starts), and errno as the real call leaves it. The new envp is built on the stack; a
// larger one goes into a private mapping, unmapped when the call returns (a vfork child's
// successful exec leaves that mapping to the parent: only envps of over 128 variables or an
// LD_PRELOAD of over 1 KiB take it).
#include "runtime.hpp"

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <spawn.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace prof::rt;

#define PROF_API __attribute__((visibility("default"))) PROF_NOINSTR

namespace {

using Execve = int (*)(const char*, char* const[], char* const[]);
using Execvpe = int (*)(const char*, char* const[], char* const[]);
using Fexecve = int (*)(int, char* const[], char* const[]);
using Execveat = int (*)(int, const char*, char* const[], char* const[], int);
using Spawn = int (*)(pid_t*, const char*, const posix_spawn_file_actions_t*,
                      const posix_spawnattr_t*, char* const[], char* const[]);

struct RealCalls {
    std::atomic<Execve> execve{nullptr};
    std::atomic<Execvpe> execvpe{nullptr};
    std::atomic<Fexecve> fexecve{nullptr};
    std::atomic<Execveat> execveat{nullptr};
    std::atomic<Spawn> posix_spawn{nullptr};
    std::atomic<Spawn> posix_spawnp{nullptr};
};
constinit RealCalls g_real;

// What a child started with an envp of its own carries, copied when the runtime starts (the
// program may change or clear its environment later; the run's settings are those it started
// with): "NAME=value" strings, and libprof's LD_PRELOAD entries, ':'-separated.
struct Carried {
    const char** vars = nullptr; // `count` strings, in a mapping of their own
    size_t count = 0;
    char preload[1024] = "";
};
constinit Carried g_carried;

constexpr char kPreload[] = "LD_PRELOAD=";
constexpr size_t kPreloadLen = sizeof kPreload - 1;

PROF_NOINSTR bool carried_variable(const char* entry) {
    return !strncmp(entry, "PROF_", 5) && strchr(entry, '=') &&
           strncmp(entry, "PROF_FORCE=", 11) != 0;
}

// The file name of the LD_PRELOAD entry `entry` (length len), and its length in `n`.
PROF_NOINSTR const char* file_name(const char* entry, size_t len, size_t& n) {
    const char* name = entry;
    for (size_t i = 0; i < len; ++i)
        if (entry[i] == '/') name = entry + i + 1;
    n = len - size_t(name - entry);
    return name;
}

// An LD_PRELOAD entry that is libprof.so or libprofmem.so (any version suffix).
PROF_NOINSTR bool own_library(const char* entry, size_t len) {
    size_t n = 0;
    const char* name = file_name(entry, len, n);
    return (n >= 10 && !strncmp(name, "libprof.so", 10)) ||
           (n >= 13 && !strncmp(name, "libprofmem.so", 13));
}

// Whether the ':'- or ' '-separated list `list` has a library of the file name of `entry`
// (length len): the same library from another directory must not be preloaded twice (both
// would interpose the same functions).
PROF_NOINSTR bool list_has(const char* list, const char* entry, size_t len) {
    size_t want = 0;
    const char* wanted = file_name(entry, len, want);
    for (const char* p = list; *p;) {
        size_t n = strcspn(p, ": "), have = 0;
        const char* name = file_name(p, n, have);
        if (have == want && !strncmp(name, wanted, want)) return true;
        p += n;
        if (*p) ++p;
    }
    return false;
}

// The index of the variable of `entry` ("NAME=..." or "NAME") in `envp`, or -1.
PROF_NOINSTR long find(char* const* envp, const char* entry) {
    size_t n = strcspn(entry, "=");
    for (long i = 0; envp && envp[i]; ++i)
        if (!strncmp(envp[i], entry, n) && envp[i][n] == '=') return i;
    return -1;
}

// The child's envp: the caller's, plus the carried variables it does not set, and libprof's
// LD_PRELOAD entries ahead of its own. `envp` is the caller's itself when nothing is missing,
// and when no memory could be had for more (the child then runs outside the run, as before).
class ChildEnvironment {
  public:
    PROF_NOINSTR explicit ChildEnvironment(char* const* given) : envp(given) {
        size_t given_count = 0;
        while (given && given[given_count]) ++given_count;
        size_t missing = 0;
        for (size_t i = 0; i < g_carried.count; ++i) missing += find(given, g_carried.vars[i]) < 0;
        long preload_at = find(given, kPreload);
        const char* theirs = preload_at >= 0 ? given[preload_at] + kPreloadLen : "";
        // The length of the entries of ours their LD_PRELOAD lacks, each with a ':' after it.
        size_t ours = 0;
        for (const char* p = g_carried.preload; *p;) {
            size_t n = strcspn(p, ":");
            if (!list_has(theirs, p, n)) ours += n + 1;
            p += n;
            if (*p) ++p;
        }
        if (!missing && !ours) return;
        size_t slots = given_count + missing + 2; // a new LD_PRELOAD, and the null
        size_t text = ours ? kPreloadLen + ours + strlen(theirs) + 1 : 0;
        char** vars = stack_vars_;
        char* preload = stack_text_;
        if (slots > kStackVars || text > sizeof stack_text_) {
            size_t bytes = slots * sizeof(char*) + text;
            int saved = errno;
            void* m = map_anon(bytes);
            errno = saved;
            if (!m) return;
            mapped_ = m;
            mapped_size_ = bytes;
            vars = static_cast<char**>(m);
            preload = static_cast<char*>(m) + slots * sizeof(char*);
        }
        if (ours) {
            char* p = preload;
            memcpy(p, kPreload, kPreloadLen);
            p += kPreloadLen;
            for (const char* q = g_carried.preload; *q;) {
                size_t n = strcspn(q, ":");
                if (!list_has(theirs, q, n)) {
                    memcpy(p, q, n);
                    p[n] = ':';
                    p += n + 1;
                }
                q += n;
                if (*q) ++q;
            }
            size_t rest = strlen(theirs);
            if (rest)
                memcpy(p, theirs, rest + 1);
            else
                p[-1] = '\0'; // no ':' after our last entry
        }
        size_t n = 0;
        for (size_t i = 0; i < given_count; ++i)
            vars[n++] = ours && long(i) == preload_at ? preload : given[i];
        for (size_t i = 0; i < g_carried.count; ++i)
            if (find(given, g_carried.vars[i]) < 0)
                vars[n++] = const_cast<char*>(g_carried.vars[i]);
        if (ours && preload_at < 0) vars[n++] = preload;
        vars[n] = nullptr;
        envp = vars;
    }

    PROF_NOINSTR ~ChildEnvironment() {
        if (!mapped_) return;
        int saved = errno; // the real call's
        munmap(mapped_, mapped_size_);
        errno = saved;
    }

    ChildEnvironment(const ChildEnvironment&) = delete;
    ChildEnvironment& operator=(const ChildEnvironment&) = delete;

    char* const* envp;

  private:
    static constexpr size_t kStackVars = 128;
    char* stack_vars_[kStackVars];
    char stack_text_[1024];
    void* mapped_ = nullptr;
    size_t mapped_size_ = 0;
};

} // namespace

namespace prof::rt {

PROF_NOINSTR void child_environment_start() {
    c_library_function(g_real.execve, "execve");
    c_library_function(g_real.execvpe, "execvpe");
    c_library_function(g_real.fexecve, "fexecve");
    c_library_function(g_real.execveat, "execveat");
    c_library_function(g_real.posix_spawn, "posix_spawn");
    c_library_function(g_real.posix_spawnp, "posix_spawnp");
}

// Called once, at start (the global lock held), before any child can be started by us.
PROF_NOINSTR void carry_start_environment(const char* const* env) {
    if (!env) return;
    size_t count = 0, bytes = 0;
    for (const char* const* e = env; *e; ++e) {
        if (carried_variable(*e)) ++count, bytes += strlen(*e) + 1;
        if (strncmp(*e, kPreload, kPreloadLen) != 0) continue;
        // libprof's own entries of LD_PRELOAD (profrun --preload, --mem), in their order.
        size_t used = strlen(g_carried.preload);
        for (const char* p = *e + kPreloadLen; *p;) {
            size_t n = strcspn(p, ": ");
            if (n && own_library(p, n) && !list_has(g_carried.preload, p, n) &&
                used + n + 2 <= sizeof g_carried.preload) {
                if (used) g_carried.preload[used++] = ':';
                memcpy(g_carried.preload + used, p, n);
                used += n;
                g_carried.preload[used] = '\0';
            }
            p += n;
            if (*p) ++p;
        }
    }
    if (!count) return;
    void* m = map_anon(count * sizeof(char*) + bytes);
    if (!m) return;
    auto** vars = static_cast<const char**>(m);
    char* text = static_cast<char*>(m) + count * sizeof(char*);
    size_t n = 0;
    for (const char* const* e = env; *e; ++e) {
        if (!carried_variable(*e)) continue;
        size_t len = strlen(*e) + 1;
        memcpy(text, *e, len);
        vars[n++] = text;
        text += len;
    }
    g_carried.vars = vars;
    g_carried.count = n;
}

} // namespace prof::rt

extern "C" {

PROF_API int prof_execve(const char* path, char* const argv[], char* const envp[]) {
    Execve fn = c_library_function(g_real.execve, "execve");
    if (!fn) return errno = ENOSYS, -1;
    ChildEnvironment env(envp);
    return fn(path, argv, env.envp);
}

// execle's arguments after `arg`, up to the null, then the envp: as an argv for execve.
PROF_API int prof_vexecle(const char* path, const char* arg, va_list ap) {
    va_list count_ap;
    va_copy(count_ap, ap);
    size_t argc = 1;
    while (va_arg(count_ap, char*)) ++argc;
    va_end(count_ap);
    char* stack_argv[256];
    char** argv = stack_argv;
    size_t bytes = (argc + 1) * sizeof(char*);
    if (argc + 1 > 256) {
        int saved = errno;
        argv = static_cast<char**>(map_anon(bytes));
        errno = saved;
        if (!argv) return errno = E2BIG, -1;
    }
    argv[0] = const_cast<char*>(arg);
    for (size_t i = 1; i <= argc; ++i) argv[i] = va_arg(ap, char*); // the last: the null
    char* const* envp = va_arg(ap, char* const*);
    int r = prof_execve(path, argv, envp);
    if (argv != stack_argv) {
        int saved = errno;
        munmap(argv, bytes);
        errno = saved;
    }
    return r;
}

PROF_API int prof_execvpe(const char* file, char* const argv[], char* const envp[]) {
    Execvpe fn = c_library_function(g_real.execvpe, "execvpe");
    if (!fn) return errno = ENOSYS, -1;
    ChildEnvironment env(envp);
    return fn(file, argv, env.envp);
}

PROF_API int prof_fexecve(int fd, char* const argv[], char* const envp[]) {
    Fexecve fn = c_library_function(g_real.fexecve, "fexecve");
    if (!fn) return errno = ENOSYS, -1;
    ChildEnvironment env(envp);
    return fn(fd, argv, env.envp);
}

PROF_API int prof_execveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                           int flags) {
    Execveat fn = c_library_function(g_real.execveat, "execveat");
    if (!fn) return errno = ENOSYS, -1;
    ChildEnvironment env(envp);
    return fn(dirfd, path, argv, env.envp, flags);
}

PROF_API int prof_posix_spawn(pid_t* pid, const char* path,
                              const posix_spawn_file_actions_t* actions,
                              const posix_spawnattr_t* attr, char* const argv[],
                              char* const envp[]) {
    Spawn fn = c_library_function(g_real.posix_spawn, "posix_spawn");
    if (!fn) return ENOSYS;
    ChildEnvironment env(envp);
    return fn(pid, path, actions, attr, argv, env.envp);
}

PROF_API int prof_posix_spawnp(pid_t* pid, const char* file,
                               const posix_spawn_file_actions_t* actions,
                               const posix_spawnattr_t* attr, char* const argv[],
                               char* const envp[]) {
    Spawn fn = c_library_function(g_real.posix_spawnp, "posix_spawnp");
    if (!fn) return ENOSYS;
    ChildEnvironment env(envp);
    return fn(pid, file, actions, attr, argv, env.envp);
}

// libprof.so's own interposers, for a program linked with it or run with it preloaded; under
// libprofmem.so alone, that library exports the same names and forwards here.
PROF_API int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
    return prof_execve(path, argv, envp);
}
PROF_API int execle(const char* path, const char* arg, ...) noexcept {
    va_list ap;
    va_start(ap, arg);
    int r = prof_vexecle(path, arg, ap);
    va_end(ap);
    return r;
}
PROF_API int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
    return prof_execvpe(file, argv, envp);
}
PROF_API int fexecve(int fd, char* const argv[], char* const envp[]) noexcept {
    return prof_fexecve(fd, argv, envp);
}
PROF_API int execveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                      int flags) noexcept {
    return prof_execveat(dirfd, path, argv, envp, flags);
}
PROF_API int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                         const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
    return prof_posix_spawn(pid, path, actions, attr, argv, envp);
}
PROF_API int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                          const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
    return prof_posix_spawnp(pid, file, actions, attr, argv, envp);
}

} // extern "C"
