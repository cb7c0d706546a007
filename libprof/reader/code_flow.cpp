#include "reader/code_flow.hpp"

#include "reader/elf_file.hpp"
#include "reader/elf_symbols.hpp"

#include <algorithm>

namespace prof::reader {

namespace {

// Two-byte opcodes (0f xx) without a ModRM byte.
bool no_modrm_0f(uint8_t b) {
    return b == 0x05 || b == 0x06 || b == 0x07 || b == 0x08 || b == 0x09 || b == 0x0b ||
           b == 0x0e || (b >= 0x30 && b <= 0x37) || b == 0x77 || b == 0xa0 || b == 0xa1 ||
           b == 0xa2 || b == 0xa8 || b == 0xa9 || b == 0xaa || (b >= 0xc8 && b <= 0xcf);
}
// Opcodes of the 0f map (legacy, VEX or EVEX encoded) with an 8-bit immediate after ModRM.
bool imm8_0f(uint8_t b) {
    return (b >= 0x70 && b <= 0x73) || b == 0xa4 || b == 0xac || b == 0xba || b == 0xc2 ||
           b == 0xc4 || b == 0xc5 || b == 0xc6;
}

} // namespace

X86Instruction decode_x86(const uint8_t* c, size_t avail) {
    X86Instruction out;
    size_t n = std::min<size_t>(avail, 15);
    size_t i = 0;
    bool opsize = false, addrsize = false, rex_w = false;
    for (; i < n; ++i) {
        uint8_t b = c[i];
        if (b == 0x66)
            opsize = true;
        else if (b == 0x67)
            addrsize = true;
        else if (b != 0xf0 && b != 0xf2 && b != 0xf3 && b != 0x2e && b != 0x36 && b != 0x3e &&
                 b != 0x26 && b != 0x64 && b != 0x65)
            break;
    }
    if (i < n && (c[i] & 0xf0) == 0x40) rex_w = c[i++] & 8;
    if (i >= n) return out;
    uint8_t op = c[i++];
    size_t z = opsize ? 2 : 4; // a 16/32-bit immediate's size
    bool modrm = false;
    size_t imm = 0, rel = 0;
    int group = -1;                               // f6, f7, ff: what the ModRM reg field decides
    if (op == 0xc4 || op == 0xc5 || op == 0x62) { // VEX (two or three bytes), EVEX
        size_t payload = op == 0xc5 ? 1 : op == 0xc4 ? 2 : 3;
        if (i + payload >= n) return out;
        int map = op == 0xc5 ? 1 : c[i] & (op == 0x62 ? 0x07 : 0x1f);
        i += payload;
        uint8_t b = c[i++];
        modrm = !(op != 0x62 && map == 1 && b == 0x77); // vzeroupper, vzeroall
        if (map == 3 || (map == 1 && imm8_0f(b))) imm = 1;
    } else if (op == 0x0f) {
        if (i >= n) return out;
        uint8_t b = c[i++];
        if (b == 0x38 || b == 0x3a) {
            if (i++ >= n) return out;
            modrm = true;
            imm = b == 0x3a;
        } else if (b == 0x0f) { // 3DNow!: its opcode is the trailing byte
            modrm = true;
            imm = 1;
        } else if (b >= 0x80 && b <= 0x8f) {
            rel = 4;
            out.jump = true;
        } else if (!no_modrm_0f(b)) {
            modrm = true;
            imm = imm8_0f(b);
        }
        out.falls = b != 0x0b; // ud2
    } else if (op < 0x40) {
        switch (op & 7) {
        case 4:
            imm = 1;
            break;
        case 5:
            imm = z;
            break;
        case 6:
        case 7:
            break; // invalid in 64-bit mode, or a prefix taken above
        default:
            modrm = true;
        }
    } else if (op >= 0x70 && op <= 0x7f) {
        rel = 1;
        out.jump = true;
    } else if (op >= 0xb0 && op <= 0xb7) {
        imm = 1;
    } else if (op >= 0xb8 && op <= 0xbf) {
        imm = rex_w ? 8 : z;
    } else if (op >= 0xd8 && op <= 0xdf) {
        modrm = true; // x87
    } else {
        // clang-format off
        switch (op) {
        case 0x63: case 0x84: case 0x85: case 0x86: case 0x87: case 0x88: case 0x89: case 0x8a:
        case 0x8b: case 0x8c: case 0x8d: case 0x8e: case 0x8f: case 0xd0: case 0xd1: case 0xd2:
        case 0xd3: case 0xfe:
            modrm = true; break;
        case 0x69: case 0x81: case 0xc7: modrm = true; imm = z; break;
        case 0x6b: case 0x80: case 0x83: case 0xc0: case 0xc1: case 0xc6: modrm = true; imm = 1; break;
        case 0x68: case 0xa9: imm = z; break;
        case 0x6a: case 0xa8: case 0xcd: case 0xe4: case 0xe5: case 0xe6: case 0xe7: imm = 1; break;
        case 0xa0: case 0xa1: case 0xa2: case 0xa3: imm = addrsize ? 4 : 8; break; // moffs
        case 0xc2: case 0xca: imm = 2; out.falls = false; break;                   // ret imm16
        case 0xc3: case 0xcb: case 0xcf: case 0xf4: out.falls = false; break;
        case 0xc8: imm = 3; break; // enter
        case 0xe0: case 0xe1: case 0xe2: case 0xe3: rel = 1; out.jump = true; break;
        case 0xe8: rel = 4; break; // call: runs on after it
        case 0xe9: rel = 4; out.jump = true; out.falls = false; break;
        case 0xeb: rel = 1; out.jump = true; out.falls = false; break;
        case 0xf6: case 0xf7: case 0xff: modrm = true; group = op; break;
        case 0x82: case 0x9a: case 0xce: case 0xd4: case 0xd5: case 0xd6: case 0xea:
            return out; // invalid in 64-bit mode
        default: break; // no operand bytes
        }
        // clang-format on
    }
    if (modrm) {
        if (i >= n) return out;
        uint8_t m = c[i++];
        uint8_t mod = m >> 6, reg = (m >> 3) & 7, rm = m & 7;
        if (mod != 3) {
            if (rm == 4) {
                if (i >= n) return out;
                if (mod == 0 && (c[i] & 7) == 5) i += 4; // no base: disp32
                ++i;
            } else if (mod == 0 && rm == 5) {
                i += 4; // RIP-relative
            }
            i += mod == 1 ? 1 : mod == 2 ? 4 : 0;
        }
        if (group == 0xf6 && reg < 2) imm = 1;
        if (group == 0xf7 && reg < 2) imm = z;
        if (group == 0xff && (reg == 4 || reg == 5)) out.falls = false; // jmp indirect
    }
    size_t length = i + imm + rel;
    if (length > n) return out;
    if (rel == 1) out.target = int64_t(length) + int8_t(c[i + imm]);
    if (rel == 4) {
        int32_t d = int32_t(uint32_t(c[length - 4]) | uint32_t(c[length - 3]) << 8 |
                            uint32_t(c[length - 2]) << 16 | uint32_t(c[length - 1]) << 24);
        out.target = int64_t(length) + d;
    }
    out.length = uint8_t(length);
    return out;
}

CodeFlow::CodeFlow(const std::string& path, const ElfSymbols& symbols, uint64_t first,
                   uint64_t last) {
    ElfFile file(path);
    if (!file.ok() || file.header().e_machine != EM_X86_64) return;
    auto sections = file.sections();
    if (!sections) return;
    uint64_t decoded_to = 0;
    for (const ElfSymbols::Entry& e : symbols.entries()) {
        uint64_t end = e.start + e.size;
        if (!e.size || end <= first || e.start >= last || e.start < decoded_to) continue;
        const Elf64_Shdr* section = nullptr;
        for (const Elf64_Shdr& s : *sections)
            if (s.sh_type == SHT_PROGBITS && (s.sh_flags & SHF_EXECINSTR) && e.start >= s.sh_addr &&
                end <= s.sh_addr + s.sh_size && file.in_bounds(s.sh_offset, s.sh_size))
                section = &s;
        if (!section) continue;
        const uint8_t* code = file.data() + section->sh_offset + (e.start - section->sh_addr);
        for (uint64_t at = e.start; at < end;) {
            X86Instruction insn = decode_x86(code + (at - e.start), end - at);
            if (!insn.length) break; // the rest of this function stays unknown
            starts_.push_back(at);
            info_.push_back(uint8_t(insn.length | (insn.falls ? kFalls : 0)));
            if (insn.jump) jumps_.emplace_back(at + uint64_t(insn.target), at);
            at += insn.length;
        }
        decoded_to = end;
    }
    std::sort(jumps_.begin(), jumps_.end());
}

uint64_t CodeFlow::instruction_at(uint64_t vaddr) const {
    auto it = std::upper_bound(starts_.begin(), starts_.end(), vaddr);
    if (it == starts_.begin()) return 0;
    size_t k = size_t(it - starts_.begin()) - 1;
    return vaddr < starts_[k] + (info_[k] & kLength) ? starts_[k] : 0;
}

CodeFlow::Entry CodeFlow::entry(uint64_t vaddr) const {
    Entry out;
    auto lo = std::lower_bound(jumps_.begin(), jumps_.end(), std::make_pair(vaddr, uint64_t(0)));
    for (auto it = lo; it != jumps_.end() && it->first == vaddr; ++it)
        out.jumps.push_back(it->second);
    auto it = std::lower_bound(starts_.begin(), starts_.end(), vaddr);
    if (it == starts_.end() || *it != vaddr || it == starts_.begin()) return out;
    size_t k = size_t(it - starts_.begin()) - 1;
    if (starts_[k] + (info_[k] & kLength) == vaddr) {
        out.previous = starts_[k];
        out.fall_through = info_[k] & kFalls;
    }
    return out;
}

} // namespace prof::reader
