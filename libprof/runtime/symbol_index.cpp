// Symbol lookup inside the runtime for PROF_EXCLUDE, and for naming the functions of an object
// that dlclose is about to unload (modules.cpp): maps a module's ELF file read-only and
// builds, in memory the runtime maps itself, an array of its function symbols sorted by
// address. No allocation through the application's allocator (the filter runs on the hooks'
// slow path, under the global lock), no sorting helper that might allocate (qsort can).
#include "runtime.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace prof::rt {
namespace {

struct Entry {
    uint64_t value;
    uint64_t size;
    const char* name; // inside the mapped file
};

PROF_NOINSTR void sift_down(Entry* a, size_t start, size_t n) {
    size_t root = start;
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && a[child].value < a[child + 1].value) ++child;
        if (!(a[root].value < a[child].value)) return;
        Entry t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}

PROF_NOINSTR void heap_sort(Entry* a, size_t n) {
    for (size_t i = n / 2; i-- > 0;) sift_down(a, i, n);
    for (size_t end = n; end-- > 1;) {
        Entry t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift_down(a, 0, end);
    }
}

// Header of the handle: the entries follow it. Names point into the file's mapping, which
// stays until symbol_index_free (an object that is unloaded frees its index).
struct IndexHeader {
    uint64_t count;
    void* file;
    size_t file_size;
    size_t bytes; // of the handle's own mapping
};

} // namespace

// Returned handle is an opaque pointer to an IndexHeader; null when the file cannot be read.
PROF_NOINSTR void* symbol_index_build(const char* path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < off_t(sizeof(Elf64_Ehdr))) {
        close(fd);
        return nullptr;
    }
    size_t size = size_t(st.st_size);
    void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return nullptr;
    auto* base = static_cast<const uint8_t*>(m);
    auto fits = [&](uint64_t off, uint64_t n) { return off <= size && n <= size - off; };
    auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
    if (__builtin_memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) ||
        !fits(eh->e_shoff, uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr))) {
        munmap(m, size);
        return nullptr;
    }
    auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
    const Elf64_Shdr* symtab = nullptr;
    for (int pass = 0; pass < 2 && !symtab; ++pass)
        for (unsigned i = 0; i < eh->e_shnum; ++i)
            if (sh[i].sh_type == (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM) &&
                sh[i].sh_entsize == sizeof(Elf64_Sym) && sh[i].sh_link < eh->e_shnum &&
                fits(sh[i].sh_offset, sh[i].sh_size)) {
                symtab = &sh[i];
                break;
            }
    if (!symtab) {
        munmap(m, size);
        return nullptr;
    }
    const Elf64_Shdr& strtab = sh[symtab->sh_link];
    if (!fits(strtab.sh_offset, strtab.sh_size)) {
        munmap(m, size);
        return nullptr;
    }
    size_t nsyms = symtab->sh_size / sizeof(Elf64_Sym);
    size_t bytes = sizeof(IndexHeader) + nsyms * sizeof(Entry);
    void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        munmap(m, size);
        return nullptr;
    }
    auto* entries = reinterpret_cast<Entry*>(static_cast<uint8_t*>(mem) + sizeof(IndexHeader));
    size_t n = 0;
    auto* syms = reinterpret_cast<const Elf64_Sym*>(base + symtab->sh_offset);
    const char* names = reinterpret_cast<const char*>(base + strtab.sh_offset);
    for (size_t i = 0; i < nsyms; ++i) {
        const Elf64_Sym& s = syms[i];
        if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || !s.st_value || s.st_name >= strtab.sh_size)
            continue;
        // The name must end inside the string table.
        if (!__builtin_memchr(names + s.st_name, 0, strtab.sh_size - s.st_name)) continue;
        entries[n++] = Entry{s.st_value, s.st_size, names + s.st_name};
    }
    heap_sort(entries, n);
    *static_cast<IndexHeader*>(mem) = IndexHeader{n, m, size, bytes};
    return mem;
}

// The GNU build-id of the indexed file (from its note sections) into `out` (64 bytes); its
// length, 0 when the file has none.
PROF_NOINSTR size_t symbol_index_build_id(const void* index, uint8_t* out) {
    if (!index) return 0;
    auto* h = static_cast<const IndexHeader*>(index);
    auto* base = static_cast<const uint8_t*>(h->file);
    size_t size = h->file_size;
    auto fits = [&](uint64_t off, uint64_t n) { return off <= size && n <= size - off; };
    auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
    auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; ++i) {
        if (sh[i].sh_type != SHT_NOTE || !fits(sh[i].sh_offset, sh[i].sh_size)) continue;
        const uint8_t* p = base + sh[i].sh_offset;
        const uint8_t* end = p + sh[i].sh_size;
        while (size_t(end - p) >= sizeof(Elf64_Nhdr)) {
            auto* n = reinterpret_cast<const Elf64_Nhdr*>(p);
            const uint8_t* name = p + sizeof(Elf64_Nhdr);
            uint64_t name_len = (uint64_t(n->n_namesz) + 3) & ~3ull;
            uint64_t desc_len = (uint64_t(n->n_descsz) + 3) & ~3ull;
            if (name_len > uint64_t(end - name) || desc_len > uint64_t(end - name) - name_len)
                break;
            const uint8_t* desc = name + name_len;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
                !__builtin_memcmp(name, "GNU", 4) && n->n_descsz <= 64) {
                __builtin_memcpy(out, desc, n->n_descsz);
                return n->n_descsz;
            }
            p = desc + desc_len;
        }
    }
    return 0;
}

// The name of the function symbol that starts at `vaddr` (an address as laid out in the
// file), or null.
PROF_NOINSTR const char* symbol_index_lookup(const void* index, uint64_t vaddr) {
    if (!index) return nullptr;
    uint64_t n = static_cast<const IndexHeader*>(index)->count;
    auto* e =
        reinterpret_cast<const Entry*>(static_cast<const uint8_t*>(index) + sizeof(IndexHeader));
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e[mid].value < vaddr) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && e[lo].value == vaddr ? e[lo].name : nullptr;
}

PROF_NOINSTR void symbol_index_free(void* index) {
    if (!index) return;
    IndexHeader h = *static_cast<IndexHeader*>(index);
    munmap(h.file, h.file_size);
    munmap(index, h.bytes);
}

} // namespace prof::rt
