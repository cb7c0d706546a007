// Test program for the views: function names that break markup when not escaped. Operators
// (`operator<`, `operator&`, `operator"" _kib`), a template whose name holds <, > and &, and a
// PROF_SCOPE label, which is any string: here one that would end a script element, open a
// tag, close a CDATA section and break JSON. Each runs a known number of times; two threads.
#include <prof/prof.hpp>

#include <cstdio>
#include <thread>

namespace odd {
struct V {
    int x;
};
__attribute__((noinline)) bool operator<(V a, V b) {
    return a.x < b.x;
}
__attribute__((noinline)) V operator&(V a, V b) {
    return V{a.x & b.x};
}
__attribute__((noinline)) unsigned long long operator"" _kib(unsigned long long n) {
    return n * 1024;
}
template <typename T>
struct Box {
    T v;
};
template <typename T>
__attribute__((noinline)) int unbox(const Box<T>& b) {
    return int(b.v);
}
} // namespace odd

__attribute__((noinline)) int hostile_scope(int i) {
    PROF_SCOPE("</script><script>alert(1)</script> ]]> \"q\" & <b>");
    return i * 3;
}

__attribute__((noinline)) int worker(int n) {
    using namespace odd;
    int s = 0;
    for (int i = 0; i < n; ++i) {
        volatile int k = i;
        if (V{k} < V{3}) ++s; // operator<: n calls
        s += (V{k} & V{1}).x; // operator&: n calls
        int r = k;
        Box<int&> box{r};
        s += unbox(box);       // unbox<int&>: n calls
        s += hostile_scope(k); // the scope: n activations
    }
    return s + int(4_kib); // operator"": once
}

int main() {
    int a = 0, b = 0;
    std::thread t([&] { b = worker(200); });
    a = worker(100);
    t.join();
    std::printf("%d\n", a + b);
    return 0;
}
