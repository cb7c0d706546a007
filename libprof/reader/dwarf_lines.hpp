// Source file and line of code addresses from an ELF file's DWARF line tables on disk, and the
// function symbol from its (or its debug file's) symbol table: the fallback that gives names
// and file:line to functions and stack frames of a trace whose process died (SIGKILL, abort,
// _exit) before writing its symbol table. elfutils' libdwfl reads the tables
// (the object's own, or a separate debug file found by build id), only when asked.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace prof::reader {

class DwarfLines {
  public:
    explicit DwarfLines(const std::string& path);
    ~DwarfLines();
    DwarfLines(const DwarfLines&) = delete;
    DwarfLines& operator=(const DwarfLines&) = delete;

    // The source position of `vaddr` (an address as laid out in the file); false when the
    // file has no line information for it.
    bool lookup(uint64_t vaddr, std::string& file, uint32_t& line) const;
    // The function symbol whose extent contains `vaddr`, from the symbol table libdwfl finds
    // for the file: its own .symtab, else the separate debug file's (where the local symbols
    // of a stripped library such as libc's __libc_start_call_main live), else .dynsym. The
    // raw (mangled) name; false when no function symbol contains the address.
    bool function(uint64_t vaddr, std::string& symbol) const;
    // The same, with the function's start (an address as laid out in the file).
    bool function(uint64_t vaddr, std::string& symbol, uint64_t& start) const;

    // A function inlined at `vaddr`: its name (the linkage name where it has one, else the
    // source name), where it is declared, and where it was inlined (a line of its caller).
    struct InlinedCall {
        std::string symbol;
        std::string decl_file;
        uint32_t decl_line = 0;
        std::string call_file;
        uint32_t call_line = 0;
    };
    // The functions inlined at `vaddr` (DW_TAG_inlined_subroutine scopes), outermost first:
    // the first was inlined into the function `vaddr` is in, each next one into the one before.
    // Empty when nothing is inlined there or the file has no DWARF.
    std::vector<InlinedCall> inlined(uint64_t vaddr) const;

    // The addresses (as laid out in the file) of the static variables declared in the lexical
    // blocks that hold `vaddr`, in the function holding it (not in functions inlined there):
    // PROF_SCOPE's site is one, so the code of a marked scope's block is known by its site.
    std::vector<uint64_t> block_statics(uint64_t vaddr) const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace prof::reader
