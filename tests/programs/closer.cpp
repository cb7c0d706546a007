// Test program: daemon-like, it closes every descriptor above stderr, then opens a file of its
// own (which gets the trace's old descriptor number) and keeps calling instrumented code, so
// the runtime needs new chunks. The runtime must notice and stop; the program's file must
// contain exactly what the program wrote.
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

static volatile long g_sink;
__attribute__((noinline)) void work(int i) { g_sink += i; }

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    for (int i = 0; i < 1000000; ++i) work(i);
    const char text[] = "the program's own data\n";
    if (write(fd, text, sizeof text - 1) != ssize_t(sizeof text - 1)) return 1;
    close(fd);
    std::printf("fd %d\n", fd);
    return 0;
}
