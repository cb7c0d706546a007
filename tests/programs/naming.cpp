// Test program: functions of every kind profreport must name correctly. Built with
// -finstrument-functions but without the /usr/include exclude list, so one standard-library
// template instance is traced too. `naming exit` ends with _exit(0): no symbol table is
// written, and names must come from the binaries on disk.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

extern "C" int lib_function(int x);

namespace shapes {
struct Widget {
    explicit Widget(int v); // complete and base constructors share one address
    int value;
};
__attribute__((noinline)) Widget::Widget(int v) : value(v) {}
} // namespace shapes

__attribute__((noinline)) static int static_helper(int x) { return x + 2; }

template <typename T>
__attribute__((noinline)) T twice(T x) { return x + x; }

int main(int argc, char** argv) {
    shapes::Widget w(3);
    int s = static_helper(w.value) + lib_function(2) + twice(4);
    std::string t = twice(std::string("ab"));
    auto lambda = [](int x) { return x * 5; };
    int (*volatile call)(int) = lambda; // called through a pointer: never folded away
    s += call(1);
    s += std::max(s, 3); // a standard-library template instance
    std::printf("%d %s\n", s, t.c_str());
    if (argc > 1 && std::strcmp(argv[1], "exit") == 0) {
        std::fflush(stdout);
        _exit(0);
    }
    return 0;
}
