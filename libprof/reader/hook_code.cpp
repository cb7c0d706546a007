#include "reader/hook_code.hpp"

#include "reader/elf_file.hpp"
#include "reader/elf_symbols.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <unordered_set>

namespace prof::reader {

namespace {

// The stubs' names, as ElfSymbols gives PLT stubs.
bool is_hook_stub(const std::string& name) {
    return name == "__cyg_profile_func_enter@plt" || name == "__cyg_profile_func_exit@plt";
}

// Where a hook's arguments are loaded. GCC and Clang load the function's address into %rdi
// (`lea disp32(%rip)`, or a register it was hoisted into) and the call site into %rsi (from
// the stack, where the host's return address is, or a register), in either order, and
// schedule other work of the function between them and the call.
constexpr size_t kArgumentWindow = 48; // bytes before the call searched for the two loads

// Whether the bytes at code[i] are `lea disp32(%rip),%rdi` of the function at a start in
// `is_function` (`vaddr`: code[i]'s address); its length, else 0.
template <class IsFunction>
size_t function_address_load(const uint8_t* code, size_t i, size_t end, uint64_t vaddr,
                             IsFunction is_function) {
    if (i + 7 > end || code[i] != 0x48 || code[i + 1] != 0x8d || code[i + 2] != 0x3d) return 0;
    int32_t disp;
    std::memcpy(&disp, code + i + 3, sizeof disp);
    return is_function(vaddr + 7 + uint64_t(int64_t(disp))) ? 7 : 0;
}
// Whether the bytes at code[i] are `mov disp8(%rsp),%rsi` or `mov disp32(%rsp),%rsi`; its
// length, else 0.
size_t call_site_load(const uint8_t* code, size_t i, size_t end) {
    if (i + 5 <= end && code[i] == 0x48 && code[i + 1] == 0x8b && code[i + 2] == 0x74 &&
        code[i + 3] == 0x24)
        return 5;
    if (i + 8 <= end && code[i] == 0x48 && code[i + 1] == 0x8b && code[i + 2] == 0xb4 &&
        code[i + 3] == 0x24)
        return 8;
    return 0;
}
// The length of a register-to-register `mov %r64,%rdi` or `mov %r64,%rsi` ending at code[end]
// (0: none): a loaded argument moved in just before the call.
size_t register_move_before(const uint8_t* code, size_t end) {
    if (end >= 3 && (code[end - 3] == 0x48 || code[end - 3] == 0x4c) && code[end - 2] == 0x89) {
        uint8_t modrm = code[end - 1];
        if ((modrm & 0xc0) == 0xc0 && ((modrm & 7) == 7 || (modrm & 7) == 6)) return 3;
    }
    return 0;
}

} // namespace

HookCode::HookCode(const std::string& path, const ElfSymbols& symbols) {
    std::unordered_set<uint64_t> stubs;
    std::unordered_set<uint64_t> starts;
    for (const ElfSymbols::Entry& e : symbols.entries()) {
        starts.insert(e.start);
        if (is_hook_stub(e.name)) {
            stubs.insert(e.start);
            ranges_.emplace_back(e.start, e.start + std::max<uint64_t>(e.size, 1));
        }
    }
    if (stubs.empty()) return;
    ElfFile file(path);
    if (!file.ok()) return;
    auto sections = file.sections();
    if (!sections) return;
    auto is_function = [&](uint64_t a) { return starts.count(a) != 0; };
    for (const Elf64_Shdr& s : *sections) {
        if (s.sh_type != SHT_PROGBITS || !(s.sh_flags & SHF_EXECINSTR) ||
            !file.in_bounds(s.sh_offset, s.sh_size))
            continue;
        const uint8_t* code = file.data() + s.sh_offset;
        // call rel32 (e8) to a stub. A byte-wise scan: a false match needs an e8 byte followed
        // by the exact distance to a stub. The argument loads are searched in the bytes
        // between the call and the one before (at most kArgumentWindow): the last function
        // address load and the last call site load there, and register moves just before
        // the call.
        size_t after_last_call = 0;
        for (size_t i = 0; i + 5 <= s.sh_size; ++i) {
            if (code[i] != 0xe8) continue;
            int32_t rel;
            std::memcpy(&rel, code + i + 1, sizeof rel);
            uint64_t call = s.sh_addr + i;
            if (!stubs.count(call + 5 + uint64_t(int64_t(rel)))) continue;
            ++calls_;
            size_t start = i;
            while (size_t len = register_move_before(code, start)) {
                if (i - (start - len) > 6) break;
                start -= len;
            }
            ranges_.emplace_back(s.sh_addr + start, call + 5);
            size_t from = std::max(after_last_call, i > kArgumentWindow ? i - kArgumentWindow : 0);
            size_t address_at = SIZE_MAX, site_at = SIZE_MAX, address_len = 0, site_len = 0;
            for (size_t j = from; j < start; ++j) {
                if (size_t n = function_address_load(code, j, start, s.sh_addr + j, is_function)) {
                    address_at = j;
                    address_len = n;
                } else if (size_t m = call_site_load(code, j, start)) {
                    site_at = j;
                    site_len = m;
                }
            }
            if (address_at != SIZE_MAX)
                ranges_.emplace_back(s.sh_addr + address_at, s.sh_addr + address_at + address_len);
            if (site_at != SIZE_MAX)
                ranges_.emplace_back(s.sh_addr + site_at, s.sh_addr + site_at + site_len);
            after_last_call = i + 5;
        }
    }
    std::sort(ranges_.begin(), ranges_.end());
    // Merge overlaps (a false match inside another's range).
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto& r : ranges_)
        if (!merged.empty() && r.first <= merged.back().second)
            merged.back().second = std::max(merged.back().second, r.second);
        else
            merged.push_back(r);
    ranges_ = std::move(merged);
}

bool HookCode::holds(uint64_t vaddr) const {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), vaddr,
                               [](uint64_t v, const auto& r) { return v < r.first; });
    return it != ranges_.begin() && vaddr < std::prev(it)->second;
}

} // namespace prof::reader
