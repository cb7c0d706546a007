// Test program: a JIT registers the unwind information of its generated code with
// __register_frame, then the program throws. libgcc sorts the registered tables at the first
// unwind that searches them, and allocates for that while it holds its object lock; a memory
// profiler that unwinds that allocation with libgcc would wait for the lock forever.
// Then allocates 4 x 700 bytes in jit_after (freed), and prints what it caught.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

extern "C" void __register_frame(void*);
extern "C" void __deregister_frame(void*);

// .eh_frame of a 16-byte function at 0x1000: a CIE (version 1, "zR", code align 1, data align
// -8, return address column 16, absolute pointers, CFA = rsp + 8, RA at CFA - 8), one FDE,
// and the zero terminator.
alignas(8) static unsigned char jit_eh_frame[64] = {
    20, 0,    0,  0, 0, 0,  0, 0, 1, 'z', 'R', 0, 1, 0x78, 16,   1, 0, 0x0c, 7,
    8,  0x90, 1,  0, 0, 28, 0, 0, 0, 28,  0,   0, 0, 0,    0x10, 0, 0, 0,    0,
    0,  0,    16, 0, 0, 0,  0, 0, 0, 0,   0,   0, 0, 0,    0,    0, 0, 0};

__attribute__((noinline)) void jit_throw(int i) {
    throw std::runtime_error(i ? "again" : "first");
}

__attribute__((noinline)) void jit_after() {
    for (int i = 0; i < 4; ++i) {
        void* volatile p = malloc(700);
        free(p);
    }
}

int main() {
    int caught = 0;
    for (int i = 0; i < 3; ++i) {
        // The first throw comes before the registration: the profiler has seen its stacks.
        if (i == 1) __register_frame(jit_eh_frame);
        try {
            jit_throw(i);
        } catch (const std::exception&) {
            ++caught;
        }
    }
    jit_after();
    __deregister_frame(jit_eh_frame);
    std::printf("caught %d\n", caught);
    return caught == 3 ? 0 : 1;
}
