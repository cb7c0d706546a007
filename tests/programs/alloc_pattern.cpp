// Test program for the memory profiler (run unmodified under libprofmem.so). Every entry point
// is called a known number of times from pattern(), on two threads:
//   per thread 35 allocation calls and 33 release calls; every block is released right after
//   its allocation, so 34 are temporary (the 33 freed ones and the block realloc moved, as
//   heaptrack counts it), and leaky() leaks 1000 bytes once.
//   The main thread adds two mismatches: new/free and new[]/delete (2 calls, 2 temporary).
// `alloc_pattern fork`: the child process allocates 2 blocks in child_allocs() (freed).
// Built with frame pointers so that stacks name pattern() and leaky().
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <new>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

// Every pointer escapes through here, so the compiler cannot elide an allocation/free pair.
static void* volatile g_escape;
template <typename T>
__attribute__((noinline)) T* use(T* p) {
    g_escape = p;
    return p;
}

__attribute__((noinline)) void leaky() { use(std::malloc(1000)); }

// Bytes requested per call of pattern(): see kPatternBytes below.
__attribute__((noinline)) void pattern() {
    for (int i = 0; i < 10; ++i) std::free(use(std::malloc(100)));          // 10 x 100
    for (int i = 0; i < 5; ++i) std::free(use(std::calloc(10, 8)));         // 5 x 80
    void* r = use(std::realloc(nullptr, 50));                               // 50
    r = use(std::realloc(r, 500));                                         // 500
    std::free(r);
    std::free(use(reallocarray(nullptr, 4, 25)));                           // 100
    for (int i = 0; i < 2; ++i) {
        void* p = nullptr;
        if (posix_memalign(&p, 64, 256) == 0) std::free(use(p));            // 2 x 256
    }
    for (int i = 0; i < 2; ++i) std::free(use(std::aligned_alloc(64, 128))); // 2 x 128
    std::free(use(memalign(32, 64)));                                       // 64
    std::free(use(valloc(100)));                                            // 100
    std::free(use(pvalloc(100)));                                           // 100
    for (int i = 0; i < 3; ++i) delete use(new int(i));                     // 3 x 4
    for (int i = 0; i < 2; ++i) delete[] use(new int[10]);                  // 2 x 40
    delete use(new (std::nothrow) int(7));                                  // 4
    delete[] use(new (std::nothrow) int[10]);                               // 40
    ::operator delete(use(::operator new(64, std::align_val_t(64))), std::align_val_t(64));     // 64
    ::operator delete[](use(::operator new[](128, std::align_val_t(64))), std::align_val_t(64)); // 128
    leaky();                                                           // 1000, never freed
}

constexpr unsigned long kPatternBytes = 1000 + 400 + 50 + 500 + 100 + 512 + 256 + 64 + 100 +
                                        100 + 12 + 80 + 4 + 40 + 64 + 128 + 1000;

__attribute__((noinline)) void mismatches() {
    std::free(use(::operator new(8))); // new / free
    ::operator delete(use(::operator new[](16))); // new[] / delete
}

__attribute__((noinline)) void child_allocs() {
    std::free(use(std::malloc(10)));
    std::free(use(std::malloc(20)));
}

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            child_allocs();
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        std::printf("child %d\n", WEXITSTATUS(status));
        return 0;
    }
    std::thread a(pattern), b(pattern);
    a.join();
    b.join();
    mismatches();
    std::printf("pattern bytes %lu\n", kPatternBytes);
    return 0;
}
