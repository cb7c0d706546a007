// Function symbols of an ELF file on disk: the fallback that names functions of a trace whose
// process died before writing its symbol table. Reads .symtab (or .dynsym when stripped) with
// bounds checks; never runs a program.
#pragma once

#include <cstdint>
#include <elf.h>
#include <string>
#include <vector>

namespace prof::reader {

class ElfFile;

// A symbol without the version a dynamic symbol carries (memcpy@@GLIBC_2.14 is memcpy). A PLT
// stub's name (memcpy@plt) keeps its suffix: the stub is not the function it jumps to.
std::string unversioned(const std::string& symbol);

class ElfSymbols {
public:
    // Loads the function symbols of `path`. ok() is false when the file is missing or not a
    // 64-bit little-endian ELF file; error() says why.
    explicit ElfSymbols(const std::string& path);

    bool ok() const { return error_.empty(); }
    const std::string& error() const { return error_; }
    const std::string& build_id() const { return build_id_; } // lowercase hex, may be empty

    struct Entry {
        uint64_t start, size;
        std::string name;
    };
    // The symbol containing `vaddr` (an address as laid out in the file), or null.
    const std::string* lookup(uint64_t vaddr) const;
    // The same, with its start and size.
    const Entry* find(uint64_t vaddr) const;
    // Every function symbol, by start.
    const std::vector<Entry>& entries() const { return entries_; }

private:
  void add_plt_stubs(const ElfFile& file, const std::vector<Elf64_Shdr>& sh,
                     const Elf64_Shdr& shstrtab);
  static bool by_start(const Entry& a, const Entry& b);

  std::vector<Entry> entries_; // sorted by start
  std::string build_id_;
  std::string error_;
};

} // namespace prof::reader
