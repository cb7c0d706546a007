// Test library: an instrumented function in a shared object.
extern "C" __attribute__((noinline)) int lib_function(int x) { return x * 7; }
