// profreport latency's report: per function the distribution of its calls' durations, and for
// the first functions their slowest calls and what made their tail slow; as text or JSON.
#pragma once

#include "render/model.hpp"

#include "analysis/model/latency.hpp"

#include <cstdio>
#include <string>

namespace prof::render {

struct LatencyPrint {
    size_t limit = 0;  // rows of the table (0: all)
    size_t detail = 3; // functions of two calls or more, from the top of the table, shown with
                       // their slowest calls and tail (text; JSON has them for every function)
    std::string format = "text"; // or "json"
    std::string source;          // what was read ("app.trace"), for the header
};

void print_latency(std::FILE* out, const LatencyReport& r, const LatencyPrint& o);

} // namespace prof::render
