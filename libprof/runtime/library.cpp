// Start and end of the runtime inside the process: the library constructor starts tracing
// before the program's own constructors run, and the destructor writes the symbol table and
// the end record after the program's static destructors.
#include "runtime.hpp"

namespace prof::rt {
void create_thread_key();
}

// Priority 101: before constructors of default priority in this library and, since
// libprof.so is a dependency of the program, before the program's.
__attribute__((constructor(101))) PROF_NOINSTR static void prof_library_start() {
    prof::rt::runtime_start();
    prof::rt::create_thread_key();
}

__attribute__((destructor(101))) PROF_NOINSTR static void prof_library_finish() {
    prof::rt::runtime_finish();
}
