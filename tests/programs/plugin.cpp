// Test library, instrumented, loaded with dlopen by tests/programs/spawner.cpp.
extern "C" __attribute__((noinline)) int plugin_work(int x) { return x * 11; }
