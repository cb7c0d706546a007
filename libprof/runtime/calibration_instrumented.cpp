// Built with -finstrument-functions (see libprof/CMakeLists.txt): the runtime's own
// instrumented code, used only to measure what the hooks cost (calibration.cpp).
#include "runtime.hpp"

namespace prof::rt {

__attribute__((noinline)) void calibration_leaf() { __asm__ volatile(""); }

// A binary tree of calls (2^(depth+1) - 1 of them): inner calls and leaves, as real code has.
__attribute__((noinline)) void calibration_tree(int depth) {
    if (depth == 0) {
        calibration_leaf();
        return;
    }
    calibration_tree(depth - 1);
    calibration_tree(depth - 1);
}

} // namespace prof::rt
