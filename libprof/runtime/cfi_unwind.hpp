// The memory profiler's DWARF unwinder (PROF_MEM_UNWIND=dwarf): x86-64 call stacks from the
// .eh_frame call frame information, with each address's rule cached so that a repeated stack
// costs a few loads per frame instead of libgcc's FDE search and CFA program per frame.
// Internal; the hot-path contract of runtime.hpp applies (no allocation, no lock to read).
#pragma once

#include <cstdint>

namespace prof::rt {

// Return addresses of the calling thread's stack, innermost first: exactly those that libgcc's
// _Unwind_Backtrace, called in place of this function, would pass to its callback (the first
// is the return address into the caller of cfi_backtrace). The first `skip` are dropped, at
// most `max` are stored. Every stack slot read lies in [current stack pointer, stack_top).
// Returns the count, or -1 when a frame needs what the cached rules do not describe (signal
// frames, CFA expressions as in PLT stubs, code without unwind information outside any loaded
// object, a frame outside the stack bounds): the caller then asks _Unwind_Backtrace. Needs no
// lock to read the cache and never allocates; a miss parses the unwind tables. A stack that
// goes through libgcc's own unwinder (an allocation libgcc makes while it holds its lock) is
// never left to libgcc: it ends at the first frame the cached rules and the .eh_frame_hdr
// tables cannot describe, and the count is returned.
int cfi_backtrace(uintptr_t* pcs, uint32_t max, uint32_t skip, uintptr_t stack_top);

// Forgets every cached rule (they belong to the previous generation from now on). Unloaded
// objects are noticed without it (cfi_unwind.cpp watches glibc's unload count); a dlclose
// wrapper may call it to drop the rules at once. Safe from any thread at any time.
void cfi_invalidate();

// Rules computed from the unwind tables so far (cache misses), for tests.
uint64_t cfi_slow_lookups();

// For tests: the FDE covering `pc` as the unwinder finds it without libgcc (in the
// .eh_frame_hdr table of the loaded object containing `pc`), or null.
const void* cfi_fde_from_tables(uintptr_t pc);

} // namespace prof::rt
