// Test program: blocks handed from thread to thread as fast as a queue allows. Two producers
// allocate (malloc, calloc, realloc) and queue 20000 blocks each; two consumers free them, often
// within a microsecond of their allocation, while the allocator hands the same addresses out
// again. Nothing leaks but the one block main keeps: 40000 blocks made, 40000 freed by another
// thread.
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace {

std::mutex queue_lock;
std::condition_variable ready;
std::deque<void*> queue;
int producers_left = 2;

void produce(unsigned seed) {
    for (int i = 0; i < 20000; ++i) {
        seed = seed * 1103515245 + 12345;
        size_t size = 16 + (seed >> 16) % 2000;
        void* p = i % 5 == 0 ? std::calloc(1, size) : std::malloc(size);
        if (i % 7 == 0) p = std::realloc(p, 2 * size);
        {
            std::lock_guard<std::mutex> g(queue_lock);
            queue.push_back(p);
        }
        ready.notify_one();
    }
    std::lock_guard<std::mutex> g(queue_lock);
    --producers_left;
    ready.notify_all();
}

void consume() {
    for (;;) {
        void* p;
        {
            std::unique_lock<std::mutex> g(queue_lock);
            ready.wait(g, [] { return !queue.empty() || producers_left == 0; });
            if (queue.empty()) return;
            p = queue.front();
            queue.pop_front();
        }
        std::free(p);
    }
}

} // namespace

int main() {
    std::vector<std::thread> threads;
    threads.emplace_back(produce, 1u);
    threads.emplace_back(produce, 2u);
    threads.emplace_back(consume);
    threads.emplace_back(consume);
    for (auto& t : threads) t.join();
    static void* kept = std::malloc(12345);
    std::printf("handoff %s\n", kept ? "done" : "out of memory");
}
