// Registry of marked source sites (PROF_LINE, PROF_SCOPE, PROF_FUNCTION, C regions). A site
// gets an id on first use, on any thread, and its constant data (file, line, function, label)
// is written once to the process stream; events then refer to it by address or id only.
#include "memory_core.hpp"
#include "runtime.hpp"

#include <prof/prof.h>

#include <cstring>
#include <sys/mman.h>

// Read by libprofmem.so on every call: whether any PROF_LINE site exists (then the usable size
// of each block is measured for the per-line heap deltas; otherwise that cost is skipped).
extern "C" {
__attribute__((visibility("default"))) int prof_heap_tracking = 0;
}

namespace prof::rt {
namespace {

constexpr uint32_t kMaxSites = 1u << 20;

struct Sites {
    prof_site** list = nullptr; // by id; id 0 is unused
    uint32_t count = 1;
};
constinit Sites g_sites;

PROF_NOINSTR size_t length(const char* s, size_t cap) {
    return s ? strnlen(s, cap) : 0;
}

} // namespace

PROF_NOINSTR uint32_t register_site(prof_site* site) {
    uint32_t id = __atomic_load_n(&site->id, __ATOMIC_ACQUIRE);
    if (id) return id;
    lock_global();
    id = site->id;
    if (!id && g_sites.count < kMaxSites) {
        if (!g_sites.list) {
            void* m = mmap(nullptr, kMaxSites * sizeof(prof_site*), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            g_sites.list = m == MAP_FAILED ? nullptr : static_cast<prof_site**>(m);
        }
        if (g_sites.list) {
            id = g_sites.count++;
            g_sites.list[id] = site;
            // Sized record (format 1.1); the global lock guards `rec`.
            static uint8_t rec[3 * 4096 + 64 + 16];
            uint8_t* r = format::put_site(
                rec, {reinterpret_cast<uintptr_t>(site), format::SiteKind(site->kind), site->line,
                      site->file, length(site->file, 4096), site->function,
                      length(site->function, 4096), site->label, length(site->label, 4096)});
            process_record(rec, size_t(r - rec));
            // The per-line heap deltas need usable sizes from the interposer from now on.
            if (site->kind == unsigned(format::SiteKind::kLine))
                __atomic_store_n(&prof_heap_tracking, 1, __ATOMIC_RELAXED);
            __atomic_store_n(&site->id, id, __ATOMIC_RELEASE);
        }
    }
    unlock_global();
    return id;
}

PROF_NOINSTR prof_site* site_by_id(uint32_t id) {
    return g_sites.list && id && id < g_sites.count ? g_sites.list[id] : nullptr;
}

PROF_NOINSTR void sites_after_fork() {
    // The child's trace is a new file: every site is described again on first use.
    for (uint32_t id = 1; g_sites.list && id < g_sites.count; ++id)
        __atomic_store_n(&g_sites.list[id]->id, 0, __ATOMIC_RELAXED);
    g_sites.count = 1;
}

} // namespace prof::rt
