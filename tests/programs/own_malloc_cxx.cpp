// own_malloc.c built as C++: libstdc++ is the program's own (see there).
#include "own_malloc.c"
