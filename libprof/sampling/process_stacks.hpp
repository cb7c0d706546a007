// The call stacks of one running process's threads, from their registers and a copy of the
// top of their stacks: unwound with the binaries' .eh_frame (stack_unwinder.hpp) and the
// frame-pointer chain where those end, and named from the binaries on disk (symbols, DWARF
// lines, the functions inlined at each address; debug files found by build id or
// .gnu_debuglink). What profrun --dump prints and --top counts. The mappings are the
// process's /proc/PID/maps, read again when an address falls outside all of them.
#pragma once

#include "sampling/stack_unwinder.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace prof::reader {
class DwarfLines;
class ElfSymbols;
} // namespace prof::reader

namespace prof::sampling {

struct NamedFrame {
    uint64_t address = 0;   // the instruction (innermost frame) or the return address
    std::string module;     // the mapped file, as /proc/PID/maps names it; empty: none
    uint64_t offset = 0;    // the address as laid out in the module's file
    std::string function;   // demangled; empty when no symbol covers the address
    std::string file;       // the source file, as DWARF names it; empty when unknown
    uint32_t line = 0;
    bool inlined = false;   // a function inlined into the frame below it
};

// A thread's registers and the top of its stack (from the stack pointer up).
struct StackCopy {
    uint64_t ip = 0, sp = 0, bp = 0;
    bool bp_known = false;      // bp is the thread's (not when read from /proc while it waits)
    const uint8_t* stack = nullptr;
    size_t size = 0;
    // The frame-pointer chain the kernel walked (perf's callchain), ip first; empty: the walk
    // is made on the copy.
    const uint64_t* chain = nullptr;
    size_t chain_size = 0;
};

// One mapping of the process.
struct ProcessMap {
    uint64_t start = 0, end = 0, offset = 0;
    bool executable = false;
    std::string path;
};

class ProcessStacks {
  public:
    // `inlined`: frames for the functions inlined at each address.
    ProcessStacks(pid_t pid, bool inlined);
    ~ProcessStacks();

    // The process's mappings, as last read.
    const std::vector<ProcessMap>& maps() const { return maps_; }
    // Reads them again (a library loaded since).
    void reload_maps();

    // The return addresses of the stack, innermost first; `complete` when they reach its first
    // frame, else `end` says why they stop.
    std::vector<uint64_t> unwind(const StackCopy& c, std::string& end, bool& complete);
    // The frames of the addresses: each named, with the functions inlined at it first.
    std::vector<NamedFrame> frames(const std::vector<uint64_t>& pcs);

  private:
    struct Names;
    const ProcessMap* map_at(uint64_t address);
    const UnwindModule* module_at(uint64_t address);
    std::optional<uint64_t> load_base(const ProcessMap& m);
    Names& names(const std::string& path);
    std::vector<NamedFrame> name(const std::string& path, uint64_t vaddr, NamedFrame f);
    std::vector<uint64_t> frame_chain(const StackCopy& c);

    pid_t pid_;
    bool inlined_;
    std::vector<ProcessMap> maps_;
    uint64_t reloaded_ns_ = 0; // when the maps were last read again for a missing address
    StackUnwinder unwinder_;
    std::map<std::pair<std::string, uint64_t>, std::optional<uint64_t>> bases_;
    std::map<std::string, std::unique_ptr<Names>> names_;
    std::map<std::pair<std::string, uint64_t>, std::vector<NamedFrame>> named_;
};

} // namespace prof::sampling
