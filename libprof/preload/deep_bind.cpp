// Libraries opened with RTLD_DEEPBIND: their allocator calls reach the interposers too.
//
// A library opened with RTLD_DEEPBIND looks its symbols up in its own dependencies before the
// program's global scope, so its malloc and free bind to the C library's, past this preloaded
// library: its allocations would be missing and its frees of the program's blocks would look
// like frees of unknown blocks. So dlopen is wrapped: after the C library's dlopen has loaded
// such a library, the references of the objects it loaded that were bound to the function an
// interposer forwards to (the next definition after this library, RTLD_NEXT) are pointed at the
// interposer, as the global scope would have bound them. References bound elsewhere on purpose
// (a library that brings its own allocator) are left alone. What its constructors allocate
// while dlopen runs them is not seen: they run before dlopen returns.
//
// The C library's dlopen names the object that called it by its return address, and searches a
// bare library name in that object's RUNPATH. So the common call (no RTLD_DEEPBIND) is a jump to
// the C library's dlopen, written in assembly, which leaves the caller's return address in
// place. A RTLD_DEEPBIND call comes back here after the load; a bare name is then looked up
// here in the caller's RPATH, LD_LIBRARY_PATH and RUNPATH, as the loader would, and given to
// dlopen as a path.
//
// None of this allocates: paths are built on the stack, the tables read in place.
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#define PROF_NOINSTR __attribute__((no_instrument_function))

using Dlopen = void* (*)(const char*, int);

// The C library's dlopen, once known; read by the assembly entry point below.
extern "C" __attribute__((visibility("hidden"))) Dlopen prof_real_dlopen;
constinit Dlopen prof_real_dlopen = nullptr;

extern "C" __attribute__((visibility("hidden"), used)) PROF_NOINSTR void*
prof_dlopen_slow(const char* file, int mode, void* caller);

#if defined(__x86_64__)
// dlopen(file, mode): the C library's own, by a jump (the caller's return address stays the
// one it sees), unless RTLD_DEEPBIND is asked or the C library's dlopen is not known yet; then
// prof_dlopen_slow(file, mode, return address).
asm(R"(
    .text
    .globl dlopen
    .type dlopen, @function
    .p2align 4
dlopen:
    .cfi_startproc
    movq prof_real_dlopen(%rip), %rax
    testq %rax, %rax
    jz 1f
    testl $0x8, %esi
    jnz 1f
    jmp *%rax
1:
    movq (%rsp), %rdx
    jmp prof_dlopen_slow
    .cfi_endproc
    .size dlopen, .-dlopen
)");
static_assert(RTLD_DEEPBIND == 0x8, "the assembly above tests RTLD_DEEPBIND as 0x8");
#endif

namespace {

PROF_NOINSTR Dlopen real_dlopen() {
    Dlopen real = __atomic_load_n(&prof_real_dlopen, __ATOMIC_ACQUIRE);
    if (!real) {
        real = reinterpret_cast<Dlopen>(dlsym(RTLD_NEXT, "dlopen"));
        __atomic_store_n(&prof_real_dlopen, real, __ATOMIC_RELEASE);
    }
    return real;
}

// ---- a bare name, searched as the loader would for the caller ---------------------------------

// The dynamic entry `tag` of `map` (a string: DT_RPATH, DT_RUNPATH), or null.
PROF_NOINSTR const char* dynamic_string(const link_map* map, ElfW(Sxword) tag) {
    if (!map || !map->l_ld) return nullptr;
    uintptr_t strtab = 0;
    const ElfW(Dyn)* entry = nullptr;
    for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d) {
        if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
        if (d->d_tag == tag) entry = d;
    }
    if (!entry || !strtab) return nullptr;
    if (strtab < map->l_addr) strtab += map->l_addr; // not relocated in place (vDSO)
    return reinterpret_cast<const char*>(strtab + entry->d_un.d_val);
}

// Writes `dir` (its $ORIGIN expanded to `origin`) + "/" + `name` into `out`; false when it does
// not fit or uses a token other than $ORIGIN.
PROF_NOINSTR bool join(const char* dir, size_t dir_len, const char* origin, const char* name,
                       char* out, size_t cap) {
    size_t n = 0;
    auto put = [&](const char* s, size_t len) {
        if (n + len >= cap) return false;
        std::memcpy(out + n, s, len);
        n += len;
        return true;
    };
    for (size_t i = 0; i < dir_len;) {
        if (dir[i] == '$') {
            const char* token = dir + i + 1;
            size_t rest = dir_len - i - 1;
            if (rest >= 6 && std::strncmp(token, "ORIGIN", 6) == 0) {
                if (!put(origin, std::strlen(origin))) return false;
                i += 7;
            } else if (rest >= 8 && std::strncmp(token, "{ORIGIN}", 8) == 0) {
                if (!put(origin, std::strlen(origin))) return false;
                i += 9;
            } else {
                return false; // $LIB, $PLATFORM: left to the loader
            }
        } else {
            if (!put(dir + i, 1)) return false;
            ++i;
        }
    }
    if (n == 0) return false;
    return put("/", 1) && put(name, std::strlen(name) + 1);
}

// The first directory of the colon-separated `list` that holds `name`, as a path in `out`.
PROF_NOINSTR bool find_in(const char* list, const char* origin, const char* name, char* out,
                          size_t cap) {
    for (const char* p = list; p && *p;) {
        const char* end = std::strchr(p, ':');
        size_t len = end ? size_t(end - p) : std::strlen(p);
        if (join(p, len, origin, name, out, cap) && access(out, F_OK) == 0) return true;
        p = end ? end + 1 : nullptr;
    }
    return false;
}

// The path the loader would open for the bare `name` that `caller` asked for, when it comes
// from the caller's own RPATH or RUNPATH (the rest of the search, LD_LIBRARY_PATH, the cache
// and the default directories, does not depend on the caller: dlopen does it from here too).
PROF_NOINSTR bool caller_path(void* caller, const char* name, char* out, size_t cap) {
    Dl_info info;
    link_map* map = nullptr;
    if (!dladdr1(caller, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) || !map)
        return false;
    const char* runpath = dynamic_string(map, DT_RUNPATH);
    const char* rpath = runpath ? nullptr : dynamic_string(map, DT_RPATH);
    if (!runpath && !rpath) return false;
    char origin[PATH_MAX];
    const char* object = map->l_name && map->l_name[0] ? map->l_name : nullptr;
    if (object) {
        size_t len = std::strlen(object);
        if (len >= sizeof origin) return false;
        std::memcpy(origin, object, len + 1);
    } else { // the program itself
        ssize_t len = readlink("/proc/self/exe", origin, sizeof origin - 1);
        if (len <= 0) return false;
        origin[len] = 0;
    }
    if (char* slash = std::strrchr(origin, '/')) *slash = 0;
    // RPATH comes before LD_LIBRARY_PATH, RUNPATH after it.
    if (rpath) return find_in(rpath, origin, name, out, cap);
    if (const char* library_path = getenv("LD_LIBRARY_PATH"))
        if (find_in(library_path, origin, name, out, cap)) return false; // dlopen finds it
    return find_in(runpath, origin, name, out, cap);
}

// ---- pointing the new objects' references at the interposers -----------------------------------

// This library's exported functions (its interposers), from its own dynamic symbol table.
struct Export {
    const char* name;
    void* address;
};
constinit Export g_exports[128]{};
constinit int g_export_count = 0;
constinit bool g_exports_read = false;

// The number of symbols of a GNU hash table: past the last chain that a bucket starts.
PROF_NOINSTR size_t gnu_hash_symbols(const uint32_t* table) {
    uint32_t buckets = table[0], offset = table[1], bloom = table[2];
    const uint32_t* bucket = table + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
    const uint32_t* chain = bucket + buckets;
    uint32_t last = 0;
    for (uint32_t i = 0; i < buckets; ++i)
        if (bucket[i] > last) last = bucket[i];
    if (last < offset) return offset;
    while (!(chain[last - offset] & 1)) ++last;
    return last + 1;
}

PROF_NOINSTR void read_exports() {
    if (g_exports_read) return;
    g_exports_read = true;
    Dl_info info;
    link_map* self = nullptr;
    if (!dladdr1(reinterpret_cast<void*>(&read_exports), &info, reinterpret_cast<void**>(&self),
                 RTLD_DL_LINKMAP) ||
        !self)
        return;
    uintptr_t symtab = 0, strtab = 0, gnu_hash = 0;
    for (const ElfW(Dyn)* d = self->l_ld; d->d_tag != DT_NULL; ++d) {
        if (d->d_tag == DT_SYMTAB) symtab = d->d_un.d_ptr;
        if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
        if (d->d_tag == DT_GNU_HASH) gnu_hash = d->d_un.d_ptr;
    }
    if (!symtab || !strtab || !gnu_hash) return;
    const auto* syms = reinterpret_cast<const ElfW(Sym)*>(symtab);
    size_t n = gnu_hash_symbols(reinterpret_cast<const uint32_t*>(gnu_hash));
    for (size_t i = 1; i < n && g_export_count < 128; ++i) {
        const ElfW(Sym)& s = syms[i];
        if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF ||
            ELF64_ST_BIND(s.st_info) == STB_LOCAL)
            continue;
        const char* name = reinterpret_cast<const char*>(strtab + s.st_name);
        if (std::strncmp(name, "prof_", 5) == 0) continue; // the runtime's entry points
        g_exports[g_export_count++] = {name, reinterpret_cast<void*>(self->l_addr + s.st_value)};
    }
}

PROF_NOINSTR const Export* export_named(const char* name) {
    for (int i = 0; i < g_export_count; ++i)
        if (std::strcmp(g_exports[i].name, name) == 0) return &g_exports[i];
    return nullptr;
}

PROF_NOINSTR bool skipped_object(const char* name) {
    return !name || !name[0] || std::strstr(name, "/libprof") || std::strstr(name, "/libc.so") ||
           std::strstr(name, "/ld-linux") || std::strstr(name, "linux-vdso");
}

// The relocations of one table (DT_RELA or DT_JMPREL) of `map`: the GOT slots of references
// to an interposed name, bound to what the interposer forwards to (or, lazily bound, not bound
// yet and bound by the loader to it when called), pointed at the interposer.
struct Object {
    link_map* map;
    void* handle;
    const ElfW(Sym) * syms;
    const char* strs;
    uintptr_t relro_start, relro_end;
    bool relro_writable;
};

PROF_NOINSTR bool inside_object(const link_map* map, uintptr_t address) {
    Dl_info info;
    return dladdr(reinterpret_cast<void*>(address), &info) &&
           reinterpret_cast<uintptr_t>(info.dli_fbase) == map->l_addr;
}

// The object's RELRO pages (read-only once relocated) made `prot`.
PROF_NOINSTR bool protect_relro(const Object& o, int prot) {
    uintptr_t start = o.relro_start & ~uintptr_t(sysconf(_SC_PAGESIZE) - 1);
    return mprotect(reinterpret_cast<void*>(start), o.relro_end - start, prot) == 0;
}

PROF_NOINSTR void patch_table(Object& o, uintptr_t table, size_t bytes) {
    if (!table || !bytes) return;
    if (table < o.map->l_addr) table += o.map->l_addr;
    const auto* rela = reinterpret_cast<const ElfW(Rela)*>(table);
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
        unsigned type = ELF64_R_TYPE(rela[i].r_info);
        if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
        const ElfW(Sym)& sym = o.syms[ELF64_R_SYM(rela[i].r_info)];
        if (sym.st_shndx != SHN_UNDEF) continue; // its own definition
        const Export* e = export_named(o.strs + sym.st_name);
        if (!e) continue;
        auto* slot = reinterpret_cast<uintptr_t*>(o.map->l_addr + rela[i].r_offset);
        uintptr_t bound = __atomic_load_n(slot, __ATOMIC_RELAXED);
        if (bound == uintptr_t(e->address)) continue;
        void* next = dlsym(RTLD_NEXT, e->name);
        bool forwarded = bound == uintptr_t(next);
        // A lazy slot not bound yet points into the object's own PLT: the loader would bind it
        // in the object's deep scope, which dlsym on its handle searches.
        if (!forwarded && inside_object(o.map, bound)) forwarded = dlsym(o.handle, e->name) == next;
        if (!forwarded || !next) continue;
        auto at = reinterpret_cast<uintptr_t>(slot);
        if (at >= o.relro_start && at < o.relro_end && !o.relro_writable) {
            if (!protect_relro(o, PROT_READ | PROT_WRITE)) continue;
            o.relro_writable = true;
        }
        __atomic_store_n(slot, uintptr_t(e->address), __ATOMIC_RELAXED);
    }
}

PROF_NOINSTR int relro_of(dl_phdr_info* info, size_t, void* arg) {
    auto* o = static_cast<Object*>(arg);
    if (info->dlpi_addr != o->map->l_addr) return 0;
    for (unsigned i = 0; i < info->dlpi_phnum; ++i)
        if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
            o->relro_start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            o->relro_end = o->relro_start + info->dlpi_phdr[i].p_memsz;
        }
    return 1;
}

PROF_NOINSTR void bind_to_interposers(void* handle) {
    read_exports();
    link_map* first = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &first) != 0 || !first) return;
    // The objects this dlopen loaded follow the one it opened in the list of loaded objects.
    for (link_map* map = first; map; map = map->l_next) {
        if (skipped_object(map->l_name) || !map->l_ld) continue;
        Object o{map, handle, nullptr, nullptr, 0, 0, false};
        uintptr_t symtab = 0, strtab = 0, rela = 0, rela_size = 0, jmprel = 0, jmprel_size = 0;
        for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d) {
            switch (d->d_tag) {
            case DT_SYMTAB:
                symtab = d->d_un.d_ptr;
                break;
            case DT_STRTAB:
                strtab = d->d_un.d_ptr;
                break;
            case DT_RELA:
                rela = d->d_un.d_ptr;
                break;
            case DT_RELASZ:
                rela_size = d->d_un.d_val;
                break;
            case DT_JMPREL:
                jmprel = d->d_un.d_ptr;
                break;
            case DT_PLTRELSZ:
                jmprel_size = d->d_un.d_val;
                break;
            }
        }
        if (!symtab || !strtab) continue;
        if (symtab < map->l_addr) symtab += map->l_addr;
        if (strtab < map->l_addr) strtab += map->l_addr;
        o.syms = reinterpret_cast<const ElfW(Sym)*>(symtab);
        o.strs = reinterpret_cast<const char*>(strtab);
        dl_iterate_phdr(relro_of, &o);
        patch_table(o, rela, rela_size);
        patch_table(o, jmprel, jmprel_size);
        if (o.relro_writable) protect_relro(o, PROT_READ);
    }
}

} // namespace

extern "C" PROF_NOINSTR void* prof_dlopen_slow(const char* file, int mode, void* caller) {
    Dlopen real = real_dlopen();
    if (!real) {
        errno = ENOSYS;
        return nullptr;
    }
    if (!(mode & RTLD_DEEPBIND)) return real(file, mode); // before the first call resolved it
    int saved = errno;
    char path[PATH_MAX];
    if (file && !std::strchr(file, '/') && caller_path(caller, file, path, sizeof path))
        file = path;
    errno = saved;
    void* handle = real(file, mode);
    if (handle) {
        saved = errno;
        bind_to_interposers(handle);
        errno = saved;
    }
    return handle;
}
