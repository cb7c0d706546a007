// The rules of x86-64 DWARF call frame information (.eh_frame) that a stack walk needs, reduced
// to one word per code address: shared by the memory profiler's unwinder in the runtime
// (cfi_unwind.cpp, on the loaded objects in place) and the sampler's unwinder of stack copies
// (sampling/stack_unwinder.cpp, on the binaries' files mapped by profrun). Header-only, inline,
// never instrumented, no allocation, no lock: usable on the runtime's hot path.
//
// Pointers in the tables are read as libgcc reads them, relative to where the bytes lie in
// memory; a reader of a file mapped elsewhere than its load address asks about addresses moved
// by the same distance (stack_unwinder.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#define PROF_CFI_INLINE inline __attribute__((no_instrument_function))

namespace prof::cfi {

// The bases of the DW_EH_PE_textrel, datarel and funcrel encodings (libgcc's dwarf_eh_bases).
struct EhBases {
    void* tbase;
    void* dbase;
    void* func;
};

// DWARF register numbers of the x86-64 psABI that the rules track.
constexpr uint64_t kRegRbp = 6, kRegRsp = 7, kRegRa = 16;

// The rule word. Bit 0 is always set (0 means "not found"); bits 1-2: the kind; bit 3: the CFA
// is rbp + offset (else rsp + offset); bit 4: rbp is saved at CFA + rbp offset (else
// unchanged); bit 5: the address is not in an object loaded at startup, so dlclose may unmap
// it; bits 16-31: rbp offset (int16); bits 32-63: CFA offset (int32). The return address is
// always at CFA-8.
constexpr uint64_t kKindStep = 0;        // unwind to the caller
constexpr uint64_t kKindLast = 1;        // the outermost frame (no return address, or no FDE)
constexpr uint64_t kKindUnsupported = 2; // the cached rules cannot describe this frame
constexpr uint64_t kCfaRbp = 1u << 3, kRbpSaved = 1u << 4, kMayUnload = 1u << 5;
constexpr uint64_t kRuleLast = 1 | (kKindLast << 1);
constexpr uint64_t kRuleUnsupported = 1 | (kKindUnsupported << 1);

PROF_CFI_INLINE constexpr uint64_t rule_kind(uint64_t rule) {
    return (rule >> 1) & 3;
}

// ---- reading .eh_frame ---------------------------------------------------------------------
// A bounded cursor: reading past `end` sets `ok` to false and yields zeros.
struct Cursor {
    const uint8_t* p;
    const uint8_t* end;
    bool ok;

    PROF_CFI_INLINE uint8_t u8() {
        if (p >= end) return fail();
        return *p++;
    }
    PROF_CFI_INLINE uint64_t fixed(size_t n) { // little-endian, n <= 8
        if (size_t(end - p) < n) return fail();
        uint64_t v = 0;
        __builtin_memcpy(&v, p, n);
        p += n;
        return v;
    }
    PROF_CFI_INLINE uint64_t uleb() {
        uint64_t v = 0;
        for (unsigned shift = 0;; shift += 7) {
            uint8_t b = u8();
            if (shift < 64) v |= uint64_t(b & 0x7f) << shift;
            if (!(b & 0x80) || !ok) return v;
        }
    }
    PROF_CFI_INLINE int64_t sleb() {
        uint64_t v = 0;
        unsigned shift = 0;
        uint8_t b;
        do {
            b = u8();
            if (shift < 64) v |= uint64_t(b & 0x7f) << shift;
            shift += 7;
        } while ((b & 0x80) && ok);
        if (shift < 64 && (b & 0x40)) v |= ~uint64_t(0) << shift;
        return int64_t(v);
    }
    PROF_CFI_INLINE void skip(uint64_t n) {
        if (uint64_t(end - p) < n)
            fail();
        else
            p += n;
    }
    PROF_CFI_INLINE uint8_t fail() {
        ok = false;
        p = end;
        return 0;
    }
};

// A pointer in a DW_EH_PE_* encoding, as libgcc's read_encoded_value_with_base reads it (the
// base is added only to a non-zero value). Indirect and aligned encodings are not needed by
// the instructions that use this: false.
PROF_CFI_INLINE bool read_encoded(Cursor& c, uint8_t enc, const EhBases& b, uintptr_t& out) {
    const uint8_t* field = c.p;
    uint64_t v;
    switch (enc & 0x0f) {
    case 0x00: // absptr
    case 0x04: // udata8
    case 0x08: // signed absptr
    case 0x0c:
        v = c.fixed(8);
        break; // sdata8
    case 0x01:
        v = c.uleb();
        break;
    case 0x02:
        v = c.fixed(2);
        break;
    case 0x03:
        v = c.fixed(4);
        break;
    case 0x09:
        v = uint64_t(c.sleb());
        break;
    case 0x0a:
        v = uint64_t(int64_t(int16_t(c.fixed(2))));
        break;
    case 0x0b:
        v = uint64_t(int64_t(int32_t(c.fixed(4))));
        break;
    default:
        return false;
    }
    if (!c.ok || (enc & 0x80)) return false;
    if (v) {
        switch (enc & 0x70) {
        case 0x00:
            break;
        case 0x10:
            v += reinterpret_cast<uintptr_t>(field);
            break; // pcrel
        case 0x20:
            v += reinterpret_cast<uintptr_t>(b.tbase);
            break;
        case 0x30:
            v += reinterpret_cast<uintptr_t>(b.dbase);
            break;
        case 0x40:
            v += reinterpret_cast<uintptr_t>(b.func);
            break;
        default:
            return false;
        }
    }
    out = uintptr_t(v);
    return true;
}

// What the CFA program says about the registers the walk needs. kUnset is libgcc's
// REG_UNSAVED: same_value, restore and no rule at all mean the caller's value is this frame's.
enum : uint8_t { kUnset = 0, kUndefined, kAtCfa, kOther };

struct RegRule {
    uint8_t how;
    int64_t offset; // kAtCfa: saved at CFA + offset
};

struct Row {
    uint64_t cfa_reg;
    int64_t cfa_offset;
    bool cfa_set;
    bool cfa_expression;
    RegRule rbp, rsp, ra;
};

struct Cie {
    uint64_t code_align;
    int64_t data_align;
    uint8_t fde_encoding;
};

PROF_CFI_INLINE RegRule* tracked(Row& row, uint64_t reg) {
    switch (reg) {
    case kRegRbp:
        return &row.rbp;
    case kRegRsp:
        return &row.rsp;
    case kRegRa:
        return &row.ra;
    default:
        return nullptr; // rules of other registers do not change rsp, rbp or the pc
    }
}

PROF_CFI_INLINE void set_rule(Row& row, uint64_t reg, uint8_t how, int64_t offset = 0) {
    if (RegRule* r = tracked(row, reg)) *r = RegRule{how, offset};
}

constexpr uint32_t kMaxRemembered = 8;

// A factored offset times the data alignment, wrapping as libgcc's arithmetic does (a
// malformed table must not be undefined behaviour; what does not fit is rejected later).
PROF_CFI_INLINE int64_t scaled(int64_t v, int64_t align) {
    return int64_t(uint64_t(v) * uint64_t(align));
}

// Runs CFA instructions while the row's location is at or before `target`, as libgcc's
// execute_cfa_program does (it stops once the location passes the return address - 1).
// False for anything the cached rule cannot express or libgcc would reject.
PROF_CFI_INLINE bool run_program(Cursor c, const Cie& cie, const EhBases& b, uintptr_t& loc,
                                 uintptr_t target, Row& row, Row* remembered, uint32_t& depth) {
    while (c.p < c.end && loc <= target) {
        uint8_t op = c.u8();
        uint8_t low = op & 0x3f;
        switch (op & 0xc0) {
        case 0x40:
            loc += low * cie.code_align;
            continue; // DW_CFA_advance_loc
        case 0x80:
            set_rule(row, low, kAtCfa, scaled(int64_t(c.uleb()), cie.data_align));
            continue;
        case 0xc0:
            set_rule(row, low, kUnset);
            continue; // DW_CFA_restore (libgcc: unsaved)
        }
        uint64_t reg;
        switch (op) {
        case 0x00:
            break; // nop
        case 0x01: // set_loc
            if (!read_encoded(c, cie.fde_encoding, b, loc)) return false;
            break;
        case 0x02:
            loc += c.fixed(1) * cie.code_align;
            break;
        case 0x03:
            loc += c.fixed(2) * cie.code_align;
            break;
        case 0x04:
            loc += c.fixed(4) * cie.code_align;
            break;
        case 0x05: // offset_extended
            reg = c.uleb();
            set_rule(row, reg, kAtCfa, scaled(int64_t(c.uleb()), cie.data_align));
            break;
        case 0x06:
            set_rule(row, c.uleb(), kUnset);
            break; // restore_extended
        case 0x07:
            set_rule(row, c.uleb(), kUndefined);
            break;
        case 0x08:
            set_rule(row, c.uleb(), kUnset);
            break; // same_value
        case 0x09: // register
            reg = c.uleb();
            c.uleb();
            set_rule(row, reg, kOther);
            break;
        case 0x0a: // remember_state (libgcc saves the CFA rule too)
            if (depth == kMaxRemembered) return false;
            remembered[depth++] = row;
            break;
        case 0x0b: // restore_state
            if (!depth) return false;
            row = remembered[--depth];
            break;
        case 0x0c: // def_cfa
            row.cfa_reg = c.uleb();
            row.cfa_offset = int64_t(c.uleb());
            row.cfa_set = true;
            row.cfa_expression = false;
            break;
        case 0x0d: // def_cfa_register
            row.cfa_reg = c.uleb();
            row.cfa_set = true;
            row.cfa_expression = false;
            break;
        case 0x0e:
            row.cfa_offset = int64_t(c.uleb());
            break; // def_cfa_offset
        case 0x0f: // def_cfa_expression
            c.skip(c.uleb());
            row.cfa_set = true;
            row.cfa_expression = true;
            break;
        case 0x10: // expression
        case 0x16: // val_expression
            reg = c.uleb();
            c.skip(c.uleb());
            set_rule(row, reg, kOther);
            break;
        case 0x11: // offset_extended_sf
            reg = c.uleb();
            set_rule(row, reg, kAtCfa, scaled(c.sleb(), cie.data_align));
            break;
        case 0x12: // def_cfa_sf
            row.cfa_reg = c.uleb();
            row.cfa_offset = scaled(c.sleb(), cie.data_align);
            row.cfa_set = true;
            row.cfa_expression = false;
            break;
        case 0x13:
            row.cfa_offset = scaled(c.sleb(), cie.data_align);
            break; // def_cfa_offset_sf
        case 0x14: // val_offset
            reg = c.uleb();
            c.uleb();
            set_rule(row, reg, kOther);
            break;
        case 0x15: // val_offset_sf
            reg = c.uleb();
            c.sleb();
            set_rule(row, reg, kOther);
            break;
        case 0x2e:
            c.uleb();
            break; // GNU_args_size: only landing pads need it
        case 0x2f: // GNU_negative_offset_extended
            reg = c.uleb();
            set_rule(row, reg, kAtCfa, scaled(int64_t(0 - c.uleb()), cie.data_align));
            break;
        default:
            return false; // window_save, vendor extensions: libgcc aborts on most
        }
    }
    return c.ok;
}

PROF_CFI_INLINE uint32_t read_u32(const uint8_t* p) {
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

// The row of the FDE covering `at` (libgcc's uw_frame_state_for), reduced to a rule word.
// `check_range`: the FDE came from our own search (fde_from_hdr), which found the entry
// before `at`; 0 when that FDE does not cover `at` (then no FDE does). Otherwise it came from
// _Unwind_Find_FDE, which checked the range and gave the function's start in `b.func`.
PROF_CFI_INLINE uint64_t rule_from_fde(const uint8_t* fde, EhBases b, uintptr_t at,
                                       bool check_range = false) {
    // Lengths too short for the fields that follow, a CIE pointer of 0 (this is a CIE) or to
    // something that is no CIE: a malformed table, left to libgcc (which then reports it).
    uint32_t length = read_u32(fde);
    if (length < 8 || length == 0xffffffffu) return kRuleUnsupported; // 0xffffffff: 64-bit DWARF
    const uint8_t* fde_end = fde + 4 + length;
    uint32_t cie_pointer = read_u32(fde + 4);
    if (cie_pointer == 0) return kRuleUnsupported;
    const uint8_t* cie = fde + 4 - cie_pointer; // back from the pointer's own field
    uint32_t cie_length = read_u32(cie);
    if (cie_length < 6 || cie_length == 0xffffffffu || read_u32(cie + 4) != 0)
        return kRuleUnsupported; // id, version and an empty augmentation at least; id 0
    const uint8_t* cie_end = cie + 4 + cie_length;

    // The CIE (libgcc's extract_cie_info).
    Cursor c{cie + 8, cie_end, true}; // after the length and the CIE id
    uint8_t version = c.u8();
    auto* aug = reinterpret_cast<const char*>(c.p);
    size_t aug_len = strnlen(aug, size_t(cie_end - c.p));
    c.skip(aug_len + 1);
    if (!c.ok || (aug[0] == 'e' && aug[1] == 'h')) return kRuleUnsupported; // g++ 2.x
    if (version >= 4 && (c.u8() != 8 || c.u8() != 0)) return kRuleUnsupported;
    Cie info{};
    info.code_align = c.uleb();
    info.data_align = c.sleb();
    uint64_t ra_column = version == 1 ? c.u8() : c.uleb();
    if (!c.ok || ra_column != kRegRa) return kRuleUnsupported;
    bool saw_z = aug[0] == 'z', signal_frame = false;
    const uint8_t* insns = nullptr; // with 'z': right after the augmentation data
    if (saw_z) {
        uint64_t n = c.uleb();
        if (!c.ok || n > uint64_t(cie_end - c.p)) return kRuleUnsupported;
        insns = c.p + n;
    }
    for (size_t i = saw_z ? 1 : 0; i < aug_len; ++i) {
        switch (aug[i]) {
        case 'L':
            c.u8();
            break; // LSDA encoding
        case 'R':
            info.fde_encoding = c.u8();
            break;
        case 'P': { // personality routine: skipped
            uint8_t enc = c.u8();
            uintptr_t ignored;
            if (!read_encoded(c, enc & 0x7f, b, ignored)) return kRuleUnsupported;
            break;
        }
        case 'B':
            break; // AArch64 pointer authentication key: nothing to read
        case 'S':
            signal_frame = true;
            break;
        default:
            return kRuleUnsupported; // unknown letters
        }
    }
    if (!c.ok) return kRuleUnsupported;
    if (!insns) insns = c.p;

    // The FDE: initial location and range, augmentation data, then its instructions.
    Cursor f{fde + 8, fde_end, true};
    uintptr_t pc_begin, range;
    if (!read_encoded(f, info.fde_encoding, b, pc_begin) ||
        !read_encoded(f, info.fde_encoding & 0x0f, b, range))
        return kRuleUnsupported;
    if (check_range) {
        if (at < pc_begin || at - pc_begin >= range) return 0;
        b.func = reinterpret_cast<void*>(pc_begin);
    }
    if (signal_frame) return kRuleUnsupported;
    if (saw_z) f.skip(f.uleb());
    if (!f.ok) return kRuleUnsupported;

    Row row{};
    Row remembered[kMaxRemembered];
    uint32_t depth = 0;
    uintptr_t loc = reinterpret_cast<uintptr_t>(b.func);
    if (!run_program(Cursor{insns, cie_end, true}, info, b, loc, at, row, remembered, depth) ||
        !run_program(f, info, b, loc, at, row, remembered, depth))
        return kRuleUnsupported;

    // The outermost frame (_start, clone3) says its return address is undefined: libgcc
    // reports the frame, then stops.
    if (row.ra.how == kUndefined) return kRuleLast;
    if (!row.cfa_set || row.cfa_expression) return kRuleUnsupported;
    if (row.cfa_reg != kRegRsp && row.cfa_reg != kRegRbp) return kRuleUnsupported;
    if (row.cfa_offset != int64_t(int32_t(row.cfa_offset))) return kRuleUnsupported;
    if (row.ra.how != kAtCfa || row.ra.offset != -8) return kRuleUnsupported;
    if (row.rsp.how == kAtCfa || row.rsp.how == kOther) return kRuleUnsupported;
    uint64_t rule = 1 | (kKindStep << 1) | (row.cfa_reg == kRegRbp ? kCfaRbp : 0) |
                    (uint64_t(uint32_t(int32_t(row.cfa_offset))) << 32);
    if (row.rbp.how == kOther) return kRuleUnsupported;
    if (row.rbp.how == kAtCfa) {
        if (row.rbp.offset != int64_t(int16_t(row.rbp.offset))) return kRuleUnsupported;
        rule |= kRbpSaved | (uint64_t(uint16_t(int16_t(row.rbp.offset))) << 16);
    }
    return rule;
}

// The FDE whose entry in the binary search table of an .eh_frame_hdr section (at `hdr`, `size`
// bytes) is the last one at or before `at` (rule_from_fde checks that it covers `at`); null
// when the table is missing, malformed or starts after `at`.
PROF_CFI_INLINE const uint8_t* fde_in_hdr(const uint8_t* hdr, size_t size, uintptr_t at) {
    if (!hdr || size < 12 || hdr[0] != 1) return nullptr;
    // version, eh_frame_ptr encoding, fde_count encoding, table encoding; the table is sorted
    // (initial location, FDE address) pairs, each a 4-byte offset from the header's start
    // (DW_EH_PE_datarel | sdata4, what GNU ld, gold, lld and mold write).
    uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
    if (count_enc == 0xff || table_enc != 0x3b) return nullptr;
    EhBases hb{nullptr, const_cast<uint8_t*>(hdr), nullptr};
    Cursor c{hdr + 4, hdr + size, true};
    uintptr_t eh_frame, count;
    if (!read_encoded(c, ptr_enc, hb, eh_frame) || !read_encoded(c, count_enc, hb, count))
        return nullptr;
    if (!count || count > uintptr_t(hdr + size - c.p) / 8) return nullptr;
    const uint8_t* table = c.p;
    auto loc = [&](uintptr_t i) {
        return uintptr_t(hdr) + int64_t(int32_t(read_u32(table + 8 * i)));
    };
    if (at < loc(0)) return nullptr;
    uintptr_t lo = 0, hi = count; // loc(lo) <= at < loc(hi)
    while (hi - lo > 1) {
        uintptr_t mid = lo + (hi - lo) / 2;
        if (loc(mid) <= at)
            lo = mid;
        else
            hi = mid;
    }
    return hdr + int64_t(int32_t(read_u32(table + 8 * lo + 4)));
}

} // namespace prof::cfi
