#include "reader/dwarf_lines.hpp"

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <dwarf.h>
#include <algorithm>
#include <cstdlib>

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

namespace {

// The source name of a function without a linkage name (internal linkage, C), with the
// namespaces and classes its declaration is in: (anonymous namespace)::step.
bool qualified_name(Dwarf_Die* inlined, std::string& out) {
    const char* name = dwarf_diename(inlined);
    if (!name) return false;
    out = name;
    Dwarf_Attribute a;
    Dwarf_Die origin;
    if (!dwarf_attr(inlined, DW_AT_abstract_origin, &a) || !dwarf_formref_die(&a, &origin))
        return true;
    // A declaration elsewhere (DW_AT_specification) holds the nesting.
    Dwarf_Die decl;
    if (dwarf_attr(&origin, DW_AT_specification, &a) && dwarf_formref_die(&a, &decl)) origin = decl;
    Dwarf_Die* parents = nullptr;
    int n = dwarf_getscopes_die(&origin, &parents);
    for (int i = 1; i < n; ++i) {
        int tag = dwarf_tag(&parents[i]);
        if (tag != DW_TAG_namespace && tag != DW_TAG_class_type && tag != DW_TAG_structure_type &&
            tag != DW_TAG_union_type)
            continue;
        const char* p = dwarf_diename(&parents[i]);
        out = std::string(p ? p : "(anonymous namespace)") + "::" + out;
    }
    std::free(parents);
    return true;
}

} // namespace

std::vector<DwarfLines::InlinedCall> DwarfLines::inlined(uint64_t vaddr) const {
    std::vector<InlinedCall> calls;
    if (!impl_->module) return calls;
    Dwarf_Addr addr = vaddr + impl_->bias, cu_bias = 0;
    Dwarf_Die* cu = dwfl_module_addrdie(impl_->module, addr, &cu_bias);
    if (!cu) // no .debug_aranges (Clang): the units' own ranges
        while ((cu = dwfl_module_nextcu(impl_->module, cu, &cu_bias)) != nullptr)
            if (dwarf_haspc(cu, addr - cu_bias) == 1) break;
    if (!cu) return calls;
    // dwarf_getscopes continues past an inlined subroutine with its abstract origin's scopes,
    // not with the code it was inlined into: the innermost scope's chain of concrete parents
    // (dwarf_getscopes_die) is the nesting of the inlined calls.
    Dwarf_Die* found = nullptr;
    int nfound = dwarf_getscopes(cu, addr - cu_bias, &found);
    if (nfound <= 0) {
        std::free(found);
        return calls;
    }
    Dwarf_Die innermost = found[0];
    std::free(found);
    Dwarf_Die* scopes = nullptr;
    int n = dwarf_getscopes_die(&innermost, &scopes);
    Dwarf_Files* files = nullptr;
    size_t nfiles = 0;
    if (dwarf_getsrcfiles(cu, &files, &nfiles) != 0) files = nullptr;
    auto udata = [](Dwarf_Die* die, unsigned name) -> uint64_t {
        Dwarf_Attribute a;
        Dwarf_Word v = 0;
        return dwarf_attr(die, name, &a) && dwarf_formudata(&a, &v) == 0 ? v : 0;
    };
    // Innermost scope first: up to the subprogram that holds them.
    for (int i = 0; i < n; ++i) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_subprogram) break;
        if (tag != DW_TAG_inlined_subroutine) continue;
        InlinedCall c;
        Dwarf_Attribute a;
        const char* linkage = nullptr;
        if (dwarf_attr_integrate(&scopes[i], DW_AT_linkage_name, &a) ||
            dwarf_attr_integrate(&scopes[i], DW_AT_MIPS_linkage_name, &a))
            linkage = dwarf_formstring(&a);
        if (linkage) {
            c.symbol = linkage;
        } else if (!qualified_name(&scopes[i], c.symbol)) {
            continue;
        }
        if (const char* f = dwarf_decl_file(&scopes[i])) c.decl_file = f;
        int line = 0;
        if (dwarf_decl_line(&scopes[i], &line) == 0 && line > 0) c.decl_line = uint32_t(line);
        uint64_t file = udata(&scopes[i], DW_AT_call_file);
        if (files && file < nfiles)
            if (const char* f = dwarf_filesrc(files, file, nullptr, nullptr)) c.call_file = f;
        c.call_line = uint32_t(udata(&scopes[i], DW_AT_call_line));
        calls.push_back(std::move(c));
    }
    std::free(scopes);
    std::reverse(calls.begin(), calls.end());
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
