// ELF symbol table reader for profreport's fallback symbolization.
#include "reader/elf_symbols.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <elf.h>
#include <fstream>
#include <iterator>
#include <sys/stat.h>

namespace prof::reader {

ElfSymbols::ElfSymbols(const std::string& path) {
    // Paths come from the trace: only regular files of a sane size (never a device or a FIFO,
    // which could hang or exhaust memory).
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t(4) << 30)) {
        error_ = "not a regular file";
        return;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        error_ = "cannot open";
        return;
    }
    std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto in_bounds = [&](uint64_t off, uint64_t n) { return off <= data.size() && n <= data.size() - off; };
    if (!in_bounds(0, sizeof(Elf64_Ehdr)) || std::memcmp(data.data(), ELFMAG, SELFMAG) != 0 ||
        data[EI_CLASS] != ELFCLASS64 || data[EI_DATA] != ELFDATA2LSB) {
        error_ = "not a 64-bit little-endian ELF file";
        return;
    }
    Elf64_Ehdr eh;
    std::memcpy(&eh, data.data(), sizeof eh);
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || !in_bounds(eh.e_shoff, uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr))) {
        error_ = "bad section header table";
        return;
    }
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    std::memcpy(sh.data(), data.data() + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));
    auto load = [&](uint32_t type) {
        for (const Elf64_Shdr& s : sh) {
            if (s.sh_type != type || s.sh_entsize != sizeof(Elf64_Sym) || s.sh_link >= sh.size()) continue;
            const Elf64_Shdr& strtab = sh[s.sh_link];
            if (!in_bounds(s.sh_offset, s.sh_size) || !in_bounds(strtab.sh_offset, strtab.sh_size)) continue;
            for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= s.sh_size; off += sizeof(Elf64_Sym)) {
                Elf64_Sym sym;
                std::memcpy(&sym, data.data() + s.sh_offset + off, sizeof sym);
                if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value || sym.st_name >= strtab.sh_size)
                    continue;
                const char* name = data.data() + strtab.sh_offset + sym.st_name;
                size_t len = strnlen(name, strtab.sh_size - sym.st_name);
                entries_.push_back({sym.st_value, sym.st_size, std::string(name, len)});
            }
        }
    };
    load(SHT_SYMTAB);
    if (entries_.empty()) load(SHT_DYNSYM);
    std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
        // Prefer the global C++ name when several symbols share an address.
        return a.start != b.start ? a.start < b.start : a.name.size() > b.name.size();
    });
    for (const Elf64_Shdr& s : sh) {
        if (s.sh_type != SHT_NOTE || !in_bounds(s.sh_offset, s.sh_size)) continue;
        uint64_t p = s.sh_offset, end = s.sh_offset + s.sh_size;
        while (p + sizeof(Elf64_Nhdr) <= end) {
            Elf64_Nhdr n;
            std::memcpy(&n, data.data() + p, sizeof n);
            uint64_t name = p + sizeof n, desc = name + ((uint64_t(n.n_namesz) + 3) & ~3ull);
            if (desc + n.n_descsz > end) break;
            if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && !std::memcmp(data.data() + name, "GNU", 4)) {
                for (uint32_t i = 0; i < n.n_descsz; ++i)
                    build_id_ += fmt::format("{:02x}", uint8_t(data[desc + i]));
                break;
            }
            p = desc + ((uint64_t(n.n_descsz) + 3) & ~3ull);
        }
    }
}

const std::string* ElfSymbols::lookup(uint64_t vaddr) const {
    const Entry* e = find(vaddr);
    return e ? &e->name : nullptr;
}

const ElfSymbols::Entry* ElfSymbols::find(uint64_t vaddr) const {
    auto it = std::upper_bound(entries_.begin(), entries_.end(), vaddr,
                               [](uint64_t v, const Entry& e) { return v < e.start; });
    if (it == entries_.begin()) return nullptr;
    // Several symbols may start at the same address; the sort put the preferred one first.
    uint64_t start = std::prev(it)->start;
    while (it != entries_.begin() && std::prev(it)->start == start) --it;
    if (vaddr == it->start || vaddr < it->start + it->size) return &*it;
    return nullptr;
}

} // namespace prof::reader
