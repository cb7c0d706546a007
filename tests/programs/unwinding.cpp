// Test program: exceptions crossing instrumented frames and longjmp out of nested frames.
// After both, the call tree must stay balanced: every frame closed, callees never longer than
// their callers, and the functions called afterwards attributed to main, not to dead frames.
#include <csetjmp>
#include <cstdio>
#include <stdexcept>

static std::jmp_buf g_jump;

__attribute__((noinline)) void thrower(int depth) {
    if (depth == 0) throw std::runtime_error("deep");
    thrower(depth - 1);
}

__attribute__((noinline)) void catcher() {
    try {
        thrower(5); // 6 calls of thrower, all left by the exception
    } catch (const std::exception&) {
    }
}

__attribute__((noinline)) void jumper(int depth) {
    if (depth == 0) std::longjmp(g_jump, 1);
    jumper(depth - 1);
}

__attribute__((noinline)) void after_jump() {} // must be a callee of main, not of jumper

// Inlined into main: GCC still calls its hooks, from main's own frame (same CFA). It must nest
// inside main, not end main's frame.
static inline __attribute__((always_inline)) int inlined_helper(int x) { return x + 1; }

__attribute__((noinline)) void leaf() {}

__attribute__((noinline)) void jump_from_nested() {
    if (setjmp(g_jump) == 0) jumper(4); // 5 calls of jumper, all left by longjmp
}

int main() {
    volatile int v = inlined_helper(1);
    (void)v;
    for (int i = 0; i < 3; ++i) catcher();
    jump_from_nested();
    after_jump();
    v = inlined_helper(2);
    leaf();
    std::puts("done");
    return 0;
}
