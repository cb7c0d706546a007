// The control flow of an object's machine code, as far as the time of a sample needs it: where
// its x86-64 instructions start and which jumps lead to each. A timer interrupt names the
// instruction after the one that held the CPU, and after a jump the CPU mispredicted, the time
// it takes to fetch the right path again falls on the first instruction there (on snappy's
// marked CompressFragment, the scan loop's exit put 5% of the function's samples on the first
// instruction of the PROF_SCOPE's end): that time is the jump's, not that instruction's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace prof::reader {

class ElfSymbols;

// One x86-64 instruction (64-bit mode) as compilers emit it.
struct X86Instruction {
    uint8_t length = 0; // 0: not decoded (cut short, or an encoding left out)
    bool jump = false;  // a direct jump (jmp, jcc, loop, jrcxz) to `target`
    bool falls = true;  // the next instruction may run after it (not jmp, ret, ud2, hlt)
    int64_t target = 0; // of a jump: relative to the instruction's address
};

// Decodes the instruction at code[0..avail).
X86Instruction decode_x86(const uint8_t* code, size_t avail);

class CodeFlow {
  public:
    // Decodes the functions of `path` (those `symbols` holds, in executable sections) whose
    // ranges meet [first, last); none when the file cannot be read or is not x86-64.
    CodeFlow(const std::string& path, const ElfSymbols& symbols, uint64_t first = 0,
             uint64_t last = UINT64_MAX);

    // The start of the decoded instruction that holds `vaddr`, or 0.
    uint64_t instruction_at(uint64_t vaddr) const;
    // The jumps to the instruction at `vaddr` (their addresses), and whether the instruction
    // before it runs into it.
    struct Entry {
        std::vector<uint64_t> jumps;
        bool fall_through = false;
        uint64_t previous = 0; // the instruction before (0: none decoded)
    };
    Entry entry(uint64_t vaddr) const;
    size_t instructions() const { return starts_.size(); }

  private:
    static constexpr uint8_t kLength = 0x0f, kFalls = 0x10;
    std::vector<uint64_t> starts_;                     // sorted
    std::vector<uint8_t> info_;                        // per start: length | kFalls
    std::vector<std::pair<uint64_t, uint64_t>> jumps_; // (target, source), sorted
};

} // namespace prof::reader
