// libFuzzer target: a trace file from untrusted bytes through everything profreport does with
// it. The input goes into a memfd (a regular file without a disk), read by path as profreport
// would, then: the replay engine (merged and per-thread profiles, memory report, line tables),
// every text/CSV/JSON rendering, diffs of the trace against itself, allocation flame graphs,
// the call tree with its exports, and the timelines, all written to /dev/null.
// reader::TraceError is the expected answer to a bad file; anything else (a crash, a sanitizer
// report, another exception, a huge allocation, a hang) is a finding. Build: -DPROF_FUZZ=ON with
// clang (tests/fuzz/CMakeLists.txt); run: tests/fuzz/run_fuzz.sh.
#include "analysis/model/lines.hpp"
#include "render/lines.hpp"
#include "render/memory_report.hpp"
#include "analysis/engine/session.hpp"
#include "analysis/model/profile.hpp"
#include "render/report.hpp"
#include "analysis/model/call_tree.hpp"
#include "analysis/model/diff.hpp"
#include "render/diff.hpp"
#include "render/render.hpp"
#include "render/timeline.hpp"
#include "reader/trace_reader.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

using namespace prof;

namespace {

// Per-thread views are the same code on less data: a few threads are enough.
constexpr size_t kMaxThreadViews = 4;

std::FILE* devnull() {
    static std::FILE* f = [] {
        std::FILE* d = std::fopen("/dev/null", "w");
        if (!d) std::abort();
        return d;
    }();
    return f;
}

// The input as a file named /proc/self/fd/N, rewritten for every input.
const std::string& input_path(const uint8_t* data, size_t size) {
    static int fd = -1;
    static std::string path;
    if (fd < 0) {
        fd = memfd_create("trace", MFD_CLOEXEC);
        if (fd < 0) std::abort();
        path = "/proc/self/fd/" + std::to_string(fd);
    }
    if (ftruncate(fd, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(fd, data + done, size - done, off_t(done));
        if (n <= 0) std::abort();
        done += size_t(n);
    }
    return path;
}

void profile_views(const analysis::Profile& p) {
    std::FILE* out = devnull();
    render::TableOptions o;
    render::print_table(out, p, o);
    o.sort = render::SortKey::kStdname;
    o.full_paths = true;
    render::print_table(out, p, o);
    render::print_callers(out, p, o, false);
    render::print_callers(out, p, o, true);
    render::print_csv(out, p, o);
    render::print_json(out, p, o);
    for (const std::string& w : render::data_warnings(p)) std::fputs(w.c_str(), out);
    render::print_callers_csv(out, p, "", false);
    render::print_callers_csv(out, p, "", true);

    std::vector<analysis::LineTable> lines = analysis::line_tables(p);
    render::LineOptions lo;
    render::print_line_tables(out, lines, lo);
    lo.memory = true;
    render::print_line_tables(out, lines, lo);
    render::print_line_json(out, lines);
    render::print_lines_csv(out, lines);
}

void analyse(const std::string& path) {
    std::FILE* out = devnull();

    // cProfile's numbers: what `profreport`, --json, --csv, --lines and --memory print.
    analysis::Session builder;
    builder.add_trace(path);
    analysis::Profile merged = builder.profile();
    profile_views(merged);
    std::vector<analysis::ThreadFilter> threads = builder.thread_list();
    for (size_t i = 0; i < threads.size() && i < kMaxThreadViews; ++i)
        profile_views(builder.profile(threads[i]));

    analysis::views::DiffOptions dop;
    dop.fail_above = 5;
    analysis::views::DiffResult d = analysis::views::diff_profiles(merged, 1, merged, 2, dop);
    for (const char* format : {"text", "csv", "json"})
        render::print_diff(out, d, dop, format);
    analysis::views::diff_failures(d, dop);

    // Allocations (profrun --mem): report, plot, flame graphs by every weight, diff.
    const analysis::MemoryReport& m = builder.memory();
    render::MemoryOptions mo;
    render::print_memory(out, m, mo);
    render::print_memory_json(out, m, mo);
    render::write_memory_plot(out, m, "fuzz");
    for (auto w :
         {analysis::views::MemoryWeight::kBytes, analysis::views::MemoryWeight::kAllocations,
          analysis::views::MemoryWeight::kLeaked, analysis::views::MemoryWeight::kPeak})
        render::write_memory_flamegraph(out, m, w, merged.traces, {});
    if (m.present) {
        analysis::views::MemoryDiffOptions mdo;
        mdo.fail_above = 5;
        analysis::views::MemoryDiffResult md = analysis::views::diff_memory({m}, {m, m}, mdo);
        for (const char* format : {"text", "csv", "json"})
            render::print_memory_diff(out, md, mdo, format);
        analysis::views::memory_diff_failures(md, mdo);
    }

    // The call tree of the same reading, and its exports.
    analysis::Session& trees = builder;
    analysis::views::CallTreeOptions co;
    co.split_threads = true;
    analysis::views::CallTree tree = trees.call_tree(co);
    render::write_flamegraph(out, tree, {});
    render::write_collapsed(out, tree);
    render::write_callgrind(out, tree);
    render::print_tree(out, tree, {});
    render::HtmlOptions ho;
    ho.memory = &m;
    render::write_html(out, merged, tree, analysis::line_tables(merged), ho);
    std::vector<analysis::ThreadFilter> tree_threads = trees.thread_list();
    if (!tree_threads.empty()) {
        analysis::views::CallTreeOptions one;
        one.thread = tree_threads.front();
        render::print_tree(out, trees.call_tree(one), {});
    }

    // Timelines: Replay again, writing events as it goes.
    render::write_chrome_trace(out, {path}, {});
    render::write_speedscope(out, {path}, {});
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string& path = input_path(data, size);
    try {
        analyse(path);
    } catch (const reader::TraceError&) {
        // The expected way to refuse a bad trace. Any other exception escapes and aborts.
    }
    return 0;
}
