// profreport --ranks: the load-imbalance table of an MPI run as text, JSON or CSV.
#pragma once

#include "render/model.hpp"

#include "analysis/model/ranks.hpp"
#include "render/report.hpp"

#include <cstdio>
#include <string>

namespace prof::render {

// The ranks (rank, pids, host, calls, time), then one row per function: the min, mean and max
// over the ranks of ncalls, tottime and cumtime, the rank of each max, and the imbalance of the
// metric sorted by (max / mean - 1, in percent). `o.sort` orders by the max of ncalls, tottime
// or cumtime (cumtime for the keys that are no metric); `o.limit` and `o.filter` apply.
void print_ranks(std::FILE* out, const RankComparison& c, const TableOptions& o,
                 const std::string& format);

} // namespace prof::render
