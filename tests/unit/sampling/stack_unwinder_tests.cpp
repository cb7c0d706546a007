// The sampler's stack unwinder (sampling::StackUnwinder) over stacks recorded from this test
// binary: registers and a copy of the stack taken in a known chain of calls, then unwound with
// the binaries' .eh_frame as perf samples are, the frames checked against the return addresses
// the calls recorded themselves.
#include "sampling/stack_unwinder.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <link.h>
#include <pthread.h>
#include <string>
#include <vector>

using namespace prof::sampling;

namespace {

// A recorded sample: the registers perf takes (ip, sp, bp) and the stack from sp up to `top`,
// plus the return address each call of the chain saw (innermost first).
struct Recorded {
    uint64_t ip = 0, sp = 0, bp = 0;
    std::vector<uint8_t> stack;
    std::vector<uint64_t> returns;
};

Recorded g_recorded;
uintptr_t g_top = 0; // where the copy ends: the frame of the chain's caller
uint64_t g_return_level1 = 0, g_return_level2 = 0;

// A sampler's stack copy reads whole frames, padding included, as the kernel does: ASan's stack
// redzones are part of what it copies, so the copy is not instrumented.
__attribute__((no_sanitize_address, noinline)) void copy_stack(uintptr_t from, uintptr_t to,
                                                                std::vector<uint8_t>& out) {
    out.resize(to - from);
    const volatile uint8_t* src = reinterpret_cast<const volatile uint8_t*>(from);
    for (size_t i = 0; i < out.size(); ++i) out[i] = src[i];
}

// The innermost frame: registers and stack copy at one instruction, as a sampling interrupt
// would see them. Its own return address closes the list.
__attribute__((noinline)) void record_here() {
    uint64_t ip, sp, bp;
    asm volatile("lea 0(%%rip), %0\n\t"
                 "mov %%rsp, %1\n\t"
                 "mov %%rbp, %2"
                 : "=r"(ip), "=r"(sp), "=r"(bp));
    g_recorded.ip = ip;
    g_recorded.sp = sp;
    g_recorded.bp = bp;
    copy_stack(sp, g_top, g_recorded.stack);
    g_recorded.returns = {uint64_t(reinterpret_cast<uintptr_t>(__builtin_return_address(0))),
                          g_return_level2, g_return_level1};
    asm volatile("" ::: "memory");
}

// Two frames of different sizes between the caller and the recording; the empty asm after
// each call keeps it a call (no tail call).
__attribute__((noinline)) void level2(int n) {
    volatile char pad[96];
    pad[n % 96] = char(n);
    g_return_level2 = uint64_t(reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
    record_here();
    asm volatile("" ::"r"(pad) : "memory");
}

__attribute__((noinline)) void level1(int n) {
    volatile char pad[320];
    pad[n % 320] = char(n);
    g_return_level1 = uint64_t(reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
    level2(n + 1);
    asm volatile("" ::"r"(pad) : "memory");
}

// Records from inside level1 -> level2 -> record_here, the copy ending at this frame's
// frame address: the caller's own return address lies beyond it.
__attribute__((noinline)) Recorded record_chain() {
    g_top = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    level1(7);
    asm volatile("" ::: "memory");
    return g_recorded;
}

// The loaded object holding an address: its path and load base (dl_iterate_phdr).
struct Object {
    std::string path;
    uint64_t base = 0;
};

bool object_at(uint64_t pc, Object& out) {
    struct Query {
        uint64_t pc;
        Object* out;
        bool found;
    } q{pc, &out, false};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            auto* q = static_cast<Query*>(data);
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const auto& ph = info->dlpi_phdr[i];
                uint64_t start = info->dlpi_addr + ph.p_vaddr;
                if (ph.p_type != PT_LOAD || q->pc < start || q->pc - start >= ph.p_memsz) continue;
                q->out->base = info->dlpi_addr;
                q->out->path = info->dlpi_name[0] ? info->dlpi_name : "/proc/self/exe";
                q->found = true;
                return 1;
            }
            return 0;
        },
        &q);
    return q.found;
}

struct Modules {
    StackUnwinder unwinder;
    const UnwindModule* at(uint64_t pc) {
        Object o;
        if (!object_at(pc, o)) return nullptr;
        return unwinder.module(o.path, o.base);
    }
};

UnwindResult unwind(Modules& modules, const Recorded& r, size_t size, uint32_t max,
                    std::vector<uint64_t>& pcs) {
    return modules.unwinder.unwind(
        r.ip, r.sp, r.bp, r.stack.data(), size, [&](uint64_t pc) { return modules.at(pc); }, pcs,
        max);
}

} // namespace

TEST_CASE("stack unwinder: a recorded stack of this binary unwinds to the calls' own returns") {
    Recorded r = record_chain();
    REQUIRE(r.stack.size() > 320 + 96);
    Modules modules;
    std::vector<uint64_t> pcs;
    // The walk passes record_here, level2 and level1; record_chain's return address lies
    // beyond the copy, so it ends there, partial.
    CHECK(unwind(modules, r, r.stack.size(), 64, pcs) == UnwindResult::kPartial);
    std::vector<uint64_t> expected{r.ip};
    expected.insert(expected.end(), r.returns.begin(), r.returns.end());
    CHECK(pcs == expected);
}

TEST_CASE("stack unwinder: the frame limit, a short copy and an unknown module end the walk") {
    Recorded r = record_chain();
    Modules modules;
    std::vector<uint64_t> pcs;
    CHECK(unwind(modules, r, r.stack.size(), 2, pcs) == UnwindResult::kPartial);
    CHECK(pcs == std::vector<uint64_t>{r.ip, r.returns[0]});

    // No stack bytes: the first return address cannot be read.
    pcs.clear();
    CHECK(unwind(modules, r, 0, 64, pcs) == UnwindResult::kPartial);
    CHECK(pcs == std::vector<uint64_t>{r.ip});

    // No tables for the first address: not even one frame.
    pcs.clear();
    CHECK(modules.unwinder.unwind(
              r.ip, r.sp, r.bp, r.stack.data(), r.stack.size(),
              [](uint64_t) -> const UnwindModule* { return nullptr; }, pcs,
              64) == UnwindResult::kNone);
    CHECK(pcs == std::vector<uint64_t>{r.ip});

    // A missing file has no tables.
    CHECK(modules.unwinder.module("/nonexistent/binary", 0x1000) == nullptr);
}

namespace {

struct ThreadRecord {
    Recorded r;
    uint64_t thread_return = 0; // the return address of the thread's start function
};

ThreadRecord g_thread;

__attribute__((noinline)) void* thread_main(void*) {
    g_thread.thread_return = uint64_t(reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
    level1(3);
    asm volatile("" ::: "memory");
    g_thread.r = g_recorded;
    return nullptr;
}

} // namespace

TEST_CASE("stack unwinder: a whole thread's stack unwinds to its first frame in libc") {
    // The copy runs to the top of the thread's stack, so the walk goes through libc's
    // start_thread and ends at the outermost frame its tables mark (clone3's).
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    static std::vector<uint8_t> thread_stack(256 * 1024);
    pthread_attr_setstack(&attr, thread_stack.data(), thread_stack.size());
    g_top = reinterpret_cast<uintptr_t>(thread_stack.data() + thread_stack.size());
    pthread_t t;
    REQUIRE(pthread_create(&t, &attr, thread_main, nullptr) == 0);
    pthread_join(t, nullptr);
    pthread_attr_destroy(&attr);
    const Recorded& r = g_thread.r;
    Modules modules;
    std::vector<uint64_t> pcs;
    CHECK(unwind(modules, r, r.stack.size(), 64, pcs) == UnwindResult::kComplete);
    // glibc: start_thread calls the start function, and clone3 start_thread.
    REQUIRE(pcs.size() == 6);
    std::vector<uint64_t> expected{r.ip};
    expected.insert(expected.end(), r.returns.begin(), r.returns.end());
    expected.push_back(g_thread.thread_return);
    CHECK(std::vector<uint64_t>(pcs.begin(), pcs.begin() + 5) == expected);
    // Below the start function, libc's two frames.
    Object libc, outer;
    REQUIRE(object_at(g_thread.thread_return, libc));
    for (size_t i = 5; i < pcs.size(); ++i) {
        REQUIRE(object_at(pcs[i], outer));
        CHECK(outer.path == libc.path);
    }
    CHECK(libc.path.find("libc.so") != std::string::npos);
}
