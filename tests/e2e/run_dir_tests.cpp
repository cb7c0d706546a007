// Runs of many processes (profrun -d DIR): every process of a pipeline writes into DIR and
// nothing into the working directory; the manifest lists them with their parents, clocks and
// the exit status; profreport reads DIR merged or one process, lists the process tree, and
// reports a broken run one line per problem while reading the rest.
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include "analysis/engine/session.hpp"
#include "reader/run_manifest.hpp"
#include "reader/trace_reader.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include <csignal>

using namespace prof;
using namespace prof::test;

// Set in ASan/UBSan/TSan builds by cmake/sanitizers.cmake: there the memory profiler's
// LD_PRELOAD cannot run (ASan's runtime must come first), and its parts are left out.
#ifdef PROF_SANITIZER_BUILD
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif

namespace {

size_t lines_with(const std::string& text, const std::string& what) {
    size_t n = 0;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) n += line.find(what) != std::string::npos;
    return n;
}

// Lines whose first word is `pid` (the process tree indents children).
size_t lines_led_by(const std::string& text, uint32_t pid) {
    size_t n = 0;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::string first;
        n += (words >> first) && first == std::to_string(pid);
    }
    return n;
}

// `profrun -d DIR -- sh -c SCRIPT` started in `cwd`.
RunResult run_in(const std::string& cwd, const std::string& dir, const std::string& script,
                 std::vector<std::pair<std::string, std::string>> env = {},
                 const std::string& extra = "") {
    std::filesystem::create_directories(cwd);
    std::string command = "cd '" + cwd + "' && exec '" PROFRUN "' " + extra + " -d '" + dir +
                          "' -- sh -c '" + script + "'";
    return run({"/bin/sh", "-c", command}, env);
}

reader::RunManifest manifest_of(const std::string& dir) {
    return reader::parse_manifest(slurp(dir + "/run.json"));
}

uint64_t calls_of(const std::vector<std::string>& traces) {
    analysis::Session s;
    for (const std::string& t : traces) s.add_trace(t);
    return s.profile().total_calls;
}

// The `N function calls` of a report's header.
uint64_t header_calls(const std::string& report) {
    return std::stoull(report.substr(report.find_first_not_of(' ')));
}

const std::string kPipeline =
    std::string(PROF_TEST_FORKER) + " | " + PROF_TEST_FORKER + " > /dev/null; exit 3";

} // namespace

TEST_CASE("profrun -d: a pipeline's processes in one directory, with their manifest") {
    std::string cwd = temp_path("run-cwd"), dir = temp_path("run-pipeline");
    auto r = run_in(cwd, dir, kPipeline);
    CHECK(r.exit_code == 3); // the command's status, passed through
    CHECK(r.err.find("run written to " + dir + ": 4 traces") != std::string::npos);
    CHECK(std::filesystem::is_empty(cwd)); // nothing in the working directory

    reader::RunManifest m = manifest_of(dir);
    CHECK(m.version == 1);
    CHECK(!m.run.empty());
    // sh (no trace of its own: listed for its status), the two forkers and their children.
    REQUIRE(m.processes.size() == 5);
    std::map<uint32_t, const reader::RunProcess*> by_pid;
    const reader::RunProcess* shell = nullptr;
    for (const reader::RunProcess& p : m.processes) {
        by_pid[p.pid] = &p;
        if (p.trace.empty()) shell = &p;
    }
    REQUIRE(shell);
    CHECK(shell->argv.at(0) == "sh");
    CHECK(shell->exit_code == 3);
    std::set<std::string> files;
    for (const reader::RunProcess& p : m.processes) {
        if (p.trace.empty()) continue;
        CAPTURE(p.trace);
        files.insert(p.trace);
        CHECK(p.trace == "test_forker." + std::to_string(p.pid) + ".trace");
        reader::TraceReader tr(dir + "/" + p.trace);
        const reader::TraceInfo& info = tr.read_metadata();
        CHECK(info.header.pid == p.pid);
        CHECK(info.meta.at("run") == m.run);
        CHECK(p.finished);
        CHECK(p.exe == PROF_TEST_FORKER);
        // Clock pairs: the end after the start, on both clocks, and the wall time they span
        // the same within 1 ms.
        REQUIRE(p.end_utc_ns > p.start_utc_ns);
        REQUIRE(p.end_ticks > p.start_ticks);
        double utc = double(p.end_utc_ns - p.start_utc_ns) * 1e-9;
        double ticks = double(p.end_ticks - p.start_ticks) / p.ticks_per_second;
        CHECK(std::abs(utc - ticks) < 1e-3);
        // The tree: each forker is the shell's child, each forked child a forker's.
        REQUIRE(by_pid.count(p.ppid));
        const reader::RunProcess& parent = *by_pid.at(p.ppid);
        CHECK((parent.trace.empty() || by_pid.at(parent.ppid)->trace.empty()));
        CHECK(p.start_utc_ns >= parent.start_utc_ns);
    }
    CHECK(files.size() == 4);
    CHECK(reader::run_traces(dir).size() == 4);

    // profreport DIR is the merge of its traces, exactly; --process one of them.
    std::vector<std::string> traces;
    for (const std::string& f : files) traces.push_back(dir + "/" + f);
    uint64_t all = calls_of(traces);
    auto merged = run({PROFREPORT, dir});
    REQUIRE_MESSAGE(merged.exit_code == 0, merged.err);
    CHECK(merged.err.empty());
    CHECK(header_calls(merged.out) == all);
    const reader::RunProcess& first = *by_pid.at(uint32_t(std::stoul(
        files.begin()->substr(12, files.begin()->size() - 18)))); // test_forker.<pid>.trace
    auto one = run({PROFREPORT, "--process", std::to_string(first.pid), dir});
    REQUIRE_MESSAGE(one.exit_code == 0, one.err);
    CHECK(header_calls(one.out) == calls_of({dir + "/" + first.trace}));
    auto named = run({PROFREPORT, "--process", "test_forker", dir});
    CHECK(header_calls(named.out) == all);
    auto none = run({PROFREPORT, "--process", "nosuch", dir});
    CHECK(none.exit_code == 2);
    CHECK(lines_with(none.err, "no process 'nosuch'") == 1);
    auto stray = run({PROFREPORT, "--process", "1", dir + "/" + first.trace});
    CHECK(stray.exit_code == 2);

    // The process tree: every process on a line of its own, the shell's exit status.
    auto tree = run({PROFREPORT, "processes", dir});
    REQUIRE_MESSAGE(tree.exit_code == 0, tree.err);
    CHECK(tree.out.find("5 processes on 1 host") != std::string::npos);
    for (const reader::RunProcess& p : m.processes) CHECK(lines_led_by(tree.out, p.pid) == 1);
    CHECK(lines_with(tree.out, "(no trace)") == 1);

    // Arguments with spaces stay whole (Meta argv), in an instrumented and a sampled process.
    std::string spaced = temp_path("run-spaced");
    // (fib refuses the argument, status 2, passed through; its trace is written all the same.)
    CHECK(run({PROFRUN, "-d", spaced, "--", PROF_SAMPLE_FIB, "5 x"}).exit_code == 2);
    REQUIRE(run({PROFRUN, "--sample", "-d", spaced + "-sampled", "--", "/bin/sh", "-c", "exit 0"})
                .exit_code == 0);
    for (const auto& [d, argv] :
         {std::pair{spaced, std::vector<std::string>{PROF_SAMPLE_FIB, "5 x"}},
          std::pair{spaced + "-sampled", std::vector<std::string>{"/bin/sh", "-c", "exit 0"}}}) {
        reader::RunManifest sm = manifest_of(d);
        REQUIRE(sm.processes.size() == 1);
        CHECK(sm.processes[0].argv == argv);
    }

    // An output onto the run's manifest is refused.
    auto onto = run({PROFREPORT, "--export", "chrome", "-o", dir + "/run.json", dir});
    CHECK(onto.exit_code == 2);
    CHECK(lines_with(onto.err, "is the manifest of the run") == 1);
    CHECK(manifest_of(dir).processes.size() == 5);

    // Another run into the same directory is refused: its traces would mix with these.
    auto again = run_in(cwd, dir, "true");
    CHECK(again.exit_code == 2);
    CHECK(lines_with(again.err, "holds another run") == 1);
    // -o names one trace; -d a run.
    auto both = run({PROFRUN, "-o", temp_path("x.trace"), "-d", dir, "--", "true"});
    CHECK(both.exit_code == 2);
}

// A shell pipeline under the memory profiler: each stage's sh image exec'd its program (a
// trace that ends at the exec, which lacks nothing), and the top sh ends with _exit. Reading the
// run warns about no exec'd image, and about the unfinished ones in one line at most.
TEST_CASE("a shell pipeline's run: no warning for exec'd images, one line for unfinished ones" *
          doctest::skip(kSanitizerBuild)) {
    std::string dir = temp_path("run-sh-pipeline");
    auto r = run({PROFRUN, "-q", "--mem", "-d", dir, "--", "/bin/sh", "-c",
                  "seq 1 20000 | sort -rn | head -3"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out == "20000\n19999\n19998\n");
    reader::RunManifest m = manifest_of(dir);
    std::map<uint32_t, size_t> images; // traces per pid
    for (const reader::RunProcess& p : m.processes) ++images[p.pid];
    size_t execd = 0;
    for (const auto& [pid, n] : images) execd += n - 1;
    CHECK(execd == 3); // the three stages' sh images

    for (const std::vector<std::string>& argv :
         {std::vector<std::string>{PROFREPORT, "--memory", dir},
          std::vector<std::string>{PROFREPORT, dir}}) {
        auto v = run(argv);
        REQUIRE_MESSAGE(v.exit_code == 0, v.err);
        CAPTURE(v.err);
        CHECK(lines_with(v.err, "incomplete") <= 1);
        // No exec'd image is named: each is an sh trace whose pid has a later trace.
        for (const reader::RunProcess& p : m.processes)
            if (images[p.pid] > 1 && p.argv.at(0) == "sh")
                CHECK(v.err.find(p.trace) == std::string::npos);
    }
}

// How each stage ended, which only its parent learns (the wait family, interposed by the
// runtime in the parent): `yes` killed by SIGPIPE once `head` has its line, `head` exiting 0,
// an inner sh exiting 3. The manifest records them and the process tree shows them.
TEST_CASE("a run records how its reaped children ended: SIGPIPE, exit 0, exit 3" *
          doctest::skip(kSanitizerBuild)) {
    std::string dir = temp_path("run-statuses");
    auto r = run({PROFRUN, "-q", "--mem", "-d", dir, "--", "/bin/sh", "-c",
                  "yes | head -1; sh -c 'exit 3'; true"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out == "y\n");
    reader::RunManifest m = manifest_of(dir);
    std::map<std::string, const reader::RunProcess*> last; // by command, its last image
    for (const reader::RunProcess& p : m.processes)
        if (!p.argv.empty()) last[p.argv.back() == "exit 3" ? "exit3" : p.argv.front()] = &p;
    REQUIRE(last.count("yes"));
    REQUIRE(last.count("head"));
    REQUIRE(last.count("exit3"));
    CHECK(last["yes"]->signal == SIGPIPE);
    CHECK_FALSE(last["yes"]->exit_code);
    CHECK(last["head"]->exit_code == 0);
    CHECK(last["exit3"]->exit_code == 3);
    auto tree = run({PROFREPORT, "processes", dir});
    REQUIRE_MESSAGE(tree.exit_code == 0, tree.err);
    CHECK(lines_with(tree.out, " SIGPIPE ") == 1);
    CHECK(lines_with(tree.out, "running?") == 0);
}

TEST_CASE("--export chrome of a run: every process on one timeline, by its clock pairs") {
    std::string dir = temp_path("run-timeline");
    REQUIRE(run_in(temp_path("run-timeline-cwd"), dir, kPipeline).exit_code == 3);
    std::string json = temp_path("run-timeline.json");
    auto r = run({PROFREPORT, "--export", "chrome", "-o", json, dir});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    // Per pid: its first activation's start and its last one's end, in microseconds.
    std::map<uint32_t, std::pair<double, double>> span;
    std::string text = slurp(json);
    std::regex event("\"ts\":([0-9.]+),\"dur\":([0-9.]+),\"pid\":([0-9]+)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), event);
         it != std::sregex_iterator(); ++it) {
        double ts = std::stod((*it)[1]), end = ts + std::stod((*it)[2]);
        auto [at, fresh] = span.try_emplace(uint32_t(std::stoul((*it)[3])), ts, end);
        at->second.first = std::min(at->second.first, ts);
        at->second.second = std::max(at->second.second, end);
    }
    reader::RunManifest m = manifest_of(dir);
    uint64_t earliest = UINT64_MAX;
    for (const reader::RunProcess& p : m.processes)
        if (!p.trace.empty()) earliest = std::min(earliest, p.start_utc_ns);
    size_t later = 0;
    for (const reader::RunProcess& p : m.processes) {
        if (p.trace.empty()) continue;
        CAPTURE(p.pid);
        REQUIRE(span.count(p.pid));
        // Each process's activations lie between its start and its end on the shared clock
        // (50 us: the clock pairs' own width, and rounding).
        double start = double(p.start_utc_ns - earliest) / 1e3;
        double end = double(p.end_utc_ns - earliest) / 1e3;
        CHECK(span[p.pid].first >= start - 50);
        CHECK(span[p.pid].second <= end + 50);
        later += start > 1000; // started more than 1 ms after the first: the forked children
    }
    CHECK(later >= 1);
}

TEST_CASE("a run with a broken manifest, a missing, a foreign and a doubly claimed trace") {
    std::string dir = temp_path("run-broken");
    auto r = run_in(temp_path("run-broken-cwd"), dir, kPipeline);
    REQUIRE(r.exit_code == 3);
    reader::RunManifest m = manifest_of(dir);
    std::vector<std::string> files = reader::run_traces(dir);
    REQUIRE(files.size() == 4);
    uint64_t all = calls_of(
        {dir + "/" + files[0], dir + "/" + files[1], dir + "/" + files[2], dir + "/" + files[3]});
    uint64_t without_last =
        calls_of({dir + "/" + files[0], dir + "/" + files[1], dir + "/" + files[2]});

    // Two processes claiming one file: one line, the file read once.
    std::string text = slurp(dir + "/run.json");
    std::string second = "\"trace\": \"" + files[1] + "\"";
    size_t at = text.find(second);
    REQUIRE(at != std::string::npos);
    std::string doubled = text;
    doubled.replace(at, second.size(), "\"trace\": \"" + files[0] + "\"");
    std::ofstream(dir + "/run.json") << doubled;
    auto claimed = run({PROFREPORT, dir});
    REQUIRE_MESSAGE(claimed.exit_code == 0, claimed.err);
    CHECK(lines_with(claimed.err, "both claim " + files[0]) == 1);
    CHECK(header_calls(claimed.out) == all);

    // A manifest that does not parse: one line, the directory's traces read.
    std::ofstream(dir + "/run.json") << text.substr(0, text.size() / 2);
    auto cut = run({PROFREPORT, dir});
    REQUIRE_MESSAGE(cut.exit_code == 0, cut.err);
    CHECK(lines_with(cut.err, "run.json: line") == 1);
    CHECK(lines_with(cut.err, "level=") == 1);
    CHECK(header_calls(cut.out) == all);

    // A trace listed but missing, and a file that is no trace: one line each.
    std::ofstream(dir + "/run.json") << text;
    std::filesystem::rename(dir + "/" + files[3], temp_path("moved.trace"));
    std::ofstream(dir + "/notes.trace") << "not a trace\n";
    auto broken = run({PROFREPORT, dir});
    REQUIRE_MESSAGE(broken.exit_code == 0, broken.err);
    CHECK(lines_with(broken.err, "is missing") == 1);
    CHECK(lines_with(broken.err, "notes.trace") == 1);
    CHECK(lines_with(broken.err, "level=") == 2);
    CHECK(header_calls(broken.out) == without_last);

    // No manifest at all: said once, the traces read.
    std::filesystem::remove(dir + "/run.json");
    std::filesystem::remove(dir + "/notes.trace");
    auto bare = run({PROFREPORT, dir});
    REQUIRE_MESSAGE(bare.exit_code == 0, bare.err);
    CHECK(lines_with(bare.err, "has no run.json") == 1);
    CHECK(header_calls(bare.out) == without_last);

    // An empty directory: no run, for every command that reads one: one error line, and exit 1
    // (nothing could be read), as docs/views.md says.
    std::string empty = temp_path("run-empty");
    std::filesystem::create_directories(empty);
    for (std::vector<std::string> argv : {std::vector<std::string>{PROFREPORT, empty},
                                          {PROFREPORT, "processes", empty},
                                          {PROFREPORT, "--ranks", empty}}) {
        CAPTURE(argv[1]);
        auto none = run(argv);
        CHECK(none.exit_code == 1);
        CHECK(none.out.empty());
        CHECK(std::count(none.err.begin(), none.err.end(), '\n') == 1);
        CHECK(lines_with(none.err, "level=error msg=\"" + empty +
                                       " holds no trace (and no run.json: not a run directory "
                                       "of profrun -d)\"") == 1);
    }
}

TEST_CASE("a run's MPI rank from the launcher's variables, several directories merge") {
    std::map<std::string, std::pair<std::string, std::string>> launchers = {
        {"OMPI_COMM_WORLD_RANK", {"OMPI_COMM_WORLD_SIZE", "Open MPI"}},
        {"PMI_RANK", {"PMI_SIZE", "MPICH"}},
        {"SLURM_PROCID", {"SLURM_NTASKS", "Slurm"}}};
    std::vector<std::string> dirs;
    uint64_t calls = 0;
    for (auto& [rank_var, size] : launchers) {
        CAPTURE(size.second);
        std::string dir = temp_path("run-rank-" + rank_var);
        auto r = run_in(temp_path("run-rank-cwd"), dir, PROF_TEST_FORKER,
                        {{rank_var, "2"}, {size.first, "4"}});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        reader::RunManifest m = manifest_of(dir);
        size_t traced = 0;
        for (const reader::RunProcess& p : m.processes) {
            if (p.trace.empty()) continue; // the shell
            ++traced;
            CHECK(p.rank == 2u);
            CHECK(p.size == 4u);
            CHECK(p.rank_from == rank_var);
        }
        CHECK(traced == 2); // the forker and its child
        std::vector<std::string> traces;
        for (const std::string& f : reader::run_traces(dir)) traces.push_back(dir + "/" + f);
        calls += calls_of(traces);
        dirs.push_back(dir);
    }
    std::vector<std::string> argv = {PROFREPORT};
    argv.insert(argv.end(), dirs.begin(), dirs.end());
    auto merged = run(argv);
    REQUIRE_MESSAGE(merged.exit_code == 0, merged.err);
    CHECK(header_calls(merged.out) == calls);

    // --ranks: three runs of rank 2 of 4 are one rank (their traces merged), three missing.
    argv = {PROFREPORT, "ranks", "--format", "csv"};
    argv.insert(argv.end(), dirs.begin(), dirs.end());
    auto ranks = run(argv);
    REQUIRE_MESSAGE(ranks.exit_code == 0, ranks.err);
    CHECK(lines_with(ranks.err, "1 of 4 ranks have a trace (missing: 0,1,3)") == 1);
    CHECK(lines_with(ranks.err, "the traces are of 3 runs (MPI jobs)") == 1);
    CHECK(lines_with(ranks.err, "3 traces of no MPI rank left out") == 0); // the shells wrote none
    // A run of no MPI job: one line, status 1.
    std::string plain = temp_path("run-no-rank");
    REQUIRE(run_in(temp_path("run-rank-cwd"), plain, PROF_TEST_FORKER).exit_code == 0);
    auto none = run({PROFREPORT, "--ranks", plain});
    CHECK(none.exit_code == 1);
    CHECK(lines_with(none.err, "no trace of an MPI rank among the 2 given") == 1);
    CHECK(none.out.empty());
}

TEST_CASE("--export rows of two runs: DuckDB sums them to profreport's merge exactly" *
          doctest::skip(kSanitizerBuild)) {
    std::string modules = PROF_NODE_MODULES;
    REQUIRE_MESSAGE(std::filesystem::exists(modules + "/@duckdb/node-api"),
                    "DuckDB's node API is not in " << modules
                                                   << ": tools/quickstart.sh test installs it "
                                                      "(npm install --prefix <build>/node "
                                                      "@duckdb/node-api)");
    std::string calls = temp_path("rows-pipeline"), memory = temp_path("rows-memory");
    REQUIRE(run_in(temp_path("rows-cwd"), calls, kPipeline).exit_code == 3);
    auto mem = run({PROFRUN, "--mem", "-d", memory, "--", PROF_SAMPLE_MEMORY_LINES});
    REQUIRE_MESSAGE(mem.exit_code == 0, mem.err);

    std::string ndjson = temp_path("rows.ndjson"), csv = temp_path("rows.csv");
    auto j = run({PROFREPORT, "--export", "rows", "-o", ndjson, calls, memory});
    REQUIRE_MESSAGE(j.exit_code == 0, j.err);
    auto c = run({PROFREPORT, "export", "rows", "--format", "csv", "-o", csv, calls, memory});
    REQUIRE_MESSAGE(c.exit_code == 0, c.err);
    CHECK(slurp(csv).rfind("schema,kind,run,host,rank,pid,ppid,exe,trace,tid,thread,function,",
                           0) == 0);
    // Every line a row of schema 1, each process's rows naming its run.
    std::string rows = slurp(ndjson);
    CHECK(lines_with(rows, "{\"schema\": 1, \"kind\": ") ==
          size_t(std::count(rows.begin(), rows.end(), '\n')));
    reader::RunManifest m = manifest_of(calls);
    CHECK(lines_with(rows, "\"run\": \"" + m.run + "\"") > 0);

    std::string report = temp_path("rows-report.json"), memory_report = temp_path("rows-mem.json");
    auto r = run({PROFREPORT, "--format", "json", "-o", report, calls, memory});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto mr = run({PROFREPORT, "--memory", "--format", "json", "-o", memory_report, calls, memory});
    REQUIRE_MESSAGE(mr.exit_code == 0, mr.err);
    auto duck = run({"/usr/bin/env", "node", PROF_ROWS_CHECKER, modules, ndjson, csv, report,
                     memory_report, temp_path("rows.parquet")});
    CHECK_MESSAGE(duck.exit_code == 0, duck.out << duck.err);
    // 4 forker processes and the memory sample.
    CHECK_MESSAGE(duck.out.find("\"processes\":5}") != std::string::npos, duck.out);
}

namespace {

// `go tool pprof ARGS...`: its report.
RunResult pprof(std::vector<std::string> args) {
    std::vector<std::string> argv = {PROF_GO, "tool", "pprof"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, {{"HOME", temp_path("")}, {"PPROF_TMPDIR", temp_path("")}});
}

// pprof's "Total samples = N" (N with its unit, e.g. 808076800B).
std::string pprof_total(const RunResult& r) {
    size_t at = r.out.find("Total samples = ");
    if (at == std::string::npos) return "none: " + r.out + r.err;
    at += 16;
    return r.out.substr(at, r.out.find_first_of(" \n", at) - at);
}

} // namespace

TEST_CASE("--export pprof: go tool pprof's totals are profreport's, profiles merge and diff") {
    REQUIRE_MESSAGE(run({PROF_GO, "version"}).exit_code == 0,
                    "go tool pprof is needed (apt-get install golang-go)");
    std::string fib15 = trace_of("pprof-fib15.trace", {PROF_SAMPLE_FIB, "15"});
    std::string fib20 = trace_of("pprof-fib20.trace", {PROF_SAMPLE_FIB, "20"});
    std::string a = temp_path("fib15.pb.gz"), b = temp_path("fib20.pb.gz");
    for (auto [trace, out] : {std::pair{fib15, a}, std::pair{fib20, b}}) {
        auto r = run({PROFREPORT, "--export", "pprof", "-o", out, trace});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK(slurp(out).rfind("\x1f\x8b", 0) == 0); // gzip
    }
    // flat calls are ncalls: the totals are the traces' calls, exactly.
    CHECK(pprof_total(pprof({"-top", "-sample_index=calls", a})) == "1974");
    CHECK(pprof_total(pprof({"-top", "-sample_index=calls", a, b})) == "23866");
    auto diff = pprof({"-top", "-sample_index=calls", "-diff_base", a, b});
    CHECK_MESSAGE(diff.out.find(" 19918 ") != std::string::npos, diff.out << diff.err);
    // flat wall time is tottime: the total is the report's, to the nanosecond.
    auto json = run({PROFREPORT, "--format", "json", fib20});
    double total = json_number(json.out, "total_time");
    std::string wall = pprof_total(pprof({"-top", "-unit=ns", "-sample_index=wall", b}));
    REQUIRE(wall.size() > 2);
    CHECK(std::abs(std::stod(wall.substr(0, wall.size() - 2)) - total * 1e9) <= 2);
    CHECK(wall.substr(wall.size() - 2) == "ns");
    // cum counts a recursive function once per path: main's is every call, fib's all but main.
    auto top = pprof({"-top", "-sample_index=calls", "-nodecount=3", b});
    CHECK_MESSAGE(top.out.find("21891   100%   100%      21891   100%  fib(int)") !=
                      std::string::npos,
                  top.out);
    CHECK(top.out.find("      21892   100%  main") != std::string::npos);
    // Labels: host and pid.
    auto tags = pprof({"-tags", b});
    CHECK(tags.out.find(" pid: Total") != std::string::npos);
    CHECK(tags.out.find(" host: Total") != std::string::npos);
    // The file's mapping: the program, its build-id.
    CHECK(top.out.find("Build ID: ") != std::string::npos);

    std::string heap = temp_path("heap.pb.gz");
    // Sampled without hooks: samples/count and cpu/nanoseconds, no calls. Every sample with a
    // named innermost frame is one of pprof's (a sample whose stack could not be read at all
    // has no frame to go to).
    std::string sampled = temp_path("pprof-sampled.trace");
    auto sr = run({PROFRUN, "--sample", "-o", sampled, "--", PROF_TEST_SPINNERS, "inlined", "1"});
    REQUIRE_MESSAGE(sr.exit_code == 0, sr.err);
    auto header = run({PROFREPORT, sampled});
    size_t at = header.out.find("times from ");
    REQUIRE_MESSAGE(at != std::string::npos, header.out);
    std::string count = header.out.substr(at + 11, header.out.find(' ', at + 11) - at - 11);
    count.erase(std::remove(count.begin(), count.end(), ','), count.end());
    double samples = std::stod(count);
    std::string sampled_pb = temp_path("sampled.pb.gz");
    REQUIRE(run({PROFREPORT, "--export", "pprof", "-o", sampled_pb, sampled}).exit_code == 0);
    double in_pprof = std::stod(pprof_total(pprof({"-top", "-sample_index=samples", sampled_pb})));
    CHECK(in_pprof <= samples);
    CHECK(in_pprof >= 0.99 * samples);
    CHECK(pprof({"-top", "-sample_index=calls", sampled_pb}).err.find("calls") !=
          std::string::npos); // no such sample type: nothing was counted
    // A function inlined into the sampled code is a Line of its caller's Location: pprof
    // marks it so.
    auto inlined = pprof({"-top", "-sample_index=samples", sampled_pb});
    CHECK_MESSAGE(inlined.out.find("inlined_burn (inline)") != std::string::npos, inlined.out);
    CHECK(inlined.out.find("inlined_host(double) (inline)") == std::string::npos);
    // A call trace has no heap profile: one line.
    auto refused = run({PROFREPORT, "--export", "pprof", "--memory", "-o", heap, fib15});
    CHECK(refused.exit_code == 1);
    CHECK(lines_with(refused.err, "has no allocation records") == 1);

    if (kSanitizerBuild) return; // no memory profiler under the sanitizers
    // --memory: the heap profile, Go's four sample types.
    std::string mem_trace = temp_path("pprof-mem.trace");
    auto mem = run({PROFRUN, "--mem", "-o", mem_trace, "--", PROF_SAMPLE_MEMORY_LINES});
    REQUIRE_MESSAGE(mem.exit_code == 0, mem.err);
    auto h = run({PROFREPORT, "--export", "pprof", "--memory", "-o", heap, mem_trace});
    REQUIRE_MESSAGE(h.exit_code == 0, h.err);
    auto summary = run({PROFREPORT, "--memory", "--format", "json", mem_trace});
    auto field = [&](const char* name) {
        return std::to_string(uint64_t(json_number(summary.out, name)));
    };
    CHECK(pprof_total(pprof({"-top", "-sample_index=alloc_objects", heap})) ==
          field("allocations"));
    CHECK(pprof_total(pprof({"-top", "-unit=B", "-sample_index=alloc_space", heap})) ==
          field("bytes_allocated") + "B");
    CHECK(pprof_total(pprof({"-top", "-sample_index=inuse_objects", heap})) ==
          field("leaked_blocks"));
}

#ifdef PROF_TEST_MPI_RANKS
namespace {

// `mpirun -np 4`, as root too, more ranks than cores.
std::vector<std::string> mpirun4() {
    return {PROF_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", "4"};
}

// `mpirun -np 4 profrun -d DIR -- test_mpi_ranks`: a profrun per rank.
std::vector<std::string> ranks_profiled_into(const std::string& dir) {
    std::vector<std::string> argv = mpirun4();
    for (const std::string& a : {std::string(PROFRUN), std::string("-d"), dir, std::string("--"),
                                 std::string(PROF_TEST_MPI_RANKS)})
        argv.push_back(a);
    return argv;
}

// The columns of the row of `function` in `profreport ranks --format csv`.
std::map<std::string, std::string> ranks_row(const std::string& csv, const std::string& function) {
    std::istringstream in(csv);
    std::vector<std::string> header, cells;
    auto split = [](const std::string& line) {
        std::vector<std::string> v;
        std::istringstream s(line);
        for (std::string cell; std::getline(s, cell, ',');) v.push_back(cell);
        return v;
    };
    std::map<std::string, std::string> row;
    for (std::string line; std::getline(in, line);) {
        if (header.empty()) {
            header = split(line);
            continue;
        }
        cells = split(line);
        if (cells.empty() || cells[0] != function) continue;
        for (size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    }
    return row;
}

// Four ranks of test_mpi_ranks in `dir`: their traces, ranks 0 to 3 of 4 from Open MPI's
// variables, and the load imbalance of compute() exactly (50 (rank + 1) calls).
void check_four_ranks(const std::string& dir) {
    reader::RunManifest m = manifest_of(dir);
    std::set<uint32_t> ranks;
    for (const reader::RunProcess& p : m.processes) {
        if (p.trace.empty()) continue; // mpirun
        CHECK(p.size == 4u);
        CHECK(p.rank_from == "OMPI_COMM_WORLD_RANK");
        REQUIRE(p.rank);
        ranks.insert(*p.rank);
    }
    CHECK(ranks == std::set<uint32_t>{0, 1, 2, 3});
    CHECK(reader::run_traces(dir).size() == 4);

    auto csv = run({PROFREPORT, "ranks", "--format", "csv", dir});
    REQUIRE_MESSAGE(csv.exit_code == 0, csv.err);
    auto compute = ranks_row(csv.out, "(anonymous namespace)::compute(int)");
    REQUIRE_MESSAGE(!compute.empty(), csv.out);
    CHECK(compute["ranks"] == "4");
    CHECK(compute["ncalls_min"] == "50");
    CHECK(compute["ncalls_mean"] == "125");
    CHECK(compute["ncalls_max"] == "200");
    CHECK(compute["ncalls_max_rank"] == "3");
    for (const char* metric : {"tottime", "cumtime"}) {
        CAPTURE(metric);
        double lo = std::stod(compute[std::string(metric) + "_min"]);
        double mean = std::stod(compute[std::string(metric) + "_mean"]);
        double hi = std::stod(compute[std::string(metric) + "_max"]);
        // Ranks that waited long in the barrier are timed by their samples, where a few
        // milliseconds of compute() may have none: 0 then, never negative.
        CHECK(lo >= 0);
        CHECK(lo <= mean);
        CHECK(mean <= hi);
    }
    auto main_row = ranks_row(csv.out, "main");
    REQUIRE(!main_row.empty());
    CHECK(main_row["ncalls_max"] == "1");
    // No rank's compute() takes longer than that rank's main().
    CHECK(std::stod(compute["cumtime_max"]) <= std::stod(main_row["cumtime_max"]));
    // The merged report counts every rank's calls.
    auto merged = run({PROFREPORT, "--format", "csv", "--match", "compute", dir});
    REQUIRE_MESSAGE(merged.exit_code == 0, merged.err);
    CHECK(merged.out.find("\n500,500,") != std::string::npos);
    // The text table: the rank of the max under its column.
    auto text = run({PROFREPORT, "--ranks", "--sort", "ncalls", "--limit", "1", dir});
    REQUIRE_MESSAGE(text.exit_code == 0, text.err);
    CHECK(text.out.find("4 ranks (4 traces)") != std::string::npos);
    CHECK(text.out.find("    50  125.0    200    3") != std::string::npos);
}

} // namespace

TEST_CASE("MPI: mpirun -np 4 profrun -d, and profrun -d -- mpirun -np 4: one run of 4 ranks") {
    std::string inside = temp_path("run-mpi-inside");
    auto r = run(ranks_profiled_into(inside));
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out == "ranks 4\n");
    // One message for the run, from rank 0; the other ranks' profrun are quiet.
    CHECK(lines_with(r.err, "run written to") == 1);
    check_four_ranks(inside);
    // pprof of the run: each sample labelled with its rank, the calls those of the merge.
    std::string profile = temp_path("mpi.pb.gz");
    auto exported = run({PROFREPORT, "--export", "pprof", "-o", profile, inside});
    REQUIRE_MESSAGE(exported.exit_code == 0, exported.err);
    auto tags = pprof({"-tags", profile});
    CHECK_MESSAGE(tags.out.find(" rank: Total") != std::string::npos, tags.out << tags.err);
    for (const char* rank : {"): 0\n", "): 1\n", "): 2\n", "): 3\n"}) // rank 0 too
        CHECK_MESSAGE(tags.out.find(rank) != std::string::npos, tags.out);
    auto merged = run({PROFREPORT, inside});
    CHECK(pprof_total(pprof({"-top", "-sample_index=calls", profile})) ==
          std::to_string(header_calls(merged.out)));

    std::string outside = temp_path("run-mpi-outside");
    std::vector<std::string> argv = {PROFRUN, "-d", outside, "--"};
    for (const std::string& a : mpirun4()) argv.push_back(a);
    argv.push_back(PROF_TEST_MPI_RANKS);
    r = run(argv);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    check_four_ranks(outside);
    reader::RunManifest m = manifest_of(outside);
    size_t launchers = 0;
    for (const reader::RunProcess& p : m.processes)
        if (p.trace.empty()) {
            ++launchers;
            CHECK(p.exit_code == 0);
        }
    CHECK(launchers == 1); // mpirun, listed without a trace
}

TEST_CASE("MPI: a rank that crashes leaves the other ranks' traces whole") {
    std::string dir = temp_path("run-mpi-crash");
    auto r = run(ranks_profiled_into(dir), {{"PROF_TEST_CRASH_RANK", "2"}});
    CHECK(r.exit_code != 0);
    // Rank 2 aborted; the launcher then ended the others, waiting in the barrier. Every trace
    // is read, and holds every call made before the end: the counts are exact.
    reader::RunManifest m = manifest_of(dir);
    bool aborted = false;
    for (const reader::RunProcess& p : m.processes)
        if (p.rank == 2u) aborted = p.signal == SIGABRT;
    CHECK(aborted);
    check_four_ranks(dir);
}
#endif
