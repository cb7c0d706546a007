// profreport --export pprof: gzipped profile.proto (github.com/google/pprof, proto/profile.proto),
// which go tool pprof reads and the fleet backends (Pyroscope, Parca, Grafana) ingest.
//   A call profile: sample types calls/count and wall/nanoseconds, one sample per call path,
//   so that pprof's flat is tottime (and ncalls) and its cum is cumtime. A trace timed by its
//   CPU samples has samples/count (the samples taken with the path innermost) and
//   cpu/nanoseconds instead of wall.
//   --memory: the heap profile as Go writes it, alloc_objects/count, alloc_space/bytes,
//   inuse_objects/count and inuse_space/bytes (in use: live at the trace's end), one sample per
//   allocation site.
// Every sample has the labels host, pid and (in an MPI job) rank. Functions are already named:
// each module is a Mapping with its build-id and has_functions, has_filenames and
// has_line_numbers set; each frame of code is one Location, whose Lines are the functions
// inlined there (sampled traces), innermost first, and its own function, each at its line.
#pragma once

#include "render/model.hpp"

#include "analysis/model/call_tree.hpp"
#include "analysis/model/profile.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace prof::render {

struct PprofProcess {
    std::string host;
    uint32_t pid = 0;
    std::optional<uint32_t> rank;
    uint64_t start_utc_ns = 0, end_utc_ns = 0;
    const views::CallTree* tree = nullptr; // the call profile (and the traces' modules)
    const MemoryReport* memory = nullptr;  // the heap profile (memory == true)
};

// The serialized Profile message (not yet compressed). Throws std::invalid_argument when the
// processes mix call profiles timed by samples and by the hooks (two time types), or when
// `memory` is asked of processes without allocation records.
std::string pprof_profile(const std::vector<PprofProcess>& processes, bool memory);

// gzip (RFC 1952) of `data`, as pprof files are.
std::string gzip(const std::string& data);

} // namespace prof::render
