// diff's tables: per function (diff_profiles) and per allocation site (diff_memory), as text,
// CSV or JSON.
#pragma once

#include "render/model.hpp"

#include "analysis/model/diff.hpp"

#include <cstdio>
#include <string>

namespace prof::render {

// format: "text", "csv" or "json".
void print_diff(std::FILE* out, const DiffResult& d, const DiffOptions& o,
                const std::string& format);
// format: "text", "csv" or "json".
void print_memory_diff(std::FILE* out, const MemoryDiffResult& d, const MemoryDiffOptions& o,
                       const std::string& format);

} // namespace prof::render
