// Names code addresses at the finish (symbolizer.cpp). Off the hot path: it allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace prof::rt {

struct SymbolInfo {
    std::string name;   // demangled
    std::string symbol; // as in the object file, when the address is the symbol's start
    std::string file;   // source file of the address, empty if unknown
    size_t line = 0;
};

// One per finish: the modules mapped now, read lazily as their addresses are asked about.
class Symbolizer {
  public:
    Symbolizer();
    ~Symbolizer();
    Symbolizer(const Symbolizer&) = delete;
    Symbolizer& operator=(const Symbolizer&) = delete;

    // False when nothing names `address`. May throw std::bad_alloc.
    bool resolve(uintptr_t address, SymbolInfo& out);

  private:
    void* dwfl_ = nullptr; // Dwfl*, kept out of this header
};

} // namespace prof::rt
