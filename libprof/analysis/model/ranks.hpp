// The load-imbalance view of an MPI run (Score-P's and Scalasca's): each function's ncalls,
// tottime and cumtime across the ranks, as their minimum, mean and maximum, and the rank that
// has the maximum. A rank is the merge of every trace that names it (a rank that forked or
// exec'd has several); a rank that never called a function counts 0 for it, as Scalasca does.
#pragma once

#include "analysis/model/profile.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace prof::analysis {

// One metric across the ranks.
struct RankSpread {
    double min = 0, mean = 0, max = 0;
    uint32_t max_rank = 0; // the lowest rank that has the maximum
    // Scalasca's load imbalance, as a percentage of the mean: (max / mean - 1) * 100.
    double imbalance_percent() const { return mean > 0 ? (max / mean - 1) * 100 : 0; }
};

struct RankedFunction {
    Function function;  // name, file, line, module (stats: the merge over the ranks)
    uint32_t ranks = 0; // how many ranks called it
    RankSpread ncalls, tottime, cumtime;
};

struct RankProfile {
    uint32_t rank = 0;
    std::vector<uint32_t> pids; // its processes
    std::string host;
    Profile profile; // the merge of its traces
};

struct RankComparison {
    std::vector<RankProfile> ranks; // by rank
    std::vector<RankedFunction> functions;
    TimeBasis time; // of every rank's traces
    bool calls_counted = true;
};

// `ranks` need not be sorted; each rank once.
RankComparison compare_ranks(std::vector<RankProfile> ranks);

} // namespace prof::analysis
