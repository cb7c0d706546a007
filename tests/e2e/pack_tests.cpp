// profpack and profrun's packing: a packed trace reports what the trace as written reports
// (to the byte with --exact-times; memory times to 4 us otherwise), and profpack's errors.
#include "support/run.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_builder.hpp"

#include <prof/trace_format.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <string>
#include <sys/stat.h>
#include <vector>

using prof::test::run;
using prof::test::slurp;
using prof::test::temp_path;

namespace {

// profreport's output for `trace` with `options`, the trace's path replaced by TRACE and its
// format version (1.5 as written, 2.2 packed) by VERSION; fails the test on a non-zero exit.
std::string report(const std::string& trace, std::vector<std::string> options) {
    std::vector<std::string> argv{PROFREPORT, trace};
    argv.insert(argv.end(), options.begin(), options.end());
    auto r = run(argv);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    std::string out = r.out;
    for (size_t at; (at = out.find(trace)) != std::string::npos;)
        out.replace(at, trace.size(), "TRACE");
    return std::regex_replace(out, std::regex("\"format_version\": \"[0-9.]+\""),
                              "\"format_version\": VERSION");
}

// The memory summary's fields other than the ones that depend on exact times.
std::string summary_counts(const std::string& json) {
    std::string out;
    for (const char* field : {"allocations", "frees", "temporary_allocations", "bytes_allocated",
                              "leaked_bytes", "leaked_blocks", "unknown_frees"}) {
        std::smatch m;
        std::regex re(std::string("\"") + field + "\": ([0-9]+)");
        REQUIRE_MESSAGE(std::regex_search(json, m, re), field);
        out += std::string(field) + "=" + m[1].str() + " ";
    }
    return out;
}

uint64_t peak_heap(const std::string& json) {
    std::smatch m;
    REQUIRE(std::regex_search(json, m, std::regex("\"peak_heap\": ([0-9]+)")));
    return std::stoull(m[1].str());
}

// The "functions" array of a profile in JSON.
std::string functions(const std::string& json) {
    size_t from = json.find("\"functions\""), to = json.find("\"threads\"");
    REQUIRE(from != std::string::npos);
    REQUIRE(to != std::string::npos);
    return json.substr(from, to - from);
}

uint64_t file_size(const std::string& path) {
    return std::filesystem::file_size(path);
}

struct Program {
    const char* name;
    const char* path;
};

} // namespace

#ifdef PROF_SANITIZER_BUILD
TEST_SUITE_BEGIN("packed traces" * doctest::skip(true));
#endif

// Memory traces of programs with every allocation entry point from two threads, blocks freed
// by another thread (also within a microsecond of their allocation: handoff), calls and
// allocations in one trace, and heap per marked line.
TEST_CASE("packed traces report what the traces as written report") {
    for (Program p :
         {Program{"alloc-pattern", PROF_TEST_ALLOC_PATTERN},
          Program{"cross-thread", PROF_TEST_CROSS_THREAD},
                      Program{"handoff", PROF_TEST_HANDOFF}, Program{"naming", PROF_TEST_NAMING},
          Program{"memory-lines", PROF_SAMPLE_MEMORY_LINES}}) {
        CAPTURE(p.name);
        std::string raw = temp_path(std::string(p.name) + "-raw.trace");
        auto r = run({PROFRUN, "--mem", "--no-pack", "-q", "-o", raw, "--", p.path});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        std::string exact = raw + ".exact", rounded = raw + ".rounded";
        auto pe = run({PROFPACK, "-q", "--exact-times", "-o", exact, raw});
        REQUIRE_MESSAGE(pe.exit_code == 0, pe.err);
        auto pr = run({PROFPACK, "-q", "-o", rounded, raw});
        REQUIRE_MESSAGE(pr.exit_code == 0, pr.err);
        CHECK(pr.err.empty());
        CHECK(file_size(rounded) < file_size(raw) / 2);

        // Times to the tick: every view reads the same.
        for (std::vector<std::string> view :
             {std::vector<std::string>{"--memory", "--format", "json"},
              {"--sort", "cumtime", "--format", "json"},
              {"--lines", "--format", "json"},
              {"--memory", "--lines"},
              {"--callers", "."}}) {
            CAPTURE(view[0]);
            CHECK(report(exact, view) == report(raw, view));
        }
        // Memory times to 4 us: the same counts and call profile (threads whose last record is
        // an allocation end up to 4 us earlier); the peak of a multi-threaded program may move
        // by the blocks of one such moment.
        std::string raw_memory = report(raw, {"--memory", "--format", "json"});
        std::string packed_memory = report(rounded, {"--memory", "--format", "json"});
        CHECK(summary_counts(packed_memory) == summary_counts(raw_memory));
        double peak = double(peak_heap(raw_memory));
        CHECK(std::abs(double(peak_heap(packed_memory)) - peak) <= 0.01 * peak);
        CHECK(functions(report(rounded, {"--sort", "cumtime", "--format", "json"})) ==
              functions(report(raw, {"--sort", "cumtime", "--format", "json"})));
    }
}

// Packing after the run reads the trace twice (3.9x the program alone on perl, where writing
// the trace is 1.7x): only --pack asks for it; a big trace kept as written gets a line.
TEST_CASE("profrun --mem keeps the trace as written, --pack packs it") {
    std::string packed = temp_path("pack-asked.trace"), kept = temp_path("pack-kept.trace");
    auto r = run({PROFRUN, "--mem", "--pack", "-o", packed, "--", PROF_TEST_ALLOC_PATTERN});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.err.find("packed " + packed) != std::string::npos);
    auto k = run({PROFRUN, "--mem", "-o", kept, "--", PROF_TEST_ALLOC_PATTERN});
    REQUIRE_MESSAGE(k.exit_code == 0, k.err);
    CHECK(k.err.find("packed") == std::string::npos);
    CHECK(k.err.find("profpack") == std::string::npos); // small: no line about packing
    std::string also_kept = temp_path("pack-kept-explicitly.trace");
    REQUIRE(run({PROFRUN, "--mem", "--no-pack", "-q", "-o", also_kept, "--",
                 PROF_TEST_ALLOC_PATTERN})
                .exit_code == 0);
    auto flags = [](const std::string& path) {
        prof::format::FileHeader h{};
        std::string bytes = slurp(path);
        REQUIRE(bytes.size() >= sizeof h);
        std::memcpy(&h, bytes.data(), sizeof h);
        return h.flags;
    };
    CHECK((flags(packed) & prof::format::kFilePacked) != 0);
    CHECK((flags(kept) & prof::format::kFilePacked) == 0);
    CHECK((flags(also_kept) & prof::format::kFilePacked) == 0);
    struct stat st;
    REQUIRE(stat(packed.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600); // as the runtime created it
    CHECK(summary_counts(report(packed, {"--memory", "--format", "json"})) ==
          summary_counts(report(kept, {"--memory", "--format", "json"})));

    // --exact-times: packed with times to the tick (memory_time_shift 0).
    std::string exact = temp_path("pack-exact.trace");
    REQUIRE(
        run({PROFRUN, "--mem", "--pack", "--exact-times", "-q", "-o", exact, "--",
             PROF_TEST_ALLOC_PATTERN})
            .exit_code == 0);
    prof::format::FileHeader h{};
    std::string bytes = slurp(exact);
    REQUIRE(bytes.size() >= sizeof h);
    std::memcpy(&h, bytes.data(), sizeof h);
    CHECK((h.flags & prof::format::kFilePacked) != 0);
    CHECK(h.memory_time_shift == 0);
    h = {};
    std::memcpy(&h, slurp(packed).data(), sizeof h);
    CHECK(h.memory_time_shift > 0);
    auto contradiction = run({PROFRUN, "--mem", "--no-pack", "--exact-times", "-q", "-o",
                              temp_path("pack-never.trace"), "--", PROF_TEST_ALLOC_PATTERN});
    CHECK(contradiction.exit_code == 2);
    CHECK(contradiction.err.find("--exact-times") != std::string::npos);
    CHECK(!std::filesystem::exists(temp_path("pack-never.trace")));
    // Nothing is packed unless --pack says so.
    auto unpacked = run({PROFRUN, "--exact-times", "-q", "-o", temp_path("pack-calls.trace"), "--",
                         PROF_SAMPLE_FIB, "5"});
    CHECK(unpacked.exit_code == 2);
    CHECK(unpacked.err.find("--exact-times is an option of the packing") != std::string::npos);
}

#ifdef PROF_SANITIZER_BUILD
TEST_SUITE_END();
#endif

TEST_CASE("profpack: unfinished, packed, damaged inputs and bad usage give one line, non-zero") {
    std::string fib = temp_path("pack-fib.trace");
    REQUIRE(run({PROF_SAMPLE_FIB, "12"}, {{"PROF_OUT", fib}}).exit_code == 0);
    auto one_line = [](const prof::test::RunResult& r) {
        return std::count(r.err.begin(), r.err.end(), '\n') == 1 &&
               r.err.find("level=error") != std::string::npos;
    };

    // A call trace packs too, and reads the same.
    std::string packed = fib + ".packed";
    REQUIRE(run({PROFPACK, "-q", "-o", packed, fib}).exit_code == 0);
    CHECK(report(packed, {"--format", "json"}) == report(fib, {"--format", "json"}));

    // Packed already: left alone in place (profpack *.trace), an error with -o (nothing
    // written); an existing -o file is kept unless --force.
    std::string before = slurp(packed);
    auto again = run({PROFPACK, packed});
    CHECK(again.exit_code == 0);
    CHECK(again.err.find("already packed, left as it is") != std::string::npos);
    CHECK(slurp(packed) == before);
    auto again_to = run({PROFPACK, "-o", temp_path("pack-again.trace"), packed});
    CHECK(again_to.exit_code == 1);
    CHECK(one_line(again_to));
    CHECK_FALSE(std::filesystem::exists(temp_path("pack-again.trace")));
    auto exists = run({PROFPACK, "-o", packed, fib});
    CHECK(exists.exit_code == 1);
    CHECK(one_line(exists));
    CHECK(exists.err.find("--force") != std::string::npos);
    CHECK(slurp(packed) == before);
    CHECK(run({PROFPACK, "-q", "--force", "--output=" + packed, "--level=3", fib}).exit_code == 0);

    // Packing a symbolic link in place packs the file it names; the link stays.
    std::string target = temp_path("pack-target.trace"), link = temp_path("pack-link.trace");
    std::filesystem::copy_file(fib, target);
    std::filesystem::create_symlink(target, link);
    REQUIRE(run({PROFPACK, "-q", link}).exit_code == 0);
    CHECK(std::filesystem::is_symlink(link));
    CHECK(report(target, {"--info"}).find("packed") != std::string::npos);

    // A hard link keeps the trace as written, and profpack says so.
    std::string named = temp_path("pack-named.trace"), other = temp_path("pack-other.trace");
    std::filesystem::copy_file(fib, named);
    std::filesystem::create_hard_link(named, other);
    auto linked = run({PROFPACK, named});
    CHECK(linked.exit_code == 0);
    CHECK(linked.err.find("has 1 other hard link, which keeps the trace as written") !=
          std::string::npos);
    CHECK(report(named, {"--info"}).find("packed") != std::string::npos);
    CHECK(slurp(other) == slurp(fib));

    // A trace whose process did not finish stays as it is.
    std::string unfinished = temp_path("pack-unfinished.trace");
    std::string bytes = slurp(fib);
    prof::format::FileHeader h;
    std::memcpy(&h, bytes.data(), sizeof h);
    h.flags &= ~prof::format::kFileFinished;
    std::memcpy(bytes.data(), &h, sizeof h);
    // Without its End record too: cut the file after the first chunk's records.
    prof::test::TraceBuilder::save(
        unfinished, std::vector<uint8_t>(bytes.begin(), bytes.begin() + 4096 + 65536));
    auto r = run({PROFPACK, unfinished});
    CHECK(r.exit_code == 1);
    CHECK(one_line(r));
    CHECK(r.err.find("incomplete") != std::string::npos);
    CHECK(slurp(unfinished).size() == 4096 + 65536);

    // A packed file cut short: profreport says so, or fails in one line; never a crash.
    std::string packed_bytes = slurp(packed);
    std::string cut = temp_path("pack-cut.trace");
    for (size_t n :
         {size_t(4096), size_t(4096 + 30), packed_bytes.size() / 2, packed_bytes.size() - 1}) {
        CAPTURE(n);
        prof::test::TraceBuilder::save(
            cut, std::vector<uint8_t>(packed_bytes.begin(), packed_bytes.begin() + long(n)));
        auto c = run({PROFREPORT, cut});
        CHECK(c.exit_code < 128);
        CHECK((c.exit_code != 0 ? one_line(c) : c.err.find("incomplete") != std::string::npos));
    }

    auto missing = run({PROFPACK, temp_path("no-such.trace")});
    CHECK(missing.exit_code == 1);
    CHECK(one_line(missing));
    auto unwritable = run({PROFPACK, "-o", "/proc/no-such-dir/x.trace", fib});
    CHECK(unwritable.exit_code == 1);
    CHECK(one_line(unwritable));
    CHECK(run({PROFPACK, "--frobnicate", fib}).exit_code == 2);
    CHECK(run({PROFPACK, "--level", "40", fib}).exit_code == 2);
    CHECK(run({PROFPACK}).exit_code == 2);
    auto help = run({PROFPACK, "--help"});
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("usage: profpack") == 0);
    // The failed runs left the input as it was, and no temporary file.
    CHECK(report(fib, {"--format", "json"}) == report(packed, {"--format", "json"}));
    CHECK_FALSE(std::filesystem::exists(fib + ".packing"));
}
