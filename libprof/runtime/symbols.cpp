// The symbol table written at finish: for every function address seen, its demangled name,
// the symbol as it appears in the object file, and the source file and line, resolved once per
// address (symbolizer.cpp: libdwfl, Boost.Stacktrace as the fallback). This runs at
// exit, off the hot path; it allocates through the process's operator new, so it runs with
// the calling thread's hooks blocked. A trace whose process died before this point is
// resolved by profreport from the module map and the binaries on disk instead.
//
// Addresses are named against the objects mapped at exit. Code of an object unloaded earlier
// was named when dlclose unloaded it (modules.cpp); its addresses are skipped here unless
// another object now occupies them, which then gets a Symbol record of its own after its
// Module record, so that a reader attributes each name to the right object.
#include "runtime.hpp"

#include "symbolizer.hpp"

#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>
#include <string>

namespace prof::rt {
namespace {

PROF_NOINSTR void collect(uintptr_t address, void* arg) {
    auto* list = static_cast<uintptr_t*>(arg);
    list[1 + list[0]++] = address;
}

PROF_NOINSTR void write_symbol(Symbolizer& symbolizer, uintptr_t address) {
    Dl_info info;
    // Nothing mapped there any more: its object was unloaded (and named then).
    if (!dladdr(reinterpret_cast<void*>(address), &info)) return;
    SymbolInfo found;
    try {
        if (!symbolizer.resolve(address, found)) return;
    } catch (...) {
        return; // out of memory at exit: leave this one to profreport
    }
    write_symbol_record(address, found.name.c_str(), found.symbol.c_str(), found.file.c_str(),
                        found.line);
}

} // namespace

PROF_NOINSTR void write_symbol_record(uintptr_t address, const char* name, const char* symbol,
                                      const char* file, size_t line) {
    static uint8_t rec[4 * (format::kMaxString + 16) + 32];
    lock_global(); // `rec` is shared by the threads that name code
    // At most 48 KiB in all, so that the record fits in the smallest chunk (64 KiB).
    uint8_t* p =
        format::put_symbol(rec, address, name, strnlen(name, format::kMaxString), symbol,
                           strnlen(symbol, format::kMaxString), file, strnlen(file, 4096), line);
    process_record(rec, size_t(p - rec));
    unlock_global();
}

// Snapshot of the addresses under the lock, then resolution without it (the resolvers take the
// dynamic loader's lock), then one locked append per record.
PROF_NOINSTR void write_symbols() {
    uint8_t prev = block_thread();
    lock_global();
    // An object whose functions the hooks only reached through addresses cached for an
    // earlier object at the same place has no Module record yet: it must precede its names.
    scan_modules();
    size_t n = function_count();
    size_t bytes = (n + 1) * sizeof(uintptr_t);
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    auto* list = m == MAP_FAILED ? nullptr : static_cast<uintptr_t*>(m);
    if (list) for_each_function(collect, list);
    unlock_global();
    if (list) {
        try {
            Symbolizer symbolizer;
            for (uintptr_t i = 0; i < list[0]; ++i) write_symbol(symbolizer, list[1 + i]);
        } catch (...) { // out of memory at exit: profreport names what is left
        }
        munmap(m, bytes);
    }
    unblock_thread(prev);
}

} // namespace prof::rt
