// Test program: operator new and delete with std::align_val_t, released by the matching form
// and by a form of another alignment (undefined behaviour that glibc's allocator happens to
// survive: libstdc++'s aligned forms allocate with aligned_alloc and release with free).
#include <cstdio>
#include <new>

static void* volatile g_sink; // every block is used: no allocation is optimized away

struct alignas(128) Wide {
    char bytes[256];
};

__attribute__((noinline)) static void matched() {
    for (int i = 0; i < 4; ++i) {
        void* p = ::operator new(100, std::align_val_t(64));
        g_sink = p;
        ::operator delete(p, std::align_val_t(64));
    }
    void* q = ::operator new(48, std::align_val_t(256));
    g_sink = q;
    ::operator delete(q, 48, std::align_val_t(256)); // the sized form
    for (int i = 0; i < 5; ++i) {
        Wide* w = new Wide[2]; // new[](size, std::align_val_t(128)) and its delete[]
        g_sink = w;
        delete[] w;
    }
}

__attribute__((noinline)) static void aligned_then_plain() {
    for (int i = 0; i < 3; ++i) {
        void* p = ::operator new(100, std::align_val_t(64));
        g_sink = p;
        ::operator delete(p);
    }
}

__attribute__((noinline)) static void plain_then_aligned() {
    for (int i = 0; i < 2; ++i) {
        void* p = ::operator new(100);
        g_sink = p;
        ::operator delete(p, std::align_val_t(32));
    }
}

int main() {
    matched();
    aligned_then_plain();
    plain_then_aligned();
    std::puts("done");
    return 0;
}
