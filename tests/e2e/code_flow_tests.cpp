// The instructions and jumps of an object's functions (reader/code_flow.hpp), checked against
// objdump's disassembly of the same file: every instruction objdump shows inside a function is
// one decoded, at the same address, and every direct jump goes to the same target.
#include "analysis/engine/session.hpp"
#include "reader/code_flow.hpp"
#include "reader/dwarf_lines.hpp"
#include "reader/elf_file.hpp"
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
#include <vector>

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
    for (const prof::reader::ElfSymbols::Entry& e : symbols.entries()) flow.decode(e);
    Listing listing = disassemble(path);
    // objdump's direct jumps: a j-mnemonic (jmp, jcc, jrcxz) or loop, with a target address.
    static const std::regex jump(R"(^(bnd |notrack )?(j[a-z]+|loop[a-z]*)\s+([0-9a-f]+)( <.*)?$)");
    // What never runs on to the next instruction (binutils before 2.36 print retq, jmpq).
    static const std::regex ends(R"(^((bnd |notrack |repz )?(jmp|ret)q?|ud2|hlt)\b)");
    // No-ops: nop, nopl, nopw with any prefixes, and xchg %ax,%ax (66 90).
    static const std::regex no_op(R"((^|\s)nop[lw]?\b|^xchg\s+%ax,%ax$)");
    std::set<uint64_t> inside, jumps; // distinct: aliases share their code
    size_t missed = 0, falls_wrong = 0, nop_wrong = 0;
    bool bad = false;
    for (const prof::reader::ElfSymbols::Entry& e : symbols.entries()) {
        if (!e.size) continue;
        for (auto it = listing.text.lower_bound(e.start);
             it != listing.text.end() && it->first < e.start + e.size; ++it) {
            const std::string& text = it->second;
            if (text.find("(bad)") != std::string::npos) { // objdump does not know it
                bad = true;
                break;
            }
            inside.insert(it->first);
            if (flow.instruction_at(it->first) != it->first) {
                if (++missed <= 5)
                    MESSAGE(std::hex << it->first << ": " << text << " (" << e.name << ")");
                continue;
            }
            if (flow.falls(it->first) == std::regex_search(text, ends) && ++falls_wrong <= 5)
                MESSAGE(std::hex << it->first << ": " << text << ": falls "
                                 << flow.falls(it->first));
            if (flow.is_nop(it->first) != std::regex_search(text, no_op) && ++nop_wrong <= 5)
                MESSAGE(std::hex << it->first << ": " << text << ": no-op "
                                 << flow.is_nop(it->first));
            std::smatch m;
            if (std::regex_match(text, m, jump)) {
                jumps.insert(it->first);
                uint64_t target = std::stoull(m[3].str(), nullptr, 16);
                auto into = flow.entry(target);
                bool found = false;
                for (uint64_t from : into.jumps) found |= from == it->first;
                CHECK_MESSAGE(found, std::hex << it->first << ": " << text);
            }
        }
    }
    CHECK(missed == 0);
    CHECK(falls_wrong == 0);
    CHECK(nop_wrong == 0);
    CHECK(inside.size() > 100);
    CHECK(jumps.size() > 10);
    if (!bad) { // objdump stopped where it knew no instruction; the decoder went on
        CHECK(flow.jumps() == jumps.size());
        CHECK(flow.instructions() == inside.size());
    }
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
// code follows a branch of the program's (a loop's exit), the time of refetching after a
// mispredicted branch falls on the markers' first instruction there. A sample naming the
// instruction after that one is the program's when branches of the program's are the only way
// there; where the program's code also runs on into it without a branch, the profiler's.
// The sanitizers' instrumentation lays the marked program out otherwise: the two cases the
// test takes from it (a way in by one branch, a way in by running on) may not be there.
#ifdef PROF_SANITIZER_BUILD
TEST_CASE("a sample after the program's branch into the markers' code is the program's" *
          doctest::skip(true)) {}
#else
TEST_CASE("a sample after the program's branch into the markers' code is the program's") {
    const std::string path = PROF_TEST_MARKED_HOT;
    prof::reader::ElfSymbols elf(path);
    REQUIRE(elf.ok());
    const prof::reader::ElfSymbols::Entry* work = nullptr;
    for (const auto& e : elf.entries())
        if (e.name == "work" && e.size) work = &e; // extern "C" (marked_hot.inc)
    REQUIRE(work);
    prof::reader::CodeFlow flow(path, elf);
    REQUIRE(flow.decode(*work));
    // GCC's cold part of work() is work's: a sample there decodes both, and jumps between
    // them are ways in.
    const prof::reader::ElfSymbols::Entry* cold = nullptr;
    for (const auto& e : elf.entries())
        if (e.name == "work.cold" && e.size) cold = &e;
    REQUIRE(cold);
    CHECK(&flow.hot_part(*cold) == work);
    CHECK(&flow.hot_part(*work) == work);
    CHECK(flow.holds(*work, cold->start));
    CHECK(flow.instruction_at(cold->start) == cold->start);
    prof::reader::DwarfLines dwarf(path);
    auto next = [&](uint64_t a) {
        for (uint64_t b = a + 1; b <= a + 15; ++b)
            if (flow.instruction_at(b) == b) return b;
        return uint64_t(0);
    };
    auto program = [&](uint64_t a) {
        return a >= work->start && a < work->start + work->size && !marker_code(dwarf, a);
    };
    // The markers' first instruction after one branch of the program's, the only way there;
    // and one the program's code also runs on into without a branch.
    uint64_t entered = 0, run_into = 0;
    for (uint64_t a = next(work->start); a && a < work->start + work->size; a = next(a)) {
        if (!marker_code(dwarf, a) || !next(a)) continue;
        prof::reader::CodeFlow::Entry e = flow.entry(a);
        bool one_jump = e.jumps.size() == 1 && !e.previous && program(e.jumps[0]);
        bool one_branch =
            e.jumps.empty() && e.previous && e.previous_conditional && program(e.previous);
        if ((one_jump || one_branch) && !entered) entered = a;
        if (!e.jumps.empty() && program(e.jumps[0]) && e.previous && !e.previous_conditional &&
            program(e.previous) && !run_into)
            run_into = a;
    }
    REQUIRE_MESSAGE(entered, "no marker instruction reached by one branch of the program's");
    REQUIRE_MESSAGE(run_into, "no marker instruction the program also runs on into");

    const uint64_t base = 0x555500000000;
    prof::test::TraceBuilder b;
    b.chunk(0).meta("sample_hz", "1000").module(0, base, base + (1u << 24), path, base);
    b.site(base + 0x10, prof::format::SiteKind::kLine, 15, "marked_hot.cpp", "work", "x");
    b.chunk(1, 0).function(base + work->start);
    b.sample(0, 0, 0, 0, 0);                                    // armed
    b.enter(0, 0);                                              // work()
    b.sample(1000000, 1000000, 0, 0, 1, base + next(entered));  // 1 ms: the program's
    b.sample(2000000, 3000000, 0, 0, 1, base + next(run_into)); // 2 ms: the markers'
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
#endif

// An instruction cut anywhere (a truncated or damaged file) decodes to nothing, and the
// decoder reads only the bytes it is given: each cut is a heap copy of exactly that many bytes,
// which the sanitizer builds check. Every instruction of the C library's first 400 functions.
TEST_CASE("code flow: an instruction cut short decodes to nothing, read within its bytes") {
    Dl_info info{};
    REQUIRE(dladdr(reinterpret_cast<void*>(&std::printf), &info) != 0);
    std::string path = info.dli_fname;
    prof::reader::ElfSymbols symbols(path);
    prof::reader::ElfFile file(path);
    REQUIRE(symbols.ok());
    REQUIRE(file.ok());
    auto sections = file.sections();
    REQUIRE(sections);
    size_t functions = 0, instructions = 0, wrong = 0;
    for (const prof::reader::ElfSymbols::Entry& e : symbols.entries()) {
        if (!e.size || functions == 400) continue;
        const Elf64_Shdr* in = nullptr;
        for (const Elf64_Shdr& s : *sections)
            if ((s.sh_flags & SHF_EXECINSTR) && s.sh_type == SHT_PROGBITS && e.start >= s.sh_addr &&
                e.start + e.size <= s.sh_addr + s.sh_size)
                in = &s;
        if (!in) continue;
        ++functions;
        const uint8_t* code = file.data() + in->sh_offset + (e.start - in->sh_addr);
        for (uint64_t at = 0; at < e.size;) {
            prof::reader::X86Instruction whole = prof::reader::decode_x86(code + at, e.size - at);
            if (!whole.length) break;
            ++instructions;
            for (size_t cut = 1; cut <= whole.length; ++cut) {
                std::vector<uint8_t> bytes(code + at, code + at + cut);
                prof::reader::X86Instruction d = prof::reader::decode_x86(bytes.data(), cut);
                wrong += d.length != (cut == whole.length ? whole.length : 0);
            }
            at += whole.length;
        }
    }
    CHECK(functions == 400);
    CHECK(instructions > 10000);
    CHECK(wrong == 0);
}
