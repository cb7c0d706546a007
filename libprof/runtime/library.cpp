// Start and end of the runtime inside the process: the library constructor starts tracing
// before the program's own constructors run, and the destructor writes the symbol table and
// the end record after the program's static destructors.
#include "runtime.hpp"

// Priority 101: before constructors of default priority in this library and, since
// libprof.so is a dependency of the program, before the program's.
__attribute__((constructor(101))) PROF_NOINSTR static void prof_library_start() {
    prof::rt::note_library_started();
    uint8_t prev = prof::rt::block_thread(); // the start path takes the global lock
    prof::rt::runtime_start();
    // A start from a .preinit_array hook came before the C library's initializer: what needs
    // it (`environ`, and the C library's functions found through its handle) is done now.
    prof::rt::options_after_environ();
    prof::rt::children_start();
    prof::rt::child_environment_start();
    prof::rt::create_thread_key();
    prof::rt::resolve_longjmp();
    prof::rt::unblock_thread(prev);
}

__attribute__((destructor(101))) PROF_NOINSTR static void prof_library_finish() {
    prof::rt::runtime_finish();
}

// ---- C API (prof/prof.h) --------------------------------------------------------------------
#include <prof/prof.h>

extern "C" __attribute__((visibility("default"))) PROF_NOINSTR int prof_is_tracing(void) {
    return prof::rt::tracing_active() ? 1 : 0;
}

extern "C" __attribute__((visibility("default"))) PROF_NOINSTR const char* prof_trace_path(void) {
    return prof::rt::tracing_active() ? prof::rt::trace_path() : nullptr;
}
