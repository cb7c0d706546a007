// The profiler's instructions in an instrumented program (reader/hook_code.hpp), checked
// against objdump's disassembly of the same file: every call of a hook is found, and every
// instruction found is a hook call, a PLT stub of a hook, or one of the loads of a hook's
// arguments (the function's address into %rdi, the call site into %rsi).
#include "reader/elf_symbols.hpp"
#include "reader/hook_code.hpp"
#include "support/run.hpp"

#include <doctest/doctest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Instruction {
    uint64_t address;
    std::string text; // mnemonic and operands, as objdump prints them
};

// objdump -d's instructions of `path` (AT&T syntax, without raw bytes).
std::vector<Instruction> disassemble(const std::string& path) {
    // binutils comes with the compiler that built the program.
    auto r = prof::test::run({"/usr/bin/objdump", "-d", "--no-show-raw-insn", path});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    static const std::regex line(R"(^\s*([0-9a-f]+):\s+(\S.*?)\s*$)");
    std::vector<Instruction> out;
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);) {
        std::smatch m;
        if (std::regex_match(l, m, line))
            out.push_back({std::stoull(m[1].str(), nullptr, 16), m[2].str()});
    }
    return out;
}

void check_hook_code(const std::string& path) {
    prof::reader::ElfSymbols symbols(path);
    REQUIRE(symbols.ok());
    prof::reader::HookCode hooks(path, symbols);
    static const std::regex hook_call(R"(^call\s+[0-9a-f]+ <__cyg_profile_func_(enter|exit)@plt>)");
    static const std::regex argument_load(
        R"(^(lea\s+-?0x[0-9a-f]+\(%rip\),%rdi\s+#.*|mov\s+(-?0x[0-9a-f]+)?\(%rsp\),%rsi|mov\s+%r[0-9a-z]+,%r(di|si)))");
    // A lazily bound stub: jmp through its slot, then push its index and jmp to the resolver.
    static const std::regex stub(
        R"(^(endbr64|bnd jmp.*|jmp\s+.*|push\s+\$0x[0-9a-f]+|xchg\s+%ax,%ax|nop.*))");
    size_t calls = 0, loads = 0;
    for (const Instruction& i : disassemble(path)) {
        bool is_call = std::regex_search(i.text, hook_call);
        calls += is_call;
        if (is_call) CHECK_MESSAGE(hooks.holds(i.address), std::hex << i.address << ": " << i.text);
        if (!hooks.holds(i.address) || is_call) continue;
        const prof::reader::ElfSymbols::Entry* e = symbols.find(i.address);
        bool in_stub = e && e->name.find("__cyg_profile_func_") == 0 && e->name.size() > 4 &&
                       e->name.compare(e->name.size() - 4, 4, "@plt") == 0;
        if (in_stub) {
            CHECK_MESSAGE(std::regex_search(i.text, stub), std::hex << i.address << ": " << i.text);
            continue;
        }
        ++loads;
        CHECK_MESSAGE(std::regex_search(i.text, argument_load),
                      std::hex << i.address << ": " << i.text);
    }
    REQUIRE(calls > 0);
    CHECK(hooks.calls() == calls);
    // Most calls have a load found before them (the rest had theirs hoisted out of a loop).
    CHECK(loads >= calls);
}

} // namespace

TEST_CASE("the hooks' call sequences in a GCC -finstrument-functions program") {
    check_hook_code(PROF_SAMPLE_FIB);
}

#ifdef PROF_TEST_CLANG_CALLS
TEST_CASE("the hooks' call sequences in a Clang -finstrument-functions-after-inlining program") {
    check_hook_code(std::string(PROF_TEST_CLANG_PROGRAMS) + "/test_fork_exec_clang");
}
#endif
