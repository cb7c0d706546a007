// Minimal LD_PRELOAD allocator interposer, the memory benchmark's floor (after the research
// note's preload.c). Built three times (-DMODE=...):
//   MODE_COUNT  thread-local counters only;
//   MODE_EVENT  + one 24-byte record {ptr, size | type << 56, rdtsc} per call into a 256 KiB
//               initial-exec TLS buffer, written with write() to MEMFLOOR_OUT when full;
//   MODE_STACK  + a frame-pointer walk (at most 64 frames, bounded by the thread's stack) and
//               {depth, frames...} after each allocation record (no deduplication).
// malloc, free, calloc, realloc, posix_memalign, aligned_alloc and memalign are wrapped
// (operator new/delete reach them through libstdc++); realloc is logged as free + alloc.
// dlsym may call calloc before the real functions are known: those requests come from a
// static arena. A TLS flag keeps the writer's own calls (none on the hot path) from recursing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <x86intrin.h>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using MallocFn = void* (*)(size_t);
using FreeFn = void (*)(void*);
using CallocFn = void* (*)(size_t, size_t);
using ReallocFn = void* (*)(void*, size_t);
using MemalignFn = void* (*)(size_t, size_t);
using PosixMemalignFn = int (*)(void**, size_t, size_t);

MallocFn r_malloc;
FreeFn r_free;
CallocFn r_calloc;
ReallocFn r_realloc;
MemalignFn r_memalign, r_aligned_alloc;
PosixMemalignFn r_posix_memalign;
bool g_resolving;

alignas(64) char g_arena[64 * 1024];
size_t g_arena_used;

bool in_arena(const void* p) { return p >= g_arena && p < g_arena + sizeof g_arena; }

void* arena_alloc(size_t n) {
    size_t start = (g_arena_used + 63) & ~size_t(63);
    if (start + n > sizeof g_arena) return nullptr;
    g_arena_used = start + n;
    return g_arena + start;
}

void resolve() {
    g_resolving = true;
    r_malloc = reinterpret_cast<MallocFn>(dlsym(RTLD_NEXT, "malloc"));
    r_free = reinterpret_cast<FreeFn>(dlsym(RTLD_NEXT, "free"));
    r_calloc = reinterpret_cast<CallocFn>(dlsym(RTLD_NEXT, "calloc"));
    r_realloc = reinterpret_cast<ReallocFn>(dlsym(RTLD_NEXT, "realloc"));
    r_memalign = reinterpret_cast<MemalignFn>(dlsym(RTLD_NEXT, "memalign"));
    r_aligned_alloc = reinterpret_cast<MemalignFn>(dlsym(RTLD_NEXT, "aligned_alloc"));
    r_posix_memalign = reinterpret_cast<PosixMemalignFn>(dlsym(RTLD_NEXT, "posix_memalign"));
    g_resolving = false;
}

enum Type : uint64_t { kMalloc = 1, kFree, kCalloc, kRealloc, kMemalign };

struct Tls {
    uint64_t counts[8];
#if defined(MODE_EVENT) || defined(MODE_STACK)
    size_t used; // bytes in buf
    uintptr_t stack_lo, stack_hi;
    alignas(64) unsigned char buf[256 * 1024];
#endif
};
thread_local Tls t __attribute__((tls_model("initial-exec")));
thread_local bool t_inside __attribute__((tls_model("initial-exec")));

#if defined(MODE_EVENT) || defined(MODE_STACK)
int g_fd = -1;
pthread_key_t g_key;

void flush(Tls& s) {
    if (g_fd >= 0 && s.used) {
        ssize_t r = write(g_fd, s.buf, s.used);
        (void)r;
    }
    s.used = 0;
}

void thread_exit(void* p) { flush(*static_cast<Tls*>(p)); }

__attribute__((noinline)) void first_use(Tls& s) {
    pthread_setspecific(g_key, &s);
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void* addr = nullptr;
        size_t size = 0;
        pthread_attr_getstack(&attr, &addr, &size);
        s.stack_lo = uintptr_t(addr);
        s.stack_hi = uintptr_t(addr) + size;
        pthread_attr_destroy(&attr);
    }
    s.used = 1; // marks the thread as set up; the byte is written as padding
    s.buf[0] = 0;
}

struct Event {
    uint64_t ptr, size_type, ts;
};

constexpr size_t kMaxRecord = sizeof(Event) + 8 + 64 * 8;

__attribute__((always_inline)) inline void event(Tls& s, const void* p, uint64_t size, Type type,
                                                 bool with_stack) {
    if (__builtin_expect(s.used == 0, 0)) first_use(s);
    if (__builtin_expect(s.used + kMaxRecord > sizeof s.buf, 0)) flush(s);
    Event e{uint64_t(p), size | (uint64_t(type) << 56), __rdtsc()};
    memcpy(s.buf + s.used, &e, sizeof e);
    s.used += sizeof e;
#ifdef MODE_STACK
    if (with_stack) {
        uint64_t* out = reinterpret_cast<uint64_t*>(s.buf + s.used);
        uint64_t n = 0;
        auto fp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
        while (n < 64 && fp >= s.stack_lo && fp + 16 <= s.stack_hi && (fp & 7) == 0) {
            auto* frame = reinterpret_cast<uintptr_t*>(fp);
            uintptr_t ret = frame[1], up = frame[0];
            if (ret < 4096) break;
            out[1 + n++] = ret;
            if (up <= fp) break;
            fp = up;
        }
        out[0] = n;
        s.used += 8 * (n + 1);
    }
#else
    (void)with_stack;
#endif
}
#endif

__attribute__((always_inline)) inline void note(const void* p, uint64_t size, Type type) {
    Tls& s = t;
    ++s.counts[type];
#if defined(MODE_EVENT) || defined(MODE_STACK)
    if (t_inside) return;
    t_inside = true;
    event(s, p, size, type, type != kFree);
    t_inside = false;
#else
    (void)p;
    (void)size;
#endif
}

__attribute__((constructor(101))) void start() {
    if (!r_malloc) resolve();
#if defined(MODE_EVENT) || defined(MODE_STACK)
    const char* path = std::getenv("MEMFLOOR_OUT");
    g_fd = open(path && *path ? path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pthread_key_create(&g_key, thread_exit);
#endif
}

__attribute__((destructor(101))) void finish() {
#if defined(MODE_EVENT) || defined(MODE_STACK)
    flush(t);
#endif
}

} // namespace

EXPORT void* malloc(size_t n) {
    if (__builtin_expect(!r_malloc, 0)) {
        if (g_resolving) return arena_alloc(n);
        resolve();
    }
    void* p = r_malloc(n);
    note(p, n, kMalloc);
    return p;
}

EXPORT void free(void* p) {
    if (!p || in_arena(p)) return;
    if (__builtin_expect(!r_free, 0)) resolve();
    note(p, 0, kFree);
    r_free(p);
}

EXPORT void* calloc(size_t n, size_t m) {
    if (__builtin_expect(!r_calloc, 0)) {
        if (g_resolving) {
            void* p = arena_alloc(n * m);
            if (p) memset(p, 0, n * m);
            return p;
        }
        resolve();
    }
    void* p = r_calloc(n, m);
    note(p, n * m, kCalloc);
    return p;
}

EXPORT void* realloc(void* old, size_t n) {
    if (__builtin_expect(!r_realloc, 0)) resolve();
    if (in_arena(old)) {
        void* p = r_malloc(n);
        if (p) memcpy(p, old, n);
        note(p, n, kRealloc);
        return p;
    }
    void* p = r_realloc(old, n);
    if (old) note(old, 0, kFree);
    note(p, n, kRealloc);
    return p;
}

EXPORT int posix_memalign(void** out, size_t align, size_t n) {
    if (__builtin_expect(!r_posix_memalign, 0)) resolve();
    int r = r_posix_memalign(out, align, n);
    if (r == 0) note(*out, n, kMemalign);
    return r;
}

EXPORT void* aligned_alloc(size_t align, size_t n) {
    if (__builtin_expect(!r_aligned_alloc, 0)) resolve();
    void* p = r_aligned_alloc(align, n);
    note(p, n, kMemalign);
    return p;
}

EXPORT void* memalign(size_t align, size_t n) {
    if (__builtin_expect(!r_memalign, 0)) resolve();
    void* p = r_memalign(align, n);
    note(p, n, kMemalign);
    return p;
}
