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
    bool opsize = false, addrsize = false, rep = false, repne = false, rex_w = false, rex_b = false;
    for (; i < n; ++i) {
        uint8_t b = c[i];
        if (b == 0x66)
            opsize = true;
        else if (b == 0x67)
            addrsize = true;
        else if (b == 0xf2)
            repne = true;
        else if (b == 0xf3)
            rep = true;
        else if (b != 0xf0 && b != 0xf2 && b != 0xf3 && b != 0x2e && b != 0x36 && b != 0x3e &&
                 b != 0x26 && b != 0x64 && b != 0x65)
            break;
    }
    if (i < n && (c[i] & 0xf0) == 0x40) {
        rex_w = c[i] & 8;
        rex_b = c[i++] & 1;
    }
    if (i >= n) return out;
    uint8_t op = c[i++];
    size_t z = opsize && !rex_w ? 2 : 4; // a 16/32-bit immediate's size (REX.W wins over 66)
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
            out.jump = out.conditional = true;
        } else if (!no_modrm_0f(b)) {
            modrm = true;
            imm = imm8_0f(b);
            if (b == 0x78 && (opsize || repne)) imm = 2; // SSE4a extrq, insertq: two imm8
            out.nop = b == 0x1f;
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
        out.jump = out.conditional = true;
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
        case 0x8b: case 0x8c: case 0x8d: case 0x8e: case 0xd0: case 0xd1: case 0xd2:
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
        case 0xe0: case 0xe1: case 0xe2: case 0xe3: rel = 1; out.jump = out.conditional = true; break;
        case 0xe8: rel = 4; break; // call: runs on after it
        case 0xe9: rel = 4; out.jump = true; out.falls = false; break;
        case 0xeb: rel = 1; out.jump = true; out.falls = false; break;
        case 0xf6: case 0xf7: case 0xff: case 0x8f: modrm = true; group = op; break;
        case 0x90: out.nop = !rex_b && !rep; break; // not xchg %eax,%r8d, not pause
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
        if (group == 0xff && (reg == 4 || reg == 5)) out.falls = false, out.indirect = true;
        if (group == 0x8f && reg != 0) return out; // XOP (-mxop), not pop: left out
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

CodeFlow::CodeFlow(const std::string& path, const ElfSymbols& symbols)
    : file_(path), symbols_(symbols) {
    if (!file_.ok() || file_.header().e_machine != EM_X86_64) return;
    auto sections = file_.sections();
    if (!sections) return;
    for (const Elf64_Shdr& s : *sections)
        if (s.sh_type == SHT_PROGBITS && (s.sh_flags & SHF_EXECINSTR) &&
            file_.in_bounds(s.sh_offset, s.sh_size))
            code_.push_back({s.sh_addr, s.sh_size, s.sh_offset});
}

bool CodeFlow::decode_range(uint64_t start, uint64_t end) {
    auto [done, fresh] = ranges_.try_emplace(start, false); // a cold part: its own symbol too
    if (!fresh) return done->second;
    const Section* in = nullptr;
    for (const Section& s : code_)
        if (start >= s.addr && end <= s.addr + s.size) in = &s;
    if (!in) return false;
    const uint8_t* code = file_.data() + in->offset + (start - in->addr);
    bool known = true;
    for (uint64_t at = start; at < end;) {
        X86Instruction insn = decode_x86(code + (at - start), end - at);
        if (!insn.length) return false; // the rest of this function stays unknown
        info_[at] = uint8_t(insn.length | (insn.falls ? kFalls : 0) | (insn.nop ? kNop : 0) |
                            (insn.conditional ? kConditional : 0));
        if (insn.jump) jumps_.emplace(at + uint64_t(insn.target), at);
        known &= !insn.indirect;
        at += insn.length;
    }
    done->second = known;
    return known;
}

const ElfSymbols::Entry& CodeFlow::hot_part(const ElfSymbols::Entry& fn) {
    size_t cut = fn.name.find(".cold");
    if (cut == std::string::npos) return fn;
    auto [it, fresh] = hot_.try_emplace(fn.start, &fn);
    if (fresh) {
        std::string hot = fn.name.substr(0, cut);
        for (const ElfSymbols::Entry& e : symbols_.entries())
            if (e.size && e.name == hot) it->second = &e;
    }
    return *it->second;
}

bool CodeFlow::decode(const ElfSymbols::Entry& fn) {
    if (code_.empty() || !fn.size) return false;
    auto [it, fresh] = functions_.try_emplace(fn.start);
    Function& f = it->second;
    if (!fresh) return f.known;
    f.ranges.emplace_back(fn.start, fn.start + fn.size);
    // GCC moves a function's unlikely paths to `name.cold` (and jumps between the two), named
    // after one of the function's aliases (a constructor's C2, not its C1).
    const auto& all = symbols_.entries();
    auto by_start = [](const ElfSymbols::Entry& e, uint64_t a) { return e.start < a; };
    for (auto alias = std::lower_bound(all.begin(), all.end(), fn.start, by_start);
         alias != all.end() && alias->start == fn.start; ++alias) {
        std::string cold = alias->name + ".cold";
        for (const ElfSymbols::Entry& e : all)
            if (e.size && e.start != fn.start && e.name.compare(0, cold.size(), cold) == 0 &&
                (e.name.size() == cold.size() || e.name[cold.size()] == '.'))
                f.ranges.emplace_back(e.start, e.start + e.size);
    }
    f.known = true;
    for (const auto& [start, end] : f.ranges) f.known &= decode_range(start, end);
    return f.known;
}

bool CodeFlow::holds(const ElfSymbols::Entry& fn, uint64_t vaddr) const {
    auto it = functions_.find(fn.start);
    if (it == functions_.end()) return false;
    for (const auto& [start, end] : it->second.ranges)
        if (vaddr >= start && vaddr < end) return true;
    return false;
}

bool CodeFlow::is_nop(uint64_t vaddr) const {
    auto it = info_.find(vaddr);
    return it != info_.end() && (it->second & kNop);
}

uint64_t CodeFlow::instruction_at(uint64_t vaddr) const {
    auto it = info_.upper_bound(vaddr);
    if (it == info_.begin()) return 0;
    --it;
    return vaddr < it->first + (it->second & kLength) ? it->first : 0;
}

bool CodeFlow::falls(uint64_t vaddr) const {
    auto it = info_.find(vaddr);
    return it != info_.end() && (it->second & kFalls);
}

CodeFlow::Entry CodeFlow::entry(uint64_t vaddr) const {
    Entry out;
    for (auto [it, end] = jumps_.equal_range(vaddr); it != end; ++it)
        out.jumps.push_back(it->second);
    auto at = info_.find(vaddr);
    // Back over the no-ops before it (padding after a jump or a return is never run), and the
    // jumps to them; never past a function's start (called, not run into).
    while (at != info_.end() && at != info_.begin()) {
        const ElfSymbols::Entry* holder = symbols_.find(at->first);
        if (holder && holder->start == at->first) break;
        auto before = std::prev(at);
        if (before->first + (before->second & kLength) != at->first || !(before->second & kFalls))
            break;
        if (!(before->second & kNop)) {
            out.previous = before->first;
            out.previous_conditional = before->second & kConditional;
            break;
        }
        at = before;
        for (auto [it, end] = jumps_.equal_range(at->first); it != end; ++it)
            out.jumps.push_back(it->second);
    }
    return out;
}

} // namespace prof::reader
