// Calls made by libprof.so's own dependencies. libprof.so brings libstdc++ (and libgcc_s,
// libm, Boost's stacktrace) into a C program. Their initializers run before libprof.so's
// constructor, and libstdc++'s allocates its exception pool through the program's malloc when
// the program defines one: a call the program does not make without the profiler. Until the
// constructor has run, a call from the code of such a library that the program itself does
// not need is not recorded, nor the calls inside it (the hooks ask call_from_our_dependency).
#include "runtime.hpp"
#include "thread_state.hpp"

#include <cstring>
#include <link.h>

namespace prof::rt {
namespace {

constinit bool g_library_started = false;

struct CodeRange {
    uintptr_t start, end;
};
constinit CodeRange g_dependency_code[8]{};
constinit int g_dependency_count = -1; // not looked for yet

PROF_NOINSTR const char* dependency_of_ours(const char* path) {
    static constexpr const char* kNames[] = {"/libstdc++.so", "/libgcc_s.so", "/libm.so",
                                             "/libboost_stacktrace"};
    for (const char* name : kNames)
        if (path && strstr(path, name)) return name;
    return nullptr;
}

struct DependencyScan {
    const char* needed_by_program[8];
    int needed = 0;
};

// First pass: which of those libraries an object of the program (not libprof's, not one of
// them) lists as needed.
PROF_NOINSTR int note_needed(dl_phdr_info* info, size_t, void* arg) {
    auto* scan = static_cast<DependencyScan*>(arg);
    if (strstr(info->dlpi_name, "/libprof") || dependency_of_ours(info->dlpi_name)) return 0;
    for (unsigned i = 0; i < info->dlpi_phnum; ++i) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
        const auto* dyn =
            reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        uintptr_t strtab = 0;
        for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d)
            if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
        if (strtab && strtab < info->dlpi_addr) strtab += info->dlpi_addr; // not relocated (vDSO)
        for (const ElfW(Dyn)* d = dyn; strtab && d->d_tag != DT_NULL; ++d) {
            if (d->d_tag != DT_NEEDED || scan->needed == 8) continue;
            char slashed[256] = "/";
            strncat(slashed, reinterpret_cast<const char*>(strtab + d->d_un.d_val), 250);
            if (const char* name = dependency_of_ours(slashed))
                scan->needed_by_program[scan->needed++] = name;
        }
    }
    return 0;
}

// Second pass: the code of those the program does not need.
PROF_NOINSTR int note_dependency_code(dl_phdr_info* info, size_t, void* arg) {
    const auto* scan = static_cast<const DependencyScan*>(arg);
    const char* name = dependency_of_ours(info->dlpi_name);
    if (!name) return 0;
    for (int i = 0; i < scan->needed; ++i)
        if (scan->needed_by_program[i] == name) return 0;
    for (unsigned i = 0; i < info->dlpi_phnum && g_dependency_count < 8; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
        uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        g_dependency_code[g_dependency_count++] = CodeRange{start, start + ph.p_memsz};
    }
    return 0;
}

} // namespace

thread_local uint32_t t_dependency_calls __attribute__((tls_model("initial-exec"))) = 0;

PROF_NOINSTR bool call_from_our_dependency(uintptr_t site) {
    if (g_library_started) return false;
    if (g_dependency_count < 0) {
        DependencyScan scan;
        dl_iterate_phdr(note_needed, &scan);
        g_dependency_count = 0;
        dl_iterate_phdr(note_dependency_code, &scan);
    }
    for (int i = 0; i < g_dependency_count; ++i)
        if (site >= g_dependency_code[i].start && site < g_dependency_code[i].end) return true;
    return false;
}

// libprof.so's constructor has begun: calls from its dependencies count as the program's now.
// (Their initializers are done: a call of theirs left without its exit, by an exception or a
// longjmp, leaves nothing ignored.)
PROF_NOINSTR void note_library_started() {
    g_library_started = true;
    t_dependency_calls = 0;
}

} // namespace prof::rt
