// Empty instrumentation hooks in a shared library: the cost of -finstrument-functions plus a
// PLT call per event, with no work in the hook.
extern "C" void __cyg_profile_func_enter(void*, void*) {}
extern "C" void __cyg_profile_func_exit(void*, void*) {}
