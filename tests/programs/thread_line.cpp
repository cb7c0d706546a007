// Test program: a PROF_LINE inside a PROF_SCOPE on one source line, in a thread. Each mode
// runs the line's statement (a 30 ms nap) a known number of times:
//   join      one thread, joined                              1 hit
//   detached  one thread that ends without a join              1 hit
//   several   three threads, each running the line once        3 hits
//   main      the same line in the main thread                 1 hit
//   fork      the child runs the thread, the parent does not   1 hit (child's trace)
//   apart     the scope and the line on two source lines       1 hit each
// With TEST_TIME_SLEEPS set, the wall time of the scopes (measured around them, summed over
// threads) goes to stderr as naps_ns: the bound of the line's time in the trace.
#include <prof/prof.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

std::atomic<long long> g_napped{0};
std::atomic<int> g_done{0};

__attribute__((noinline)) void nap(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Runs f, its wall time added to g_napped: a measure that contains the scope f opens.
template <class F>
void timed(F f) {
    auto before = std::chrono::steady_clock::now();
    f();
    g_napped += std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - before)
                    .count();
}

// Each scope and its line stay on one source line.
// clang-format off
void one_thread() {
    std::thread t([] { timed([] { PROF_SCOPE("side"); PROF_LINE(nap(30)); }); });
    t.join();
}
// clang-format on

void report() {
    if (std::getenv("TEST_TIME_SLEEPS"))
        std::fprintf(stderr, "naps_ns=%lld\n", static_cast<long long>(g_napped.load()));
}

} // namespace

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "join";
    if (std::strcmp(mode, "join") == 0) {
        one_thread();
    } else if (std::strcmp(mode, "detached") == 0) {
        // clang-format off
        std::thread([] { timed([] { PROF_SCOPE("side"); PROF_LINE(nap(30)); }); g_done = 1; })
            .detach();
        // clang-format on
        while (g_done.load() == 0) std::this_thread::yield();
    } else if (std::strcmp(mode, "several") == 0) {
        std::vector<std::thread> ts;
        // clang-format off
        for (int i = 0; i < 3; ++i)
            ts.emplace_back([] { timed([] { PROF_SCOPE("side"); PROF_LINE(nap(30)); }); });
        // clang-format on
        for (auto& t : ts) t.join();
    } else if (std::strcmp(mode, "main") == 0) {
        // clang-format off
        timed([] { PROF_SCOPE("side"); PROF_LINE(nap(30)); });
        // clang-format on
    } else if (std::strcmp(mode, "fork") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            one_thread();
            report();
            std::exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    } else if (std::strcmp(mode, "apart") == 0) {
        std::thread t([] {
            timed([] {
                PROF_SCOPE("side");
                PROF_LINE(nap(30));
            });
        });
        t.join();
    } else {
        return 2;
    }
    report();
    std::printf("done\n");
    return 0;
}
