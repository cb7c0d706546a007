// Shared by the analysis unit tests: traces built record by record (1 tick = 1 ns, so every
// time is an exact number of nanoseconds) and the replay engine's results looked up by name.
#pragma once

#include "analysis/engine/session.hpp"
#include "analysis/model/profile.hpp"
#include "analysis/model/call_tree.hpp"
#include "support/approx.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_builder.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace prof::test {

inline std::string save_trace(const TraceBuilder& b, const std::string& name) {
    std::string path = temp_path(name);
    b.save(path);
    return path;
}

// Names the functions of a thread's stream: `names[i]` is at address 0x1000 * (i + 1).
inline TraceBuilder& name_functions(TraceBuilder& b, const std::vector<std::string>& names) {
    for (size_t i = 0; i < names.size(); ++i)
        b.symbol(0x1000 * (i + 1), names[i], "/src/app.cpp", uint32_t(10 * (i + 1)));
    return b;
}
inline TraceBuilder& define_functions(TraceBuilder& b, size_t n) {
    for (size_t i = 0; i < n; ++i) b.function(0x1000 * (i + 1));
    return b;
}

inline TraceBuilder& overheads(TraceBuilder& b, const char* in, const char* out,
                               const char* line = "0.00") {
    b.tag(format::Tag::kMeta).str("overhead_in_ticks").str(in);
    b.tag(format::Tag::kMeta).str("overhead_out_ticks").str(out);
    return b.tag(format::Tag::kMeta).str("line_overhead_ticks").str(line);
}

inline analysis::Profile profile_of(const std::string& path, bool compensate = true) {
    analysis::Session s(analysis::SessionOptions{compensate, true, {}, nullptr});
    s.add_trace(path);
    return s.profile();
}

inline const analysis::Function& function(const analysis::Profile& p, const std::string& name) {
    for (const analysis::Function& f : p.functions)
        if (f.name == name) return f;
    FAIL("no function " << name);
    return p.functions.front();
}
inline const analysis::Stats& stats(const analysis::Profile& p, const std::string& name) {
    return function(p, name).stats;
}
inline size_t index_of(const analysis::Profile& p, const std::string& name) {
    for (size_t i = 0; i < p.functions.size(); ++i)
        if (p.functions[i].name == name) return i;
    FAIL("no function " << name);
    return 0;
}

// The caller -> callee edge; caller "" is the root (a thread's outermost frames).
inline const analysis::Stats& edge(const analysis::Profile& p, const std::string& caller,
                                   const std::string& callee) {
    size_t from = caller.empty() ? analysis::kRoot : index_of(p, caller);
    size_t to = index_of(p, callee);
    for (const analysis::Edge& e : p.edges)
        if (e.caller == from && e.callee == to) return e.stats;
    FAIL("no edge " << caller << " -> " << callee);
    return p.edges.front().stats;
}

// Seconds equal to `ns` nanoseconds, to the last bits of a double (0 exactly).
inline bool same_time(double seconds, double ns) {
    return ns == 0 ? seconds == 0 : seconds == approx(ns * 1e-9);
}

// Checks a function's or an edge's four numbers; times in nanoseconds.
inline void check_stats(const analysis::Stats& s, uint64_t ncalls, uint64_t pcalls, double tot_ns,
                        double cum_ns) {
    CHECK(s.ncalls == ncalls);
    CHECK(s.pcalls == pcalls);
    CHECK_MESSAGE(same_time(s.tottime, tot_ns), "tottime ", s.tottime, " expected ", tot_ns, " ns");
    CHECK_MESSAGE(same_time(s.cumtime, cum_ns), "cumtime ", s.cumtime, " expected ", cum_ns, " ns");
}

// The call tree node at the path of function names from the root (thread label first when the
// tree is split by thread); SIZE_MAX when there is none.
inline size_t node_at(const analysis::views::CallTree& t, const std::vector<std::string>& path) {
    size_t n = 0;
    for (const std::string& name : path) {
        size_t next = SIZE_MAX;
        for (size_t c : t.nodes[n].children)
            if (t.name(t.nodes[c]) == name) next = c;
        if (next == SIZE_MAX) return SIZE_MAX;
        n = next;
    }
    return n;
}

} // namespace prof::test
