// The instructions and jumps of an object's functions (reader/code_flow.hpp), checked against
// objdump's disassembly of the same file: every instruction objdump shows inside a function is
// one decoded, at the same address, and every direct jump goes to the same target.
#include "analysis/engine/session.hpp"
#include "reader/code_flow.hpp"
#include "reader/dwarf_lines.hpp"
#include "reader/elf_symbols.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_builder.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

struct Listing {
    std::map<uint64_t, std::string> text; // by address: mnemonic and operands
};

Listing disassemble(const std::string& path) {
    // binutils comes with the compiler that built the programs.
    auto r = prof::test::run({"/usr/bin/objdump", "-d", "--no-show-raw-insn", path});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    static const std::regex line(R"(^\s*([0-9a-f]+):\s+(\S.*?)\s*$)");
    Listing out;
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);) {
        std::smatch m;
        if (std::regex_match(l, m, line))
            out.text[std::stoull(m[1].str(), nullptr, 16)] = m[2].str();
    }
    return out;
}

void check_code_flow(const std::string& path) {
    CAPTURE(path);
    prof::reader::ElfSymbols symbols(path);
    REQUIRE(symbols.ok());
    prof::reader::CodeFlow flow(path, symbols);
    Listing listing = disassemble(path);
    // objdump's direct jumps: a j-mnemonic (jmp, jcc, jrcxz) or loop, with a target address.
    static const std::regex jump(R"(^(bnd |notrack )?(j[a-z]+|loop[a-z]*)\s+([0-9a-f]+)( <.*)?$)");
    std::set<uint64_t> inside; // distinct: aliases share their code
    size_t jumps = 0, missed = 0;
    for (const prof::reader::ElfSymbols::Entry& e : symbols.entries()) {
        if (!e.size) continue;
        for (auto it = listing.text.lower_bound(e.start);
             it != listing.text.end() && it->first < e.start + e.size; ++it) {
            inside.insert(it->first);
            const std::string& text = it->second;
            if (text.rfind("(bad)", 0) == 0 || text.find("(bad)") != std::string::npos) break;
            if (flow.instruction_at(it->first) != it->first) {
                ++missed;
                if (missed <= 5)
                    MESSAGE(std::hex << it->first << ": " << text << " (" << e.name << ")");
                continue;
            }
            std::smatch m;
            if (std::regex_match(text, m, jump)) {
                ++jumps;
                uint64_t target = std::stoull(m[3].str(), nullptr, 16);
                auto into = flow.entry(target);
                bool found = false;
                for (uint64_t from : into.jumps) found |= from == it->first;
                CHECK_MESSAGE(found, std::hex << it->first << ": " << text);
            }
        }
    }
    CHECK(missed == 0);
    CHECK(inside.size() > 100);
    CHECK(jumps > 10);
    CHECK(flow.instructions() == inside.size());
}

} // namespace

TEST_CASE("code flow: instructions and jumps of a GCC -O2 program with markers, as objdump's") {
    check_code_flow(PROF_TEST_MARKED_HOT);
}

TEST_CASE("code flow: instructions and jumps of the C library (SSE, AVX, AVX-512), as objdump's") {
    Dl_info info{};
    REQUIRE(dladdr(reinterpret_cast<void*>(&std::printf), &info) != 0);
    check_code_flow(info.dli_fname);
}

namespace {

// Whether the instruction at `vaddr` is the markers' code, as the engine tells: a line of
// libprof's public headers, or code of a function inlined from them.
bool marker_code(const prof::reader::DwarfLines& dwarf, uint64_t vaddr) {
    auto header = [](const std::string& f) {
        for (const char* h : {"/prof/prof.hpp", "/prof/prof_thread.h", "/prof/prof.h"})
            if (f.size() >= std::strlen(h) &&
                f.compare(f.size() - std::strlen(h), std::string::npos, h) == 0)
                return true;
        return false;
    };
    std::string file;
    uint32_t line = 0;
    if (!dwarf.lookup(vaddr, file, line)) return false;
    if (header(file)) return true;
    for (const auto& call : dwarf.inlined(vaddr))
        if (header(call.decl_file)) return true;
    return false;
}

} // namespace

// A timer interrupt names the instruction after the one that held the CPU; where the markers'
// code follows a jump of the program's (a loop's exit), the time of refetching after a
// mispredicted jump falls on the markers' first instruction there. A sample naming the
// instruction after that one is the program's; one after a marker instruction that only the
// markers' own code leads to is the profiler's.
TEST_CASE("a sample after the program's jump into the markers' code is the program's") {
    const std::string path = PROF_TEST_MARKED_HOT;
    prof::reader::ElfSymbols elf(path);
    REQUIRE(elf.ok());
    const prof::reader::ElfSymbols::Entry* work = nullptr;
    for (const auto& e : elf.entries())
        if (e.name == "work" && e.size) work = &e; // extern "C" (marked_hot.inc)
    REQUIRE(work);
    prof::reader::CodeFlow flow(path, elf, work->start, work->start + work->size);
    prof::reader::DwarfLines dwarf(path);
    auto next = [&](uint64_t a) {
        for (uint64_t b = a + 1; b <= a + 15; ++b)
            if (flow.instruction_at(b) == b) return b;
        return uint64_t(0);
    };
    uint64_t entered = 0, inside = 0;
    for (uint64_t a = work->start; a && a < work->start + work->size; a = next(a)) {
        if (!marker_code(dwarf, a) || !next(a)) continue;
        prof::reader::CodeFlow::Entry e = flow.entry(a);
        bool from_program = !e.jumps.empty() && !(e.fall_through && marker_code(dwarf, e.previous));
        for (uint64_t j : e.jumps)
            from_program &=
                !marker_code(dwarf, j) && j >= work->start && j < work->start + work->size;
        if (from_program && !entered) entered = a;
        if (e.jumps.empty() && e.fall_through && marker_code(dwarf, e.previous) && !inside)
            inside = a;
    }
    REQUIRE_MESSAGE(entered, "no marker instruction reached only by the program's jumps");
    REQUIRE(inside);

    const uint64_t base = 0x555500000000;
    prof::test::TraceBuilder b;
    b.chunk(0).meta("sample_hz", "1000").module(0, base, base + (1u << 24), path, base);
    b.site(base + 0x10, prof::format::SiteKind::kLine, 15, "marked_hot.cpp", "work", "x");
    b.chunk(1, 0).function(base + work->start);
    b.sample(0, 0, 0, 0, 0);                                   // armed
    b.enter(0, 0);                                             // work()
    b.sample(1000000, 1000000, 0, 0, 1, base + next(entered)); // 1 ms: the program's
    b.sample(2000000, 3000000, 0, 0, 1, base + next(inside));  // 2 ms: the markers'
    b.exit(10).thread_end(0);
    b.chunk(0).end_record(5000000);
    std::string trace = prof::test::temp_path("code_flow_jump.trace");
    b.save(trace);
    prof::analysis::SessionOptions o;
    o.time = prof::analysis::TimeSource::kSampled;
    prof::analysis::Session s(o);
    s.add_trace(trace);
    prof::analysis::Profile p = s.profile();
    CHECK(p.time.marker_samples == 1);
    REQUIRE(p.functions.size() == 1);
    CHECK(std::abs(p.functions[0].stats.tottime - 1e-3) < 1e-6);
}
