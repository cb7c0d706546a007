// The memory profiler's DWARF unwinder (PROF_MEM_UNWIND=dwarf, memory.cpp): x86-64 stacks from
// .eh_frame, with the unwind rule of every code address cached process-wide.
//
// libgcc's _Unwind_Backtrace searches the FDE and runs the CIE and FDE programs for every frame
// of every allocation (about 1.6 us for 7 frames). Nearly every frame of code built by GCC or
// Clang reduces to three facts: the CFA is rsp or rbp plus a constant, the return address is
// at CFA-8, and rbp is either unchanged or saved at CFA plus a constant. That fits in one
// 64-bit word, computed once per address (the slow path: libgcc's _Unwind_Find_FDE, then our
// own CFA program interpreter) and then found in an open-addressing table with a few loads.
// Whatever does not reduce to it (signal frames, CFA expressions as in PLT stubs and realigned
// frames, a saved rsp, unknown instructions) is "unsupported": the caller takes the whole stack
// from _Unwind_Backtrace instead, so the stacks are always the ones libgcc gives. On top of
// that, each thread keeps its last few walks step by step and replays them (see Memo): a
// repeated stack then costs a compare per frame instead of a table lookup per frame.
//
// The table: lookups take no lock and write nothing. An entry is a key word (address | tag of
// the generation) and a rule word; one writer at a time (a try-lock: a thread that finds it
// taken just does not cache) stores the rule, then the key with release order. A key is
// stored at most once per table between two clears and every clear follows a generation
// change, so a reader that sees its key before and after reading the rule has that key's rule
// (a seqlock whose sequence number is the key itself). A new generation (cfi_invalidate)
// makes older entries stop matching, and the next insertion clears the table. Tables are
// mapped with mmap, never with the application's allocator, and grow x4 up to kMaxBits; a
// replaced table stays mapped (a reader may still be probing it) and is no longer written,
// which costs at most a third of the final table.
//
// Unloading: a rule cached for code of an object that dlclose unloaded would describe
// whatever is mapped at that address later. The runtime's dlclose wrapper is not on that path
// when only libprofmem.so is preloaded (the C library comes before libprof.so in the global
// scope, so a program's dlclose goes straight to it), so the cache watches the loader itself:
// objects present when libprof.so starts are never unloaded, and a rule for any other address
// is marked; a walk that uses a marked rule first compares glibc's unload count (dlpi_subs,
// read with dl_iterate_phdr, about 20 ns) with the last one seen, and on a change starts a new
// generation and walks again. Stacks entirely in the program's startup objects pay nothing.
#include "cfi_unwind.hpp"
#include "runtime.hpp"

#include <prof/cfi_rules.hpp>

#include <atomic>
#include <cstring>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

extern "C" {
// libgcc's FDE search (unwind-dw2-fde.h, not installed; exported by libgcc_s since GCC 3.0):
// the .eh_frame_hdr tables of the loaded objects, through dl_iterate_phdr, with its own cache
// of the last objects found. `func` is the start of the function the FDE covers.
struct dwarf_eh_bases {
    void* tbase;
    void* dbase;
    void* func;
};
const void* _Unwind_Find_FDE(void* pc, dwarf_eh_bases* bases);
}

namespace prof::rt {
namespace {

using namespace prof::cfi;

// ---- the cache -----------------------------------------------------------------------------
struct Slot {
    std::atomic<uint64_t> key; // address | generation tag; 0 = empty
    std::atomic<uint64_t> rule;
};

struct Table {
    uint64_t mask;  // slots - 1
    uint32_t shift; // 64 - log2(slots): the hash's top bits index the table
    uint32_t bits;
    uint32_t gen; // generation the entries belong to (writer only)
    uint32_t used;
    Slot* slots; // right after this header, in the same mapping
};

constexpr uint32_t kFirstBits = 12; // 4096 slots, 64 KiB
constexpr uint32_t kMaxBits = 20;   // 1 M slots, 16 MiB

std::atomic<Table*> g_table{nullptr};
std::atomic<uint32_t> g_generation{1};
std::atomic<int> g_writer{0}; // pid of the process whose thread is inserting; 0 = free
std::atomic<uint64_t> g_slow{0};

// Keys carry 15 bits of the generation above the 48-bit address (bit 63 always set, so a key
// is never 0): an entry of an earlier generation no longer matches.
PROF_NOINSTR inline uint64_t key_tag(uint32_t gen) {
    return uint64_t(0x8000u | (gen & 0x7fffu)) << 48;
}

PROF_NOINSTR inline uint64_t slot_of(const Table* t, uint64_t key) {
    return (key * 0x9E3779B97F4A7C15ull) >> t->shift;
}

PROF_NOINSTR inline uint64_t find(const Table* t, uint64_t key) {
    for (uint64_t i = slot_of(t, key);; i = (i + 1) & t->mask) {
        const Slot& s = t->slots[i];
        uint64_t k = s.key.load(std::memory_order_acquire);
        if (k == key) {
            uint64_t rule = s.rule.load(std::memory_order_acquire);
            // Still our key after reading the rule: the rule is the one stored with it (see
            // the top of the file). Otherwise the slot is being reused: a miss.
            return s.key.load(std::memory_order_relaxed) == key ? rule : 0;
        }
        if (!k) return 0;
    }
}

// One inserting thread at a time. A thread that finds the lock taken does not wait: its rule
// is used uncached this once. The holder's pid lets a forked child take over a lock held by a
// thread of its parent at the fork, which would otherwise never be released in the child.
PROF_NOINSTR bool writer_lock() {
    int me = getpid();
    int holder = 0;
    if (g_writer.compare_exchange_strong(holder, me, std::memory_order_acquire)) return true;
    if (holder == me) return false;
    return g_writer.compare_exchange_strong(holder, me, std::memory_order_acquire);
}

PROF_NOINSTR void writer_unlock() {
    g_writer.store(0, std::memory_order_release);
}

PROF_NOINSTR Table* map_table(uint32_t bits, uint32_t gen) {
    size_t slots = size_t(1) << bits;
    void* m = mmap(nullptr, sizeof(Table) + slots * sizeof(Slot), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    auto* t = static_cast<Table*>(m);
    t->mask = slots - 1;
    t->shift = 64 - bits;
    t->bits = bits;
    t->gen = gen;
    t->used = 0;
    t->slots = reinterpret_cast<Slot*>(t + 1);
    return t;
}

// Writer only. The table is private until published, or the key is stored last with release
// order, so a reader that sees the key sees the rule.
PROF_NOINSTR void put(Table* t, uint64_t key, uint64_t rule) {
    for (uint64_t i = slot_of(t, key);; i = (i + 1) & t->mask) {
        Slot& s = t->slots[i];
        uint64_t k = s.key.load(std::memory_order_relaxed);
        if (k == key) return; // another thread's miss on the same address came first
        if (k) continue;
        s.rule.store(rule, std::memory_order_relaxed);
        s.key.store(key, std::memory_order_release);
        ++t->used;
        return;
    }
}

// Writer only: a table with room for one more entry of generation `gen`, or null.
PROF_NOINSTR Table* table_for_insert(uint32_t gen) {
    Table* t = g_table.load(std::memory_order_relaxed);
    if (t && t->gen != gen) {
        // Entries of an earlier generation: emptied before any new rule is stored (the fence
        // orders these stores before the rule stores that follow; readers rely on it).
        for (uint64_t i = 0; i <= t->mask; ++i) t->slots[i].key.store(0, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        t->gen = gen;
        t->used = 0;
    }
    if (t && (uint64_t(t->used) + 1) * 2 <= t->mask + 1) return t;
    uint32_t bits = t ? t->bits + 2 : kFirstBits;
    if (bits > kMaxBits) return nullptr; // full: further addresses are computed every time
    Table* grown = map_table(bits, gen);
    if (!grown) return nullptr;
    for (uint64_t i = 0; t && i <= t->mask; ++i) {
        uint64_t k = t->slots[i].key.load(std::memory_order_relaxed);
        if (k) put(grown, k, t->slots[i].rule.load(std::memory_order_relaxed));
    }
    g_table.store(grown, std::memory_order_release);
    return grown;
}

PROF_NOINSTR void insert(uint64_t key, uint32_t gen, uint64_t rule) {
    if (!writer_lock()) return;
    // A dlclose since the walk began: the rule may describe an object that is gone.
    if (g_generation.load(std::memory_order_acquire) == gen)
        if (Table* t = table_for_insert(gen)) put(t, key, rule);
    writer_unlock();
}

// ---- objects that stay loaded ------------------------------------------------------------
// glibc never unloads the objects loaded with the program (only those dlopen loaded can go),
// so the address ranges of the objects present when libprof.so starts are permanent. The
// memory profiler's libprof.so is always among them (libprofmem.so is preloaded and needs it).
constexpr uint32_t kMaxStartupObjects = 256;

struct Range {
    uintptr_t start, end;
};

Range g_startup[kMaxStartupObjects];
uint32_t g_startup_count;
std::atomic<int> g_startup_state{0}; // 0: not taken, 1: being taken, 2: ready
std::atomic<uint64_t> g_unloads_seen{0};

// The code of the object whose _Unwind_Find_FDE the slow path calls (libgcc_s.so.1): see
// miss_holding_unwinder.
Range g_unwinder{0, 0};

// One object loaded at start: its extent, and the unwinder's code if it holds it.
PROF_NOINSTR int note_startup_object(dl_phdr_info* info, size_t, void*) {
    auto unwinder = reinterpret_cast<uintptr_t>(&_Unwind_Find_FDE);
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (unsigned i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        uintptr_t start = info->dlpi_addr + ph.p_vaddr, end = start + ph.p_memsz;
        if (start < lo) lo = start;
        if (end > hi) hi = end;
        if ((ph.p_flags & PF_X) && unwinder >= start && unwinder < end) g_unwinder = {start, end};
    }
    if (lo < hi && g_startup_count < kMaxStartupObjects) g_startup[g_startup_count++] = {lo, hi};
    return 0;
}

PROF_NOINSTR inline bool in_unwinder(uintptr_t pc) {
    return pc >= g_unwinder.start && pc < g_unwinder.end;
}

PROF_NOINSTR int read_unloads(dl_phdr_info* info, size_t size, void* arg) {
    if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
        *static_cast<uint64_t*>(arg) = info->dlpi_subs;
    return 1; // the counters are the same in every entry: the first one is enough
}

// Objects glibc has unloaded since the process started.
PROF_NOINSTR uint64_t unload_count() {
    uint64_t subs = 0;
    dl_iterate_phdr(read_unloads, &subs);
    return subs;
}

// At library start (and at the first unwind, should an allocation come before that): the
// objects are all mapped before any constructor runs.
__attribute__((constructor)) PROF_NOINSTR void take_startup_objects() {
    int expected = 0;
    if (!g_startup_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
    g_unloads_seen.store(unload_count(), std::memory_order_relaxed);
    dl_iterate_phdr(note_startup_object, nullptr);
    g_startup_state.store(2, std::memory_order_release);
}

PROF_NOINSTR bool may_unload(uintptr_t address) {
    if (g_startup_state.load(std::memory_order_acquire) != 2) return true;
    for (uint32_t i = 0; i < g_startup_count; ++i)
        if (address >= g_startup[i].start && address < g_startup[i].end) return false;
    return true;
}

// True when the walk that began in generation `gen` must start again: an object was unloaded
// since the last check (the cache then moves to a new generation), or another thread or
// cfi_invalidate started one. The generation is bumped before the count is published, so a
// thread that finds the count already seen also finds the new generation.
PROF_NOINSTR bool cache_outdated(uint32_t gen) {
    uint64_t unloads = unload_count();
    if (unloads != g_unloads_seen.load(std::memory_order_acquire)) {
        g_generation.fetch_add(1, std::memory_order_acq_rel);
        g_unloads_seen.store(unloads, std::memory_order_release);
    }
    return g_generation.load(std::memory_order_acquire) != gen;
}

// No FDE covers the return address `ra`: libgcc reports the frame and stops, unless the code
// there is the rt_sigreturn trampoline of a C library without unwind information for it (its
// x86_64_fallback_frame_state). Those bytes are read only inside a loaded object's code;
// anywhere else (generated code, a bad address) the stack is left to libgcc.
// Whether [pc, pc + bytes) lies in the code of a loaded object.
struct CodeProbe {
    uintptr_t pc;
    uintptr_t bytes;
    bool mapped;
};

PROF_NOINSTR int probe_code(dl_phdr_info* info, size_t, void* arg) {
    auto* probe = static_cast<CodeProbe*>(arg);
    for (unsigned i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
        uintptr_t start = info->dlpi_addr + ph.p_vaddr, end = start + ph.p_memsz;
        if (probe->pc >= start && probe->pc < end && end - probe->pc >= probe->bytes) {
            probe->mapped = true;
            return 1;
        }
    }
    return 0;
}

PROF_NOINSTR uint64_t rule_without_fde(uintptr_t ra) {
    CodeProbe probe{ra, 9, false};
    if (!ra || (dl_iterate_phdr(probe_code, &probe), !probe.mapped)) return kRuleUnsupported;
    auto* code = reinterpret_cast<const uint8_t*>(ra);
    uint64_t rest;
    __builtin_memcpy(&rest, code + 1, 8);
    // mov $15, %rax; syscall
    if (code[0] == 0x48 && rest == 0x050f0000000fc0c7ull) return kRuleUnsupported;
    return kRuleLast;
}

// The slow path: the rule of the frame at `at` (the walk's own pc, or a return address - 1;
// `ra` is that return address, or 0), computed and cached.
__attribute__((noinline)) PROF_NOINSTR uint64_t miss(uintptr_t at, uintptr_t ra, uint64_t key,
                                                     uint32_t gen) {
    g_slow.fetch_add(1, std::memory_order_relaxed);
    dwarf_eh_bases bases{};
    const void* fde = _Unwind_Find_FDE(reinterpret_cast<void*>(at), &bases);
    if (fde) {
        // An FDE for code outside every loaded object was registered at run time
        // (__register_frame, as JIT compilers do): the code and its rules can change without a
        // dlclose, which is all the cache watches. Such frames go to libgcc, uncached.
        CodeProbe probe{at, 1, false};
        dl_iterate_phdr(probe_code, &probe);
        if (!probe.mapped) return kRuleUnsupported;
    }
    uint64_t rule =
        fde ? rule_from_fde(static_cast<const uint8_t*>(fde), EhBases{bases.tbase, bases.dbase, bases.func}, at) : rule_without_fde(ra);
    if (g_startup_state.load(std::memory_order_acquire) == 0) take_startup_objects();
    if (may_unload(at)) rule |= kMayUnload;
    insert(key, gen, rule);
    return rule;
}

// ---- the slow path inside libgcc's unwinder ------------------------------------------------
// libgcc's _Unwind_Find_FDE holds its object lock while it sorts the FDEs registered with
// __register_frame (JIT compilers register their code that way), and allocates while it does
// (init_object, at the first search after a registration). An allocation made there reaches
// the walk with that lock held: _Unwind_Find_FDE or _Unwind_Backtrace would wait for it
// forever. So a walk that has passed a frame of the unwinder's object finds FDEs itself, in
// the binary search tables of the loaded objects' .eh_frame_hdr, and ends the stack where
// those do not reach (code registered at run time, a frame the rules cannot describe)
// instead of handing it to libgcc. The stack is then the one libgcc would give, up to there.
struct HdrSearch {
    uintptr_t pc;
    const uint8_t* hdr;
    size_t size;
};

PROF_NOINSTR int find_hdr(dl_phdr_info* info, size_t, void* arg) {
    auto* s = static_cast<HdrSearch*>(arg);
    bool inside = false;
    const ElfW(Phdr)* eh = nullptr;
    for (unsigned i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_GNU_EH_FRAME) eh = &ph;
        uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && s->pc >= start && s->pc - start < ph.p_memsz) inside = true;
    }
    if (!inside) return 0;
    if (eh) {
        s->hdr = reinterpret_cast<const uint8_t*>(info->dlpi_addr + eh->p_vaddr);
        s->size = eh->p_memsz;
    }
    return 1;
}

// The FDE whose entry in the .eh_frame_hdr table of the object containing `at` is the last one
// at or before `at` (rule_from_fde checks that it covers `at`); null when the object has no
// such table, or `at` is in no loaded object.
PROF_NOINSTR const uint8_t* fde_from_hdr(uintptr_t at) {
    HdrSearch s{at, nullptr, 0};
    dl_iterate_phdr(find_hdr, &s);
    return fde_in_hdr(s.hdr, s.size, at);
}

// miss() for a walk that may hold libgcc's lock: 0 when the rule is not known here (the walk
// then ends).
__attribute__((noinline)) PROF_NOINSTR uint64_t miss_holding_unwinder(uintptr_t at, uint64_t key,
                                                                      uint32_t gen) {
    g_slow.fetch_add(1, std::memory_order_relaxed);
    const uint8_t* fde = fde_from_hdr(at);
    if (!fde) return 0;
    uint64_t rule = rule_from_fde(fde, EhBases{}, at, true);
    if (!rule) return 0;
    if (g_startup_state.load(std::memory_order_acquire) == 0) take_startup_objects();
    if (may_unload(at)) rule |= kMayUnload;
    insert(key, gen, rule);
    return rule;
}

// The registers of the frame the walk starts in.
struct Start {
    uintptr_t pc, sp, fp;
};

// This thread's recent walks, step by step. Allocations repeat their stacks, or at least the
// allocator's frames and their innermost callers, and a repeated stack has the same layout
// relative to the first frame's rsp. A replay reads each return address at its recorded
// offset and compares it with the recorded one: the loads do not wait for each other and no
// rule is looked up. By induction it gives exactly what the walk gives: frame i's rule is the
// one recorded as long as its pc matched, its CFA is then at the recorded offset (checked for
// an rbp-based CFA: rbp must hold the recorded offset too), and so is every slot it reads.
// Where a walk parts from one recording, another recording with the same frames so far may
// go on (malloc, operator new and realloc reach the recorder through different frames); else
// the walk goes on the usual way, recorded in place of the least recently used recording.
// Not reentrant: the runtime never unwinds on a thread that is already inside it.
constexpr uint32_t kMemos = 4;
constexpr uint32_t kMemoSteps = 24;

struct MemoStep {
    uint64_t rule;    // the frame's rule
    uint64_t next_pc; // the return address read at its CFA - 8: the next frame's pc
    int32_t ra_off;   // that slot's address - the first frame's rsp
    int32_t fp_off;   // rbp-based CFA: the frame's rbp - the first frame's rsp
};

struct Memo {
    uint32_t gen;    // generation of the rules
    uint32_t count;  // steps recorded, from frame 0 (cfi_backtrace's own)
    uintptr_t pc0;   // frame 0's pc
    uint32_t reach;  // bytes above the first rsp that the recorded steps read
    bool ends;       // frame `count` is the outermost one (kKindLast)
    bool may_unload; // a recorded rule needs the unload check
    MemoStep step[kMemoSteps];
};

// One page per thread, mapped at its first walk and unmapped when it exits.
struct Memos {
    uint8_t order[kMemos]; // indexes into `memo`, most recently used first
    Memo memo[kMemos];
};
static_assert(sizeof(Memos) <= 4096);

thread_local Memos* t_memos __attribute__((tls_model("initial-exec")));
std::atomic<int> g_memo_key_state{0}; // 0: none, 1: being created, 2: ready, 3: failed
pthread_key_t g_memo_key;

PROF_NOINSTR void free_memos(void* p) {
    // Forgotten before it is unmapped: a signal handler that allocates in between must not
    // replay from the page.
    t_memos = nullptr;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    munmap(p, 4096);
}

// This thread's recordings, or null when they cannot be mapped (then walks are not replayed).
PROF_NOINSTR Memos* thread_memos() {
    if (PROF_LIKELY(t_memos)) return t_memos;
    int state = g_memo_key_state.load(std::memory_order_acquire);
    if (state == 0 && g_memo_key_state.compare_exchange_strong(state, 1)) {
        // The key only unmaps a thread's page when the thread exits. glibc keeps the values
        // of the first 32 keys in the thread descriptor; past those, pthread_setspecific
        // allocates once per thread, which the runtime does not record (the thread is in it).
        state = pthread_key_create(&g_memo_key, free_memos) == 0 ? 2 : 3;
        g_memo_key_state.store(state, std::memory_order_release);
    }
    if (state != 2) return nullptr; // another thread is creating the key, or it failed
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    auto* ms = static_cast<Memos*>(p); // zero-filled: no recordings (count 0)
    for (uint32_t i = 0; i < kMemos; ++i) ms->order[i] = uint8_t(i);
    pthread_setspecific(g_memo_key, ms);
    t_memos = ms;
    return ms;
}

PROF_NOINSTR inline void make_recent(Memos& ms, const Memo* m) {
    auto index = uint8_t(m - ms.memo);
    if (ms.order[0] == index) return;
    uint32_t i = 0;
    while (ms.order[i] != index) ++i;
    for (; i > 0; --i) ms.order[i] = ms.order[i - 1];
    ms.order[0] = index;
}

constexpr int kRestart = -2;

// Where a rule saves the caller's rbp, for a frame whose CFA is `cfa`.
PROF_NOINSTR inline uintptr_t rbp_slot(uintptr_t cfa, uint64_t rule) {
    return cfa + uintptr_t(int64_t(int16_t(rule >> 16)));
}

// The walk's state at frame `frame`: its pc (already reported), rsp and rbp.
struct Walk {
    uintptr_t pc, sp, fp;
    uint32_t frame, n, skip;
    bool checked; // the unload count, once per walk
};

// Reports the pc of a new frame. False when the walk is over (a null return address, or
// `max` addresses).
PROF_NOINSTR inline bool report(Walk& w, uintptr_t* pcs, uint32_t max) {
    if (!w.pc) return false; // after a frame whose return address is undefined
    if (w.skip) {
        --w.skip;
        return true;
    }
    pcs[w.n++] = w.pc;
    return w.n < max;
}

// A recording, not yet tried in this walk, with the same steps before frame `frame` as
// `like` (whose steps so far were this walk's: the same pcs, and the same layout) and at
// least one more step (or that ends at `frame`), and whose reads stay below `stack_top`.
PROF_NOINSTR Memo* find_memo(Memos& ms, const Memo* like, uint32_t frame, uint32_t tried,
                             uint32_t gen, const Start& start, uintptr_t stack_top) {
    for (uint32_t k = 0; k < kMemos; ++k) {
        Memo& m = ms.memo[ms.order[k]];
        if ((tried >> ms.order[k]) & 1) continue;
        if (m.gen != gen || m.pc0 != start.pc || m.reach > stack_top - start.sp) continue;
        if (m.count < frame || (m.count == frame && !m.ends) || !m.count) continue;
        uint32_t i = 0;
        while (i < frame && m.step[i].next_pc == like->step[i].next_pc &&
               m.step[i].ra_off == like->step[i].ra_off && m.step[i].fp_off == like->step[i].fp_off)
            ++i;
        if (i == frame) return &m;
    }
    return nullptr;
}

// Starts a recording of this walk in the least recently used slot other than `from`, whose
// first `steps` steps are this walk's.
PROF_NOINSTR Memo* fork_memo(Memos& ms, const Memo* from, uint32_t steps, uint32_t gen,
                             uintptr_t pc0) {
    Memo* m = &ms.memo[ms.order[kMemos - 1]];
    if (m == from) m = &ms.memo[ms.order[kMemos - 2]];
    m->gen = gen;
    m->pc0 = pc0;
    m->count = steps;
    m->reach = 0;
    m->ends = false;
    m->may_unload = false;
    for (uint32_t i = 0; i < steps; ++i) {
        const MemoStep& s = from->step[i];
        m->step[i] = s;
        uint32_t end = uint32_t(s.ra_off) + 8;
        if (s.rule & kRbpSaved) {
            uint32_t slot_end = uint32_t(int64_t(s.ra_off) + 8 + int16_t(s.rule >> 16) + 8);
            if (slot_end > end) end = slot_end;
        }
        if (end > m->reach) m->reach = end;
        if (s.rule & kMayUnload) m->may_unload = true;
    }
    make_recent(ms, m);
    return m;
}

// One walk with the cache of generation `gen` (see cfi_backtrace). kRestart: an unload was
// noticed, the walk must be done again with the new generation.
PROF_NOINSTR int walk(const Start& start, uintptr_t* pcs, uint32_t max, uint32_t skip,
                      uintptr_t stack_top, uint32_t gen) {
    Walk w{start.pc, start.sp, start.fp, 0, 0, skip, false};
    Memos* ms = stack_top > start.sp ? thread_memos() : nullptr;
    Memo* rec = nullptr; // the recording this walk extends: its steps so far are this walk's

    // Replays, while a recording has this walk's frames.
    uint32_t tried = 0;
    Memo* m = ms ? find_memo(*ms, nullptr, 0, tried, gen, start, stack_top) : nullptr;
    while (m) {
        if (m->may_unload && !w.checked) {
            w.checked = true;
            if (cache_outdated(gen)) return kRestart;
        }
        bool parted = false;
        for (; w.frame < m->count; ++w.frame) {
            const MemoStep& st = m->step[w.frame];
            if ((st.rule & kCfaRbp) && w.fp - start.sp != uintptr_t(intptr_t(st.fp_off))) {
                parted = true; // another layout from here (alloca)
                break;
            }
            uintptr_t cfa = start.sp + uintptr_t(intptr_t(st.ra_off)) + 8;
            uintptr_t pc = *reinterpret_cast<const uintptr_t*>(cfa - 8);
            if (PROF_UNLIKELY(pc != st.next_pc)) {
                parted = true; // another caller from here
                break;
            }
            if (st.rule & kRbpSaved)
                w.fp = *reinterpret_cast<const uintptr_t*>(rbp_slot(cfa, st.rule));
            w.sp = cfa;
            w.pc = pc;
            if (!report(w, pcs, max)) {
                make_recent(*ms, m);
                return int(w.n);
            }
        }
        if (!parted) {
            make_recent(*ms, m);
            if (m->ends) return int(w.n);
            rec = m; // frames beyond its last step are recorded in it
            break;
        }
        tried |= 1u << uint32_t(m - ms->memo);
        Memo* next = find_memo(*ms, m, w.frame, tried, gen, start, stack_top);
        if (!next) rec = fork_memo(*ms, m, w.frame, gen, start.pc);
        m = next;
    }
    if (ms && !rec && !w.frame) rec = fork_memo(*ms, nullptr, 0, gen, start.pc); // a new stack

    const Table* table = g_table.load(std::memory_order_acquire);
    uint64_t tag = key_tag(gen);
    bool holding = false; // a frame of libgcc's unwinder is on the stack: it may hold its lock
    for (uint32_t i = 0; i < w.n; ++i) holding |= in_unwinder(pcs[i]);
    for (;; ++w.frame) {
        // The row of a return address is looked up at address - 1: a call may be the last
        // instruction of its function (a call to a noreturn function).
        uintptr_t at = w.frame ? w.pc - 1 : w.pc;
        if (at >> 48) break; // not a user-space code address: keys have no room for it
        holding |= in_unwinder(at);
        uint64_t key = at | tag;
        uint64_t rule = table ? find(table, key) : 0;
        if (PROF_UNLIKELY(!rule)) {
            rule = holding ? miss_holding_unwinder(at, key, gen)
                           : miss(at, w.frame ? w.pc : 0, key, gen);
            if (!rule) break;
        }
        if (PROF_UNLIKELY(rule & kMayUnload) && !w.checked) {
            w.checked = true;
            if (cache_outdated(gen)) return kRestart;
        }
        uint64_t kind = rule_kind(rule);
        if (kind == kKindLast) {
            if (rec && rec->count == w.frame) {
                rec->ends = true;
                // A replay that ends here must check for unloads too: the outermost frame may
                // be code that dlclose can remove (and another object replace).
                if (rule & kMayUnload) rec->may_unload = true;
            }
            return int(w.n);
        }
        if (kind != kKindStep) break;
        uintptr_t cfa = ((rule & kCfaRbp) ? w.fp : w.sp) + uintptr_t(int64_t(int32_t(rule >> 32)));
        // The return address slot lies in the stack, above this frame's stack pointer: every
        // step moves up, so the walk ends. Nothing below the first frame's rsp is read.
        if ((cfa & 7) || cfa < w.sp + 8 || cfa > stack_top) break;
        uintptr_t reach = cfa - start.sp;
        uintptr_t fp = w.fp;
        if (rule & kRbpSaved) {
            uintptr_t slot = rbp_slot(cfa, rule);
            if ((slot & 7) || slot < start.sp || slot + 8 > stack_top) break;
            fp = *reinterpret_cast<const uintptr_t*>(slot);
            if (slot + 8 - start.sp > reach) reach = slot + 8 - start.sp;
        }
        uintptr_t ra = *reinterpret_cast<const uintptr_t*>(cfa - 8);
        // Recorded while the steps stay contiguous from frame 0 and the offsets fit.
        uintptr_t fp_off = w.fp - start.sp;
        if (rec && w.frame == rec->count && w.frame < kMemoSteps && reach <= 0x7fffffff &&
            (!(rule & kCfaRbp) || fp_off == uintptr_t(intptr_t(int32_t(fp_off))))) {
            rec->step[w.frame] = {rule, ra, int32_t(cfa - 8 - start.sp),
                                  (rule & kCfaRbp) ? int32_t(fp_off) : 0};
            rec->count = w.frame + 1;
            if (reach > rec->reach) rec->reach = uint32_t(reach);
            if (rule & kMayUnload) rec->may_unload = true;
        }
        w.sp = cfa;
        w.fp = fp;
        w.pc = ra;
        if (!report(w, pcs, max)) return int(w.n);
    }
    // Unsupported: the caller asks libgcc, and this stack is not replayed. Inside libgcc's
    // unwinder the stack ends here instead.
    if (rec) rec->count = 0;
    return holding ? int(w.n) : -1;
}

} // namespace

// Kept out of line and never inlined: its own frame is the first one unwound (from the pc,
// rsp and rbp read below, which the CFI row at that pc describes exactly: the library is
// built with asynchronous unwind tables), so that the first address reported is the return
// address into its caller, as with _Unwind_Backtrace.
__attribute__((noinline)) PROF_NOINSTR int cfi_backtrace(uintptr_t* pcs, uint32_t max,
                                                         uint32_t skip, uintptr_t stack_top) {
    if (!max) return 0;
    Start start;
    // rbp first: the compiler may pick rbp for an output when this function saves it (then
    // the row restores rbp from its slot and the value read here is not used). The pc is the
    // address right after the lea, whose row describes the registers as read here.
    asm volatile("mov %%rbp, %2\n\t"
                 "mov %%rsp, %1\n\t"
                 "lea 0(%%rip), %0"
                 : "=r"(start.pc), "=r"(start.sp), "=r"(start.fp));
    for (int attempt = 0; attempt < 3; ++attempt) {
        int n =
            walk(start, pcs, max, skip, stack_top, g_generation.load(std::memory_order_acquire));
        if (n != kRestart) return n;
    }
    return -1; // objects keep being unloaded: libgcc's unwinder copes with that
}

PROF_NOINSTR void cfi_invalidate() {
    g_generation.fetch_add(1, std::memory_order_acq_rel);
}

PROF_NOINSTR uint64_t cfi_slow_lookups() {
    return g_slow.load(std::memory_order_relaxed);
}

PROF_NOINSTR const void* cfi_fde_from_tables(uintptr_t pc) {
    const uint8_t* fde = fde_from_hdr(pc);
    return fde && rule_from_fde(fde, EhBases{}, pc, true) ? fde : nullptr;
}

} // namespace prof::rt
