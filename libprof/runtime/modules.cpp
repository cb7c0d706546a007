// The module map (every loaded object: path, load base, address range, build-id) and the set of
// functions seen, both kept under the global lock in memory mapped by the runtime itself.
// A new module is found when a function address falls outside every known one (dlopen'd
// libraries included), so no dlopen wrapper is needed. Also applies the runtime filters.
//
// Unloading is what needs help: the hooks cache functions by address, so after dlclose another
// object mapped at the same addresses runs through the cached entries without any slow path
// that would notice it. libprof.so therefore interposes dlclose: before the real one it records
// the objects loaded since the last scan and names the functions seen in the closing object
// while its code is still mapped; after it, an Unload record with the time marks every object
// that went away, so a reader can tell which object an event at a reused address ran in.
#include "memory_core.hpp"
#include "runtime.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fnmatch.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

namespace prof::rt {
namespace {

constexpr uint32_t kMaxModules = 4096;
constexpr size_t kPathPool = 2u << 20;

struct Module {
    uintptr_t base, start, end;
    const char* path;    // in the path pool
    bool excluded;       // PROF_EXCLUDE_MODULES matched
    bool symbols_tried;  // symbol index built (or failed) for PROF_EXCLUDE or for naming
    void* symbols;       // symbol_index_build() result
    bool listed;         // reported by the current dl_iterate_phdr pass
};

struct Modules {
    Module* list = nullptr;
    uint32_t count = 0;
    char* pool = nullptr;
    size_t pool_used = 0;
};
constinit Modules m;

// Open-addressing set of function addresses; value = the filter's verdict.
struct FunctionSet {
    uintptr_t* keys = nullptr;
    uint8_t* excluded = nullptr;
    uint32_t mask = 0;
    uint32_t count = 0;
};
constinit FunctionSet f;

PROF_NOINSTR uint32_t hash(uintptr_t a, uint32_t mask) {
    return uint32_t((uint64_t(a) * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

PROF_NOINSTR bool grow_functions() {
    uint32_t size = f.mask ? (f.mask + 1) * 2 : 4096;
    auto* keys = static_cast<uintptr_t*>(map_anon(size_t(size) * sizeof(uintptr_t)));
    auto* excl = static_cast<uint8_t*>(map_anon(size));
    if (!keys || !excl) return false;
    for (uint32_t i = 0; f.mask && i <= f.mask; ++i) {
        if (!f.keys[i]) continue;
        uint32_t h = hash(f.keys[i], size - 1);
        while (keys[h]) h = (h + 1) & (size - 1);
        keys[h] = f.keys[i];
        excl[h] = f.excluded[i];
    }
    if (f.mask) {
        munmap(f.keys, size_t(f.mask + 1) * sizeof(uintptr_t));
        munmap(f.excluded, f.mask + 1);
    }
    f.keys = keys;
    f.excluded = excl;
    f.mask = size - 1;
    return true;
}

// Comma-separated list matching: `match(item)` for each non-empty item.
template <typename Match>
PROF_NOINSTR bool any_item(const char* list, Match match) {
    char item[256];
    while (*list) {
        size_t n = strcspn(list, ",");
        if (n && n < sizeof item) {
            memcpy(item, list, n);
            item[n] = '\0';
            if (match(item)) return true;
        }
        list += n;
        if (*list == ',') ++list;
    }
    return false;
}

PROF_NOINSTR Module* find_module(uintptr_t a) {
    // Unloaded objects leave the list, so at most one entry covers an address; newest first
    // still, in case an unload went unnoticed and two entries overlap.
    for (uint32_t i = m.count; i-- > 0;)
        if (a >= m.list[i].start && a < m.list[i].end) return &m.list[i];
    return nullptr;
}

PROF_NOINSTR void build_id_of(const dl_phdr_info* info, uint8_t* out, size_t& len) {
    len = 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        auto* p = reinterpret_cast<const uint8_t*>(info->dlpi_addr + ph.p_vaddr);
        const uint8_t* end = p + ph.p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const uint8_t* name = p + sizeof(ElfW(Nhdr));
            const uint8_t* desc = name + ((n->n_namesz + 3) & ~3u);
            if (desc + n->n_descsz > end) break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                n->n_descsz <= 64) {
                memcpy(out, desc, n->n_descsz);
                len = n->n_descsz;
                return;
            }
            p = desc + ((n->n_descsz + 3) & ~3u);
        }
    }
}

PROF_NOINSTR int on_object(dl_phdr_info* info, size_t, void*) {
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        uintptr_t s = info->dlpi_addr + ph.p_vaddr;
        if (s < lo) lo = s;
        if (s + ph.p_memsz > hi) hi = s + ph.p_memsz;
    }
    if (lo >= hi) return 0;
    char exe[4096];
    const char* path = info->dlpi_name;
    if (!path || !*path) { // the main program
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        path = exe;
    }
    for (uint32_t i = 0; i < m.count; ++i)
        if (m.list[i].base == info->dlpi_addr && m.list[i].start == lo && m.list[i].end == hi &&
            !strcmp(m.list[i].path, path)) {
            m.list[i].listed = true;
            return 0;
        }
    size_t plen = strnlen(path, format::kMaxString);
    if (m.count == kMaxModules || m.pool_used + plen + 1 > kPathPool) return 0;
    char* stored = m.pool + m.pool_used;
    memcpy(stored, path, plen);
    stored[plen] = '\0';
    m.pool_used += plen + 1;
    const char* patterns = g_options.exclude_modules;
    bool excluded = any_item(patterns, [&](const char* item) { return strstr(stored, item); });
    m.list[m.count++] = Module{info->dlpi_addr, lo, hi, stored, excluded, false, nullptr, true};

    uint8_t id[64];
    size_t idlen = 0;
    build_id_of(info, id, idlen);
    uint8_t rec[format::kMaxString + 128];
    uint8_t* p =
        format::put_module(rec, {now_ticks(), info->dlpi_addr, lo, hi, stored, plen, id, idlen});
    process_record(rec, size_t(p - rec));
    return 0;
}

// Mangled-name prefixes of the C++ standard library (libstdc++ and libc++): PROF_EXCLUDE=std.
// Besides St (std::) the standard abbreviations Sa (allocator), Sb (basic_string), Ss
// (string), Si/So/Sd (istream/ostream/iostream) name std members directly.
constexpr const char* kStdPrefixes[] = {
    "_ZNSt", "_ZNKSt", "_ZSt",  "_ZNVKSt", "_ZNSa",  "_ZNKSa", "_ZNSb",          "_ZNKSb",
    "_ZNSs", "_ZNKSs", "_ZNSi", "_ZNKSi",  "_ZNSo",  "_ZNKSo", "_ZNSd",          "_ZNKSd",
    "_ZSa",  "_ZSs",   "_ZSi",  "_ZSo",    "_ZSd",   "_ZN9__gnu_cxx", "_ZNK9__gnu_cxx",
    "_ZN10__cxxabiv1"};

// PROF_EXCLUDE: comma-separated globs (fnmatch) on the symbol name as it is in the object file
// (mangled for C++), or the keyword `std` for the standard library. The name comes from the
// module's own symbol table (.symtab, else .dynsym; static functions included).
PROF_NOINSTR bool excluded_by_name(uintptr_t a, Module* mod) {
    if (!g_options.exclude[0]) return false;
    const char* name = nullptr;
    if (mod) {
        if (!mod->symbols_tried) {
            mod->symbols_tried = true;
            mod->symbols = symbol_index_build(mod->path);
        }
        name = symbol_index_lookup(mod->symbols, a - mod->base);
    }
    // No dladdr here: it takes the dynamic loader's lock, and we hold ours (a thread in
    // dlopen holds the loader's lock while its constructors may need ours).
    if (!name) return false;
    return any_item(g_options.exclude, [&](const char* item) {
        if (!strcmp(item, "std")) {
            for (const char* prefix : kStdPrefixes)
                if (!strncmp(name, prefix, strlen(prefix))) return true;
            return false;
        }
        return fnmatch(item, name, 0) == 0;
    });
}

// Objects the last pass did not list have been unloaded: one Unload record each, at `ticks`
// (by which time they were gone). They leave the list, so that an object mapped at their
// addresses later is recorded as a module of its own.
PROF_NOINSTR void drop_unloaded(uint64_t ticks) {
    uint32_t kept = 0;
    for (uint32_t i = 0; i < m.count; ++i) {
        const Module& mod = m.list[i];
        if (mod.listed) {
            m.list[kept++] = mod;
            continue;
        }
        uint8_t rec[48];
        uint8_t* p = format::put_unload(rec, ticks, mod.base, mod.start, mod.end);
        process_record(rec, size_t(p - rec));
        char shown[256];
        log(LogLevel::kDebug, "module_unloaded", "path=\"%s\" start=0x%lx end=0x%lx",
            log_safe(mod.path, shown, sizeof shown), (unsigned long)mod.start,
            (unsigned long)mod.end);
        symbol_index_free(mod.symbols);
    }
    m.count = kept;
}

// Global lock held. Records the objects loaded since the last pass and the ones unloaded
// (at `unload_ticks`, or now).
PROF_NOINSTR void scan(uint64_t unload_ticks) {
    if (!m.list) {
        m.list = static_cast<Module*>(map_anon(kMaxModules * sizeof(Module)));
        m.pool = static_cast<char*>(map_anon(kPathPool));
        if (!m.list || !m.pool) return;
    }
    for (uint32_t i = 0; i < m.count; ++i) m.list[i].listed = false;
    dl_iterate_phdr(on_object, nullptr);
    drop_unloaded(unload_ticks ? unload_ticks : now_ticks());
}

PROF_NOINSTR void collect_range(uintptr_t a, void* arg) {
    auto* list = static_cast<uintptr_t*>(arg); // count, range start and end, addresses
    if (a >= list[1] && a < list[2]) list[3 + list[0]++] = a;
}

// Names the functions seen in the object loaded at `base` (path `name`) from its ELF symbol
// table while it is still mapped: once it is unloaded, the symbolizer at exit would name
// whatever object occupies its addresses by then. No source file and line: they come from the
// DWARF reader, whose per-thread state, once built, outlives dlclose and would go stale for
// objects loaded later, so it is only used at exit. Called without the global lock, with the
// calling thread's hooks blocked.
struct LoadedId {
    uintptr_t base;
    uint8_t id[64];
    size_t len;
    bool found;
};

PROF_NOINSTR int on_loaded_id(dl_phdr_info* info, size_t, void* arg) {
    auto* q = static_cast<LoadedId*>(arg);
    if (info->dlpi_addr != q->base || q->found) return 0;
    build_id_of(info, q->id, q->len);
    q->found = true;
    return 1;
}

PROF_NOINSTR void name_functions_of(uintptr_t base, const char* name) {
    lock_global();
    Module* mod = nullptr;
    for (uint32_t i = 0; i < m.count; ++i)
        if (m.list[i].base == base && !strcmp(m.list[i].path, name)) mod = &m.list[i];
    if (mod && !mod->symbols_tried) {
        mod->symbols_tried = true;
        mod->symbols = symbol_index_build(mod->path);
        // The file at the path may have been replaced since the object was loaded (a plugin
        // rebuilt in place, then reloaded): its symbols would name another build's code.
        LoadedId loaded{base, {}, 0, false};
        if (mod->symbols) dl_iterate_phdr(on_loaded_id, &loaded);
        uint8_t on_disk[64];
        size_t disk_len = symbol_index_build_id(mod->symbols, on_disk);
        if (loaded.len && (disk_len != loaded.len || memcmp(on_disk, loaded.id, disk_len) != 0)) {
            char shown[256];
            log(LogLevel::kDebug, "module_changed_on_disk", "path=\"%s\"",
                log_safe(mod->path, shown, sizeof shown));
            symbol_index_free(mod->symbols);
            mod->symbols = nullptr;
        }
    }
    const void* index = mod ? mod->symbols : nullptr;
    size_t bytes = (size_t(function_count()) + 3) * sizeof(uintptr_t);
    auto* list = index ? static_cast<uintptr_t*>(map_anon(bytes)) : nullptr;
    if (list) {
        list[1] = mod->start;
        list[2] = mod->end;
        for_each_function(collect_range, list);
    }
    unlock_global();
    if (!list) return;
    // The index stays valid without the lock: only drop_unloaded frees it, and this object
    // cannot be unloaded before the dlclose that called us.
    for (uintptr_t i = 0; i < list[0]; ++i) {
        uintptr_t a = list[3 + i];
        const char* symbol = symbol_index_lookup(index, a - base);
        if (!symbol) continue;
        int status = -1;
        char* demangled = !strncmp(symbol, "_Z", 2)
                              ? abi::__cxa_demangle(symbol, nullptr, nullptr, &status)
                              : nullptr;
        write_symbol_record(a, status == 0 && demangled ? demangled : symbol, symbol, "", 0);
        free(demangled);
    }
    munmap(list, bytes);
}

} // namespace

PROF_NOINSTR void scan_modules() {
    scan(0);
}

PROF_NOINSTR void modules_after_fork() {
    m.count = 0;
    m.pool_used = 0;
    if (f.mask) {
        memset(f.keys, 0, size_t(f.mask + 1) * sizeof(uintptr_t));
        memset(f.excluded, 0, f.mask + 1);
    }
    f.count = 0;
}

PROF_NOINSTR bool note_function(uintptr_t a) {
    if ((f.count + 1) * 2 > f.mask + 1 && !grow_functions()) return true;
    uint32_t h = hash(a, f.mask);
    while (f.keys[h]) {
        if (f.keys[h] == a) return !f.excluded[h];
        h = (h + 1) & f.mask;
    }
    Module* mod = find_module(a);
    if (!mod) {
        scan_modules();
        mod = find_module(a);
    }
    bool excluded = (mod && mod->excluded) || excluded_by_name(a, mod);
    f.keys[h] = a;
    f.excluded[h] = excluded;
    ++f.count;
    return !excluded;
}

PROF_NOINSTR void note_code_address(uintptr_t a) {
    if ((f.count + 1) * 2 > f.mask + 1 && !grow_functions()) return;
    uint32_t h = hash(a, f.mask);
    while (f.keys[h]) {
        if (f.keys[h] == a) return;
        h = (h + 1) & f.mask;
    }
    if (!find_module(a)) scan_modules();
    f.keys[h] = a;
    f.excluded[h] = 0;
    ++f.count;
}

PROF_NOINSTR uint32_t function_count() { return f.count; }

PROF_NOINSTR void for_each_function(void (*fn)(uintptr_t, void*), void* arg) {
    for (uint32_t i = 0; f.mask && i <= f.mask; ++i)
        if (f.keys[i] && !f.excluded[i]) fn(f.keys[i], arg);
}

} // namespace prof::rt

// ---- dlclose ---------------------------------------------------------------------------------
// Exported from libprof.so, which comes before the C library in the search order of a program
// linked with it (and of one run with the runtime preloaded), so the program's dlclose calls
// arrive here. A program run with only libprofmem.so preloaded loads libprof.so after the C
// library: libprofmem.so then exports dlclose too, and calls prof_dlclose. dlopen is not
// wrapped: the loader resolves a relative name against the runpath of the object that calls
// dlopen, which a wrapper would change.
using namespace prof::rt;

namespace {

using Dlclose = int (*)(void*);

// The C library's dlclose (libdl's before glibc 2.34). Not dlsym(RTLD_NEXT): after libprof.so
// in the search order there may be no dlclose at all when libprof.so came in as
// libprofmem.so's dependency.
PROF_NOINSTR Dlclose real_dlclose() {
    static std::atomic<Dlclose> cached{nullptr};
    Dlclose real = cached.load(std::memory_order_acquire);
    if (real) return real;
    for (const char* lib : {"libc.so.6", "libdl.so.2"}) {
        if (void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD)) {
            real = reinterpret_cast<Dlclose>(dlsym(h, "dlclose"));
            if (real) {
                real(h); // the reference RTLD_NOLOAD took
                break;
            }
        }
    }
    if (!real) real = reinterpret_cast<Dlclose>(dlsym(RTLD_NEXT, "dlclose"));
    if (real) cached.store(real, std::memory_order_release);
    return real;
}

} // namespace

extern "C" __attribute__((visibility("default"))) PROF_NOINSTR int prof_dlclose(void* handle) {
    Dlclose real = real_dlclose();
    if (!real) { // cannot happen with glibc
        errno = ENOSYS;
        return -1;
    }
    if (!tracing_active()) return real(handle);
    int saved = errno;
    uint8_t prev = block_thread();
    // Objects loaded since the last scan are recorded now, whether or not they go away: one
    // reached only through function addresses the hooks had cached for an earlier object would
    // otherwise never be.
    lock_global();
    scan(0);
    unlock_global();
    link_map* map = nullptr;
    if (g_options.symbols && dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name &&
        map->l_name[0])
        name_functions_of(map->l_addr, map->l_name);
    unblock_thread(prev);
    errno = saved;
    // The object's destructors run in here, traced as usual.
    int rc = real(handle);
    uint64_t gone = now_ticks();
    saved = errno;
    prev = block_thread();
    lock_global();
    if (tracing_active()) scan(gone);
    unlock_global();
    unblock_thread(prev);
    errno = saved;
    return rc;
}

extern "C" __attribute__((visibility("default"))) PROF_NOINSTR int dlclose(void* handle) {
    return prof_dlclose(handle);
}
