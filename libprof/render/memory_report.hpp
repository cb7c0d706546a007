// The memory report (heaptrack's questions, memory_profiler's numbers): summary, top sites by
// allocations, peak contribution, leaks and temporaries, each with its stack; and its JSON.
#pragma once

#include "render/model.hpp"

#include "analysis/model/profile.hpp"

#include <cstdio>

namespace prof::render {

struct MemoryOptions {
    size_t limit = 10;      // sites per section
    size_t depth = 8;       // frames shown per stack
    bool full_paths = false;
};

void print_memory(std::FILE* out, const MemoryReport& m, const MemoryOptions& o);
void print_memory_json(std::FILE* out, const MemoryReport& m, const MemoryOptions& o);
// Heap and RSS over time (mprof plot's picture), a self-contained SVG.
void write_memory_plot(std::FILE* out, const MemoryReport& m, const std::string& title);

} // namespace prof::render
