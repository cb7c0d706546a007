// Reliability: what a process recorded survives SIGKILL, SIGSEGV and abort(); the report says
// the trace is incomplete and still names every function; hostile output paths are refused.
#include "analysis/engine/session.hpp"
#include "analysis/model/profile.hpp"
#include "reader/trace_reader.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <thread>
#include <tuple>
#include <unistd.h>

// Set in ASan/UBSan/TSan builds by cmake/sanitizers.cmake.
#ifdef PROF_SANITIZER_BUILD
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif

using namespace prof;
using prof::test::run;
using prof::test::temp_path;

namespace {

uint64_t calls_of(const analysis::Profile& p, const std::string& name) {
    for (const auto& f : p.functions)
        if (f.name == name) return f.stats.ncalls;
    return 0;
}

// A crasher killed while running (`run` or `oom` mode): `trace` must hold at least the calls the
// program reported complete, the last line of `out`. Returns that count and the trace's.
std::pair<long, uint64_t> check_killed_crasher(const std::string& trace, const std::string& out) {
    std::string text = test::slurp(out);
    REQUIRE(!text.empty());
    text.pop_back();
    long printed =
        std::stol(text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1));
    REQUIRE(printed >= 1000);
    analysis::Session pb;
    pb.add_trace(trace);
    analysis::Profile p = pb.profile();
    CHECK(p.traces.at(0).incomplete);
    CHECK(calls_of(p, "work(int)") >= uint64_t(printed)); // named from the binary on disk
    CHECK(calls_of(p, "main") == 1);
    // And placed from its DWARF line table: work is defined on line 14 of crasher.cpp.
    for (const auto& f : p.functions)
        if (f.name == "work(int)") {
            CHECK(f.file.find("crasher.cpp") != std::string::npos);
            CHECK(f.line == 14);
        }
    return {printed, calls_of(p, "work(int)")};
}

// `pid`, a crasher in `run` mode writing `trace` and `out`, is killed (SIGKILL) after 300 ms,
// then checked as above.
void kill_and_check_crasher(pid_t pid, const std::string& trace, const std::string& out) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    auto [printed, held] = check_killed_crasher(trace, out);
    MESSAGE("killed after ", printed, " printed calls; trace holds ", held);
}

} // namespace

TEST_CASE("SIGKILL: every call completed before the kill is in the trace") {
    std::string trace = temp_path("killed.trace"), out = temp_path("killed.out");
    std::vector<std::string> env_s;
    for (char** e = environ; *e; ++e)
        if (std::string(*e).rfind("PROF_", 0) != 0) env_s.push_back(*e);
    env_s.push_back("PROF_OUT=" + trace);
    env_s.push_back("PROF_CHUNK_SIZE=64K"); // many chunks: kills land between and inside them
    std::vector<char*> envp;
    for (auto& s : env_s) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string exe = PROF_TEST_CRASHER;
    char arg0[] = "crasher", arg1[] = "run";
    char* argv[] = {arg0, arg1, nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = -1;
    REQUIRE(posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, envp.data()) == 0);
    posix_spawn_file_actions_destroy(&fa);
    kill_and_check_crasher(pid, trace, out);

    auto r = run({PROFREPORT, trace});
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("incomplete trace") != std::string::npos);
    CHECK(r.out.find("(work(int))") != std::string::npos);
}

// A memory cgroup of its own for one test (cgroup v2 or the v1 memory hierarchy), or an empty
// path when this machine does not let us create one.
static std::string memory_cgroup(const std::string& name, const std::string& limit) {
    namespace fs = std::filesystem;
    for (const auto& [root, file] : {std::pair{"/sys/fs/cgroup/memory", "memory.limit_in_bytes"},
                                     std::pair{"/sys/fs/cgroup", "memory.max"}}) {
        std::error_code ec;
        std::string dir = std::string(root) + "/" + name;
        if (!fs::create_directory(dir, ec) && !fs::is_directory(dir)) continue;
        std::ofstream(dir + "/" + file) << limit;
        if (fs::exists(dir + "/memory.swap.max")) std::ofstream(dir + "/memory.swap.max") << "0";
        std::ifstream in(dir + "/" + file);
        std::string got;
        in >> got;
        if (!got.empty() && got != "max" && got != "9223372036854771712") return dir;
        fs::remove(dir, ec);
    }
    return "";
}

TEST_CASE("an out-of-memory kill: every call completed before it is in the trace" *
          doctest::skip(kSanitizerBuild)) {
    std::string cg = memory_cgroup("libprof-oom-" + std::to_string(getpid()), "67108864");
    if (cg.empty()) {
        MESSAGE("no memory cgroup can be created here (needs root and a writable cgroup "
                "hierarchy): skipping the out-of-memory kill");
        return;
    }
    std::string trace = temp_path("oom.trace"), out = temp_path("oom.out");
    // The shell joins the 64 MiB cgroup, then becomes the program, which allocates 256 KiB per
    // 1000 calls until the kernel's OOM killer sends it SIGKILL.
    std::string script = "echo $$ > " + cg + "/cgroup.procs && PROF_OUT=" + trace +
                         " PROF_CHUNK_SIZE=64K exec " + PROF_TEST_CRASHER + " oom > " + out;
    auto r = run({"/bin/sh", "-c", script});
    std::error_code ec;
    std::filesystem::remove(cg, ec);
    REQUIRE_MESSAGE(r.exit_code == 128 + SIGKILL, "exit ", r.exit_code, ": ", r.err);
    auto [printed, held] = check_killed_crasher(trace, out);
    MESSAGE("OOM-killed after ", printed, " printed calls; trace holds ", held);
}

TEST_CASE("SIGSEGV and abort(): exactly the completed calls, names from the binary") {
    for (const char* mode : {"segv", "abort"}) {
        std::string trace = temp_path(std::string("crash-") + mode + ".trace");
        auto r = run({PROF_TEST_CRASHER, mode, "123456"},
                     {{"PROF_OUT", trace}, {"PROF_CHUNK_SIZE", "64K"}});
        CHECK(r.exit_code == (std::string(mode) == "segv" ? 128 + SIGSEGV : 128 + SIGABRT));
        analysis::Session pb;
        pb.add_trace(trace);
        analysis::Profile p = pb.profile();
        CHECK(calls_of(p, "work(int)") == 123456);
        CHECK(p.traces.at(0).incomplete);
    }
}

TEST_CASE("a symlink planted at the output path is not followed, existing traces are kept") {
    std::string target = temp_path("victim.txt"), link = temp_path("planted.trace");
    {
        std::FILE* f = std::fopen(target.c_str(), "w");
        std::fputs("precious\n", f);
        std::fclose(f);
    }
    std::filesystem::create_symlink(target, link);
    auto r = run({PROF_SAMPLE_FIB, "5"}, {{"PROF_OUT", link}});
    CHECK(r.exit_code == 0);
    CHECK(test::slurp(target) == "precious\n"); // never written through the link
    CHECK(std::filesystem::is_symlink(link));
    // The trace went to a name of its own, and the log said so.
    CHECK(r.err.find("event=output_exists") != std::string::npos);
    struct stat st;
    std::string own = link + "." + std::to_string(0);
    bool found = false;
    for (const auto& e : std::filesystem::directory_iterator(test::temp_dir()))
        if (e.path().string().rfind(link + ".", 0) == 0) {
            found = true;
            REQUIRE(stat(e.path().c_str(), &st) == 0);
            CHECK((st.st_mode & 0777) == 0600); // owner-only
        }
    CHECK(found);
}

TEST_CASE("bad option values: one log line each, defaults used, the program runs") {
    auto r = run({PROF_SAMPLE_FIB, "5"}, {{"PROF_OUT", temp_path("opts.trace")},
                                          {"PROF_CHUNK_SIZE", "12345"},
                                          {"PROF_CLOCK", "sundial"}});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "fib(5) = 5\n");
    CHECK(r.err.find("name=PROF_CHUNK_SIZE") != std::string::npos);
    CHECK(r.err.find("name=PROF_CLOCK") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 2);
}

namespace {

analysis::Profile life(const std::string& mode, std::string* out = nullptr,
                       std::vector<std::pair<std::string, std::string>> env = {},
                       const std::string& exe = PROF_TEST_LIFE) {
    static int n = 0;
    std::string trace = temp_path("life-" + mode + "-" + std::to_string(++n) + ".trace");
    env.emplace_back("PROF_OUT", trace);
    auto r = run({exe, mode}, env);
    REQUIRE_MESSAGE(r.exit_code == 0, mode, ": ", r.err);
    if (out) *out = r.out;
    analysis::Session pb;
    pb.add_trace(trace);
    return pb.profile();
}

void balanced(const analysis::Profile& p) {
    for (const analysis::Edge& e : p.edges)
        if (e.caller != analysis::kRoot && e.caller != e.callee)
            CHECK(e.stats.cumtime <= p.functions[e.caller].stats.cumtime + 1e-9);
    for (const auto& t : p.threads) CHECK(t.unmatched_exits == 0);
}

} // namespace

TEST_CASE("200 threads started and ended quickly") {
    analysis::Profile p = life("threads200");
    CHECK(calls_of(p, "tick(int)") == 2000);
    size_t ended = 0;
    for (const auto& [s, t] : p.traces.at(0).threads) ended += t.ended;
    CHECK(ended == 200);
    balanced(p);
}

TEST_CASE("recursion 100000 frames deep") {
    std::string out;
    analysis::Profile p = life("deep", &out);
    CHECK(out == "100000\n");
    const auto& f = p.functions[p.match("descend")[0]];
    CHECK(f.stats.ncalls == 100001);
    CHECK(f.stats.pcalls == 1);
    balanced(p);
}

namespace {

// life("signals"): the handlers the program counted (`out`) are every one recorded or dropped.
// A handler that interrupts a hook is not recorded (the hook is busy): its four events, the
// enter and exit of on_alarm and of in_handler, are counted as dropped. All others are
// recorded. How many land in a hook depends on the machine (a sanitizer slows the hooks), so
// the check is the exact sum, not a share.
void check_handlers(const analysis::Profile& p, const std::string& out) {
    long handled = std::stol(out.substr(out.find(' ') + 1));
    CHECK(calls_of(p, "spin(int)") == 200000);
    uint64_t recorded = calls_of(p, "in_handler()"), dropped = 0;
    for (const auto& t : p.threads) dropped += t.dropped;
    CHECK(recorded > 0);
    CHECK(dropped % 4 == 0);
    CHECK(recorded + dropped / 4 == uint64_t(handled));
    CHECK(calls_of(p, "on_alarm(int)") == recorded);
    balanced(p);
}

// Every function's calls and primitive calls, by name.
using CallCounts = std::map<std::string, std::pair<uint64_t, uint64_t>>;
CallCounts call_counts(const analysis::Profile& p) {
    CallCounts c;
    for (const auto& f : p.functions) c[f.name] = {f.stats.ncalls, f.stats.pcalls};
    return c;
}

} // namespace

TEST_CASE("signal handlers that call instrumented functions") {
    std::string out;
    analysis::Profile p = life("signals", &out);
    check_handlers(p, out);
}

TEST_CASE("longjmp out of a signal handler") {
    for (const char* exe : {PROF_TEST_LIFE, PROF_TEST_LIFE_FP}) {
        CAPTURE(exe);
        analysis::Profile p = life("sigjmp", nullptr, {}, exe);
        CHECK(calls_of(p, "after_jump()") == 5);
        CHECK(calls_of(p, "jump_handler(int)") == 5);
        size_t main_index = p.match("\\(main\\)")[0];
        for (const analysis::Edge& e : p.edges)
            if (p.functions[e.callee].name == "after_jump()") CHECK(e.caller == main_index);
        balanced(p);
    }
}

TEST_CASE("thread cancellation") {
    analysis::Profile p = life("cancel");
    CHECK(calls_of(p, "nap()") == 1);
    CHECK(calls_of(p, "cancelled_thread(void*)") == 1);
    balanced(p);
}

TEST_CASE("fork from a multi-threaded process") {
    std::string trace = temp_path("life-mtfork.trace");
    auto r = run({PROF_TEST_LIFE, "mtfork"}, {{"PROF_OUT", trace}});
    REQUIRE(r.exit_code == 0);
    std::string child = test::child_trace(trace);
    REQUIRE(!child.empty());
    analysis::Session pb;
    pb.add_trace(child);
    analysis::Profile kid = pb.profile();
    CHECK(calls_of(kid, "child_only(int)") == 7);
    CHECK(calls_of(kid, "tick(int)") == 0); // the other threads do not exist in the child
    analysis::Session parent_pb;
    parent_pb.add_trace(trace);
    CHECK(calls_of(parent_pb.profile(), "child_only(int)") == 0);
}

TEST_CASE("a full disk stops tracing with one line, the program runs on, what fits is kept") {
    std::string dir = temp_path("tinyfs");
    std::filesystem::create_directories(dir);
    auto mounted = run({"/bin/mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", dir});
    if (mounted.exit_code != 0) {
        MESSAGE("skipped: cannot mount a small tmpfs here (needs root): ", mounted.err);
        return;
    }
    std::string trace = dir + "/full.trace";
    auto r = run({PROF_SAMPLE_FIB, "27"}, {{"PROF_OUT", trace}, {"PROF_CHUNK_SIZE", "64K"}});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "fib(27) = 196418\n");
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find("No space left on device") != std::string::npos);
    analysis::Session pb;
    pb.add_trace(trace); // what fitted reads, and says it is incomplete
    analysis::Profile p = pb.profile();
    CHECK(p.traces.at(0).incomplete);
    CHECK(calls_of(p, "fib(int)") > 0);
    CHECK(calls_of(p, "fib(int)") < 635621);
    run({"/bin/umount", dir});
}

TEST_CASE("a program that closes every descriptor: tracing stops, its own file is untouched") {
    std::string own = temp_path("closer-own.txt"), trace = temp_path("closer.trace");
    auto r = run({PROF_TEST_CLOSER, own}, {{"PROF_OUT", trace}, {"PROF_CHUNK_SIZE", "64K"}});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "fd 3\n"); // the trace's old descriptor number was reused
    CHECK(test::slurp(own) == "the program's own data\n");
    CHECK(r.err.find("closed the trace file descriptor") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    analysis::Session pb;
    pb.add_trace(trace); // the part recorded before the descriptor was closed
    analysis::Profile p = pb.profile();
    CHECK(calls_of(p, "work(int)") > 0);
    // Why it ends early is in the trace (through the still mapped process chunk), and profrun
    // does not present it as a finished trace.
    CHECK(p.traces.at(0).incomplete);
    CHECK(p.traces.at(0).incomplete_reason.find("closed the trace file descriptor") !=
          std::string::npos);
    std::string via_profrun = temp_path("closer-profrun.trace");
    auto pr = run({PROFRUN, "-o", via_profrun, "--", PROF_TEST_CLOSER, own},
                  {{"PROF_CHUNK_SIZE", "64K"}});
    CHECK(pr.exit_code == 0);
    CHECK(pr.err.find(via_profrun + " is not finished") != std::string::npos);
}

namespace {

analysis::Profile profile_file(const std::string& path) {
    analysis::Session pb;
    pb.add_trace(path);
    return pb.profile();
}

} // namespace

TEST_CASE("execve: the new program image writes a trace of its own, linked by pid") {
    std::string trace = temp_path("exec.trace");
    auto r = run({PROF_TEST_SPAWNER, "exec"}, {{"PROF_OUT", trace}});
    REQUIRE(r.exit_code == 0);
    auto others = test::traces_next_to(trace);
    REQUIRE(others.size() == 1);
    analysis::Profile before = profile_file(trace), after = profile_file(others[0]);
    CHECK(calls_of(before, "before_exec()") == 1);
    CHECK(calls_of(after, "after_exec()") == 1);
    CHECK(after.traces.at(0).header.pid == before.traces.at(0).header.pid);
    CHECK(before.traces.at(0).incomplete); // the old image never returned from execv
}

TEST_CASE("posix_spawn: the child writes its own trace") {
    std::string trace = temp_path("spawn.trace");
    auto r = run({PROF_TEST_SPAWNER, "spawn"}, {{"PROF_OUT", trace}});
    REQUIRE(r.exit_code == 0);
    auto others = test::traces_next_to(trace);
    REQUIRE(others.size() == 1);
    analysis::Profile child = profile_file(others[0]);
    CHECK(calls_of(child, "spawned(int)") == 3);
    CHECK(child.traces.at(0).header.ppid == profile_file(trace).traces.at(0).header.pid);
}

TEST_CASE("dlopen, dlclose and dlopen again of an instrumented library") {
    std::string trace = temp_path("dlopen.trace");
    auto r = run({PROF_TEST_SPAWNER, "dlopen", PROF_TEST_PLUGIN}, {{"PROF_OUT", trace}});
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == "44\n"); // 11 x (0 + 1) + 11 x (0 + 1 + 2)
    analysis::Profile p = profile_file(trace);
    CHECK(calls_of(p, "plugin_work") == 5);
    for (const auto& f : p.functions)
        if (f.name == "plugin_work") CHECK(f.module.find("libtest_plugin.so") != std::string::npos);
}

namespace {

const analysis::Function* function_named(const analysis::Profile& p, const std::string& name) {
    for (const auto& f : p.functions)
        if (f.name == name) return &f;
    return nullptr;
}

// The ncalls column of the profreport table row of `function`, "" if none.
std::string table_calls(const std::string& table, const std::string& function) {
    size_t at = table.find("(" + function + ")\n");
    if (at == std::string::npos) return "";
    size_t begin = table.rfind('\n', at) + 1;
    size_t first = table.find_first_not_of(' ', begin);
    return table.substr(first, table.find(' ', first) - first);
}

// The CALLS column of the `profreport --tree` row of `function` (the first one), "" if none.
std::string tree_calls(const std::string& tree, const std::string& function) {
    size_t at = tree.find("+-" + function + "\n");
    if (at == std::string::npos) return "";
    size_t end = tree.find_last_not_of(' ', at - 1) + 1;
    size_t begin = tree.rfind(' ', end - 1) + 1;
    return tree.substr(begin, end - begin);
}

// The fields of the profreport CSV row whose name column is `function` (names without commas).
std::vector<std::string> csv_row(const std::string& csv, const std::string& function) {
    std::istringstream in(csv);
    for (std::string line; std::getline(in, line);) {
        std::vector<std::string> fields;
        std::istringstream row(line);
        for (std::string f; std::getline(row, f, ',');) fields.push_back(f);
        if (fields.size() == 11 && fields[6] == function) return fields; // name is column 7
    }
    return {};
}

} // namespace

// dlclose of an instrumented library, then dlopen of another that the loader maps at the same
// address: the hooks' per-thread tables still map those addresses to the first library's
// functions. Copies of the libraries are loaded and deleted before the report, so the names
// must come from the trace itself (named at dlclose, or at exit for the one still loaded).
// A plugin rebuilt in place: the file at the library's path is another build when dlclose
// names its functions. Those must not take the new file's names.
TEST_CASE("dlclose of a library whose file was replaced: its functions keep no wrong names") {
    std::string dir = temp_path("reload-replace");
    std::filesystem::create_directories(dir);
    std::string a = dir + "/plugin.so", trace = dir + "/replace.trace";
    std::filesystem::copy_file(PROF_TEST_RELOAD_A, a);
    auto r = run({PROF_TEST_RELOAD, a, PROF_TEST_RELOAD_B, "replace"}, {{"PROF_OUT", trace}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    CHECK(r.out == "sum 33\n"); // alpha_work(x) = 6x + 5 for x = 0, 1, 2
    analysis::Profile p = profile_file(trace);
    uint64_t calls_in_plugin = 0;
    for (const auto& f : p.functions) {
        if (f.module != a) continue;
        calls_in_plugin += f.stats.ncalls;
        CHECK_MESSAGE(f.name.find("bravo") == std::string::npos, f.name);
    }
    CHECK(calls_in_plugin == 9); // alpha_work 3, alpha_step 6: named or shown by address
}

TEST_CASE("dlclose, then another library at the same address: each named and counted as its own") {
    for (std::string mode : {"keep", "close"}) {
        CAPTURE(mode);
        std::string dir = temp_path("reload-" + mode);
        std::filesystem::create_directories(dir);
        std::string a = dir + "/liba.so", b = dir + "/libb.so", trace = dir + "/reload.trace";
        std::filesystem::copy_file(PROF_TEST_RELOAD_A, a);
        std::filesystem::copy_file(PROF_TEST_RELOAD_B, b);
        auto r = run({PROF_TEST_RELOAD, a, b, mode}, {{"PROF_OUT", trace}});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        CHECK(r.out.find("sum 168\n") != std::string::npos); // 3 calls of a, 5 of b
        bool reused = r.out.rfind("reused 1 ", 0) == 0;
        if (!reused) MESSAGE("the loader did not map b at a's address; checked anyway: ", r.out);
        std::filesystem::remove(a);
        std::filesystem::remove(b);

        analysis::Profile p = profile_file(trace);
        struct Expected {
            const char* name;
            uint64_t calls;
            const std::string& module;
        };
        for (const Expected& e : {Expected{"alpha_work", 3, a}, Expected{"alpha_step", 6, a},
                                  Expected{"bravo_work", 5, b}, Expected{"bravo_step", 10, b}}) {
            CAPTURE(e.name);
            const analysis::Function* f = function_named(p, e.name);
            REQUIRE(f);
            CHECK(f->stats.ncalls == e.calls);
            CHECK(f->stats.pcalls == e.calls);
            CHECK(f->module == e.module);
        }
        size_t from_libraries = 0;
        for (const auto& f : p.functions) from_libraries += f.module == a || f.module == b;
        CHECK(from_libraries == 4); // nothing else, no function under the other's name
        balanced(p);
        const reader::TraceInfo& info = p.traces.at(0);
        CHECK(info.finished);
        if (reused) { // the trace says when a went away, and b got a module record of its own
            size_t unloaded = 0, of_b = 0;
            for (const auto& m : info.modules) {
                unloaded += m.unload_ticks != UINT64_MAX;
                of_b += m.path == b;
            }
            CHECK(unloaded == (mode == "close" ? 2u : 1u));
            CHECK(of_b == 1);
        }

        auto table = run({PROFREPORT, trace});
        CHECK(table.exit_code == 0);
        CHECK(table_calls(table.out, "alpha_work") == "3");
        CHECK(table_calls(table.out, "alpha_step") == "6");
        CHECK(table_calls(table.out, "bravo_work") == "5");
        CHECK(table_calls(table.out, "bravo_step") == "10");
        auto csv = run({PROFREPORT, "--format", "csv", trace});
        CHECK(csv.exit_code == 0);
        for (auto [name, calls, module] :
             {std::tuple{"alpha_work", "3", a}, std::tuple{"bravo_work", "5", b}}) {
            std::vector<std::string> row = csv_row(csv.out, name);
            REQUIRE_MESSAGE(row.size() == 11, name);
            CHECK(row[0] == calls);
            CHECK(row[9] == module);
        }
        auto json = run({PROFREPORT, "--format", "json", trace});
        CHECK(json.exit_code == 0);
        CHECK(json.out.find("\"name\": \"alpha_work\"") != std::string::npos);
        CHECK(json.out.find("\"name\": \"bravo_work\"") != std::string::npos);
        // The call tree replays the events: the same split.
        auto tree = run({PROFREPORT, "--tree", trace});
        CHECK(tree_calls(tree.out, "alpha_work") == "3");
        CHECK(tree_calls(tree.out, "bravo_work") == "5");
    }
}

// vfork: the child runs in the parent's memory (thread-local state and mapped chunks included)
// until exec or _exit; `exit` mode is the classic mistake of calling exit() there, which runs
// the parent's exit handlers in the child. Under TSan vfork is fork (its interceptor), and the
// child then writes a trace of its own, which is fine too.
TEST_CASE("vfork: the child's calls stay out of the parent's trace, which stays exact") {
    for (std::string mode : {"_exit", "exit", "exec", "counted _exit", "counted exec"}) {
        CAPTURE(mode);
        // `counted`: the parent counts its calls in a call tree (PROF_TIME=sampled).
        bool counted = mode.rfind("counted ", 0) == 0;
        if (counted) mode = mode.substr(8);
        std::string trace = temp_path("vfork-" + mode + (counted ? "-counted" : "") + ".trace");
        auto r = run({PROF_TEST_VFORKER, mode},
                     {{"PROF_OUT", trace}, {"PROF_TIME", counted ? "sampled" : "auto"}});
        REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        // The child ran its instrumented code: its exit status is its result (exec: the new
        // image's).
        CHECK(r.out == (mode == "exec" ? "parent 9 child 42\n" : "parent 9 child 30\n"));
        analysis::Profile p = profile_file(trace);
        CHECK(calls_of(p, "parent_work(int)") == 5);
        CHECK(calls_of(p, "main") == 1);
        CHECK(calls_of(p, "in_child(int)") == 0);
        CHECK(calls_of(p, "child_work(int)") == 0);
        CHECK(p.threads.size() == 1);
        for (const auto& t : p.threads) CHECK(t.abandoned == 0);
        balanced(p);
        const reader::TraceInfo& info = p.traces.at(0);
        CHECK(info.finished); // also when the child ran the exit handlers
        CHECK_FALSE(info.incomplete);
        if (mode == "exit" && !kSanitizerBuild)
            CHECK(r.err.find("event=vfork_child_exit") != std::string::npos);
        auto report = run({PROFREPORT, "--format", "json", trace});
        CHECK(report.exit_code == 0);
        CHECK(report.err.empty());
        CHECK(report.out.find("\"ncalls\": 5") != std::string::npos);
        if (mode == "exec") { // the new image has a trace of its own
            uint64_t after = 0;
            for (const std::string& other : test::traces_next_to(trace))
                after += calls_of(profile_file(other), "after_exec(int)");
            CHECK(after == 1);
        }
    }
}

// A setuid copy cannot load the sanitizer runtime the way the test binaries do.
TEST_CASE("setuid programs ignore PROF_* and are not traced" * doctest::skip(kSanitizerBuild)) {
    if (geteuid() != 0) {
        MESSAGE("skipped: needs root to make a setuid copy");
        return;
    }
    // A setuid-to-nobody copy run by root: the kernel sets AT_SECURE.
    std::string dir = temp_path("setuid");
    std::filesystem::create_directories(dir);
    std::filesystem::permissions(dir, std::filesystem::perms::all);
    std::string exe = dir + "/fib", trace = dir + "/setuid.trace";
    std::filesystem::copy_file(PROF_SAMPLE_FIB, exe);
    REQUIRE(chown(exe.c_str(), 65534, 65534) == 0);
    REQUIRE(chmod(exe.c_str(), 04755) == 0);
    auto r = run({exe, "10"}, {{"PROF_OUT", trace}});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "fib(10) = 55\n");
    CHECK(!std::filesystem::exists(trace));
    CHECK(r.err.find("setuid or setgid program") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

// profrun moves an existing trace aside (or replaces it with --force), so -o naming anything
// other than a regular file, a typo such as -o /tmp, must be refused before the program runs.
TEST_CASE(
    "profrun -o: a directory or a device is refused, never moved, an unwritable path fails early") {
    std::string dir = temp_path("profrun-out-dir");
    std::filesystem::create_directories(dir + "/inside");
    for (bool force : {false, true}) {
        CAPTURE(force);
        std::vector<std::string> args{PROFRUN, "-o", dir};
        if (force) args.push_back("--force");
        args.insert(args.end(), {"--", PROF_TEST_FORKER});
        auto r = run(args);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty()); // the program did not run
        CHECK(r.err.find("is not a regular file") != std::string::npos);
        CHECK(std::filesystem::is_directory(dir + "/inside"));
        CHECK(!std::filesystem::exists(dir + ".old"));
    }
    std::string dev = temp_path("profrun-out-null");
    REQUIRE(mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
    auto r = run({PROFRUN, "-o", dev, "--", PROF_TEST_FORKER});
    CHECK(r.exit_code == 2);
    struct stat st {};
    CHECK((stat(dev.c_str(), &st) == 0 && S_ISCHR(st.st_mode)));
    auto missing = run({PROFRUN, "-o", dir + "/no/such/dir/x.trace", "--", PROF_TEST_FORKER});
    CHECK(missing.exit_code == 2);
    CHECK(missing.out.empty());
    CHECK(missing.err.find("cannot write the trace to") != std::string::npos);
    CHECK(std::count(missing.err.begin(), missing.err.end(), '\n') == 1);
}

TEST_CASE("profrun names the traces a forked child wrote next to the one asked for") {
    std::string trace = temp_path("profrun-forker.trace");
    auto r = run({PROFRUN, "-o", trace, "--", PROF_TEST_FORKER});
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("trace written to " + trace) != std::string::npos);
    size_t at = r.err.find("1 more from other processes of the run (fork or exec): " + trace + ".");
    REQUIRE(at != std::string::npos);
    std::string child = r.err.substr(at + r.err.substr(at).find(trace + "."));
    child = child.substr(0, child.find('"'));
    CHECK(std::filesystem::is_regular_file(child));
}

// libprof/runtime/options.inc: a refused value of each kind gives one bad_option line naming
// the variable, what it accepts and the default used; the program runs on and is traced.
TEST_CASE("bad values of the PROF_* variables: one bad_option line each, the default used") {
    std::string trace = temp_path("bad-options.trace");
    auto r = run({PROF_SAMPLE_FIB, "5"}, {{"PROF_OUT", trace},
                                          {"PROF_LOG_FORMAT", "xml"},
                                          {"PROF_DISABLE", "maybe"},
                                          {"PROF_SYMBOLS", "x"},
                                          {"PROF_MEM_UNWIND", "lbr"},
                                          {"PROF_MEM_RSS_INTERVAL", "3600001"},
                                          {"PROF_CHUNK_SIZE", "100K"},
                                          {"PROF_MAX_DEPTH", "15"},
                                          {"PROF_CLOCK", "wall"}});
    CHECK(r.exit_code == 0);
    for (const char* line :
         {"name=PROF_LOG_FORMAT value=\"xml\" expected=text|json using=text\n",
          "name=PROF_DISABLE value=\"maybe\" expected=bool using=0\n",
          "name=PROF_SYMBOLS value=\"x\" expected=bool using=1\n",
          "name=PROF_MEM_UNWIND value=\"lbr\" expected=fp|dwarf using=fp\n",
          "name=PROF_MEM_RSS_INTERVAL value=\"3600001\" expected=\"milliseconds, 0 to 3600000 (0 "
          "= off)\" using=10\n",
          "name=PROF_CHUNK_SIZE value=\"100K\" expected=\"power of two from 64K to 64M\" "
          "using=262144\n",
          "name=PROF_MAX_DEPTH value=\"15\" expected=\"16 to 16777216\" using=1048576\n",
          "name=PROF_CLOCK value=\"wall\" expected=auto|tsc|monotonic using=auto\n"})
        CHECK_MESSAGE(r.err.find(line) != std::string::npos, line, " not in:\n", r.err);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 8);
    CHECK(profile_file(trace).total_calls > 0);
    // The log settings are read first: PROF_LOG=quiet silences the complaints about the others.
    auto quiet =
        run({PROF_SAMPLE_FIB, "5"},
            {{"PROF_OUT", trace + ".quiet"}, {"PROF_LOG", "quiet"}, {"PROF_CHUNK_SIZE", "1"}});
    CHECK(quiet.exit_code == 0);
    CHECK(quiet.err.empty());
    // A size within range and a power of two, with a suffix; a bool spelled out.
    auto good = run({PROF_SAMPLE_FIB, "5"}, {{"PROF_OUT", trace + ".good"},
                                             {"PROF_CHUNK_SIZE", "1MiB"},
                                             {"PROF_MAX_DEPTH", "16M"},
                                             {"PROF_SCOPE_RUNS", "off"}});
    CHECK(good.exit_code == 0);
    CHECK(good.err.empty());
}

// The same process lives with the calls counted in a call tree (PROF_TIME=sampled, format 1.9):
// every function's calls and primitive calls are the traced mode's, the tree balanced. The
// handlers' calls depend on the run: their sum with the dropped ones is exact. (A sanitizer
// build counts without samples, so that its checks cover the counting hooks too.)
TEST_CASE("counting threads: threads, deep recursion, handlers, longjmp, cancel as traced") {
    for (std::string mode : {"threads200", "deep", "sigjmp", "cancel"}) {
        CAPTURE(mode);
#ifdef __SANITIZE_THREAD__
        if (mode == "deep") continue; // TSan's stack depot stops at 65536 frames, and hangs
#endif
        analysis::Profile traced = life(mode, nullptr, {{"PROF_TIME", "traced"}});
        analysis::Profile counted = life(mode, nullptr, {{"PROF_TIME", "sampled"}});
        CHECK(counted.time.untimed_traces == 1);
        CHECK(call_counts(counted) == call_counts(traced));
        balanced(counted);
    }
    std::string out;
    analysis::Profile p = life("signals", &out, {{"PROF_TIME", "sampled"}});
    CHECK(p.time.untimed_traces == 1);
    check_handlers(p, out);
}

TEST_CASE("counting threads: SIGKILL, SIGSEGV and abort() keep every call counted") {
    for (const char* mode : {"segv", "abort"}) {
        CAPTURE(mode);
        std::string trace = temp_path(std::string("counted-crash-") + mode + ".trace");
        auto r = run({PROF_TEST_CRASHER, mode, "123456"},
                     {{"PROF_OUT", trace}, {"PROF_CHUNK_SIZE", "64K"}, {"PROF_TIME", "sampled"}});
        CHECK(r.exit_code == (std::string(mode) == "segv" ? 128 + SIGSEGV : 128 + SIGABRT));
        analysis::Session pb;
        pb.add_trace(trace);
        analysis::Profile p = pb.profile();
        CHECK(p.time.untimed_traces == 1);
        CHECK(calls_of(p, "work(int)") == 123456);
        CHECK(p.traces.at(0).incomplete);
    }
    // Killed while it counts: the counts are in the file's mapped pages, not in the process.
    std::string trace = temp_path("counted-killed.trace"), out = temp_path("counted-killed.out");
    std::string script = "PROF_OUT=" + trace + " PROF_TIME=sampled exec " +
                         std::string(PROF_TEST_CRASHER) + " run > " + out;
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    kill_and_check_crasher(pid, trace, out);
}

// A counting thread's tree across chunks: 3000 functions, each first called from main (a
// Function and a CallNode record each, and the blocks of counts made right after some of them),
// then thousands of paths; small chunks, so that records land at every place of a chunk's end.
// Every count is the traced mode's.
TEST_CASE("counting threads: thousands of functions and paths across chunks, counts exact") {
    for (const char* chunk : {"64K", "128K"}) {
        CAPTURE(chunk);
        CallCounts counts[2];
        uint64_t total[2] = {0, 0};
        for (int counting = 0; counting < 2; ++counting) {
            std::string trace = temp_path(std::string("paths-") + chunk + "-" +
                                          std::to_string(counting) + ".trace");
            auto r = run({PROF_TEST_CALL_PATHS}, {{"PROF_OUT", trace},
                                                  {"PROF_CHUNK_SIZE", chunk},
                                                  {"PROF_TIME", counting ? "sampled" : "traced"}});
            REQUIRE_MESSAGE(r.exit_code == 0, r.err);
            uint64_t printed = std::stoull(r.out.substr(r.out.find(' ') + 1));
            analysis::Session session;
            session.add_trace(trace); // throws on a record that breaks the format's rules
            analysis::Profile p = session.profile();
            CHECK(p.time.untimed_traces == uint64_t(counting));
            counts[counting] = call_counts(p);
            for (const auto& f : p.functions) total[counting] += f.stats.ncalls;
            CHECK(total[counting] == printed + 1); // and main
        }
        CHECK(counts[0].size() == 3001);
        CHECK(counts[1] == counts[0]);
    }
}

// PROF_TIME=auto, the default: a run shorter than PROF_COUNT_AFTER samples keeps every call's
// time; a longer one begins counting, with the counts of a traced run. (Not under a sanitizer,
// whose runtime keeps sigaction: no samples, so no switch.)
#ifndef PROF_SANITIZER_BUILD
TEST_CASE("PROF_TIME=auto: traced until the run has samples enough, then counted, counts exact") {
    // 201 threads of a few calls each: far from 100 samples, every call keeps its time.
    analysis::Profile traced = life("threads200", nullptr, {{"PROF_TIME", "traced"}});
    analysis::Profile short_run = life("threads200");
    CHECK(call_counts(short_run) == call_counts(traced));
    CHECK(short_run.time.untimed_traces == 0);
    for (const auto& [s, t] : short_run.traces.at(0).threads) CHECK(!t.counting);

    // A run that burns CPU: it begins counting after its 10th sample, in the middle of its
    // calls. Its counts are exact (the burners' rounds depend on their time, the others not).
    std::string trace = temp_path("auto-switched.trace");
    auto r = run({PROF_TEST_TRUE_TIME, "0.3"}, {{"PROF_OUT", trace}, {"PROF_COUNT_AFTER", "10"}});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    analysis::Session session;
    session.add_trace(trace);
    const reader::TraceInfo& info = session.traces().at(0);
    CHECK(info.meta.at("time") == "auto");
    CHECK(info.meta.at("count_after_samples") == "10");
    REQUIRE(info.threads.size() == 1);
    CHECK(info.threads.begin()->second.counting);
    analysis::Profile p = session.profile();
    CHECK(p.time.switched_traces == 1);
    CHECK(p.time.untimed_traces == 1);
    CHECK(calls_of(p, "tiny()") == 10000000);
    CHECK(calls_of(p, "nap()") == 4);
    CHECK(calls_of(p, "main") == 1);
    balanced(p);
    // What needs every call's time says when the hooks stopped reading the clock.
    for (std::vector<std::string> argv :
         {std::vector<std::string>{PROFREPORT, "--time", "traced", trace},
          std::vector<std::string>{PROFREPORT, "--export", "chrome", "-o",
                                   temp_path("auto-switched.json"), trace}}) {
        auto e = run(argv);
        CHECK(e.exit_code != 0);
        CHECK(std::count(e.err.begin(), e.err.end(), '\n') == 1);
        CHECK(e.err.find("stopped reading the clock per call at") != std::string::npos);
        CHECK(e.err.find("PROF_TIME=traced") != std::string::npos);
    }
    // The finished trace's header says when (FileHeader::counting_ticks), so the refusal comes
    // before its records are read; without it (a 1.9 file), reading up to the switch says the
    // same line.
    CHECK(info.header.counting_ticks > info.header.start_ticks);
    CHECK(info.header.counting_ticks < info.header.end_ticks);
    std::string older = temp_path("auto-switched-no-header.trace");
    {
        std::ifstream in(trace, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::memset(bytes.data() + offsetof(format::FileHeader, counting_ticks), 0, 8);
        std::ofstream(older, std::ios::binary) << bytes;
    }
    auto from_header = run({PROFREPORT, "--export", "chrome", "-o", temp_path("a.json"), trace});
    auto from_records = run({PROFREPORT, "--export", "chrome", "-o", temp_path("b.json"), older});
    CHECK(from_header.err.substr(from_header.err.find(": the hooks")) ==
          from_records.err.substr(from_records.err.find(": the hooks")));
    auto table = run({PROFREPORT, trace});
    CHECK(table.exit_code == 0);
    CHECK(table.out.find("calls counted without a clock once samples could time them") !=
          std::string::npos);
    auto info_text = run({PROFREPORT, "--info", trace});
    CHECK(info_text.exit_code == 0);
    CHECK(info_text.out.find("(calls counted in its call tree)") != std::string::npos);
}
#endif
