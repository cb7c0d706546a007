// The profiler's own instructions inside an instrumented object: the PLT stubs of the
// -finstrument-functions hooks, and each call of a hook with the instructions that load its
// two arguments just before it. A sample that interrupts one of them is the profiler's cost,
// not the program's: the uninstrumented program has none of them. With GCC, which keeps the
// hooks of inlined functions, they are a large part of a tiny inlined function's code (in a GCC
// build of snappy, about a fifth of the samples in CompressFragment's own code fell on them).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace prof::reader {

class ElfSymbols;

class HookCode {
  public:
    // Reads `path` (whose function symbols and PLT stubs `symbols` holds) for its hook code;
    // none when the file cannot be read or calls no hook through a PLT stub.
    HookCode(const std::string& path, const ElfSymbols& symbols);

    // Whether the instruction at `vaddr` (an address as laid out in the file) is hook code.
    bool holds(uint64_t vaddr) const;
    // How many calls of a hook the code has.
    size_t calls() const { return calls_; }

  private:
    std::vector<std::pair<uint64_t, uint64_t>> ranges_; // [start, end), sorted, disjoint
    size_t calls_ = 0;
};

} // namespace prof::reader
