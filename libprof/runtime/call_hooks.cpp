// The hot path: __cyg_profile_func_enter/exit, called by every function built with
// -finstrument-functions. Each thread keeps its state in initial-exec TLS: its own mapped chunk,
// a shadow call stack and a table from function address to a stream-local index, so a typical
// event is a table hit, one rdtsc and 2-4 bytes written, with no lock and no allocation.
//
// Matching exits to enters. The runtime keeps the recorded call tree balanced by itself. Every
// frame stores the function, its call site (the return address into the caller, which GCC and
// Clang pass to both hooks) and the hook's canonical frame address (CFA):
//  - an exit normally matches the innermost frame by function and call site. Its CFA equals
//    the enter's when the exit hook is called from the function body; GCC at -O2 often
//    tail-calls the exit hook after the epilogue instead, and then the CFA is the caller's
//    (larger) and the hook's own return address is the call site;
//  - an exit that does not match the innermost frame closes the frames above its own (a
//    longjmp or an exception through uninstrumented code skipped their exits) and records
//    them as abandoned; an exit that matches nothing (its enter came before tracing started,
//    or was dropped) is ignored;
//  - an enter strictly above the innermost frame's CFA means that frame is gone (longjmp out
//    of it), so it is abandoned before the new frame is pushed. Equal CFAs are legitimate
//    nesting: an inlined function keeps its hooks and runs in its caller's frame.
// Distances are bounded (kSameStack) so that a signal handler on an alternate stack is not
// mistaken for a return to an outer frame.
#include "thread_state.hpp"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <unistd.h>

// The thread state, exported for the macros' inline fast paths (prof/prof_thread.h).
extern "C" {
__attribute__((visibility("default"))) __thread prof_thread prof_tls
    __attribute__((tls_model("initial-exec")));
}

namespace prof::rt {

thread_local bool t_calibrating __attribute__((tls_model("initial-exec"))) = false;

PROF_NOINSTR inline uint32_t slot_of(uintptr_t a, uint32_t mask) {
    return uint32_t((uint64_t(a) * 0x9E3779B97F4A7C15ull) >> 40) & mask;
}

// Declared in runtime.hpp: the one helper of every table of the runtime (here, modules.cpp).
PROF_NOINSTR void* map_anon(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

// Opens the next chunk when fewer than `need` bytes are left. On failure tracing is off for
// this thread; frames already recorded stay valid.
PROF_NOINSTR bool refill(ThreadState& s, uint64_t now) {
    int saved = errno;
    forget_runs(s);
    bool ok = open_chunk(s.w, now);
    errno = saved;
    if (!ok) s.state = kOff;
    return ok;
}

// The refill of an event (a call, a scope, an allocation). Opening a chunk (file space, mapping,
// faulting it in) takes tens to hundreds of microseconds, inside whatever frame is open: the time
// is taken again after it, and a Pause record tells compensating readers how much of the interval
// was ours.
__attribute__((noinline)) PROF_NOINSTR bool refill_event(ThreadState& s, uint64_t& now) {
    if (!refill(s, now)) return false;
    // A sample that found no room in the old chunk comes first: it was taken before this event,
    // and the thread has written nothing since (every writer needs more room than it did).
    sampler_flush(s, false);
    // A counting thread: `now` is the last clock read, not the time of an event, and samples
    // that land in the runtime are its own: no Pause.
    if (s.counting) return true;
    uint64_t after = now_ticks();
    if (after > now) {
        s.w.cursor = format::put_pause(s.w.cursor, after - now);
        now = after;
    }
    return true;
}

PROF_NOINSTR bool grow_table(ThreadState& s) {
    uint32_t old_size = s.mask + 1;
    uint32_t size = s.mask ? old_size * 4 : kInitialTable;
    if (size > kMaxTable) return false;
    auto* table = static_cast<Slot*>(map_anon(size_t(size) * sizeof(Slot)));
    if (!table) return false;
    uint32_t mask = size - 1;
    for (uint32_t i = 0; s.mask && i < old_size; ++i) {
        const Slot& o = s.table[i];
        if (!o.address) continue;
        uint32_t h = slot_of(o.address, mask);
        while (table[h].address) h = (h + 1) & mask;
        table[h] = o;
    }
    if (s.mask) munmap(s.table, size_t(old_size) * sizeof(Slot));
    s.table = table;
    s.mask = mask;
    return true;
}

// Slow path of the table: a function this thread has not seen. Writes its definition record.
// Returns null when the table is full; the caller then records the address itself.
PROF_NOINSTR Slot* define_function(ThreadState& s, uintptr_t a, prof_site* site) {
    int saved = errno;
    if ((s.used + 1) * 2 > s.mask + 1 && !grow_table(s)) {
        errno = saved;
        return nullptr;
    }
    bool keep = true;
    if (site) {
        register_site(site); // a scope: described once by its site record
    } else if (!t_calibrating) { // the calibration's own functions are not the program's
        lock_global();
        keep = note_function(a);
        unlock_global();
    }
    uint32_t h = slot_of(a, s.mask);
    while (s.table[h].address) h = (h + 1) & s.mask;
    Slot* slot = &s.table[h];
    slot->address = a;
    slot->excluded = !keep;
    ++s.used;
    if (keep) {
        slot->index = s.next_index++;
        s.w.cursor = format::put_function(s.w.cursor, a);
    }
    errno = saved;
    return slot;
}

PROF_NOINSTR inline Slot* lookup(ThreadState& s, uintptr_t a, prof_site* site) {
    uint32_t h = slot_of(a, s.mask);
    for (;;) {
        Slot* slot = &s.table[h];
        if (PROF_LIKELY(slot->address == a)) return slot;
        if (!slot->address) return define_function(s, a, site);
        h = (h + 1) & s.mask;
    }
}

// Lookup without defining: for exits, which never introduce a function.
PROF_NOINSTR const Slot* find(const ThreadState& s, uintptr_t a) {
    uint32_t h = slot_of(a, s.mask);
    for (;;) {
        const Slot* slot = &s.table[h];
        if (slot->address == a) return slot;
        if (!slot->address) return nullptr;
        h = (h + 1) & s.mask;
    }
}

PROF_NOINSTR Slot* function_slot(ThreadState& s, uintptr_t a, prof_site* site) {
    return lookup(s, a, site);
}

PROF_NOINSTR const Slot* find_function(const ThreadState& s, uintptr_t a) {
    return find(s, a);
}

PROF_NOINSTR void write_abandon(ThreadState& s, uint32_t count, uint64_t now) {
    s.w.cursor = format::put_abandon(s.w.cursor, count, take_delta(s.w, now));
    s.depth -= count;
}

PROF_NOINSTR void write_enter(ThreadState& s, uintptr_t a, uintptr_t site, uintptr_t cfa,
                              uint64_t now) {
    Slot* slot = lookup(s, a, site == kScopeMark ? reinterpret_cast<prof_site*>(a) : nullptr);
    if (slot && slot->excluded) return;
    if (PROF_UNLIKELY(!slot)) { // the table is full: the filter still applies
        lock_global();
        bool keep = note_function(a);
        unlock_global();
        if (!keep) return;
    }
    if (PROF_UNLIKELY(s.depth == s.max_depth)) {
        // Too deep to record: this frame and its exit are dropped. Exits come in reverse
        // order, so the next `overflow` exits are these frames'.
        if (!s.overflow++) s.overflow_cfa = cfa;
        s.dropped += 2;
        return;
    }
    s.frames[s.depth++] = Frame{a, site, cfa, 0, 0};
    uint64_t dt = take_delta(s.w, now);
    if (PROF_LIKELY(slot != nullptr))
        s.w.cursor = format::put_enter(s.w.cursor, slot->index, dt);
    else
        s.w.cursor = format::put_enter_address(s.w.cursor, a, dt);
}

PROF_NOINSTR void settle(ThreadState& s) {
    // In one instruction: a signal handler that ran between the caller's look at the state and
    // here has settled the activation already (and may have left a run of its own last).
    uint8_t expected = kDeferred;
    if (!__atomic_compare_exchange_n(&s.state, &expected, uint8_t(kBusy), false,
                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // Room: the activation joined its run with at least PROF_DETAIL_RECORD_ROOM bytes left,
    // and nothing has been written since.
    // An activation that was not to be timed (prof/prof.hpp) has no start: it starts now.
    uint64_t start = s.defer_ticks ? s.defer_ticks : now_ticks();
    s.w.cursor = format::put_enter(s.w.cursor, s.run_key >> 32, take_delta(s.w, start));
    commit(s.w);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    s.state = kActive;
}

PROF_NOINSTR bool grow_lines(ThreadState& s, uint32_t id) {
    uint32_t cap = s.site_cap ? s.site_cap : 64;
    while (cap <= id) cap *= 2;
    auto* lines = static_cast<LineAgg*>(map_anon(size_t(cap) * sizeof(LineAgg)));
    if (!lines) return false;
    // The old table is left mapped: a PROF_LINE interrupted by a signal handler that grows the
    // table may still be adding to it (its update is lost, nothing is corrupted). The tables
    // double, so what is left behind stays below the size of the live one.
    if (s.site_cap) memcpy(lines, s.sites, size_t(s.site_cap) * sizeof(LineAgg));
    __atomic_store_n(&s.site_cap, 0, __ATOMIC_RELAXED);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    s.sites = lines;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    s.site_cap = cap;
    return true;
}

} // namespace prof::rt

namespace prof::rt {
namespace {

// How many of the innermost frames a call at stack level `cfa` from `site` finds left without an
// exit (longjmp): those above its level. At the same level, only a frame from another call site
// is left over: GCC keeps the hooks of inlined functions, which run in their host's frame and
// pass the host's call site, so an equal CFA with the same site is nesting. Scopes are never
// left over here.
PROF_NOINSTR uint32_t left_frames(const ThreadState& s, uintptr_t site, uintptr_t cfa) {
    uint32_t n = 0;
    while (n < s.depth) {
        const Frame& f = s.frames[s.depth - 1 - n];
        bool deeper = f.cfa < cfa && cfa - f.cfa < kSameStack;
        bool sibling = f.cfa == cfa && f.site != site && !is_scope(f.site);
        if (!deeper && !sibling) break;
        ++n;
    }
    return n;
}

// A call that a counting thread does not record: too deep (PROF_MAX_DEPTH), inside such a call,
// or a path its tree has no room for. Its exit, and those of the calls inside it, are known by
// `overflow` (as in write_enter). A function the runtime filter excludes is none of these.
__attribute__((noinline)) PROF_NOINSTR void count_overflow(ThreadState& s, uintptr_t a,
                                                           uintptr_t cfa) {
    const Slot* slot = find(s, a);
    if (slot && slot->excluded) return;
    if (!s.overflow++) s.overflow_cfa = cfa;
    s.dropped += 2;
}

// The common call of a counting thread, inline in the hook: no switch since the last hook, a
// path its innermost frame's node knows (one of the two it entered last, or at its home slot in
// the table of paths), nothing unusual about the stack. False, and nothing done, for anything
// else (count_enter).
__attribute__((always_inline)) PROF_NOINSTR inline bool
count_enter_fast(ThreadState& s, uintptr_t a, uintptr_t site, uintptr_t cfa) {
    if (PROF_UNLIKELY(__atomic_load_n(s.switch_word, __ATOMIC_RELAXED) != switch_mark()))
        return false;
    uint32_t d = s.depth;
    if (PROF_UNLIKELY(!d || d == s.max_depth || s.overflow)) return false;
    Frame* top = &s.frames[d - 1];
    // A call below the innermost frame, or nested at its level from its own call site (GCC's
    // hooks of an inlined function run in their host's frame with the host's call site).
    if (PROF_UNLIKELY(top->cfa < cfa || (top->cfa == cfa && top->site != site))) return false;
    TreeNode& parent = s.tree_nodes[top->node];
    TreeChild child = parent.recent[0];
    if (PROF_UNLIKELY(child.fn != a)) {
        // The other child entered last, or the path's home slot in the table of paths (where
        // most paths are: the table is at most half full).
        child = parent.recent[1];
        if (child.fn != a) {
            const PathSlot& p = s.tree_paths[path_slot(a, top->node, s.tree_path_mask)];
            if (PROF_UNLIKELY(p.fn != a || p.parent != top->node)) return false;
            const TreeNode& n = s.tree_nodes[p.node];
            child = TreeChild{a, n.id ? n.calls : nullptr, p.node, node_timed(p.node)};
        }
        parent.recent[1] = parent.recent[0];
        parent.recent[0] = child;
    }
    if (PROF_UNLIKELY(!child.calls)) return true; // excluded: neither counted nor pushed
    uint64_t calls = ++*child.calls;
    top[1] = Frame{a, site, cfa, child.node, 0};
    s.depth = d + 1;
    if (PROF_UNLIKELY(child.timed || latency_probe_due(calls))) tree_time_enter(s, d);
    return true;
}

// A counting thread's call of `a` (the thread is busy): the first hook after a switch reads the
// thread's clocks, in the node it was in; frames left by a longjmp are dropped; the call adds
// one to its path's count and pushes its frame. No record unless the path is new.
__attribute__((noinline)) PROF_NOINSTR void count_enter(ThreadState& s, uintptr_t a, uintptr_t site,
                                                        uintptr_t cfa, bool scope) {
    if (PROF_UNLIKELY(switched(s))) tree_clock_record(s);
    uint32_t d = s.depth;
    if (PROF_UNLIKELY(!scope && d && s.frames[d - 1].cfa <= cfa))
        s.depth = d -= left_frames(s, site, cfa);
    if (PROF_UNLIKELY(s.overflow || d == s.max_depth)) return count_overflow(s, a, cfa);
    uint32_t parent = d ? s.frames[d - 1].node : 0;
    uint32_t c = tree_child(s, parent, a, site);
    if (PROF_UNLIKELY(c == kNoNode)) return count_overflow(s, a, cfa);
    note_recent_child(s, parent, c, a);
    const TreeNode& n = s.tree_nodes[c];
    if (PROF_UNLIKELY(!n.id)) return; // excluded by the runtime filter: neither counted nor pushed
    uint64_t calls = ++*n.calls;
    s.frames[d] = Frame{a, site, cfa, c, 0};
    s.depth = d + 1;
    if (node_timed(c) || latency_probe_due(calls)) tree_time_enter(s, d);
}

} // namespace
} // namespace prof::rt

using namespace prof::rt;

namespace prof::rt {
namespace {

// Every enter but a counting thread's common one (the hook below): `cfa` is the hook's own.
__attribute__((noinline)) PROF_NOINSTR void enter_hook(uintptr_t a, uintptr_t site, uintptr_t cfa) {
    ThreadState& s = prof_tls;
    if (PROF_UNLIKELY(s.state != kActive)) {
        if (s.state == kBusy) { // re-entry (a signal handler interrupted a hook): not recorded
            if (!s.own_work) ++s.dropped;
            return;
        }
        if (s.state == kDeferred) {
            settle(s);
        } else {
            if (s.state != kNew) return; // off
            if (t_dependency_calls || call_from_our_dependency(site)) {
                ++t_dependency_calls; // its exit takes it back
                return;
            }
            thread_start(s);
            if (s.state != kActive) return;
        }
    }
    s.state = kBusy;
    // No load of the writer's state may move above the guard: a signal handler could run in
    // between and write records of its own.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (PROF_UNLIKELY(s.count_soon)) begin_counting(s); // PROF_TIME=auto: samples enough
    if (s.counting) {
        count_enter(s, a, site, cfa, false);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        if (PROF_LIKELY(s.state == kBusy)) s.state = kActive; // else off: no room was left
        return;
    }
    uint64_t now = now_ticks();
    if (PROF_UNLIKELY(!ensure(s, now))) return;
    if (PROF_UNLIKELY(s.depth && s.frames[s.depth - 1].cfa <= cfa)) {
        uint32_t n = left_frames(s, site, cfa);
        if (n) write_abandon(s, n, now);
    }
    write_enter(s, a, site, cfa, now);
    commit(s.w);
    s.state = kActive;
}

} // namespace
} // namespace prof::rt

// Exported explicitly: the library is built with hidden visibility, and Clang (unlike GCC's
// version script handling) would otherwise leave the hooks unexported. The common call of a
// counting thread is inline here (count_enter_fast), with no call and no register saved; the
// rest, and every call of a thread that traces, is enter_hook.
extern "C" PROF_NOINSTR __attribute__((visibility("default"))) void
__cyg_profile_func_enter(void* fn, void* call_site) {
    ThreadState& s = prof_tls;
    auto cfa = reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa());
    auto a = reinterpret_cast<uintptr_t>(fn);
    auto site = reinterpret_cast<uintptr_t>(call_site);
    if (PROF_LIKELY(s.counting && s.state == kActive)) {
        s.state = kBusy;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        bool done = count_enter_fast(s, a, site, cfa);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        s.state = kActive;
        if (PROF_LIKELY(done)) return;
    }
    enter_hook(a, site, cfa);
}

namespace prof::rt {
namespace {

// Whether frame `f` is the one exiting: same function and call site, and a CFA consistent with
// how the exit hook was reached.
PROF_NOINSTR inline bool is_exiting(const Frame& f, uintptr_t a, uintptr_t site, uintptr_t cfa,
                                    bool tail) {
    return f.fn == a && f.site == site && (tail ? f.cfa <= cfa : f.cfa == cfa);
}

// Closes the frame at depth `i` - 1 (and abandons the frames above it).
PROF_NOINSTR inline void close_frame(ThreadState& s, uint32_t i, uint64_t now) {
    if (s.depth - i) write_abandon(s, s.depth - i, now);
    --s.depth;
    s.w.cursor = format::put_exit(s.w.cursor, take_delta(s.w, now));
    commit(s.w);
}

// Slow path of an exit that is not the innermost frame's (or whose CFA moved). Returns the
// depth of the exiting frame plus one, or 0 when no open frame is its own.
PROF_NOINSTR uint32_t find_exiting(const ThreadState& s, uintptr_t a, uintptr_t site,
                                   uintptr_t cfa, bool tail) {
    // Frames deeper than the exit's stack level were left by longjmp: look below them.
    for (uint32_t i = s.depth; i; --i) {
        const Frame& f = s.frames[i - 1];
        if (is_exiting(f, a, site, cfa, tail)) return i;
        if (!(f.cfa <= cfa && cfa - f.cfa < kSameStack)) break;
    }
    // The CFA moved inside the function (alloca, a VLA): match function and call site alone.
    for (uint32_t i = s.depth; i && s.depth - i < kExitSearch; --i)
        if (s.frames[i - 1].fn == a && s.frames[i - 1].site == site) return i;
    return 0;
}

// Whether the exit of `a` at stack level `cfa`, while frames too deep to record are open, is one
// of theirs (then accounted), rather than a recorded frame's: a longjmp can have left them.
PROF_NOINSTR bool unrecorded_exit(ThreadState& s, uintptr_t a, uintptr_t cfa) {
    if (cfa > s.overflow_cfa && cfa - s.overflow_cfa < kSameStack) {
        s.overflow = 0; // a longjmp left the unrecorded frames: this exit is a recorded one
        return false;
    }
    const Slot* slot = find(s, a);
    if (!(slot && slot->excluded)) --s.overflow;
    return true;
}

// A counting thread's return from `a` (the thread is busy): its frame is popped, with those
// above it (left by a longjmp or an exception through code without hooks). Exits of calls not
// recorded are matched as in the traced exit.
__attribute__((noinline)) PROF_NOINSTR void count_exit(ThreadState& s, uintptr_t a, uintptr_t site,
                                                       uintptr_t cfa, bool tail) {
    if (PROF_UNLIKELY(switched(s))) tree_clock_record(s);
    if (PROF_UNLIKELY(s.overflow) && unrecorded_exit(s, a, cfa)) return;
    uint32_t d = s.depth;
    if (PROF_LIKELY(d && is_exiting(s.frames[d - 1], a, site, cfa, tail))) {
        if (s.frames[d - 1].timed) tree_time_exit(s, d - 1);
        s.depth = d - 1;
        return;
    }
    const Slot* slot = find(s, a);
    uint32_t i = slot && !slot->excluded ? find_exiting(s, a, site, cfa, tail) : 0;
    if (!i) return;
    if (s.frames[i - 1].timed) tree_time_exit(s, i - 1); // the frames above it were left
    s.depth = i - 1;
}

} // namespace
} // namespace prof::rt

namespace prof::rt {
namespace {

// Every exit but a counting thread's common one (the hook below): `cfa` and `tail` are the
// hook's own.
__attribute__((noinline)) PROF_NOINSTR void exit_hook(uintptr_t a, uintptr_t site, uintptr_t cfa,
                                                      bool tail) {
    ThreadState& s = prof_tls;
    if (PROF_UNLIKELY(s.state != kActive)) {
        if (s.state == kBusy && !s.own_work) ++s.dropped; // re-entry: not recorded
        if (s.state == kNew && t_dependency_calls) --t_dependency_calls;
        if (s.state != kDeferred) return;
        settle(s);
    }
    s.state = kBusy;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (PROF_UNLIKELY(s.count_soon)) begin_counting(s); // PROF_TIME=auto: samples enough
    if (s.counting) {
        count_exit(s, a, site, cfa, tail);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        if (PROF_LIKELY(s.state == kBusy)) s.state = kActive; // else off: no room was left
        return;
    }
    uint64_t now = now_ticks();
    if (PROF_UNLIKELY(!ensure(s, now))) return;
    if (PROF_UNLIKELY(s.overflow) && unrecorded_exit(s, a, cfa)) {
        s.state = kActive;
        return;
    }
    if (PROF_UNLIKELY(!s.depth || !is_exiting(s.frames[s.depth - 1], a, site, cfa, tail))) {
        const Slot* slot = find(s, a);
        uint32_t i = slot && !slot->excluded ? find_exiting(s, a, site, cfa, tail) : 0;
        if (!i) { // filtered out, or never entered while tracing
            s.state = kActive;
            return;
        }
        close_frame(s, i, now);
    } else {
        close_frame(s, s.depth, now);
    }
    s.state = kActive;
}

} // namespace
} // namespace prof::rt

// The common return of a counting thread is inline here, with no call and no register saved:
// no switch since the last hook, the innermost frame's, nothing unusual about the stack. The
// rest, and every exit of a thread that traces, is exit_hook.
extern "C" PROF_NOINSTR __attribute__((visibility("default"))) void
__cyg_profile_func_exit(void* fn, void* call_site) {
    ThreadState& s = prof_tls;
    auto cfa = reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa());
    auto a = reinterpret_cast<uintptr_t>(fn);
    auto site = reinterpret_cast<uintptr_t>(call_site);
    // Reached by a tail call after the function's epilogue: our return address is its own.
    bool tail = __builtin_return_address(0) == call_site;
    if (PROF_LIKELY(s.counting && s.state == kActive)) {
        s.state = kBusy;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        uint32_t d = s.depth;
        if (PROF_LIKELY(__atomic_load_n(s.switch_word, __ATOMIC_RELAXED) == switch_mark() &&
                        !s.overflow && d && is_exiting(s.frames[d - 1], a, site, cfa, tail))) {
            s.depth = d - 1;
            if (PROF_UNLIKELY(s.frames[d - 1].timed)) {
                tree_time_exit(s, d - 1); // may write its record: off when no room was left
                std::atomic_signal_fence(std::memory_order_seq_cst);
                if (PROF_LIKELY(s.state == kBusy)) s.state = kActive;
                return;
            }
            std::atomic_signal_fence(std::memory_order_seq_cst);
            s.state = kActive;
            return;
        }
        std::atomic_signal_fence(std::memory_order_seq_cst);
        s.state = kActive;
    }
    exit_hook(a, site, cfa, tail);
}

// ---- marked scopes and lines (prof/prof.h, prof/prof.hpp) -----------------------------------

namespace prof::rt {
namespace {

// PROF_SCOPE, PROF_FUNCTION and C regions: push a frame for the site and record its enter.
PROF_NOINSTR inline void scope_enter(prof_site* site, uintptr_t cfa) {
    ThreadState& s = prof_tls;
    if (s.state == kDeferred) settle(s);
    if (PROF_UNLIKELY(s.state != kActive)) {
        if (s.state == kBusy && !s.own_work) ++s.dropped; // a signal handler interrupted
        if (s.state != kNew) return;
        thread_start(s);
        if (s.state != kActive) return;
    }
    s.state = kBusy;
    if (s.counting) { // a node like a function's; the inline paths stay out (kCountedScopeMark)
        count_enter(s, reinterpret_cast<uintptr_t>(site), kCountedScopeMark, cfa, true);
        if (PROF_LIKELY(s.state == kBusy)) s.state = kActive;
        return;
    }
    uint64_t now = now_ticks();
    if (PROF_UNLIKELY(!ensure(s, now))) return;
    uint32_t depth = s.depth;
    write_enter(s, reinterpret_cast<uintptr_t>(site), kScopeMark, cfa, now);
    commit(s.w);
    // The site's function index in this stream, for the macros' inline path from now on.
    uint32_t id = __atomic_load_n(&site->id, __ATOMIC_RELAXED);
    int saved = errno;
    if (s.depth > depth && id && (id < s.site_cap || grow_lines(s, id))) {
        const Slot* slot = find(s, reinterpret_cast<uintptr_t>(site));
        if (slot && !slot->excluded) s.sites[id].scope_index = slot->index + 1;
    }
    errno = saved;
    s.state = kActive;
}

PROF_NOINSTR inline void scope_exit(prof_site* site, uintptr_t cfa) {
    ThreadState& s = prof_tls;
    if (s.state == kDeferred) settle(s);
    if (PROF_UNLIKELY(s.state != kActive)) {
        if (s.state == kBusy && !s.own_work) ++s.dropped; // a scope entered while busy
        return;
    }
    s.state = kBusy;
    auto a = reinterpret_cast<uintptr_t>(site);
    if (s.counting) {
        count_exit(s, a, kCountedScopeMark, cfa, false);
        if (PROF_LIKELY(s.state == kBusy)) s.state = kActive;
        return;
    }
    uint64_t now = now_ticks();
    if (PROF_UNLIKELY(!ensure(s, now))) return;
    if (PROF_UNLIKELY(s.overflow)) {
        --s.overflow;
        s.state = kActive;
        return;
    }
    uint32_t i = s.depth && is_exiting(s.frames[s.depth - 1], a, kScopeMark, cfa, false)
                     ? s.depth
                     : find_exiting(s, a, kScopeMark, cfa, false);
    if (i) close_frame(s, i, now);
    s.state = kActive;
}

// The first hit of a site on a thread (or the thread's first event): out of line, so that the
// common path of a PROF_LINE saves no registers. Returns the site's id, or 0 to skip the hit.
__attribute__((noinline, cold)) PROF_NOINSTR uint32_t line_slow(ThreadState& s, prof_site* site) {
    if (s.state == kDeferred) settle(s);
    if (s.state != kActive) {
        if (s.state != kNew) return 0;
        thread_start(s);
        if (s.state != kActive) return 0;
    }
    uint32_t id = __atomic_load_n(&site->id, __ATOMIC_RELAXED);
    if (id && id < s.site_cap) return id;
    s.state = kBusy;
    int saved = errno;
    if (!id) id = register_site(site);
    bool ok = id && (id < s.site_cap || grow_lines(s, id));
    errno = saved;
    s.state = kActive;
    return ok ? id : 0;
}

// The thread's first hit of a PROF_LINE site in its current chunk: a LineCounts record of no
// hit yet, whose counts the hits then add to in place (prof/prof.hpp). False when nothing can
// be recorded.
__attribute__((noinline)) PROF_NOINSTR bool new_line_counter(ThreadState& s, prof_site* site,
                                                             LineAgg& a) {
    if (s.state == kDeferred) settle(s); // the record goes after the activation's Enter
    if (s.state != kActive) return false;
    s.state = kBusy;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    uint64_t now = now_ticks();
    if (!ensure_bytes(s, now, 32)) return false; // off for good when no chunk can be opened
    uint8_t* p = format::put_line_counts(s.w.cursor, reinterpret_cast<uintptr_t>(site), 0, 0);
    a.counter = p - 16; // hits and ticks, the record's last fields
    s.w.cursor = p;
    commit(s.w);
    a.counter_seq = s.w.seq;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    s.state = kActive;
    return true;
}

// One hit of `site`. A hit that measured no memory (`mem` false) adds to the site's LineCounts
// record in the chunk, its duration counted `weight` times (0: not timed; line_clock.cpp); the
// others to the thread's sums (a LineStats record later), with the RSS before and after when
// `rss` (PROF_LINE_RSS=1) and the growth of the thread's heap.
PROF_NOINSTR inline void line_add(prof_site* site, uint64_t start, uint64_t end, bool mem, bool rss,
                                  uint64_t rss_before, uint64_t rss_after, int64_t heap_delta,
                                  uint32_t weight = 1) {
    ThreadState& s = prof_tls;
    uint32_t id = __atomic_load_n(&site->id, __ATOMIC_RELAXED);
    if (PROF_UNLIKELY((s.state & 3) != kActive || !id || id >= s.site_cap)) {
        id = line_slow(s, site);
        if (!id) return;
    }
    LineAgg& a = s.sites[id];
    uint64_t ticks = end > start ? end - start : 0;
    if (!mem) {
        if (a.counter_seq != s.w.seq && !new_line_counter(s, site, a)) return;
        uint64_t counts[2];
        memcpy(counts, a.counter, sizeof counts);
        counts[0] += 1;
        counts[1] += ticks * weight;
        memcpy(a.counter, counts, sizeof counts);
        if (weight) prof_line_timed(&a, ticks, weight);
        return;
    }
    ++a.hits;
    a.ticks += ticks;
    a.heap_increment += heap_delta;
    if (rss) {
        ++a.rss_reads;
        a.rss_increment += int64_t(rss_after) - int64_t(rss_before);
        a.rss_last = rss_after;
    }
}

} // namespace
} // namespace prof::rt

#define PROF_API extern "C" __attribute__((visibility("default"))) PROF_NOINSTR

PROF_API void prof_scope_enter(prof_site* site) {
    prof::rt::scope_enter(site, reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()));
}

PROF_API void prof_scope_exit(prof_site* site) {
    prof::rt::scope_exit(site, reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()));
}

PROF_API void prof_scope_enter_at(prof_site* site, unsigned long cfa) {
    prof::rt::scope_enter(site, cfa);
}

PROF_API void prof_scope_exit_at(prof_site* site, unsigned long cfa) {
    prof::rt::scope_exit(site, cfa);
}

PROF_API void prof_region_begin(prof_site* site) {
    prof::rt::scope_enter(site, reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()));
}

// Ends the innermost open region or scope of this thread.
PROF_API void prof_region_end(void) {
    ThreadState& s = prof_tls;
    if (s.state == kDeferred) settle(s);
    if (s.state != kActive) return;
    s.state = kBusy;
    if (s.counting) {
        if (PROF_UNLIKELY(switched(s))) tree_clock_record(s);
        for (uint32_t i = s.depth; i && s.depth - i < kExitSearch; --i)
            if (s.frames[i - 1].site == kCountedScopeMark) {
                if (s.frames[i - 1].timed) tree_time_exit(s, i - 1);
                s.depth = i - 1;
                break;
            }
        if (PROF_LIKELY(s.state == kBusy)) s.state = kActive;
        return;
    }
    uint64_t now = now_ticks();
    if (!ensure(s, now)) return;
    for (uint32_t i = s.depth; i && s.depth - i < kExitSearch; --i)
        if (s.frames[i - 1].site == kScopeMark) {
            close_frame(s, i, now);
            break;
        }
    s.state = kActive;
}

PROF_API unsigned long long prof_ticks(void) {
    if (PROF_UNLIKELY(prof_tls.state == kNew)) prof::rt::runtime_start();
    return now_ticks();
}

PROF_API void prof_line_record(prof_site* site, unsigned long long start, unsigned long long end) {
    prof::rt::line_add(site, start, end, false, false, 0, 0, 0);
}

PROF_API void prof_line_record_weighted(prof_site* site, unsigned long long start,
                                        unsigned long long end, unsigned weight) {
    prof::rt::line_add(site, start, end, false, false, 0, 0, 0, weight);
}

PROF_API void prof_line_record_rss(prof_site* site, unsigned long long start,
                                   unsigned long long end, unsigned long long rss_before,
                                   unsigned long long rss_after) {
    prof::rt::line_add(site, start, end, true, true, rss_before, rss_after, 0);
}

// Also what programs built with an older prof/prof.hpp call whenever prof_line_rss_enabled is
// not 0: they read the RSS, so it is recorded.
PROF_API void prof_line_record_mem(prof_site* site, unsigned long long start,
                                   unsigned long long end, unsigned long long rss_before,
                                   unsigned long long rss_after, long long heap_before) {
    prof::rt::line_add(site, start, end, true, true, rss_before, rss_after,
                       prof_tls.heap_bytes - heap_before);
}

PROF_API void prof_line_record_heap(prof_site* site, unsigned long long start,
                                    unsigned long long end, long long heap_before) {
    prof::rt::line_add(site, start, end, true, false, 0, 0, prof_tls.heap_bytes - heap_before);
}

// Resident set size now, from /proc/self/statm (one pread on a descriptor kept open).
PROF_API unsigned long long prof_rss_bytes(void) { return prof::rt::rss_bytes_now(); }

// ---- longjmp ---------------------------------------------------------------------------------
// A longjmp leaves every frame between it and its setjmp without an exit hook. The enter hook
// notices such frames only when the next call's stack level is at or above theirs, and that
// level depends on frame sizes: after a longjmp, a sibling call with a larger frame than the
// abandoned ones looked nested in them (and scopes had no such check at all). libprof.so
// therefore interposes longjmp and its variants: on glibc x86-64 they read the stack pointer
// the jump restores from the jmp_buf (slot 6, mangled with the thread's pointer guard) and
// close every open frame and scope below it (an Abandon record) before jumping. A target that
// is not up this thread's stack (a jump to another stack, as coroutine libraries do) changes
// nothing, and the enter hook's check remains for jumps this does not see.
namespace prof::rt {
namespace {

using LongjmpFn = void (*)(struct __jmp_buf_tag*, int);
LongjmpFn g_longjmp, g_underscore_longjmp, g_siglongjmp, g_longjmp_chk;

// The C library's own function, from its handle: RTLD_NEXT would miss it when libprof.so comes
// after the C library in the search order (a dependency of a preloaded libprofmem.so), and a
// failed lookup allocates its error message.
PROF_NOINSTR LongjmpFn real_jump(LongjmpFn& fn, const char* name) {
    if (PROF_UNLIKELY(!fn)) {
        static void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        if (libc) fn = reinterpret_cast<LongjmpFn>(dlsym(libc, name));
    }
    return fn;
}

PROF_NOINSTR void close_frames_below(struct __jmp_buf_tag* env) {
#if defined(__x86_64__) && defined(__GLIBC__)
    ThreadState& s = prof_tls;
    if (s.state == kDeferred) settle(s);
    if (s.state != kActive || !s.depth) return; // inside a hook (a handler), off, or nothing open
    uintptr_t mangled = uintptr_t(env->__jmpbuf[6]), guard;
    __asm__("mov %%fs:0x30, %0" : "=r"(guard));
    uintptr_t target = ((mangled >> 17) | (mangled << 47)) ^ guard;
    auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    if (target <= here || target - here >= kSameStack) return;
    s.state = kBusy;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // Frames deeper than the recorded depth limit are below the recorded ones.
    if (s.overflow && s.overflow_cfa < target) s.overflow = 0;
    uint32_t n = 0;
    while (n < s.depth && s.frames[s.depth - 1 - n].cfa < target) ++n;
    if (s.counting) { // frames are popped, no record
        s.depth -= n;
        s.state = kActive;
        return;
    }
    uint64_t now = now_ticks();
    if (n && ensure(s, now)) {
        write_abandon(s, n, now);
        commit(s.w);
    }
    s.state = kActive;
#else
    (void)env;
#endif
}

} // namespace

PROF_NOINSTR void resolve_longjmp() {
    real_jump(g_longjmp, "longjmp");
    real_jump(g_underscore_longjmp, "_longjmp");
    real_jump(g_siglongjmp, "siglongjmp");
    real_jump(g_longjmp_chk, "__longjmp_chk");
}

} // namespace prof::rt

extern "C" void __longjmp_chk(struct __jmp_buf_tag* env, int val) __attribute__((noreturn));

namespace {

// Every variant: close what the jump leaves, then make it with the C library's function.
[[noreturn]] PROF_NOINSTR void jump(prof::rt::LongjmpFn& fn, const char* name,
                                    struct __jmp_buf_tag* env, int val) {
    prof::rt::close_frames_below(env);
    if (prof::rt::LongjmpFn real = prof::rt::real_jump(fn, name)) real(env, val);
    abort(); // no C library to jump with
}

} // namespace

extern "C" PROF_NOINSTR __attribute__((visibility("default"))) void
longjmp(struct __jmp_buf_tag env[1], int val) noexcept {
    jump(g_longjmp, "longjmp", env, val);
}

extern "C" PROF_NOINSTR __attribute__((visibility("default"))) void
_longjmp(struct __jmp_buf_tag env[1], int val) noexcept {
    jump(g_underscore_longjmp, "_longjmp", env, val);
}

extern "C" PROF_NOINSTR __attribute__((visibility("default"))) void
siglongjmp(struct __jmp_buf_tag env[1], int val) noexcept {
    jump(g_siglongjmp, "siglongjmp", env, val);
}

// What longjmp calls become with _FORTIFY_SOURCE.
extern "C" PROF_NOINSTR __attribute__((visibility("default"))) void
__longjmp_chk(struct __jmp_buf_tag* env, int val) {
    jump(g_longjmp_chk, "__longjmp_chk", env, val);
}
