// Test program for what a killed process leaves: marked lines and scope runs are counted in
// the trace as they run, so a process that dies without its finish (SIGKILL here) keeps them.
// Exact counts: the `main` line 1000000 hits, the `worker` line 5000 hits (a thread that has
// ended), the `spin` scope 1000 activations; then the process kills itself.
#include <prof/prof.hpp>

#include <csignal>
#include <thread>

int main() {
    volatile long s = 0;
    std::thread t([&] {
        for (int i = 0; i < 5000; ++i) {
            PROF_LINE(s = s + 2); // worker
        }
    });
    t.join();
    for (long i = 0; i < 1000000; ++i) {
        PROF_LINE(s = s + i); // main
    }
    for (int i = 0; i < 1000; ++i) {
        PROF_SCOPE("spin");
        s = s + 1;
    }
    std::raise(SIGKILL);
    return 0;
}
