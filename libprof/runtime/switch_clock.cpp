// PROF_TIME=sampled: hooks that read no clock per call. Times then come from the CPU samples
// (sampler.cpp); the clock is read only where the thread may have been off CPU since the hooks
// last read it, so that time spent sleeping, blocked or preempted still lands at its place in
// the call tree (the engine's sampled time model, analysis/engine/session.hpp).
//
// The kernel says when that may be, through restartable sequences (rseq), which glibc 2.35 and
// later registers for every thread: on the way back to user space after the thread was
// descheduled, migrated or sent a signal, the kernel looks at the thread's `rseq_cs` word, and
// if it names a critical section that the interrupted instruction is not in, clears it. Ours is
// a one-byte section no thread ever executes, so the word is cleared at every switch and
// nowhere else: the hooks compare it with the descriptor's address (one load), and when it was
// cleared, store it again and read the clock. No system call, no signal.
//
// The descriptor must be valid, or the kernel kills the thread (SIGSEGV): version and flags 0,
// its addresses in user space, the abort address outside the section and preceded by the
// signature glibc registered (RSEQ_SIG). A thread whose registration failed (cpu_id < 0), or a
// C library without rseq (older glibc, GLIBC_TUNABLES=glibc.pthread.rseq=0, valgrind), reads the
// clock per call as in the default mode.
#include "thread_state.hpp"

#include <cerrno>
#include <cstddef>
#include <ctime>

#if defined(__x86_64__) && defined(__GLIBC__) && __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define PROF_HAVE_RSEQ 1
#include <dlfcn.h>

// The section [start, start + 1) is never executed; the abort label after the signature is
// never jumped to (no instruction of the section is ever interrupted).
__asm__(".pushsection .text.prof_switch_mark,\"ax\",@progbits\n"
        ".balign 16\n"
        "prof_switch_section:\n"
        "  nop\n"
        "  .long 0x53053053\n" // RSEQ_SIG on x86-64, checked below
        "prof_switch_abort:\n"
        "  ud2\n"
        ".popsection\n");
extern "C" char prof_switch_section[], prof_switch_abort[];
static_assert(RSEQ_SIG == 0x53053053, "the signature before prof_switch_abort");
#endif

namespace prof::rt {

// Filled in at start. Its layout is the kernel's struct rseq_cs.
SwitchSection g_switch_section = {};
#ifdef PROF_HAVE_RSEQ
static_assert(sizeof(SwitchSection) == sizeof(struct rseq_cs) &&
              offsetof(SwitchSection, start_ip) == offsetof(struct rseq_cs, start_ip) &&
              offsetof(SwitchSection, post_commit_offset) ==
                  offsetof(struct rseq_cs, post_commit_offset) &&
              offsetof(SwitchSection, abort_ip) == offsetof(struct rseq_cs, abort_ip));
#endif

namespace {
bool g_switch_clock = false;
#ifdef PROF_HAVE_RSEQ
// glibc's __rseq_offset (2.35): looked up rather than linked, so that libprof.so still loads on
// an older C library (and the mode falls back there).
ptrdiff_t g_rseq_offset = 0;

PROF_NOINSTR struct rseq* rseq_area() {
    return reinterpret_cast<struct rseq*>(static_cast<char*>(__builtin_thread_pointer()) +
                                          g_rseq_offset);
}
#endif
} // namespace

PROF_NOINSTR const char* switch_clock_init() {
#ifdef PROF_HAVE_RSEQ
    auto* offset = static_cast<const ptrdiff_t*>(dlsym(RTLD_DEFAULT, "__rseq_offset"));
    auto* size = static_cast<const unsigned*>(dlsym(RTLD_DEFAULT, "__rseq_size"));
    if (!offset || !size || *size < offsetof(struct rseq, rseq_cs) + 8)
        return "the C library registers no rseq area";
    g_rseq_offset = *offset;
    struct rseq* area = rseq_area();
    if (int32_t(__atomic_load_n(&area->cpu_id, __ATOMIC_RELAXED)) < 0)
        return "the kernel refused the rseq registration";
    g_switch_section.version = 0;
    g_switch_section.flags = 0;
    g_switch_section.start_ip = reinterpret_cast<uintptr_t>(prof_switch_section);
    g_switch_section.post_commit_offset = 1;
    g_switch_section.abort_ip = reinterpret_cast<uintptr_t>(prof_switch_abort);
    // The kernel must clear the word when the thread was switched out inside a system call,
    // where threads block: Linux 6.19 changed rseq to look at it only after an interrupt of
    // user code. A sleep blocks, and must come back with the word cleared. A 1 us sleep may
    // not block: on a busy machine its time can pass before the thread gets to sleep (one run
    // in a few hundred of the test suite's, two at a time), so longer ones are tried after it (a
    // kernel that never clears the word costs the process 2.1 ms of sleep at start).
    auto* word = reinterpret_cast<uint64_t*>(&area->rseq_cs);
    int saved = errno;
    bool cleared = false;
    for (long nap_ns : {1000L, 100000L, 2000000L}) {
        __atomic_store_n(word, uint64_t(reinterpret_cast<uintptr_t>(&g_switch_section)),
                         __ATOMIC_RELAXED);
        timespec nap{0, nap_ns};
        nanosleep(&nap, nullptr);
        cleared = __atomic_load_n(word, __ATOMIC_RELAXED) == 0;
        __atomic_store_n(word, uint64_t(0), __ATOMIC_RELAXED);
        if (cleared) break;
    }
    errno = saved;
    if (!cleared) return "the kernel does not clear rseq_cs after a blocking system call";
    g_switch_clock = true;
    return nullptr;
#else
    return "no rseq support in this build (x86-64 glibc only)";
#endif
}

PROF_NOINSTR bool switch_clock_on() {
    return g_switch_clock;
}

PROF_NOINSTR void switch_clock_thread_start(ThreadState& s) {
    s.switch_word = s.switch_area = nullptr;
#ifdef PROF_HAVE_RSEQ
    if (!g_switch_clock || !(sampler_thread_armed() || kCountWithoutSamples)) return;
    struct rseq* area = rseq_area();
    if (int32_t(__atomic_load_n(&area->cpu_id, __ATOMIC_RELAXED)) < 0) return; // not registered
    // Used once the thread counts (begin_counting sets switch_word).
    s.switch_area = reinterpret_cast<uint64_t*>(&area->rseq_cs);
#endif
}

} // namespace prof::rt
