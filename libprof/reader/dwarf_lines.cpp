#include "reader/dwarf_lines.hpp"

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <dwarf.h>
#include <algorithm>
#include <cstdlib>
#include <unordered_map>
#include <vector>

namespace prof::reader {

namespace {

char* g_debuginfo_path = nullptr; // libdwfl's default search path for separate debug files

const Dwfl_Callbacks kOfflineCallbacks = {
    dwfl_build_id_find_elf,
    dwfl_standard_find_debuginfo,
    dwfl_offline_section_address,
    &g_debuginfo_path,
};

} // namespace

struct DwarfLines::Impl {
    Dwfl* dwfl = nullptr;
    Dwfl_Module* module = nullptr;
    Dwarf_Addr bias = 0;
    Dwarf_Die last_cu{}; // of the last lookup without .debug_aranges
    bool have_last_cu = false;

    // The address ranges of a unit's subprograms (those with code), by start: inlined() looks
    // an address's subprogram up here instead of walking the unit.
    struct Subprogram {
        Dwarf_Addr low, high;
        Dwarf_Die die;
    };
    std::unordered_map<Dwarf_Off, std::vector<Subprogram>> subprograms;
    // The namespaces and classes around each subprogram DIE of the units indexed ("a::B::").
    std::unordered_map<Dwarf_Off, std::string> prefixes;

    // The source name of an inlined function without a linkage name (internal linkage, C),
    // with the namespaces and classes its declaration is in: (anonymous namespace)::step.
    bool qualified_name(Dwarf_Die* inlined, std::string& out) {
        const char* name = dwarf_diename(inlined);
        if (!name) return false;
        out = name;
        Dwarf_Attribute a;
        Dwarf_Die origin, decl;
        if (!dwarf_attr(inlined, DW_AT_abstract_origin, &a) || !dwarf_formref_die(&a, &origin))
            return true;
        // A declaration elsewhere (DW_AT_specification) is where the nesting is.
        if (dwarf_attr(&origin, DW_AT_specification, &a) && dwarf_formref_die(&a, &decl))
            origin = decl;
        if (auto it = prefixes.find(dwarf_dieoffset(&origin)); it != prefixes.end())
            out = it->second + out;
        return true;
    }

    // A subprogram's scopes (inlined subroutines and lexical blocks), in preorder, once: a
    // walk per address would skip over the subtrees of its siblings every time.
    struct Scope {
        std::vector<std::pair<Dwarf_Addr, Dwarf_Addr>> ranges;
        Dwarf_Die die;
        bool inlined;
    };
    std::unordered_map<Dwarf_Off, std::vector<Scope>> scopes;
    const std::vector<Scope>& scopes_of(Dwarf_Die* subprogram) {
        auto [it, fresh] = scopes.try_emplace(dwarf_dieoffset(subprogram));
        if (fresh) gather(subprogram, it->second, 0);
        return it->second;
    }
    static void gather(Dwarf_Die* parent, std::vector<Scope>& v, int depth) {
        Dwarf_Die child;
        if (depth > 64 || dwarf_child(parent, &child) != 0) return;
        do {
            int tag = dwarf_tag(&child);
            if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_lexical_block) continue;
            Scope sc{{}, child, tag == DW_TAG_inlined_subroutine};
            Dwarf_Addr base, low, high;
            ptrdiff_t off = 0;
            while ((off = dwarf_ranges(&child, off, &base, &low, &high)) > 0)
                if (high > low) sc.ranges.emplace_back(low, high);
            bool any = !sc.ranges.empty();
            if (any) v.push_back(std::move(sc));
            // A block without addresses of its own may still hold scopes that have them.
            if (any || tag == DW_TAG_lexical_block) gather(&child, v, depth + 1);
        } while (dwarf_siblingof(&child, &child) == 0);
    }
    // The unit and the subprogram holding `vaddr`, and its address in the unit (`pc`), from the
    // unit's index of subprograms. (dwarf_getscopes walks the whole unit per address, far too slow
    // for an amalgamation such as sqlite3.c, and continues past an inlined subroutine with its
    // abstract origin's scopes.)
    bool subprogram_at(uint64_t vaddr, Dwarf_Die*& cu, Dwarf_Die& subprogram, uint64_t& pc) {
        if (!module) return false;
        Dwarf_Addr addr = vaddr + bias, cu_bias = 0;
        cu = dwfl_module_addrdie(module, addr, &cu_bias);
        if (!cu) // no .debug_aranges (Clang): the units' own ranges
            while ((cu = dwfl_module_nextcu(module, cu, &cu_bias)) != nullptr)
                if (dwarf_haspc(cu, addr - cu_bias) == 1) break;
        if (!cu) return false;
        pc = addr - cu_bias;
        const std::vector<Subprogram>& subs = subprograms_of(cu);
        auto it = std::upper_bound(subs.begin(), subs.end(), Dwarf_Addr(pc),
                                   [](Dwarf_Addr a, const Subprogram& s) { return a < s.low; });
        for (int back = 0; it != subs.begin() && back < 8; ++back) {
            --it;
            if (pc < it->high) {
                subprogram = it->die;
                return true;
            }
        }
        return false;
    }
    const std::vector<Subprogram>& subprograms_of(Dwarf_Die* cu) {
        auto [it, fresh] = subprograms.try_emplace(dwarf_dieoffset(cu));
        if (!fresh) return it->second;
        std::vector<Subprogram>& v = it->second;
        collect(cu, v, prefixes, std::string(), 0);
        std::sort(v.begin(), v.end(),
                  [](const Subprogram& a, const Subprogram& b) { return a.low < b.low; });
        return v;
    }
    static void collect(Dwarf_Die* parent, std::vector<Subprogram>& v,
                        std::unordered_map<Dwarf_Off, std::string>& prefixes,
                        const std::string& prefix, int depth) {
        Dwarf_Die child;
        if (depth > 16 || dwarf_child(parent, &child) != 0) return;
        do {
            int tag = dwarf_tag(&child);
            if (tag == DW_TAG_subprogram) {
                if (!prefix.empty()) prefixes.emplace(dwarf_dieoffset(&child), prefix);
                Dwarf_Addr base, low, high;
                ptrdiff_t off = 0;
                while ((off = dwarf_ranges(&child, off, &base, &low, &high)) > 0)
                    if (high > low) v.push_back(Subprogram{low, high, child});
            } else if (tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
                       tag == DW_TAG_structure_type || tag == DW_TAG_union_type) {
                const char* name = dwarf_diename(&child);
                collect(&child, v, prefixes,
                        prefix + (name ? name : "(anonymous namespace)") + "::", depth + 1);
            }
        } while (dwarf_siblingof(&child, &child) == 0);
    }

    // libdwfl finds an address's compilation unit through .debug_aranges, which Clang does not
    // write: then the units are searched by their own address ranges (the last one found
    // first: nearby addresses tend to share it).
    Dwarf_Line* line_without_aranges(Dwarf_Addr addr) {
        Dwarf_Addr cu_bias = 0;
        if (have_last_cu && dwarf_haspc(&last_cu, addr - cu_bias) == 1)
            return dwarf_getsrc_die(&last_cu, addr - cu_bias);
        Dwarf_Die* cu = nullptr;
        while ((cu = dwfl_module_nextcu(module, cu, &cu_bias)) != nullptr) {
            if (dwarf_haspc(cu, addr - cu_bias) != 1) continue;
            last_cu = *cu;
            have_last_cu = cu_bias == 0;
            return dwarf_getsrc_die(cu, addr - cu_bias);
        }
        return nullptr;
    }
};

DwarfLines::DwarfLines(const std::string& path) : impl_(std::make_unique<Impl>()) {
    Dwfl* d = dwfl_begin(&kOfflineCallbacks);
    if (!d) return;
    dwfl_report_begin(d);
    Dwfl_Module* m = dwfl_report_offline(d, path.c_str(), path.c_str(), -1);
    dwfl_report_end(d, nullptr, nullptr);
    if (!m || !dwfl_module_getelf(m, &impl_->bias)) {
        dwfl_end(d);
        return;
    }
    impl_->dwfl = d;
    impl_->module = m;
}

DwarfLines::~DwarfLines() {
    if (impl_->dwfl) dwfl_end(impl_->dwfl);
}

std::vector<uint64_t> DwarfLines::block_statics(uint64_t vaddr) const {
    std::vector<uint64_t> out;
    Dwarf_Die* cu = nullptr;
    Dwarf_Die scope;
    uint64_t pc = 0;
    if (!impl_->subprogram_at(vaddr, cu, scope, pc)) return out;
    // Preorder: a block inside an inlined subroutine comes after it; those are left out.
    std::vector<std::pair<Dwarf_Addr, Dwarf_Addr>> inlined_at;
    for (const Impl::Scope& sc : impl_->scopes_of(&scope)) {
        bool holds = false;
        for (const auto& [low, high] : sc.ranges) holds |= pc >= low && pc < high;
        if (!holds) continue;
        if (sc.inlined) break; // the rest holding pc are the inlined function's
        Dwarf_Die block = sc.die, child;
        if (dwarf_child(&block, &child) != 0) continue;
        do {
            if (dwarf_tag(&child) != DW_TAG_variable) continue;
            Dwarf_Attribute a;
            Dwarf_Op* expr = nullptr;
            size_t n = 0;
            if (dwarf_attr(&child, DW_AT_location, &a) && dwarf_getlocation(&a, &expr, &n) == 0 &&
                n == 1 && expr[0].atom == DW_OP_addr)
                out.push_back(expr[0].number + (vaddr - pc)); // the unit's addresses to the file's
        } while (dwarf_siblingof(&child, &child) == 0);
    }
    return out;
}

std::vector<DwarfLines::InlinedCall> DwarfLines::inlined(uint64_t vaddr) const {
    std::vector<InlinedCall> calls;
    Dwarf_Die* cu = nullptr;
    Dwarf_Die scope;
    uint64_t pc = 0;
    // The subprogram holding pc; then down its tree, through the scopes that hold pc: the
    // inlined subroutines met on the way are the calls, outermost first.
    if (!impl_->subprogram_at(vaddr, cu, scope, pc)) return calls;
    Dwarf_Files* files = nullptr;
    size_t nfiles = 0;
    if (dwarf_getsrcfiles(cu, &files, &nfiles) != 0) files = nullptr;
    auto udata = [](Dwarf_Die* die, unsigned name) -> uint64_t {
        Dwarf_Attribute a;
        Dwarf_Word v = 0;
        return dwarf_attr(die, name, &a) && dwarf_formudata(&a, &v) == 0 ? v : 0;
    };
    // Preorder puts a scope before the ones nested in it: those holding pc, in order, are the
    // nesting at pc.
    for (const Impl::Scope& sc : impl_->scopes_of(&scope)) {
        if (!sc.inlined) continue;
        bool holds = false;
        for (const auto& [low, high] : sc.ranges) holds |= pc >= low && pc < high;
        if (!holds) continue;
        Dwarf_Die die = sc.die;
        InlinedCall c;
        Dwarf_Attribute a;
        const char* linkage = nullptr;
        if (dwarf_attr_integrate(&die, DW_AT_linkage_name, &a) ||
            dwarf_attr_integrate(&die, DW_AT_MIPS_linkage_name, &a))
            linkage = dwarf_formstring(&a);
        if (linkage) {
            c.symbol = linkage;
        } else if (!impl_->qualified_name(&die, c.symbol)) {
            continue;
        }
        if (const char* f = dwarf_decl_file(&die)) c.decl_file = f;
        int line = 0;
        if (dwarf_decl_line(&die, &line) == 0 && line > 0) c.decl_line = uint32_t(line);
        uint64_t file = udata(&die, DW_AT_call_file);
        if (files && file < nfiles)
            if (const char* f = dwarf_filesrc(files, file, nullptr, nullptr)) c.call_file = f;
        c.call_line = uint32_t(udata(&die, DW_AT_call_line));
        calls.push_back(std::move(c));
    }
    return calls;
}

bool DwarfLines::lookup(uint64_t vaddr, std::string& file, uint32_t& line) const {
    if (!impl_->module) return false;
    int n = 0;
    const char* f = nullptr;
    if (Dwfl_Line* l = dwfl_module_getsrc(impl_->module, vaddr + impl_->bias)) {
        f = dwfl_lineinfo(l, nullptr, &n, nullptr, nullptr, nullptr);
    } else if (Dwarf_Line* dl = impl_->line_without_aranges(vaddr + impl_->bias)) {
        f = dwarf_linesrc(dl, nullptr, nullptr);
        if (dwarf_lineno(dl, &n) != 0) n = 0;
    }
    if (!f || n <= 0) return false;
    file = f;
    line = uint32_t(n);
    return true;
}

bool DwarfLines::function(uint64_t vaddr, std::string& symbol) const {
    uint64_t start;
    return function(vaddr, symbol, start);
}

bool DwarfLines::function(uint64_t vaddr, std::string& symbol, uint64_t& start) const {
    if (!impl_->module) return false;
    GElf_Off offset = 0;
    GElf_Sym sym;
    const char* name = dwfl_module_addrinfo(impl_->module, vaddr + impl_->bias, &offset, &sym,
                                            nullptr, nullptr, nullptr);
    // Only a function that contains the address: libdwfl also answers with the nearest
    // sizeless symbol below it, which names some other code.
    int type = GELF_ST_TYPE(sym.st_info);
    if (!name || !*name || (type != STT_FUNC && type != STT_GNU_IFUNC) || offset >= sym.st_size)
        return false;
    symbol = name;
    start = vaddr - offset;
    return true;
}

} // namespace prof::reader
