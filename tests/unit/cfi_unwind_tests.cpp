// The memory profiler's DWARF unwinder (libprof/runtime/cfi_unwind.cpp, compiled into this test:
// the runtime's symbols are hidden) against libgcc's _Unwind_Backtrace, called from the same
// place: the same return addresses, the same count, on code built with -fomit-frame-pointer
// (frames of several sizes, rbp kept as an ordinary saved register, alloca frames whose CFA is
// rbp-based, a shared library), on a second thread, from a signal handler (left to libgcc) and
// across dlclose (cached rules of the unloaded library must not be used).
//
// Built twice more with CFI_TEST_LIB_FRAME defined, as two shared libraries whose one function
// has the same code but a different frame size (tests/CMakeLists.txt).
#ifdef CFI_TEST_LIB_FRAME

#include <cstddef>
#include <cstdint>

// Writes a pattern over the frame's buffer. noipa: no copy specialised for either size, so
// that both libraries have the same code layout.
__attribute__((noipa)) void cfi_lib_fill(volatile char* p, int n) {
    for (int i = 0; i < n; ++i) p[i] = 0x11;
}

extern "C" __attribute__((visibility("default"), noinline)) int cfi_lib_call(int (*fn)(void*),
                                                                             void* arg) {
    volatile char frame[CFI_TEST_LIB_FRAME];
    cfi_lib_fill(frame, CFI_TEST_LIB_FRAME);
    int r = fn(arg);
    return r + frame[0];
}

// An alloca frame in the library: its CFA is rbp-based.
extern "C" __attribute__((visibility("default"), noinline)) int cfi_lib_alloca(int (*fn)(void*),
                                                                               void* arg, int n) {
    auto* p = static_cast<volatile char*>(__builtin_alloca(std::size_t(n) * 16 + 8));
    p[0] = char(n);
    int r = fn(arg);
    return r + p[0];
}

#else

#include "runtime/cfi_unwind.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <thread>
#include <unistd.h>
#include <unwind.h>
#include <vector>

extern "C" void* __libc_stack_end;

using prof::rt::cfi_backtrace;

namespace {

constexpr uint32_t kMax = 64;

// The highest address of the calling thread's stack, as the memory core computes it.
uintptr_t stack_top() {
    if (getpid() == gettid()) return reinterpret_cast<uintptr_t>(__libc_stack_end) + 4096;
    pthread_attr_t attr;
    uintptr_t top = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void* addr = nullptr;
        size_t size = 0;
        if (pthread_attr_getstack(&attr, &addr, &size) == 0)
            top = reinterpret_cast<uintptr_t>(addr) + size;
        pthread_attr_destroy(&attr);
    }
    return top;
}

struct Capture {
    uint32_t skip = 0, max = kMax;
    uint32_t extra = 0;   // more bytes for alloca frames: the same frames, another layout
    bool fill_ra = false; // alloca frames fill their buffer with their own return address
    uintptr_t top = 0;
    uintptr_t ours[kMax] = {};
    int n_ours = 0;
    uintptr_t gcc[kMax] = {};
    int n_gcc = 0;

    std::vector<uintptr_t> ours_list() const {
        return n_ours < 0 ? std::vector<uintptr_t>{} : std::vector<uintptr_t>(ours, ours + n_ours);
    }
    std::vector<uintptr_t> gcc_list() const { return {gcc, gcc + n_gcc}; }
};

struct GccState {
    Capture* c;
    uint32_t skip;
};

_Unwind_Reason_Code gcc_one(_Unwind_Context* ctx, void* arg) {
    auto* st = static_cast<GccState*>(arg);
    uintptr_t ip = _Unwind_GetIP(ctx);
    if (!ip) return _URC_END_OF_STACK;
    if (st->skip)
        --st->skip;
    else
        st->c->gcc[st->c->n_gcc++] = ip;
    return uint32_t(st->c->n_gcc) < st->c->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}

// Both unwinders from here, each skipping this function's own frame (their return addresses
// into it differ) plus `skip`: the first address is the return address into our caller.
__attribute__((noinline)) void capture(Capture& c) {
    if (!c.top) c.top = stack_top();
    c.n_ours = cfi_backtrace(c.ours, c.max, c.skip + 1, c.top);
    GccState st{&c, c.skip + 1};
    c.n_gcc = 0;
    _Unwind_Backtrace(gcc_one, &st);
}

// A chain of frames of different shapes, `depth` deep, ending in capture(). The file is built
// -O2 -fomit-frame-pointer -fno-optimize-sibling-calls.
__attribute__((noinline)) int step(int depth, Capture& c);

__attribute__((noinline)) int small_frame(int depth, Capture& c) {
    volatile int x = depth;
    return step(depth - 1, c) + x;
}

__attribute__((noinline)) int big_frame(int depth, Capture& c) {
    volatile char buf[3000];
    buf[depth] = char(depth);
    return step(depth - 1, c) + buf[depth];
}

// Alloca: the CFA is rbp + offset here, even without frame pointers elsewhere.
__attribute__((noinline)) int alloca_frame(int depth, Capture& c) {
    size_t size = size_t(depth) * 32 + 16 + c.extra;
    auto* p = static_cast<volatile char*>(__builtin_alloca(size));
    if (c.fill_ra) { // where a walk that assumed the previous layout would look for it
        auto ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
        for (size_t i = 0; i + 8 <= size; i += 8)
            *reinterpret_cast<volatile uintptr_t*>(p + i) = ra;
    }
    p[0] = char(depth);
    return step(depth - 1, c) + p[0];
}

// Enough values live across the call that rbp is saved and used as an ordinary register.
__attribute__((noinline)) int many_registers(int depth, Capture& c) {
    volatile int v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int a = v[0], b = v[1], d = v[2], e = v[3], f = v[4], g = v[5], h = v[6], i = v[7];
    int r = step(depth - 1, c);
    return r + a * b + d * e + f * g + h * i + a * i + b * h;
}

__attribute__((noinline)) int step(int depth, Capture& c) {
    if (depth <= 0) {
        capture(c);
        return 0;
    }
    switch (depth % 4) {
    case 0:
        return small_frame(depth, c);
    case 1:
        return big_frame(depth, c);
    case 2:
        return alloca_frame(depth, c);
    default:
        return many_registers(depth, c);
    }
}

void check_same(const Capture& c) {
    REQUIRE(c.n_ours >= 0);
    CHECK(c.ours_list() == c.gcc_list());
}

// The two test libraries (same code, frames of 256 and 2048 bytes), loaded with dlopen.
struct Library {
    void* handle = nullptr;
    int (*call)(int (*)(void*), void*) = nullptr;
    int (*call_alloca)(int (*)(void*), void*, int) = nullptr;

    explicit Library(const char* path) {
        handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        REQUIRE(handle);
        call = reinterpret_cast<decltype(call)>(dlsym(handle, "cfi_lib_call"));
        call_alloca = reinterpret_cast<decltype(call_alloca)>(dlsym(handle, "cfi_lib_alloca"));
        REQUIRE(static_cast<bool>(call));
        REQUIRE(static_cast<bool>(call_alloca));
    }
    ~Library() { dlclose(handle); }
    Library(const Library&) = delete;
    Library& operator=(const Library&) = delete;
};

struct Callback {
    Capture* c;
    int depth;
};

int from_library(void* arg) {
    auto* cb = static_cast<Callback*>(arg);
    return step(cb->depth, *cb->c);
}

// A capture two frames below the library's cfi_lib_call.
Capture through(Library& lib) {
    Capture c;
    Callback cb{&c, 2};
    lib.call(from_library, &cb);
    return c;
}

// The return address into the test library's cfi_lib_call, among libgcc's addresses.
uintptr_t address_in(const Capture& c, const Library& lib) {
    Dl_info own, info;
    REQUIRE(dladdr(reinterpret_cast<void*>(lib.call), &own));
    for (int i = 0; i < c.n_gcc; ++i)
        if (dladdr(reinterpret_cast<void*>(c.gcc[i]), &info) && info.dli_fbase == own.dli_fbase)
            return c.gcc[i];
    return 0;
}

int handler_depth = 0;
Capture* handler_capture = nullptr;

void on_signal(int) {
    step(handler_depth, *handler_capture);
}

} // namespace

TEST_CASE("cfi unwinder: the same stacks as _Unwind_Backtrace at every depth") {
    for (int depth = 0; depth <= 24; ++depth) {
        CAPTURE(depth);
        std::vector<uintptr_t> first;
        for (int round = 0; round < 2; ++round) { // one call site: the same stack twice
            uint64_t slow = prof::rt::cfi_slow_lookups();
            Capture c;
            step(depth, c);
            check_same(c);
            CHECK(c.n_gcc >= depth + 3); // the chain, the test runner, main, _start...
            if (round == 0) {
                first = c.ours_list();
            } else { // the second time, every rule comes from the cache
                CHECK(c.ours_list() == first);
                CHECK(prof::rt::cfi_slow_lookups() == slow);
            }
        }
    }
}

TEST_CASE("cfi unwinder: skipped frames and the frame limit as with _Unwind_Backtrace") {
    for (uint32_t skip : {0u, 1u, 3u, 7u, 40u}) {
        for (uint32_t max : {1u, 2u, 5u, 64u}) {
            CAPTURE(skip);
            CAPTURE(max);
            Capture c;
            c.skip = skip;
            c.max = max;
            step(12, c);
            check_same(c);
            CHECK(uint32_t(c.n_ours) <= max);
        }
    }
    Capture deep; // deeper than the limit: 64 addresses, the outermost ones cut
    step(80, deep);
    check_same(deep);
    CHECK(deep.n_ours == int(kMax));
}

TEST_CASE("cfi unwinder: interleaved stacks that share their innermost frames") {
    // More shapes than the unwinder keeps recordings of, in turns: each walk replays part of
    // another one's frames, or parts from it (another caller, or the same frames with another
    // alloca size, so that the rbp-based frames sit elsewhere).
    for (int round = 0; round < 40; ++round) {
        for (int shape : {3, 7, 4, 11, 2, 6}) {
            CAPTURE(round);
            CAPTURE(shape);
            Capture c;
            c.skip = uint32_t(round % 3);
            c.extra = uint32_t(round % 4) * 48;
            step(shape + (round % 5 == 4 ? 4 : 0), c);
            check_same(c);
        }
    }
}

TEST_CASE("cfi unwinder: the same frames with another alloca size") {
    // The second walk has the first one's frames, but the alloca frame is larger: its return
    // address moved, and where it used to be, the buffer now holds that same address.
    for (int round = 0; round < 6; ++round) {
        CAPTURE(round);
        Capture c;
        c.fill_ra = true;
        c.extra = round % 2 ? 512 : 0;
        step(10, c);
        check_same(c);
    }
}

TEST_CASE("cfi unwinder: through a shared library built without frame pointers") {
    Library lib(CFI_TEST_LIB_A);
    for (int depth : {0, 1, 2, 5, 9}) {
        CAPTURE(depth);
        Capture c;
        Callback cb{&c, depth};
        lib.call(from_library, &cb);
        check_same(c);
        CHECK(address_in(c, lib) != 0);
        Capture a;
        Callback cba{&a, depth};
        lib.call_alloca(from_library, &cba, depth + 3);
        check_same(a);
    }
}

TEST_CASE("cfi unwinder: on a second thread, bounded by that thread's stack") {
    std::vector<Capture> results(10);
    std::thread t([&] {
        for (size_t i = 0; i < results.size(); ++i) step(int(i * 3), results[i]);
    });
    t.join();
    for (const Capture& c : results) check_same(c);
    CHECK(results[0].top != 0);
}

TEST_CASE("cfi unwinder: a signal frame is left to _Unwind_Backtrace") {
    Capture c;
    handler_capture = &c;
    handler_depth = 3;
    struct sigaction sa = {}, old = {};
    sa.sa_handler = on_signal;
    REQUIRE(sigaction(SIGUSR1, &sa, &old) == 0);
    raise(SIGUSR1);
    sigaction(SIGUSR1, &old, nullptr);
    CHECK(c.n_ours == -1);
    CHECK(c.n_gcc > 8); // through the signal frame into raise's caller
}

TEST_CASE("cfi unwinder: rules cached for a library are not used once dlclose unloaded it") {
    // The second library usually takes the first one's place, with the same code: the return
    // address into cfi_lib_call is then the same, but the frame is 2048 bytes instead of 256.
    // A stale rule would read the fill pattern as the return address.
    uintptr_t in_a = 0, in_b = 0;
    for (int round = 0; round < 3; ++round) {
        CAPTURE(round);
        {
            Library a(CFI_TEST_LIB_A);
            Capture c = through(a);
            check_same(c);
            in_a = address_in(c, a);
        }
        Library b(CFI_TEST_LIB_B); // no cfi_invalidate: the unload itself is noticed
        Capture c = through(b);
        check_same(c);
        in_b = address_in(c, b);
        CHECK(in_b != 0);
    }
    if (in_a != in_b) MESSAGE("the second library was loaded elsewhere: no stale rule to avoid");
}

TEST_CASE("cfi unwinder: a walk that ended in an unloaded library is not replayed after it") {
    // Library c has no unwind tables: walks end in it (the outermost frame, for libgcc too),
    // and the thread records such a walk. Once c is unloaded and a with its tables takes its
    // place, the same frames must not replay the old ending.
    for (int round = 0; round < 2; ++round) {
        CAPTURE(round);
        {
            Library without_tables(CFI_TEST_LIB_C);
            for (int rep = 0; rep < 2; ++rep) check_same(through(without_tables));
        }
        Library a(CFI_TEST_LIB_A);
        for (int rep = 0; rep < 2; ++rep) {
            Capture c = through(a);
            check_same(c);
            CHECK(address_in(c, a) != 0); // the walk went through a, to its callers
        }
    }
}

// Inside libgcc's unwinder (an allocation libgcc makes while it holds its lock) the unwinder
// finds FDEs itself, in the loaded objects' .eh_frame_hdr tables: the same FDE as libgcc's
// _Unwind_Find_FDE for every code address of every loaded object, gaps included.
extern "C" {
struct dwarf_eh_bases { // libgcc's unwind-dw2-fde.h (not installed)
    void* tbase;
    void* dbase;
    void* func;
};
const void* _Unwind_Find_FDE(void* pc, dwarf_eh_bases* bases);
}

namespace {
struct CodeRange {
    uintptr_t start, end;
};

int collect_code(dl_phdr_info* info, size_t, void* arg) {
    auto* out = static_cast<std::vector<CodeRange>*>(arg);
    for (unsigned i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            out->push_back(
                {info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz});
    }
    return 0;
}
} // namespace

TEST_CASE("cfi unwinder: its own FDE search finds what _Unwind_Find_FDE finds") {
    std::vector<CodeRange> code;
    dl_iterate_phdr(collect_code, &code);
    REQUIRE(code.size() >= 4); // this program, libstdc++, libgcc_s, libc at least
    uint64_t compared = 0, found = 0, differ = 0;
    for (const CodeRange& r : code) {
        for (uintptr_t pc = r.start; pc < r.end; pc += 7) { // odd step: every alignment
            dwarf_eh_bases bases{};
            const void* theirs = _Unwind_Find_FDE(reinterpret_cast<void*>(pc), &bases);
            const void* ours = prof::rt::cfi_fde_from_tables(pc);
            ++compared;
            found += theirs != nullptr;
            if (ours != theirs && ++differ <= 5) {
                Dl_info where{};
                dladdr(reinterpret_cast<void*>(pc), &where);
                MESSAGE(std::string(where.dli_fname ? where.dli_fname : "?")
                        << "+0x" << std::hex << (pc - reinterpret_cast<uintptr_t>(where.dli_fbase))
                        << ": libgcc " << theirs << ", ours " << ours);
            }
        }
    }
    CHECK(differ == 0);
    CHECK(found > compared / 2);                             // most code has unwind information
    CHECK(prof::rt::cfi_fde_from_tables(0x1000) == nullptr); // in no object
}

TEST_CASE("cfi unwinder: cfi_invalidate drops every cached rule") {
    for (int round = 0; round < 3; ++round) {
        CAPTURE(round);
        if (round == 2) prof::rt::cfi_invalidate();
        uint64_t slow = prof::rt::cfi_slow_lookups();
        Capture c;
        step(6, c);
        check_same(c);
        if (round == 1) CHECK(prof::rt::cfi_slow_lookups() == slow); // all cached
        if (round == 2) CHECK(prof::rt::cfi_slow_lookups() > slow);  // parsed again
    }
}

#endif
