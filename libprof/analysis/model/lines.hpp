// The line view's model (line_profiler's and memory_profiler's tables): per function with
// marked sites, one row per source line with hits, time and, when sampled, resident set size.
#pragma once

#include "analysis/model/profile.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace prof::analysis {

struct LineRow {
    uint32_t line = 0;
    uint64_t hits = 0;
    double time = 0; // seconds
    // The memory profiler and PROF_LINE_RSS=1: memory around the marked statement.
    uint64_t memory_samples = 0; // hits that measured memory (memory_profiler's Occurrences)
    uint64_t rss_samples = 0;    // of those, the hits that read the resident set size
    double rss_increment = 0;    // bytes, summed over the RSS reads
    double rss_last = 0;         // bytes after the latest RSS read
    double heap_increment = 0;   // usable heap bytes, summed over memory_samples
    // Sampled from outside (profrun --sample, --pid): `hits` are CPU samples, each the CPU time
    // since the one before, not one execution of the line: no time per hit.
    bool sampled = false;
    std::string kind;          // "line", "scope", "marked function", "region"
    std::string mark;          // the marking as written (PROF_LINE(statement), ...), from the
                               // trace: shown when the source file cannot be read
};

struct LineTable {
    std::string file;          // as recorded (the compiler's __FILE__)
    std::string function;      // display name of the enclosing function
    double total_time = 0;     // the PROF_FUNCTION time when marked, else the sum of the rows
    // Executions of marked lines whose markers' own cost that PROF_FUNCTION time still holds:
    // those of traces timed by their clock reads (too few samples), or of code whose DWARF
    // was not found (the samples in the markers' code cannot be told apart).
    uint64_t markers_in_total = 0;
    std::vector<LineRow> rows; // by line
    // Heap increments were recorded (the memory profiler ran, or some row has one): the heap
    // column is shown even for a function whose rows are all 0.
    bool heap = false;
};

// Tables for the threads `p` covers. `match` (a regex on "file:function", empty = all)
// selects functions.
std::vector<LineTable> line_tables(const Profile& p, const std::string& match = {});

} // namespace prof::analysis
