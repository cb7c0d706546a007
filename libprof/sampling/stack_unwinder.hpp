// Call stacks of sampled threads from copies of their user stacks (perf_event's
// PERF_SAMPLE_STACK_USER), unwound after the fact with the .eh_frame call frame information of
// the binaries on disk: the stacks of code built without frame pointers (Debian's libc, most -O2
// code), which the kernel's frame-pointer walk gets wrong. The rules are the runtime's
// (unwind/prof/cfi_rules.hpp): a frame that they cannot describe, or whose slots lie beyond the
// copy, ends the walk, and the caller completes the stack from the frame-pointer chain.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace prof::sampling {

enum class UnwindResult {
    kNone,     // not even the first frame
    kPartial,  // the walk ended before the outermost frame
    kComplete, // down to the thread's first frame (_start, clone)
};

// The unwind tables of one object mapped at one load base.
struct UnwindModule {
    uint64_t base = 0;        // load base: runtime address - address in the file
    int64_t delta = 0;        // address in the file + delta = where the tables' bytes say it is
    const uint8_t* hdr = nullptr; // .eh_frame_hdr, in the mapped file
    size_t hdr_size = 0;
    mutable std::unordered_map<uint64_t, uint64_t> rules; // address in the file -> rule word
};

class StackUnwinder {
  public:
    StackUnwinder();
    ~StackUnwinder();
    // The tables of `path` loaded at `base`; null when the file or its .eh_frame_hdr is missing.
    const UnwindModule* module(const std::string& path, uint64_t base);
    // The tables of the vDSO mapped at `base` in the target: the kernel maps one image into
    // every process, so this process's own (AT_SYSINFO_EHDR) has them. Null without one.
    const UnwindModule* vdso(uint64_t base);
    // Walks from the registers of the sample over `stack` (the bytes from `sp` up). Return
    // addresses go to `pcs` after the first address (`ip`), at most `max` in all.
    UnwindResult unwind(uint64_t ip, uint64_t sp, uint64_t bp, const uint8_t* stack, size_t size,
                        const std::function<const UnwindModule*(uint64_t)>& module_at,
                        std::vector<uint64_t>& pcs, uint32_t max);

  private:
    struct File;
    std::map<std::string, std::unique_ptr<File>> files_;
    std::map<std::pair<std::string, uint64_t>, std::unique_ptr<UnwindModule>> modules_;
    std::map<uint64_t, std::unique_ptr<UnwindModule>> vdso_modules_;
};

} // namespace prof::sampling
