// A C++ program linked with -lmimalloc that marks lines: the memory profiler then measures the
// usable size of each block (for the per-line heap deltas) with mimalloc's malloc_usable_size.
// At exit the runtime's finish names functions with C++ strings and libdw; none of those
// blocks may reach the allocator's malloc_usable_size (tcmalloc's aborts on a pointer not its
// own; mimalloc's reads the header of a segment that may not exist).
// Known counts: one malloc of 1,000 bytes and its free, each on a marked line, besides the
// emergency exception pool libstdc++ allocates at start (72,704 bytes) and releases at exit.
#include <prof/prof.hpp>

#include <cstdlib>
#include <mimalloc.h>

static void* volatile block; // kept: GCC removes a malloc whose block is only freed

int main() {
    PROF_LINE(block = std::malloc(1000));
    PROF_LINE(std::free(block));
    return mi_version() > 0 ? 0 : 1; // the program really uses the library it links
}
