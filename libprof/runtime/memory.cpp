// Memory recording core, inside libprof.so so that calls, lines and allocations of one process
// go to one trace. libprofmem.so (preload/) interposes the allocator and calls these entry
// points once per user-level call; this file turns them into Alloc/Free/Realloc records of the
// calling thread's stream, with a call stack:
//  - in a program built with the call profiler, the thread's own call path is the stack
//    (stack 0: the reader knows it from the Enter/Exit records), which costs nothing here;
//  - otherwise the frame-pointer chain is walked (bounded by the thread's stack), and each
//    distinct stack is written once per thread as a Stack record and referred to by id.
// Resident memory is sampled from the allocation path at most every PROF_MEM_RSS_INTERVAL per
// thread, and by the runtime's timer every PROF_MEM_RSS_INTERVAL (rss_timer.cpp).
// Same hot-path contract as the call hooks: no lock and no allocation in the common case.
#include "cfi_unwind.hpp"
#include "memory_core.hpp"
#include "thread_state.hpp"

extern "C" int prof_line_rss_enabled, prof_line_fast;

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include <unwind.h>
#include <utility>

extern "C" void* __libc_stack_end;

namespace prof::rt {

bool g_memory_active = false;
void (*g_mem_finish_begin)() = nullptr;
void (*g_mem_finish_end)() = nullptr;

namespace {

constexpr uint32_t kMaxFrames = 64;
constexpr uint32_t kMaxStacks = 1u << 22;

// A stack's key in the thread's table of stacks: a hash of its addresses, folded one frame at a
// time so that the frame-pointer walk computes it as it goes (the mixing then overlaps the
// walk's chain of loads instead of following it).
constexpr uint64_t kStackHashSeed = 0x9E3779B97F4A7C15ull;

PROF_NOINSTR inline uint64_t hash_frame(uint64_t h, uintptr_t pc) {
    h ^= pc;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

PROF_NOINSTR inline uint64_t hash_end(uint64_t h, uint32_t n) {
    h ^= uint64_t(n) * 0xc4ceb9fe1a85ec53ull;
    return h ? h : 1;
}

PROF_NOINSTR uint64_t hash_frames(const uintptr_t* pcs, uint32_t n) {
    uint64_t h = kStackHashSeed;
    for (uint32_t i = 0; i < n; ++i) h = hash_frame(h, pcs[i]);
    return hash_end(h, n);
}

// The end of the calling thread's stack, for bounding frame-pointer walks. The main thread's
// from __libc_stack_end. Another thread's from its descriptor: glibc places a thread's
// descriptor (what pthread_self returns) at the top of the memory block of its stack, above
// the static TLS, so every frame of the thread lies below it and the memory up to it is
// mapped. Not pthread_getattr_np: it calls realloc while it holds the thread's lock, and a
// thread whose first allocation is that realloc (Rust's threads ask for their attributes
// when they start) would wait for itself. 0 (no stack recorded) when the guess does not hold.
PROF_NOINSTR uintptr_t stack_top_of_thread() {
    auto sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    uintptr_t top = getpid() == gettid() ? reinterpret_cast<uintptr_t>(__libc_stack_end) + 4096
                                         : reinterpret_cast<uintptr_t>(pthread_self());
    return top > sp && top - sp < (uintptr_t(1) << 30) ? top : 0;
}

// Return addresses along the frame-pointer chain, innermost first, skipping the allocator
// frames (libprofmem's wrapper and this core). Stops at anything that does not look like a
// frame of this thread's stack, so code built without frame pointers ends the walk early
// instead of reading wild memory.
__attribute__((noinline)) PROF_NOINSTR uint32_t walk_frames(ThreadState& s, uintptr_t* pcs,
                                                            uint64_t& key) {
    if (PROF_UNLIKELY(!s.stack_top)) {
        uintptr_t top = stack_top_of_thread();
        s.stack_top = top ? top : 1; // 1: not known, no frames (and no second try)
    }
    auto fp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    uintptr_t top = s.stack_top;
    // Skipped: current_stack, the prof_mem_record_* entry point and the interposer.
    uint32_t n = 0, skip = 3;
    uint64_t h = kStackHashSeed;
    while (n < kMaxFrames && fp && (fp & 7) == 0 && fp + 16 <= top) {
        auto* frame = reinterpret_cast<uintptr_t*>(fp);
        uintptr_t next = frame[0], ret = frame[1];
        if (ret < 4096) break;
        if (skip) {
            --skip;
        } else {
            pcs[n++] = ret;
            h = hash_frame(h, ret);
        }
        if (next <= fp || next - fp > (1u << 20)) break;
        fp = next;
    }
    key = hash_end(h, n); // hash_frames(pcs, n)
    return n;
}

// ---- which return addresses are code ------------------------------------------------------
// A frame-pointer walk through code built without frame pointers follows whatever rbp holds
// there: a walk that stays inside the stack can still read "return addresses" that are text,
// heap pointers or a stack canary (python3: 0x2e336e6f68747970, which is "python3."). A new
// stack is therefore cut at its first address outside the code of the loaded objects. The
// ranges are a snapshot, taken again when the loader's counts of loaded and unloaded objects
// change; snapshots are immutable and never unmapped (a walk may still be reading an old one).
struct CodeRange {
    uintptr_t start, end;
};

struct CodeSnapshot {
    uint64_t adds, subs;
    uint32_t count;
    CodeRange range[1]; // `count` entries, sorted by start
};

constexpr uint32_t kMaxCodeRanges = 8192;
std::atomic<CodeSnapshot*> g_code{nullptr};
std::atomic<bool> g_code_busy{false};

struct LoaderCounts {
    uint64_t adds = 0, subs = 0;
};

PROF_NOINSTR int read_loader_counts(dl_phdr_info* info, size_t size, void* arg) {
    auto* c = static_cast<LoaderCounts*>(arg);
    if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
        c->adds = info->dlpi_adds;
        c->subs = info->dlpi_subs;
    }
    return 1; // the same in every entry
}

PROF_NOINSTR int collect_code(dl_phdr_info* info, size_t, void* arg) {
    auto* snap = static_cast<CodeSnapshot*>(arg);
    for (unsigned i = 0; i < info->dlpi_phnum && snap->count < kMaxCodeRanges; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
        uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        snap->range[snap->count++] = {start, start + ph.p_memsz};
    }
    return 0;
}

// The current snapshot, taken again if objects were loaded or unloaded since; null when none
// could be made (then nothing is cut).
PROF_NOINSTR const CodeSnapshot* code_snapshot() {
    LoaderCounts now;
    dl_iterate_phdr(read_loader_counts, &now);
    CodeSnapshot* cur = g_code.load(std::memory_order_acquire);
    if (cur && cur->adds == now.adds && cur->subs == now.subs) return cur;
    if (g_code_busy.exchange(true, std::memory_order_acquire)) return cur; // being taken
    size_t bytes = sizeof(CodeSnapshot) + kMaxCodeRanges * sizeof(CodeRange);
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) {
        auto* snap = static_cast<CodeSnapshot*>(m);
        snap->adds = now.adds;
        snap->subs = now.subs;
        dl_iterate_phdr(collect_code, snap);
        // Insertion sort: a few dozen objects, taken rarely.
        for (uint32_t i = 1; i < snap->count; ++i)
            for (uint32_t j = i; j && snap->range[j - 1].start > snap->range[j].start; --j)
                std::swap(snap->range[j - 1], snap->range[j]);
        g_code.store(snap, std::memory_order_release);
        cur = snap;
    }
    g_code_busy.store(false, std::memory_order_release);
    return cur;
}

PROF_NOINSTR bool in_code(const CodeSnapshot* c, uintptr_t pc) {
    uint32_t lo = 0, hi = c->count; // the last range starting at or before pc
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (c->range[mid].start <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo && pc < c->range[lo - 1].end;
}

// How many of the walked addresses, from the innermost, are return addresses into code.
// A return address is the instruction after a call: pc - 1 must be code too.
PROF_NOINSTR uint32_t code_prefix(const uintptr_t* pcs, uint32_t n) {
    const CodeSnapshot* c = code_snapshot();
    if (!c) return n;
    for (uint32_t i = 0; i < n; ++i)
        if (!in_code(c, pcs[i] - 1)) return i;
    return n;
}

// The DWARF unwinder: complete stacks through code built without frame pointers, from the
// unwind tables (.eh_frame). cfi_backtrace (cfi_unwind.cpp) caches each address's rule; the
// frames it cannot describe (signal frames, CFA expressions) leave the whole stack to libgcc's
// _Unwind_Backtrace, which re-reads the tables for every frame of every call. Both give the
// same addresses, and skip the same allocator frames.
struct UnwindState {
    uintptr_t* pcs;
    uint32_t n, skip;
    uintptr_t top; // highest CFA seen: the outermost frame's when the walk got that far
};

PROF_NOINSTR _Unwind_Reason_Code unwind_one(_Unwind_Context* ctx, void* arg) {
    auto* st = static_cast<UnwindState*>(arg);
    uintptr_t cfa = _Unwind_GetCFA(ctx);
    if (cfa > st->top) st->top = cfa;
    // A frame interrupted by a signal holds the interrupted instruction, not a return address:
    // one byte on, so that the call address current_stack makes of it is that instruction.
    int before_instruction = 0;
    uintptr_t ip = _Unwind_GetIPInfo(ctx, &before_instruction);
    if (!ip) return _URC_END_OF_STACK;
    if (before_instruction) ++ip;
    if (st->skip)
        --st->skip;
    else
        st->pcs[st->n++] = ip;
    return st->n < kMaxFrames ? _URC_NO_REASON : _URC_END_OF_STACK;
}

__attribute__((noinline)) PROF_NOINSTR uint32_t unwind_frames(ThreadState& s, uintptr_t* pcs) {
    // The thread's stack bounds the cached walks: its top from the thread descriptor at first
    // (not from libgcc's walk: the thread's first allocation may be one libgcc makes while it
    // holds its unwinder's lock, see cfi_unwind.hpp), raised by libgcc's walks below.
    if (PROF_UNLIKELY(!s.stack_top)) s.stack_top = stack_top_of_thread();
    // Skipped: this function, current_stack, the prof_mem_record_* entry point, the interposer.
    if (PROF_LIKELY(s.stack_top)) {
        int n = cfi_backtrace(pcs, kMaxFrames, 4, s.stack_top);
        if (PROF_LIKELY(n >= 0)) return uint32_t(n);
    }
    UnwindState st{pcs, 0, 4, 0};
    _Unwind_Backtrace(unwind_one, &st);
    if (st.top > s.stack_top) s.stack_top = st.top;
    return st.n;
}

PROF_NOINSTR bool grow_stacks(ThreadState& s) {
    uint32_t old = s.stack_mask ? s.stack_mask + 1 : 0;
    uint32_t size = old ? old * 2 : 4096;
    if (size > kMaxStacks) return false;
    void* k =
        mmap(nullptr, size_t(size) * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void* v =
        mmap(nullptr, size_t(size) * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (k == MAP_FAILED || v == MAP_FAILED) return false;
    auto* keys = static_cast<uint64_t*>(k);
    auto* ids = static_cast<uint32_t*>(v);
    for (uint32_t i = 0; i < old; ++i) {
        if (!s.stack_keys[i]) continue;
        uint32_t h = uint32_t(s.stack_keys[i]) & (size - 1);
        while (keys[h]) h = (h + 1) & (size - 1);
        keys[h] = s.stack_keys[i];
        ids[h] = s.stack_ids[i];
    }
    if (old) {
        munmap(s.stack_keys, size_t(old) * 8);
        munmap(s.stack_ids, size_t(old) * 4);
    }
    s.stack_keys = keys;
    s.stack_ids = ids;
    s.stack_mask = size - 1;
    return true;
}

} // namespace

// The thread's table of unwound stacks: forgotten in a fork child (its trace is a new file,
// where every stack must be described again) and unmapped when the thread ends.
PROF_NOINSTR void forget_stacks(ThreadState& s, bool release) {
    if (!s.stack_mask) return;
    size_t slots = size_t(s.stack_mask) + 1;
    if (release) {
        munmap(s.stack_keys, slots * 8);
        munmap(s.stack_ids, slots * 4);
        s.stack_keys = nullptr;
        s.stack_ids = nullptr;
        s.stack_mask = 0;
    } else {
        memset(s.stack_keys, 0, slots * 8);
    }
    s.stack_count = 0;
}

namespace {

// errno as the caller left it, whatever the system calls in between do to it.
struct KeepErrno {
    int saved = errno;
    PROF_NOINSTR ~KeepErrno() { errno = saved; }
};

// The stack id of the current allocation: 0 when the call profiler's shadow stack describes
// it, else the id of the unwound stack (written to the stream the first time). The other
// paths of an allocation record keep errno in what they call (refill, rss_bytes_now); this one
// keeps it here, for the unwinders and a new stack's tables, locks and symbol notes.
__attribute__((noinline)) PROF_NOINSTR uint32_t current_stack(ThreadState& s, uint64_t& now) {
    if (s.depth) return 0;
    KeepErrno keep;
    uintptr_t pcs[kMaxFrames];
    bool dwarf = g_options.mem_unwind_dwarf;
    uint64_t key = 0;
    uint32_t n = dwarf ? unwind_frames(s, pcs) : walk_frames(s, pcs, key);
    if (!n) return 0;
    if (dwarf) key = hash_frames(pcs, n);
    if ((s.stack_count + 1) * 2 > s.stack_mask + 1 && !grow_stacks(s)) return 0;
    auto find = [&s](uint64_t k, uint32_t& slot) {
        slot = uint32_t(k) & s.stack_mask;
        while (s.stack_keys[slot]) {
            if (s.stack_keys[slot] == k) return s.stack_ids[slot];
            slot = (slot + 1) & s.stack_mask;
        }
        return 0u;
    };
    uint32_t h;
    if (uint32_t known = find(key, h)) return known;
    // A stack not seen before: a frame-pointer walk keeps only its frames in code (see
    // code_prefix). A cut stack is known by its kept frames, not by the walk's (whose wrong
    // addresses vary from call to call): it costs this check again each time.
    if (!dwarf) {
        uint32_t kept = code_prefix(pcs, n);
        if (kept < n) {
            if (!kept) return 0;
            n = kept;
            key = hash_frames(pcs, n);
            if (uint32_t known = find(key, h)) return known;
        }
    }
    uint32_t id = ++s.stack_count;
    s.stack_keys[h] = key;
    s.stack_ids[h] = id;
    // Each return address is written as its call's address, one byte back inside the call
    // instruction: the instruction after a call is often on the next line, and after a call
    // that does not return, in the next function (format 1.12).
    for (uint32_t i = 0; i < n; ++i) pcs[i] -= 1;
    // New stack: its addresses are symbolized at finish, and described in this stream now.
    lock_global();
    for (uint32_t i = 0; i < n; ++i) note_code_address(pcs[i]);
    unlock_global();
    if (!ensure_bytes(s, now, 32 + n * 8)) return 0;
    s.w.cursor = format::put_stack(s.w.cursor, id, pcs, n);
    commit(s.w); // before the allocation's own ensure_bytes may switch chunks
    return id;
}

// The signed delta of a memory record's pointer from the chunk's previous one, which it becomes.
PROF_NOINSTR inline int64_t ptr_delta(ThreadState& s, uintptr_t ptr) {
    auto delta = int64_t(ptr - s.w.last_ptr);
    s.w.last_ptr = ptr;
    return delta;
}

// Common entry: the thread is ready and not already inside the runtime.
PROF_NOINSTR inline bool begin(ThreadState& s) {
    if (PROF_UNLIKELY(s.state != kActive)) {
        if (s.state == kDeferred)
            settle(s);
        else if (s.state != kNew)
            return false;
        else
            thread_start(s);
        if (s.state != kActive) return false;
    }
    s.state = kBusy;
    return true;
}

__attribute__((noinline)) PROF_NOINSTR void sample_rss(ThreadState& s, uint64_t& now) {
    if (!g_options.mem_rss_interval_ms) {
        s.next_rss_ticks = UINT64_MAX; // sampling is off: no second call
        return;
    }
    s.next_rss_ticks = now + uint64_t(g_options.mem_rss_interval_ms) * ticks_per_ms();
    uint64_t rss = rss_bytes_now();
    if (!rss || !ensure_bytes(s, now, 32)) return;
    s.w.cursor = format::put_rss(s.w.cursor, take_delta(s.w, now), rss);
    commit(s.w);
}

PROF_NOINSTR inline void maybe_sample_rss(ThreadState& s, uint64_t& now) {
    if (PROF_UNLIKELY(now >= s.next_rss_ticks)) sample_rss(s, now);
}

// The stack of the current allocation (see current_stack), without a call when the call
// profiler's shadow stack describes it.
PROF_NOINSTR inline uint32_t stack_of_allocation(ThreadState& s, uint64_t& now) {
    return s.depth ? 0 : current_stack(s, now);
}

// Room for a record of `n` bytes with `stack`: in a counting thread, a record of stack 0 is
// preceded by a Position record when the thread's node changed (its call path is the node's).
PROF_NOINSTR inline bool room_for_stack_record(ThreadState& s, uint64_t& now, uint32_t stack,
                                               size_t n) {
    bool position = s.counting && !stack;
    if (!ensure_bytes(s, now, n + (position ? format::kMaxPositionRecord : 0))) return false;
    if (position) tree_note_position(s);
    return true;
}

} // namespace
} // namespace prof::rt

using namespace prof::rt;
namespace format = prof::format;
using prof::mem::alignment_of_kind;

#define PROF_API extern "C" __attribute__((visibility("default"))) PROF_NOINSTR

// The room each record asks of ensure_bytes covers its longest encoding plus the scratch bytes
// of the one-store LEB128 writers at its last field (format/prof/record_codec.hpp).

// One allocation of `size` bytes at `ptr` (kind: see memory_core.hpp).
PROF_API void prof_mem_record_alloc(void* ptr, size_t size, unsigned kind, size_t usable) {
    ThreadState& s = prof_tls;
    if (!ptr || !begin(s)) return;
    s.heap_bytes += int64_t(usable);
    uint64_t now = now_ticks();
    maybe_sample_rss(s, now);
    uint32_t stack = stack_of_allocation(s, now);
    if (room_for_stack_record(s, now, stack, format::kMaxAllocRecord + format::kLebScratch)) {
        uint64_t dt = take_delta(s.w, now);
        int64_t delta = ptr_delta(s, reinterpret_cast<uintptr_t>(ptr));
        s.w.cursor = format::put_alloc(s.w.cursor, dt, delta, size, stack, uint8_t(kind),
                                       alignment_of_kind(kind));
        commit(s.w);
    }
    s.state = kActive;
}

// The block at `ptr` is about to be released (kind: see memory_core.hpp). Called before the real
// free, so that no other thread can be handed the same address first.
PROF_API void prof_mem_record_free(void* ptr, unsigned kind, size_t usable) {
    ThreadState& s = prof_tls;
    if (!ptr || !begin(s)) return;
    s.heap_bytes -= int64_t(usable);
    uint64_t now = now_ticks();
    if (ensure_bytes(s, now, format::kMaxFreeRecord + format::kLebScratch)) {
        uint64_t dt = take_delta(s.w, now);
        int64_t delta = ptr_delta(s, reinterpret_cast<uintptr_t>(ptr));
        s.w.cursor =
            format::put_free(s.w.cursor, dt, delta, uint8_t(kind), alignment_of_kind(kind));
        commit(s.w);
    }
    s.state = kActive;
}

// realloc(old, size) returned `ptr` (old may be null, ptr null when it failed).
PROF_API void prof_mem_record_realloc(void* old, void* ptr, size_t size, size_t old_usable,
                                      size_t usable) {
    ThreadState& s = prof_tls;
    if (!ptr || !begin(s)) return;
    s.heap_bytes += int64_t(usable) - int64_t(old_usable);
    uint64_t now = now_ticks();
    maybe_sample_rss(s, now);
    uint32_t stack = stack_of_allocation(s, now);
    if (room_for_stack_record(s, now, stack, format::kMaxReallocRecord + format::kLebScratch)) {
        uint64_t dt = take_delta(s.w, now);
        int64_t old_delta = ptr_delta(s, reinterpret_cast<uintptr_t>(old));
        int64_t new_delta = ptr_delta(s, reinterpret_cast<uintptr_t>(ptr));
        s.w.cursor = format::put_realloc(s.w.cursor, dt, old_delta, new_delta, size, stack);
        commit(s.w);
    }
    s.state = kActive;
}

// libprofmem.so says it is loaded: marked lines then also record the growth of the thread's
// heap (a counter of this thread's), and their RSS only with PROF_LINE_RSS=1 (trace_writer.cpp).
PROF_API void prof_mem_activate(void) {
    __atomic_fetch_or(&prof_line_rss_enabled, PROF_LINE_MEM_HEAP, __ATOMIC_RELAXED);
    prof_line_fast = 0;
    g_memory_active = true;
    rss_timer_start(); // when tracing runs already (the runtime's constructor came first)
}

PROF_API void prof_mem_set_finish_hooks(void (*begin)(void), void (*end)(void)) {
    g_mem_finish_begin = begin;
    g_mem_finish_end = end;
}

// Usable heap bytes this thread allocated minus released, while the memory profiler runs.
// A marked line reads it when it starts: from then on the interposer measures usable sizes,
// which it skips while no line wants them (the first line of the program would otherwise see
// none of its own allocations).
PROF_API long long prof_heap_bytes(void) {
    if (PROF_UNLIKELY(!__atomic_load_n(&prof_heap_tracking, __ATOMIC_RELAXED)))
        __atomic_store_n(&prof_heap_tracking, 1, __ATOMIC_RELAXED);
    return prof_tls.heap_bytes;
}
