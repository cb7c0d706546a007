// The control flow of an object's machine code, as far as the time of a sample needs it: where
// its x86-64 instructions start and what leads to each. A timer interrupt names the instruction
// after the one that held the CPU, and after a branch the CPU mispredicted, the time it takes to
// fetch the right path falls on the first instruction there (on snappy's marked
// CompressFragment, the scan loop's exit put 5% of the function's samples on the first
// instruction of the PROF_SCOPE's end): that time is the branch's, not that instruction's.
#pragma once

#include "reader/elf_file.hpp"
#include "reader/elf_symbols.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace prof::reader {

// One x86-64 instruction (64-bit mode) as compilers emit it.
struct X86Instruction {
    uint8_t length = 0;       // 0: not decoded (cut short, or an encoding left out)
    bool jump = false;        // a direct jump (jmp, jcc, loop, jrcxz) to `target`
    bool conditional = false; // of those: it may also run on to the next instruction
    bool indirect = false;    // a jmp through a register or memory: its targets are unknown
    bool falls = true;        // the next instruction may run after it (not jmp, ret, ud2, hlt)
    bool nop = false;         // a no-op (padding)
    int64_t target = 0;       // of a jump: relative to the instruction's address
};

// Decodes the instruction at code[0..avail).
X86Instruction decode_x86(const uint8_t* code, size_t avail);

class CodeFlow {
  public:
    // Reads nothing yet but `path`'s sections; decode() reads a function's code.
    CodeFlow(const std::string& path, const ElfSymbols& symbols);

    // The function a part GCC split off (`f.cold`, `f.cold.1`) belongs to; `fn` itself else.
    const ElfSymbols::Entry& hot_part(const ElfSymbols::Entry& fn);
    // Decodes `fn` and the parts GCC split off it (`fn.cold`), once. True when every
    // instruction decoded and none jumps through a register or memory: then every way into an
    // instruction of the function is known.
    bool decode(const ElfSymbols::Entry& fn);
    // Whether `vaddr` is code of `fn` or of a part split off it (`fn` decoded).
    bool holds(const ElfSymbols::Entry& fn, uint64_t vaddr) const;

    // The start of the decoded instruction that holds `vaddr`, or 0.
    uint64_t instruction_at(uint64_t vaddr) const;
    // What leads to the instruction at `vaddr`: the jumps to it (their addresses), and the
    // instruction that runs on into it, if one does (no-op padding skipped).
    struct Entry {
        std::vector<uint64_t> jumps;
        uint64_t previous = 0;             // runs on into it (0: none)
        bool previous_conditional = false; // that one is a conditional jump not taken
    };
    Entry entry(uint64_t vaddr) const;
    size_t instructions() const { return info_.size(); }
    size_t jumps() const { return jumps_.size(); }
    // Whether the decoded instruction at `vaddr` may run on to the next one; is a no-op.
    bool falls(uint64_t vaddr) const;
    bool is_nop(uint64_t vaddr) const;

  private:
    bool decode_range(uint64_t start, uint64_t end);
    static constexpr uint8_t kLength = 0x0f, kFalls = 0x10, kNop = 0x20, kConditional = 0x40;
    ElfFile file_;
    const ElfSymbols& symbols_;
    struct Section {
        uint64_t addr, size, offset;
    };
    std::vector<Section> code_;               // the executable sections in the file
    std::map<uint64_t, uint8_t> info_;        // instruction start -> length | flags
    std::multimap<uint64_t, uint64_t> jumps_; // target -> source
    struct Function {
        bool known = false;
        std::vector<std::pair<uint64_t, uint64_t>> ranges; // its code and its parts'
    };
    std::unordered_map<uint64_t, Function> functions_;           // by start: decode()'s
    std::unordered_map<uint64_t, const ElfSymbols::Entry*> hot_; // a part's start: hot_part()'s
    std::unordered_map<uint64_t, bool> ranges_; // range start -> decode_range()'s answer
};

} // namespace prof::reader
