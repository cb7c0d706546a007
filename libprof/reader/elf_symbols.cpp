// ELF symbol table reader for profreport's fallback symbolization.
#include "reader/elf_symbols.hpp"

#include "reader/elf_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <elf.h>
#include <iterator>
#include <optional>
#include <unordered_map>

namespace prof::reader {

ElfSymbols::ElfSymbols(const std::string& path) {
    // Only regular files of a sane size (never a device or a FIFO, which could hang or exhaust
    // memory); the file is mapped, not read.
    ElfFile file(path, uint64_t(4) << 30);
    switch (file.status()) {
    case ElfFile::Status::kNotRegular:
        error_ = "not a regular file";
        return;
    case ElfFile::Status::kCannotOpen:
        error_ = "cannot open";
        return;
    case ElfFile::Status::kNotElf64:
        error_ = "not a 64-bit little-endian ELF file";
        return;
    case ElfFile::Status::kOk:
        break;
    }
    const Elf64_Ehdr& eh = file.header();
    if (eh.e_ident[EI_DATA] != ELFDATA2LSB) {
        error_ = "not a 64-bit little-endian ELF file";
        return;
    }
    std::optional<std::vector<Elf64_Shdr>> sections = file.sections();
    if (!sections) {
        error_ = "bad section header table";
        return;
    }
    const std::vector<Elf64_Shdr>& sh = *sections;
    const char* data = reinterpret_cast<const char*>(file.data());
    auto load = [&](uint32_t type) {
        for (const Elf64_Shdr& s : sh) {
            if (s.sh_type != type || s.sh_entsize != sizeof(Elf64_Sym) || s.sh_link >= sh.size()) continue;
            const Elf64_Shdr& strtab = sh[s.sh_link];
            if (!file.in_bounds(s.sh_offset, s.sh_size) ||
                !file.in_bounds(strtab.sh_offset, strtab.sh_size))
                continue;
            for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= s.sh_size; off += sizeof(Elf64_Sym)) {
                Elf64_Sym sym;
                std::memcpy(&sym, data + s.sh_offset + off, sizeof sym);
                if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value || sym.st_name >= strtab.sh_size)
                    continue;
                const char* name = data + strtab.sh_offset + sym.st_name;
                size_t len = strnlen(name, strtab.sh_size - sym.st_name);
                entries_.push_back({sym.st_value, sym.st_size, std::string(name, len)});
            }
        }
    };
    load(SHT_SYMTAB);
    if (entries_.empty()) load(SHT_DYNSYM);
    std::sort(entries_.begin(), entries_.end(), by_start);
    if (eh.e_machine == EM_X86_64 && eh.e_shstrndx < sh.size())
        add_plt_stubs(file, sh, sh[eh.e_shstrndx]);
    for (const std::string& id : file.build_ids_in_sections())
        for (char c : id) build_id_ += fmt::format("{:02x}", uint8_t(c));
}

// PLT stubs have no symbol: binutils and perf name each after the function whose GOT slot it
// jumps through (memcpy@plt). A stripped program can spend real time in them (2-3% of sort's
// samples in __errno_location@plt), which would otherwise go to the object as a whole. Each
// stub of .plt, .plt.sec and .plt.got holds a `jmp *disp32(%rip)` (ff 25), possibly after an
// endbr64 and a bnd prefix; its slot is the r_offset of a JUMP_SLOT or GLOB_DAT relocation,
// whose symbol names the stub. The lazy-binding stub at the head of .plt jumps through a slot
// no relocation names, and stays unnamed.
void ElfSymbols::add_plt_stubs(const ElfFile& file, const std::vector<Elf64_Shdr>& sh,
                               const Elf64_Shdr& shstrtab) {
    auto in_bounds = [&](uint64_t off, uint64_t n) { return file.in_bounds(off, n); };
    const char* data = reinterpret_cast<const char*>(file.data());
    auto section_name = [&](const Elf64_Shdr& s) -> std::string {
        if (s.sh_name >= shstrtab.sh_size || !in_bounds(shstrtab.sh_offset, shstrtab.sh_size))
            return {};
        const char* n = data + shstrtab.sh_offset + s.sh_name;
        return std::string(n, strnlen(n, shstrtab.sh_size - s.sh_name));
    };
    std::unordered_map<uint64_t, std::string> slot_symbol; // GOT slot address -> symbol
    for (const Elf64_Shdr& r : sh) {
        if (r.sh_type != SHT_RELA || r.sh_entsize != sizeof(Elf64_Rela) || r.sh_link >= sh.size() ||
            !in_bounds(r.sh_offset, r.sh_size))
            continue;
        const Elf64_Shdr& symtab = sh[r.sh_link];
        if (symtab.sh_entsize != sizeof(Elf64_Sym) || symtab.sh_link >= sh.size() ||
            !in_bounds(symtab.sh_offset, symtab.sh_size))
            continue;
        const Elf64_Shdr& strtab = sh[symtab.sh_link];
        if (!in_bounds(strtab.sh_offset, strtab.sh_size)) continue;
        for (uint64_t off = 0; off + sizeof(Elf64_Rela) <= r.sh_size; off += sizeof(Elf64_Rela)) {
            Elf64_Rela rel;
            std::memcpy(&rel, data + r.sh_offset + off, sizeof rel);
            uint32_t type = ELF64_R_TYPE(rel.r_info);
            uint64_t index = ELF64_R_SYM(rel.r_info);
            if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || !index ||
                (index + 1) * sizeof(Elf64_Sym) > symtab.sh_size)
                continue;
            Elf64_Sym sym;
            std::memcpy(&sym, data + symtab.sh_offset + index * sizeof sym, sizeof sym);
            if (!sym.st_name || sym.st_name >= strtab.sh_size) continue;
            const char* name = data + strtab.sh_offset + sym.st_name;
            slot_symbol.emplace(rel.r_offset,
                                std::string(name, strnlen(name, strtab.sh_size - sym.st_name)));
        }
    }
    if (slot_symbol.empty()) return;
    std::vector<Entry> stubs;
    for (const Elf64_Shdr& s : sh) {
        std::string name = section_name(s);
        if (s.sh_type != SHT_PROGBITS || !(s.sh_flags & SHF_EXECINSTR) ||
            (name != ".plt" && name != ".plt.sec" && name != ".plt.got") ||
            !in_bounds(s.sh_offset, s.sh_size))
            continue;
        uint64_t step =
            s.sh_entsize >= 8 && s.sh_entsize <= 32 ? s.sh_entsize : (name == ".plt.got" ? 8 : 16);
        const auto* code = reinterpret_cast<const uint8_t*>(data + s.sh_offset);
        for (uint64_t at = 0; at + step <= s.sh_size; at += step)
            for (uint64_t j = 0; j + 6 <= step; ++j) {
                if (code[at + j] != 0xff || code[at + j + 1] != 0x25) continue;
                int32_t disp;
                std::memcpy(&disp, code + at + j + 2, sizeof disp);
                uint64_t slot = s.sh_addr + at + j + 6 + uint64_t(int64_t(disp));
                if (auto it = slot_symbol.find(slot); it != slot_symbol.end())
                    stubs.push_back({s.sh_addr + at, step, it->second + "@plt"});
                break;
            }
    }
    // A symbol table that names a stub already (rare) keeps its name.
    std::erase_if(stubs, [&](const Entry& e) { return find(e.start) != nullptr; });
    if (stubs.empty()) return;
    entries_.insert(entries_.end(), std::make_move_iterator(stubs.begin()),
                    std::make_move_iterator(stubs.end()));
    std::sort(entries_.begin(), entries_.end(), by_start);
}

// Prefers the global C++ name when several symbols share an address.
bool ElfSymbols::by_start(const Entry& a, const Entry& b) {
    return a.start != b.start ? a.start < b.start : a.name.size() > b.name.size();
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

std::string unversioned(const std::string& symbol) {
    size_t at = symbol.find('@');
    if (at == std::string::npos || at == 0 || symbol.compare(at, 4, "@plt") == 0) return symbol;
    return symbol.substr(0, at);
}

} // namespace prof::reader
