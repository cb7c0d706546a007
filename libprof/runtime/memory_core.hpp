// The memory profiler's core in libprof.so (runtime/memory.cpp), as the allocator interposers of
// libprofmem.so (preload/memory_preload.cpp) call it: the one declaration of that interface,
// included by both sides, so that a change on one side that the other does not follow fails to
// compile. Internal to the two libraries (they always come from the same build); not installed.
// The functions are exported by libprof.so (runtime/exports.map), the hot-path contract of
// runtime.hpp applies to them, and none of them changes errno.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <new>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

extern "C" {

// One allocation of `size` bytes at `ptr` (null: nothing is recorded); `usable`: its usable
// size when prof_heap_tracking is set (else 0). `kind`: see prof::mem::kind_with_alignment().
void prof_mem_record_alloc(void* ptr, size_t size, unsigned kind, size_t usable);
// The block at `ptr` is about to be released: called before the real free, so that no other
// thread can be handed the same address first. `kind`: a FreeKind, see
// prof::mem::kind_with_alignment().
void prof_mem_record_free(void* ptr, unsigned kind, size_t usable);
// realloc(old, size) returned `ptr` (old may be null; ptr null when it failed: not recorded).
void prof_mem_record_realloc(void* old, void* ptr, size_t size, size_t old_usable, size_t usable);
// The interposers are loaded: marked lines then also record heap and RSS deltas.
void prof_mem_activate(void);
// libprofmem.so's part in the finish at exit (runtime_finish): `begin` before the finish's own
// work, `end` after it. In between, the finishing thread's allocations come from a region of
// libprofmem.so's, and its releases of the program's blocks are recorded but the blocks kept
// (memory_preload.cpp says why).
void prof_mem_set_finish_hooks(void (*begin)(void), void (*end)(void));
// dlclose through the runtime, which names the object's functions before they are unmapped
// (runtime/modules.cpp); libprofmem.so exports dlclose too, being first in the search order.
int prof_dlclose(void* handle);
// The wait family through the runtime, which records how each reaped child ended
// (runtime/children.cpp); libprofmem.so exports them too, for the same reason as dlclose.
pid_t prof_waitpid(pid_t pid, int* status, int options);
pid_t prof_wait(int* status);
pid_t prof_wait3(int* status, int options, struct rusage* usage);
pid_t prof_wait4(pid_t pid, int* status, int options, struct rusage* usage);
int prof_waitid(idtype_t type, id_t id, siginfo_t* info, int options);
// The calls that start a program with an envp of the caller's, through the runtime, which gives
// that envp the run's PROF_* variables and libprof's LD_PRELOAD entries
// (runtime/child_environment.cpp); libprofmem.so exports them too, for the same reason. They
// set errno as the C library's calls do, and only so.
// prof_vexecle is execle with its arguments after `arg` (up to the null, then the envp) in `ap`.
int prof_execve(const char* path, char* const argv[], char* const envp[]);
int prof_vexecle(const char* path, const char* arg, va_list ap);
int prof_execvpe(const char* file, char* const argv[], char* const envp[]);
int prof_fexecve(int fd, char* const argv[], char* const envp[]);
int prof_execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags);
int prof_posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                     const posix_spawnattr_t* attr, char* const argv[], char* const envp[]);
int prof_posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                      const posix_spawnattr_t* attr, char* const argv[], char* const envp[]);
// Set once some PROF_LINE site exists: the interposers then measure usable sizes, for the
// per-line heap deltas (runtime/sites.cpp).
extern int prof_heap_tracking;

} // extern "C"

namespace prof::mem {

// The `kind` argument of prof_mem_record_alloc and prof_mem_record_free: the format's AllocKind
// or FreeKind in the low byte, and for the operator new and delete forms with std::align_val_t,
// log2 of the alignment plus one in the next byte (the record's `alignment` field, format 1.4).
__attribute__((no_instrument_function)) inline unsigned kind_with_alignment(unsigned kind,
                                                                            std::align_val_t a) {
    auto v = static_cast<size_t>(a);
    return v ? kind | (unsigned(__builtin_ctzll(v)) + 1) << 8 : kind;
}

// The alignment a `kind` argument carries (0: none); its low byte is the AllocKind or FreeKind.
__attribute__((no_instrument_function)) inline uint64_t alignment_of_kind(unsigned kind) {
    unsigned log2_plus_one = (kind >> 8) & 0xff;
    return log2_plus_one ? uint64_t(1) << ((log2_plus_one - 1) & 63) : 0;
}

} // namespace prof::mem
