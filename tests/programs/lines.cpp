// Test program for the line/scope layer. Exact hits (n = 1000 per call, 2 worker threads and
// the main thread each call branchy(1000) once, so 3 calls):
//   the `s += i` line        3000 hits
//   the `s ^= 1` line        1002 hits (i % 3 == 0: 334 per call)
//   the line with two marks  6000 hits (3000 per statement; both statements on one line)
//   branchy's PROF_FUNCTION     3 hits
//   the sleeping line           5 hits, ~50 ms
//   scopes: outer 1, inner 1 (inside outer), in nested(), which main calls once
// Prints a checksum (compared with a -DPROF_DISABLE build); sleepy()'s wall time: main.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <prof/prof.hpp>
#include <thread>

__attribute__((noinline)) int branchy(int n) {
    PROF_FUNCTION();
    int s = 0;
    for (int i = 0; i < n; ++i) {
        PROF_LINE(s += i);
        if (i % 3 == 0) {
            PROF_LINE(s ^= 1);
        }
        PROF_LINE(int twice = i * 2); PROF_LINE(s += twice); // a declaration stays visible
    }
    return s;
}

__attribute__((noinline)) void sleepy() {
    for (int i = 0; i < 5; ++i) {
        PROF_LINE(std::this_thread::sleep_for(std::chrono::milliseconds(10)));
    }
}

__attribute__((noinline)) long busy(int n) {
    long x = 0;
    for (int i = 0; i < n; ++i) x += i * 7 % 13;
    return x;
}

__attribute__((noinline)) long nested() {
    PROF_SCOPE("outer");
    long r = busy(1000);
    {
        PROF_SCOPE("inner");
        r += busy(100000);
    }
    return r;
}

int parked(const char* mode); // `lines parked`: at the end of the file

int main(int argc, char** argv) {
    if (argc > 1) return parked(argv[1]);
    int a = 0, b = 0;
    std::thread t1([&] { a = branchy(1000); });
    std::thread t2([&] { b = branchy(1000); });
    t1.join();
    t2.join();
    int c = branchy(1000);
    // With TEST_TIME_SLEEPS set, the sleeping loop's own wall time goes to stderr: the bound
    // of its line's time in the trace, however late a loaded machine wakes the sleeps.
    auto before = std::chrono::steady_clock::now();
    sleepy();
    auto slept = std::chrono::steady_clock::now() - before;
    if (std::getenv("TEST_TIME_SLEEPS"))
        std::fprintf(stderr, "sleepy_ns=%lld\n",
                     static_cast<long long>(
                         std::chrono::duration_cast<std::chrono::nanoseconds>(slept).count()));
    long n = nested();
    std::printf("%d %d %d %ld\n", a, b, c, n);
    return 0;
}

// `lines parked`: a thread still running when the process exits. Its 777 hits must be in the
// trace (the finish collects the line sums of running threads).
#include <atomic>
#include <cstring>
#include <unistd.h>

std::atomic<bool> g_parked{false};

int parked(const char* mode) {
    if (std::strcmp(mode, "parked") != 0) return 2;
    std::thread([] {
        long s = 0;
        for (int i = 0; i < 777; ++i) {
            PROF_LINE(s += i);
        }
        std::printf("%ld\n", s);
        g_parked.store(true);
        for (;;) pause();
    }).detach();
    while (!g_parked.load()) std::this_thread::yield();
    return 0;
}
