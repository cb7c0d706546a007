// The line tables as line_profiler and memory_profiler print them, and as JSON.
#pragma once

#include "render/model.hpp"

#include "analysis/model/lines.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace prof::render {

struct LineOptions {
    double unit = 1e-9;                   // seconds per timer unit
    bool memory = false;                  // memory_profiler's columns instead of line_profiler's
    std::vector<std::string> source_dirs; // where to look for a source file not found as recorded
};

void print_line_tables(std::FILE* out, const std::vector<LineTable>& tables, const LineOptions& o);
void print_line_json(std::FILE* out, const std::vector<LineTable>& tables);

} // namespace prof::render
