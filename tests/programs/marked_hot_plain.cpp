// marked_hot.cpp's work without the markers (see there).
#define PROF_DISABLE
#include <prof/prof.hpp>

#include <cstddef>
#include <cstdint>

extern "C" uint64_t spin(int rounds);

#define WORK_NAME plain_work
#define SCOPED_NAME plain_scoped
#define SLOW_NAME plain_slow
#include "marked_hot.inc"
