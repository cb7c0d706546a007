// Test program for crash survival. `crasher run`: calls work() forever and, after every 1000
// calls, prints how many calls have completed (so whoever kills it knows a lower bound of
// what the trace must hold). `crasher segv N` / `crasher abort N`: N calls of work(), then a
// crash. `crasher oom`: like `run`, and also allocates and touches 256 KiB (never freed) after
// every 1000 calls, until a memory limit has the kernel's OOM killer end it. The trace must
// hold every completed call in all cases.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

static volatile long g_sum;

__attribute__((noinline)) void work(int i) { g_sum = g_sum + i; }

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "run";
    long n = argc > 2 ? std::atol(argv[2]) : 0;
    bool oom = std::strcmp(mode, "oom") == 0;
    if (oom || std::strcmp(mode, "run") == 0) {
        for (long i = 1;; ++i) {
            work(int(i));
            if (i % 1000 == 0) {
                std::printf("%ld\n", i);
                std::fflush(stdout);
                if (oom) std::memset(std::malloc(256 * 1024), 1, 256 * 1024);
            }
        }
    }
    for (long i = 0; i < n; ++i) work(int(i));
    if (std::strcmp(mode, "segv") == 0) std::raise(SIGSEGV);
    std::abort();
}
