// profpack's rewrite of a finished trace into the packed form, format 2.2 (docs/trace-format.md,
// section 13): the chunks of the file one after the other, each zstd-compressed, and in the
// thread streams the memory records as references to blocks instead of pointers, with their
// times rounded down to a power-of-two number of ticks (at most 4 us). Every other record keeps its
// meaning and its exact time. heaptrack's interpret step does the same kind of work after a run.
#pragma once

#include <cstdint>
#include <string>

namespace prof::pack {

struct PackOptions {
    int level = 9;            // zstd compression level
    bool exact_times = false; // keep memory record times to the tick (memory_time_shift 0)
};

struct PackResult {
    uint64_t bytes_in = 0, bytes_out = 0;
    uint64_t chunks = 0;
    uint64_t memory_records = 0;  // Alloc, Free, Realloc records rewritten
    uint64_t remote_frees = 0;    // of them, releases of a block another thread allocated
    unsigned time_shift = 0;      // memory record times are in units of 2^time_shift ticks
    double time_unit_seconds = 0; // the same in seconds
};

// Packs the finished trace `in` into `out` (which may be `in`: the file is replaced once the
// packed one is complete). Throws reader::TraceError for an input that is not a complete trace, and
// std::runtime_error when the output cannot be written (nothing is left behind then).
PackResult pack_trace(const std::string& in, const std::string& out, const PackOptions& options);

// For tools that pack: SIGINT, SIGQUIT, SIGTERM and SIGHUP then remove the packed file being
// written, if any, before they end the process as they would have (the trace is never touched
// before its packed file is complete).
void remove_partial_pack_on_signals();

} // namespace prof::pack
