// profreport --export rows: one row per (process, function), per (process, thread, function)
// with --threads, and per (process, allocation site), for SQL engines (DuckDB, ClickHouse,
// Spark) as NDJSON or CSV. The schema is versioned (docs/rows.md): every row carries its
// `schema` number, and a new version only adds columns at the end.
#pragma once

#include "render/model.hpp"

#include "analysis/model/profile.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace prof::render {

inline constexpr int kRowsSchema = 1;

// One process (one trace) of the rows: who it is, and its profiles.
struct RowsProcess {
    std::string run, host, exe, trace;
    std::optional<uint32_t> rank;
    uint32_t pid = 0, ppid = 0;
    const Profile* profile = nullptr;     // every thread merged
    const MemoryReport* memory = nullptr; // its allocation sites (none: no rows)
    std::vector<const Profile*> threads;  // one per thread, with --threads
};

enum class RowsFormat { kNdjson, kCsv };

// The column names, in order (the CSV header).
const std::vector<std::string>& rows_columns();
void write_rows(std::FILE* out, const std::vector<RowsProcess>& processes, RowsFormat format);

} // namespace prof::render
