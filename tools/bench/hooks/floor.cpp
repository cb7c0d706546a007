// Minimal call tracer used as the benchmark's "physical limit": rdtsc + one 16-byte record per
// hook event into a 256 KiB thread-local buffer, flushed with writev() to FLOOR_OUT (without
// the rdtsc when built with -DFLOOR_NO_CLOCK).
//
// Built as a shared library (-fPIC) so that the hooks are reached through the PLT exactly as
// libprof's are; the buffer uses initial-exec TLS so the hot path has no __tls_get_addr call.
// File layout: chunks of {uint64 tid, uint64 record count} followed by the records.
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <x86intrin.h>

namespace {

struct Record {
    uint64_t fn;
    uint64_t ts; // rdtsc, bit 63 set for an exit
};

constexpr size_t kRecords = (256u << 10) / sizeof(Record);

struct Buffer {
    Record* cur; // null until the thread's first event
    Record* end;
    Record records[kRecords];
};

thread_local Buffer t_buf __attribute__((tls_model("initial-exec")));

int g_fd = -1;
pthread_key_t g_key;

void flush(Buffer& b) {
    uint64_t head[2] = {uint64_t(syscall(SYS_gettid)), uint64_t(b.cur - b.records)};
    iovec iov[2] = {{head, sizeof head}, {b.records, size_t(b.cur - b.records) * sizeof(Record)}};
    if (g_fd >= 0 && head[1]) {
        ssize_t r = writev(g_fd, iov, 2);
        (void)r;
    }
    b.cur = b.records;
}

// Slow path: the thread's first event (register the exit flush) or a full buffer.
__attribute__((noinline)) void refill(Buffer& b) {
    if (b.cur) flush(b);
    else pthread_setspecific(g_key, &b);
    b.cur = b.records;
    b.end = b.records + kRecords;
}

inline void put(uint64_t fn, uint64_t ts) {
    Buffer& b = t_buf;
    if (__builtin_expect(b.cur == b.end, 0)) refill(b);
    *b.cur++ = Record{fn, ts};
}

void thread_exit(void* p) { flush(*static_cast<Buffer*>(p)); }

__attribute__((constructor(101))) void start() {
    const char* path = std::getenv("FLOOR_OUT");
    g_fd = open(path && *path ? path : "/dev/null",
                O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    pthread_key_create(&g_key, thread_exit);
}

// Threads still running at exit are not flushed; the workloads join theirs first.
__attribute__((destructor(101))) void finish() {
    if (t_buf.cur) flush(t_buf);
}

} // namespace

// -DFLOOR_NO_CLOCK: the floor of hooks that read no clock (libprof's PROF_TIME=sampled).
#ifdef FLOOR_NO_CLOCK
inline uint64_t clock_ticks() { return 0; }
#else
inline uint64_t clock_ticks() { return __rdtsc(); }
#endif

extern "C" void __cyg_profile_func_enter(void* fn, void*) { put(uint64_t(fn), clock_ticks()); }

extern "C" void __cyg_profile_func_exit(void* fn, void*) {
    put(uint64_t(fn), clock_ticks() | (1ull << 63));
}
