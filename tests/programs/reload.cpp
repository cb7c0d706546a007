// Test program: `reload LIB_A LIB_B keep|close` dlopens LIB_A (alpha_work, alpha_step), calls
// alpha_work 3 times, dlcloses it, then dlopens LIB_B (bravo_work, bravo_step), which the loader
// normally maps at the address LIB_A had, and calls bravo_work 5 times; `close` also dlcloses
// LIB_B before exit. Prints whether the load address was reused and the sum of the results.
// `reload LIB_A LIB_B replace`: calls alpha_work 3 times, then replaces the file LIB_A with a
// copy of LIB_B (a plugin rebuilt in place) before dlclosing it, and exits.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <string>
#include <link.h>

namespace {

uintptr_t load_base(void* handle) {
    link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map) return 0;
    return map->l_addr;
}

__attribute__((noinline)) int run(const char* path, const char* symbol, int calls, uintptr_t& base,
                                  void*& handle) {
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) return -1;
    base = load_base(handle);
    auto work = reinterpret_cast<int (*)(int)>(dlsym(handle, symbol));
    if (!work) return -1;
    int sum = 0;
    for (int i = 0; i < calls; ++i) sum += work(i);
    return sum;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 4) return 2;
    uintptr_t a_base = 0, b_base = 0;
    void *a = nullptr, *b = nullptr;
    int sum_a = run(argv[1], "alpha_work", 3, a_base, a);
    if (sum_a < 0) return 1;
    if (!strcmp(argv[3], "replace")) {
        std::string fresh = std::string(argv[1]) + ".new";
        std::ifstream in(argv[2], std::ios::binary);
        std::ofstream(fresh, std::ios::binary) << in.rdbuf();
        if (std::rename(fresh.c_str(), argv[1]) != 0 || dlclose(a) != 0) return 1;
        std::printf("sum %d\n", sum_a);
        return 0;
    }
    if (dlclose(a) != 0) return 1;
    int sum_b = run(argv[2], "bravo_work", 5, b_base, b);
    if (sum_b < 0) return 1;
    if (!strcmp(argv[3], "close") && dlclose(b) != 0) return 1;
    std::printf("reused %d sum %d\n", a_base == b_base ? 1 : 0, sum_a + sum_b);
    if (a_base != b_base)
        std::printf("address not reused: a at 0x%lx, b at 0x%lx\n", (unsigned long)a_base,
                    (unsigned long)b_base);
    return 0;
}
