#include "analysis/model/ranks.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace prof::analysis {

namespace {

// The same function in the traces of different ranks: its object, symbol, name and where it is
// defined, as a merge of traces tells functions apart. Addresses differ between processes
// (ASLR), these do not.
using FunctionKey =
    std::tuple<std::string, std::string, std::string, std::string, uint32_t, std::string>;

FunctionKey key_of(const Function& f) {
    return {f.module, f.symbol, f.name, f.file, f.line, f.kind};
}

RankSpread spread(const std::vector<double>& per_rank, const std::vector<RankProfile>& ranks) {
    RankSpread s;
    s.min = *std::min_element(per_rank.begin(), per_rank.end());
    size_t at = size_t(std::max_element(per_rank.begin(), per_rank.end()) - per_rank.begin());
    s.max = per_rank[at];
    s.max_rank = ranks[at].rank;
    double sum = 0;
    for (double v : per_rank) sum += v;
    s.mean = sum / double(per_rank.size());
    return s;
}

} // namespace

RankComparison compare_ranks(std::vector<RankProfile> ranks) {
    RankComparison c;
    std::sort(ranks.begin(), ranks.end(),
              [](const RankProfile& x, const RankProfile& y) { return x.rank < y.rank; });
    c.ranks = std::move(ranks);
    if (c.ranks.empty()) return c;
    const size_t n = c.ranks.size();
    struct Row {
        Function function;
        std::vector<Stats> per_rank;
    };
    std::map<FunctionKey, Row> rows;
    for (size_t r = 0; r < n; ++r) {
        const Profile& p = c.ranks[r].profile;
        c.time.add(p.time);
        for (const Function& f : p.functions) {
            auto [it, fresh] = rows.try_emplace(key_of(f));
            Row& row = it->second;
            if (fresh) {
                row.function = f;
                row.function.stats = {};
                row.per_rank.resize(n);
            }
            row.per_rank[r].add(f.stats);
            row.function.stats.add(f.stats);
        }
    }
    c.calls_counted = c.time.calls_counted();
    c.functions.reserve(rows.size());
    std::vector<double> ncalls(n), tottime(n), cumtime(n);
    for (auto& [key, row] : rows) {
        RankedFunction f;
        f.function = std::move(row.function);
        for (size_t r = 0; r < n; ++r) {
            const Stats& s = row.per_rank[r];
            ncalls[r] = double(s.ncalls);
            tottime[r] = s.tottime;
            cumtime[r] = s.cumtime;
            // A function some rank ran counts for it even when no call was counted (sampled).
            if (s.ncalls || s.tottime > 0 || s.cumtime > 0) ++f.ranks;
        }
        f.ncalls = spread(ncalls, c.ranks);
        f.tottime = spread(tottime, c.ranks);
        f.cumtime = spread(cumtime, c.ranks);
        c.functions.push_back(std::move(f));
    }
    return c;
}

} // namespace prof::analysis
