// libprofmem.so: the allocator interposers, loaded with LD_PRELOAD (or `profrun --mem`). Only
// the extern "C" entry points and their bootstrap live here; each forwards to the allocator
// the program would have used without us (found with dlsym(RTLD_NEXT), so a program linked
// with jemalloc or tcmalloc keeps it) and reports the call once to the core in libprof.so.
//
// One user-level call counts once: a per-thread depth counter marks that we are inside an
// interposed call, so operator new calling malloc, or a realloc implemented with malloc, is
// not counted again. dlsym may itself call calloc before the real functions are known; those
// requests are served from a static arena and never freed to the real allocator.
#include "runtime/memory_core.hpp"

#include <prof/trace_format.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <new>
#include <sys/mman.h>
#include <unistd.h>

#define PROF_NOINSTR __attribute__((no_instrument_function))
#define PROF_EXPORT extern "C" __attribute__((visibility("default"))) PROF_NOINSTR

namespace {

using prof::format::AllocKind;
using prof::format::FreeKind;
using prof::mem::kind_with_alignment;

using MallocFn = void* (*)(size_t);
using FreeFn = void (*)(void*);
using CallocFn = void* (*)(size_t, size_t);
using ReallocFn = void* (*)(void*, size_t);
using MemalignFn = void* (*)(size_t, size_t);
using PosixMemalignFn = int (*)(void**, size_t, size_t);
using NewFn = void* (*)(size_t);
using NewAlignFn = void* (*)(size_t, std::align_val_t);
using NewNothrowFn = void* (*)(size_t, const std::nothrow_t&);
using NewAlignNothrowFn = void* (*)(size_t, std::align_val_t, const std::nothrow_t&);
using DeleteFn = void (*)(void*);
using DeleteAlignFn = void (*)(void*, std::align_val_t);

struct Real {
    MallocFn malloc;
    FreeFn free;
    CallocFn calloc;
    ReallocFn realloc;
    MemalignFn memalign, aligned_alloc;
    PosixMemalignFn posix_memalign;
    MallocFn valloc, pvalloc;
    NewFn new_, new_array;
    NewAlignFn new_align, new_array_align;
    NewNothrowFn new_nothrow, new_array_nothrow;
    NewAlignNothrowFn new_align_nothrow, new_array_align_nothrow;
    DeleteFn delete_, delete_array;
    DeleteAlignFn delete_align, delete_array_align;
    size_t (*usable_size)(void*);
};
constinit Real real{};
constinit bool resolving = false;

// Bootstrap arena for allocations made while dlsym runs.
alignas(64) constinit char arena[64 * 1024]{};
constinit size_t arena_used = 0;

PROF_NOINSTR bool in_arena(const void* p) {
    return p >= arena && p < arena + sizeof arena;
}

PROF_NOINSTR void* arena_alloc(size_t n) {
    size_t start = (arena_used + 63) & ~size_t(63);
    if (start + n > sizeof arena) return nullptr;
    arena_used = start + n;
    return arena + start;
}

// Depth of interposed calls on this thread: only the outermost one is recorded.
thread_local int t_depth __attribute__((tls_model("initial-exec"))) = 0;

struct Outermost {
    bool outer;
    PROF_NOINSTR Outermost() : outer(t_depth++ == 0) {}
    PROF_NOINSTR ~Outermost() { --t_depth; }
};

// ---- the finish's own allocations ---------------------------------------------------------------
// At exit the runtime's finish names functions with libdw (runtime/symbols.cpp), which
// allocates: the dynamic loader opening it, libelf, the symbol table. After a program has
// released many small blocks, glibc's first request of 1 KiB or more, and any release that makes
// a free chunk of 64 KiB or more, consolidate every small free block of the heap: perl with 1.5 M
// allocator calls spent a tenth of its run there, at exit, under the memory profiler alone. So
// between finish_begin and finish_end the finishing thread allocates from a region of its own,
// and its releases of the program's blocks (libstdc++'s emergency pool, released so that it is
// no leak) are recorded but the blocks kept (the process is ending).
//
// The region is a stack: a block is given back, or grown in place, only when it is the last one
// (the demangler's buffers, a vector's growth), and otherwise stays until exit. Only the finishing
// thread allocates and gives back, so no lock; another thread that is handed one of its blocks
// leaves it alone.
constexpr size_t kRegionReserves[] = {size_t(1) << 32, size_t(1) << 28}; // MAP_NORESERVE
constexpr size_t kRegionStart = 64; // no block's size header at the region's first bytes
constinit uintptr_t g_region_base = 0;
constinit size_t g_region_used = 0, g_region_size = 0;
constinit bool g_region_failed = false; // no reserve could be mapped: the real allocator
thread_local bool t_finishing __attribute__((tls_model("initial-exec"))) = false;

PROF_NOINSTR bool in_region(const void* p) {
    // Relaxed: another thread reads these while the finishing thread changes them, and a block
    // of the region reaches another thread only through a hand-over of its own, which orders it.
    return uintptr_t(p) - __atomic_load_n(&g_region_base, __ATOMIC_RELAXED) <
           __atomic_load_n(&g_region_used, __ATOMIC_RELAXED);
}

// A block's size sits in the 8 bytes before it.
PROF_NOINSTR size_t region_block_size(const void* p) {
    return static_cast<const size_t*>(p)[-1];
}

PROF_NOINSTR bool map_region() {
    if (g_region_failed) return false;
    int saved = errno;
    for (size_t reserve : kRegionReserves) {
        void* m = mmap(nullptr, reserve, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) continue; // vm.overcommit_memory=2, ulimit -v
        g_region_size = reserve;
        __atomic_store_n(&g_region_base, uintptr_t(m), __ATOMIC_RELAXED);
        __atomic_store_n(&g_region_used, kRegionStart, __ATOMIC_RELAXED);
        errno = saved;
        return true;
    }
    g_region_failed = true;
    errno = saved;
    return false;
}

// A block of the region (16-byte aligned at least), or null: no region, no room, or an
// alignment that is no power of two; the caller then takes the real allocator.
PROF_NOINSTR void* region_alloc(size_t n, size_t align) {
    if (!g_region_base && !map_region()) return nullptr;
    if (align < 16) align = 16;
    if ((align & (align - 1)) || align > g_region_size / 2 || n > g_region_size) return nullptr;
    size_t at = (g_region_used + sizeof(size_t) + align - 1) & ~(align - 1);
    if (at + n > g_region_size) return nullptr;
    __atomic_store_n(&g_region_used, at + (n ? n : 1), __ATOMIC_RELAXED);
    auto* p = reinterpret_cast<size_t*>(g_region_base + at);
    p[-1] = n;
    return p;
}

// The last block of the region can be given back, or grown in place (then `p`), on the
// finishing thread.
PROF_NOINSTR bool region_is_last(const void* p) {
    return t_finishing && uintptr_t(p) + region_block_size(p) + (region_block_size(p) ? 0 : 1) ==
                              g_region_base + g_region_used;
}
PROF_NOINSTR void region_release(void* p) {
    if (region_is_last(p))
        __atomic_store_n(&g_region_used, uintptr_t(p) - sizeof(size_t) - g_region_base,
                         __ATOMIC_RELAXED);
}
PROF_NOINSTR void* region_resize(void* p, size_t n) {
    if (!n || !region_is_last(p) || n > g_region_size - (uintptr_t(p) - g_region_base))
        return nullptr;
    static_cast<size_t*>(p)[-1] = n;
    __atomic_store_n(&g_region_used, uintptr_t(p) - g_region_base + n, __ATOMIC_RELAXED);
    return p;
}

// The finishing thread's allocation, or null when this is no such call (or the region has no
// room).
PROF_NOINSTR inline void* alloc_if_finishing(size_t n, size_t align = 16) {
    return __builtin_expect(t_finishing, 0) ? region_alloc(n, align) : nullptr;
}

PROF_NOINSTR size_t page_size() {
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? size_t(page) : 4096;
}

PROF_NOINSTR void finish_begin() {
    t_finishing = true;
}
PROF_NOINSTR void finish_end() {
    t_finishing = false;
}

template <typename T>
PROF_NOINSTR T next(const char* name) {
    return reinterpret_cast<T>(dlsym(RTLD_NEXT, name));
}

PROF_NOINSTR void resolve() {
    if (real.malloc || resolving) return;
    resolving = true;
    Real r{};
    r.malloc = next<MallocFn>("malloc");
    r.free = next<FreeFn>("free");
    r.calloc = next<CallocFn>("calloc");
    r.realloc = next<ReallocFn>("realloc");
    r.memalign = next<MemalignFn>("memalign");
    r.aligned_alloc = next<MemalignFn>("aligned_alloc");
    r.posix_memalign = next<PosixMemalignFn>("posix_memalign");
    r.valloc = next<MallocFn>("valloc");
    r.pvalloc = next<MallocFn>("pvalloc");
    r.new_ = next<NewFn>("_Znwm");
    r.new_array = next<NewFn>("_Znam");
    r.new_align = next<NewAlignFn>("_ZnwmSt11align_val_t");
    r.new_array_align = next<NewAlignFn>("_ZnamSt11align_val_t");
    r.new_nothrow = next<NewNothrowFn>("_ZnwmRKSt9nothrow_t");
    r.new_array_nothrow = next<NewNothrowFn>("_ZnamRKSt9nothrow_t");
    r.new_align_nothrow = next<NewAlignNothrowFn>("_ZnwmSt11align_val_tRKSt9nothrow_t");
    r.new_array_align_nothrow = next<NewAlignNothrowFn>("_ZnamSt11align_val_tRKSt9nothrow_t");
    r.delete_ = next<DeleteFn>("_ZdlPv");
    r.delete_array = next<DeleteFn>("_ZdaPv");
    r.delete_align = next<DeleteAlignFn>("_ZdlPvSt11align_val_t");
    r.delete_array_align = next<DeleteAlignFn>("_ZdaPvSt11align_val_t");
    r.usable_size = next<size_t (*)(void*)>("malloc_usable_size");
    real = r;
    resolving = false;
}

PROF_NOINSTR inline bool ready() {
    if (__builtin_expect(real.malloc != nullptr, 1)) return true;
    resolve();
    return real.malloc != nullptr;
}

// Usable size of a live block, for the heap counter behind the per-line heap deltas.
// Only while marked lines exist: otherwise the call (a cache miss on the block's header at
// free) is skipped.
PROF_NOINSTR size_t usable(void* p) {
    return p && real.usable_size && __atomic_load_n(&prof_heap_tracking, __ATOMIC_RELAXED) &&
                   !in_region(p) // not the real allocator's
               ? real.usable_size(p)
               : 0;
}

PROF_NOINSTR void* record(void* p, size_t n, unsigned kind, bool outer) {
    if (outer && p) prof_mem_record_alloc(p, n, kind, usable(p));
    return p;
}

PROF_NOINSTR void* record(void* p, size_t n, AllocKind kind, bool outer) {
    return record(p, n, unsigned(kind), outer);
}

// ---- the profiler's own libstdc++ ---------------------------------------------------------------
// In a C program, libstdc++ is there only because libprof.so needs it, and its initializer,
// which runs before this library's constructor, allocates the exception handling emergency
// pool (about 71 KiB): the profiler's memory, which would otherwise be the largest site of
// every C program's report (/bin/true: one 71 KiB allocation). Allocations libstdc++ makes
// itself before the constructor are passed through unrecorded when no object of the program
// needs libstdc++, and so are their releases.
constinit bool g_started = false; // activate() ran: everything is recorded from then on

struct CxxRuntime {
    uintptr_t start = 0, end = 0; // libstdc++'s code
    bool needed_by_program = false;
};

PROF_NOINSTR bool name_has(const char* name, const char* part) {
    return name && std::strstr(name, part) != nullptr;
}

PROF_NOINSTR int note_cxx_runtime(dl_phdr_info* info, size_t, void* arg) {
    auto* cxx = static_cast<CxxRuntime*>(arg);
    bool ours = name_has(info->dlpi_name, "/libprof") ||
                name_has(info->dlpi_name, "libboost_stacktrace"); // libprof.so's dependency
    bool is_cxx = name_has(info->dlpi_name, "libstdc++.so");
    for (unsigned i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        uintptr_t at = info->dlpi_addr + ph.p_vaddr;
        if (is_cxx && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
            cxx->start = at;
            cxx->end = at + ph.p_memsz;
        }
        if (ours || is_cxx || ph.p_type != PT_DYNAMIC) continue;
        // The loader has relocated the string table's address in place (not the vDSO's).
        const auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(at);
        uintptr_t strtab = 0;
        for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d)
            if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
        if (strtab && strtab < info->dlpi_addr) strtab += info->dlpi_addr;
        for (const ElfW(Dyn)* d = dyn; strtab && d->d_tag != DT_NULL; ++d)
            if (d->d_tag == DT_NEEDED &&
                name_has(reinterpret_cast<const char*>(strtab + d->d_un.d_val), "libstdc++.so"))
                cxx->needed_by_program = true;
    }
    return 0;
}

constinit void* g_own_blocks[8]{}; // passed through: their release is not recorded either
constinit int g_own_count = 0;

// Whether the block `p` that `caller` just allocated is the profiler's own (see above).
PROF_NOINSTR bool profiler_block(void* p, void* caller) {
    static constinit int state = 0; // 0: not known yet, 1: libstdc++ is ours, 2: it is not
    static constinit CxxRuntime cxx{};
    if (state == 0) {
        dl_iterate_phdr(note_cxx_runtime, &cxx);
        state = cxx.start && !cxx.needed_by_program ? 1 : 2;
    }
    auto at = reinterpret_cast<uintptr_t>(caller);
    if (state != 1 || at < cxx.start || at >= cxx.end || g_own_count == 8) return false;
    g_own_blocks[g_own_count++] = p;
    return true;
}

PROF_NOINSTR bool release_of_profiler_block(void* p) {
    for (int i = 0; i < g_own_count; ++i)
        if (g_own_blocks[i] == p) {
            g_own_blocks[i] = g_own_blocks[--g_own_count];
            return true;
        }
    return false;
}

__attribute__((constructor)) PROF_NOINSTR void activate() {
    resolve();
    g_started = true;
    prof_mem_set_finish_hooks(finish_begin, finish_end);
    prof_mem_activate();
}

// Operator new without a libstdc++ to forward to (a C program whose library uses C++): the
// standard behaviour, on top of our malloc.
PROF_NOINSTR void* new_fallback(size_t n, bool nothrow) {
    for (;;) {
        void* p = real.malloc(n ? n : 1);
        if (p) return p;
        std::new_handler h = std::get_new_handler();
        if (!h) {
            if (nothrow) return nullptr;
            throw std::bad_alloc();
        }
        h();
    }
}

} // namespace

// ---- dlclose ------------------------------------------------------------------------------------
// Preloaded, this library comes before the C library in the search order and libprof.so (its
// dependency) after it: the runtime's dlclose wrapper, which records an unloaded object's
// names and its Unload record, would never see the program's calls. Forwarded to it here.
PROF_EXPORT int dlclose(void* handle) { return prof_dlclose(handle); }

// ---- the wait family ----------------------------------------------------------------------------
// The same for the runtime's record of how each reaped child ended (runtime/children.cpp).
PROF_EXPORT pid_t waitpid(pid_t pid, int* status, int options) {
    return prof_waitpid(pid, status, options);
}
PROF_EXPORT pid_t wait(int* status) { return prof_wait(status); }
PROF_EXPORT pid_t wait3(int* status, int options, struct rusage* usage) {
    return prof_wait3(status, options, usage);
}
PROF_EXPORT pid_t wait4(pid_t pid, int* status, int options, struct rusage* usage) {
    return prof_wait4(pid, status, options, usage);
}
PROF_EXPORT int waitid(idtype_t type, id_t id, siginfo_t* info, int options) {
    return prof_waitid(type, id, info, options);
}

// ---- the calls that start a program with an envp of the caller's ------------------------------
// The same for the run's settings and this library itself in such a child's environment
// (runtime/child_environment.cpp): a minimal envp would leave both out.
PROF_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
    return prof_execve(path, argv, envp);
}
PROF_EXPORT int execle(const char* path, const char* arg, ...) noexcept {
    va_list ap;
    va_start(ap, arg);
    int r = prof_vexecle(path, arg, ap);
    va_end(ap);
    return r;
}
PROF_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
    return prof_execvpe(file, argv, envp);
}
PROF_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) noexcept {
    return prof_fexecve(fd, argv, envp);
}
PROF_EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[],
                         int flags) noexcept {
    return prof_execveat(dirfd, path, argv, envp, flags);
}
PROF_EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                            const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
    return prof_posix_spawn(pid, path, actions, attr, argv, envp);
}
PROF_EXPORT int posix_spawnp(pid_t* pid, const char* file,
                             const posix_spawn_file_actions_t* actions,
                             const posix_spawnattr_t* attr, char* const argv[],
                             char* const envp[]) {
    return prof_posix_spawnp(pid, file, actions, attr, argv, envp);
}

// ---- C allocation functions -------------------------------------------------------------------

PROF_EXPORT void* malloc(size_t n) {
    if (!ready()) return arena_alloc(n);
    if (void* p = alloc_if_finishing(n)) return p;
    Outermost o;
    void* p = real.malloc(n);
    if (__builtin_expect(!g_started, 0) && p && profiler_block(p, __builtin_return_address(0)))
        return p;
    return record(p, n, AllocKind::kMalloc, o.outer);
}

PROF_EXPORT void* calloc(size_t count, size_t size) {
    if (!ready()) { // dlsym's own calloc: zeroed static memory
        size_t n = 0;
        if (__builtin_mul_overflow(count, size, &n)) return nullptr;
        return arena_alloc(n);
    }
    size_t bytes = 0;
    if (__builtin_expect(t_finishing, 0) && !__builtin_mul_overflow(count, size, &bytes))
        if (void* p = region_alloc(bytes, 16)) return std::memset(p, 0, bytes); // may be reused

    Outermost o;
    return record(real.calloc(count, size), count * size, AllocKind::kMalloc, o.outer);
}

PROF_EXPORT void free(void* p) {
    if (!p || in_arena(p)) return;
    if (in_region(p)) return region_release(p);
    if (!ready()) return;
    Outermost o;
    if (o.outer && !(__builtin_expect(g_own_count != 0, 0) && release_of_profiler_block(p)))
        prof_mem_record_free(p, unsigned(FreeKind::kFree), usable(p));
    if (__builtin_expect(t_finishing, 0)) return; // kept (see region_alloc)
    real.free(p);
}

PROF_EXPORT void* realloc(void* old, size_t n) {
    if (in_arena(old)) { // grow a bootstrap block into a real one
        void* p = malloc(n);
        if (p) std::memcpy(p, old, n < sizeof arena ? n : sizeof arena);
        return p;
    }
    if (in_region(old) || (old && __builtin_expect(t_finishing, 0))) {
        // A block of the region (grown in place when it is the last one), or a program's block
        // on the finishing thread (never seen: its release is recorded and the block kept, as
        // by free). realloc(p, 0) releases the block and returns null, as glibc's.
        bool ours = in_region(old);
        if (ours)
            if (void* p = region_resize(old, n)) return p;
        size_t had = ours ? region_block_size(old)
                          : (ready() && real.usable_size ? real.usable_size(old) : 0);
        void* p = n ? malloc(n) : nullptr;
        if (n && !p) return nullptr; // the old block stays, as when realloc fails
        if (p) std::memcpy(p, old, n < had ? n : had);
        free(old);
        return p;
    }
    if (!ready()) return nullptr;
    if (void* p = old ? nullptr : alloc_if_finishing(n)) return p;
    Outermost o;
    if (old && n == 0) { // glibc frees the block and returns null
        if (o.outer) prof_mem_record_free(old, unsigned(FreeKind::kFree), usable(old));
        return real.realloc(old, n);
    }
    size_t old_usable = o.outer ? usable(old) : 0;
    void* p = real.realloc(old, n);
    if (o.outer && p) prof_mem_record_realloc(old, p, n, old_usable, usable(p));
    return p;
}

PROF_EXPORT void* reallocarray(void* old, size_t count, size_t size) {
    size_t n = 0;
    if (__builtin_mul_overflow(count, size, &n)) {
        errno = ENOMEM;
        return nullptr;
    }
    return realloc(old, n);
}

PROF_EXPORT void* memalign(size_t align, size_t n) {
    if (!ready()) return nullptr;
    if (void* p = alloc_if_finishing(n, align)) return p;
    Outermost o;
    return record(real.memalign(align, n), n, AllocKind::kAligned, o.outer);
}

PROF_EXPORT void* aligned_alloc(size_t align, size_t n) {
    if (!ready()) return nullptr;
    if (void* p = alloc_if_finishing(n, align)) return p;
    Outermost o;
    return record(real.aligned_alloc(align, n), n, AllocKind::kAligned, o.outer);
}

PROF_EXPORT int posix_memalign(void** out, size_t align, size_t n) {
    if (!ready()) return ENOMEM;
    if (align >= sizeof(void*))
        if (void* p = alloc_if_finishing(n, align)) {
            *out = p;
            return 0;
        }
    Outermost o;
    int rc = real.posix_memalign(out, align, n);
    if (rc == 0) record(*out, n, AllocKind::kAligned, o.outer);
    return rc;
}

PROF_EXPORT void* valloc(size_t n) {
    if (!ready()) return nullptr;
    if (__builtin_expect(t_finishing, 0))
        if (void* p = region_alloc(n, page_size())) return p;
    Outermost o;
    return record(real.valloc(n), n, AllocKind::kAligned, o.outer);
}

PROF_EXPORT void* pvalloc(size_t n) {
    if (!ready()) return nullptr;
    if (__builtin_expect(t_finishing, 0)) { // the size rounded up to whole pages, as pvalloc's
        size_t page = page_size(), whole = (n + page - 1) & ~(page - 1);
        if (void* p = whole >= n ? region_alloc(whole ? whole : page, page) : nullptr) return p;
    }
    Outermost o;
    return record(real.pvalloc(n), n, AllocKind::kAligned, o.outer);
}

// ---- operator new and delete, every form ---------------------------------------------------------
// Replaceable global allocation functions: defining them here takes precedence over
// libstdc++'s for the whole program; each forwards to libstdc++'s own (RTLD_NEXT).

#define PROF_CXX __attribute__((visibility("default"))) PROF_NOINSTR

namespace {

PROF_NOINSTR void release(void* p, FreeKind kind, DeleteFn with) {
    if (!p || in_arena(p)) return;
    if (in_region(p)) return region_release(p);
    ready();
    Outermost o;
    if (o.outer) prof_mem_record_free(p, unsigned(kind), usable(p));
    if (__builtin_expect(t_finishing, 0)) return; // kept (see region_alloc)
    if (with) with(p);
    else real.free(p);
}

PROF_NOINSTR void release_aligned(void* p, FreeKind kind, std::align_val_t a, DeleteAlignFn with) {
    if (!p || in_arena(p)) return;
    if (in_region(p)) return region_release(p);
    ready();
    Outermost o;
    if (o.outer) prof_mem_record_free(p, kind_with_alignment(unsigned(kind), a), usable(p));
    if (__builtin_expect(t_finishing, 0)) return; // kept (see region_alloc)
    if (with) with(p, a);
    else real.free(p);
}

} // namespace

// On the finishing thread, from the region: operator new would reach it through our malloc, and
// record() would then ask the real allocator for the usable size of a block not its own.
#define PROF_NEW_BODY(call, kind, align)                                                           \
    ready();                                                                                       \
    if (void* region = alloc_if_finishing(n, align)) return region;                                \
    Outermost o;                                                                                   \
    void* p = call;                                                                                \
    return record(p, n, kind, o.outer)

PROF_CXX void* operator new(size_t n) {
    PROF_NEW_BODY(real.new_ ? real.new_(n) : new_fallback(n, false), AllocKind::kNew, 16);
}
PROF_CXX void* operator new[](size_t n) {
    PROF_NEW_BODY(real.new_array ? real.new_array(n) : new_fallback(n, false), AllocKind::kNewArray,
                  16);
}
PROF_CXX void* operator new(size_t n, const std::nothrow_t& t) noexcept {
    PROF_NEW_BODY(real.new_nothrow ? real.new_nothrow(n, t) : new_fallback(n, true),
                  AllocKind::kNew, 16);
}
PROF_CXX void* operator new[](size_t n, const std::nothrow_t& t) noexcept {
    PROF_NEW_BODY(real.new_array_nothrow ? real.new_array_nothrow(n, t) : new_fallback(n, true),
                  AllocKind::kNewArray, 16);
}
PROF_CXX void* operator new(size_t n, std::align_val_t a) {
    PROF_NEW_BODY(real.new_align(n, a), kind_with_alignment(unsigned(AllocKind::kNew), a),
                  static_cast<size_t>(a));
}
PROF_CXX void* operator new[](size_t n, std::align_val_t a) {
    PROF_NEW_BODY(real.new_array_align(n, a),
                  kind_with_alignment(unsigned(AllocKind::kNewArray), a), static_cast<size_t>(a));
}
PROF_CXX void* operator new(size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept {
    PROF_NEW_BODY(real.new_align_nothrow(n, a, t),
                  kind_with_alignment(unsigned(AllocKind::kNew), a), static_cast<size_t>(a));
}
PROF_CXX void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept {
    PROF_NEW_BODY(real.new_array_align_nothrow(n, a, t),
                  kind_with_alignment(unsigned(AllocKind::kNewArray), a), static_cast<size_t>(a));
}

PROF_CXX void operator delete(void* p) noexcept { release(p, FreeKind::kDelete, real.delete_); }
PROF_CXX void operator delete[](void* p) noexcept {
    release(p, FreeKind::kDeleteArray, real.delete_array);
}
PROF_CXX void operator delete(void* p, size_t) noexcept { release(p, FreeKind::kDelete, real.delete_); }
PROF_CXX void operator delete[](void* p, size_t) noexcept {
    release(p, FreeKind::kDeleteArray, real.delete_array);
}
PROF_CXX void operator delete(void* p, const std::nothrow_t&) noexcept {
    release(p, FreeKind::kDelete, real.delete_);
}
PROF_CXX void operator delete[](void* p, const std::nothrow_t&) noexcept {
    release(p, FreeKind::kDeleteArray, real.delete_array);
}
PROF_CXX void operator delete(void* p, std::align_val_t a) noexcept {
    release_aligned(p, FreeKind::kDelete, a, real.delete_align);
}
PROF_CXX void operator delete[](void* p, std::align_val_t a) noexcept {
    release_aligned(p, FreeKind::kDeleteArray, a, real.delete_array_align);
}
PROF_CXX void operator delete(void* p, size_t, std::align_val_t a) noexcept {
    release_aligned(p, FreeKind::kDelete, a, real.delete_align);
}
PROF_CXX void operator delete[](void* p, size_t, std::align_val_t a) noexcept {
    release_aligned(p, FreeKind::kDeleteArray, a, real.delete_array_align);
}
PROF_CXX void operator delete(void* p, std::align_val_t a, const std::nothrow_t&) noexcept {
    release_aligned(p, FreeKind::kDelete, a, real.delete_align);
}
PROF_CXX void operator delete[](void* p, std::align_val_t a, const std::nothrow_t&) noexcept {
    release_aligned(p, FreeKind::kDeleteArray, a, real.delete_array_align);
}
