#include "reader/dwarf_lines.hpp"

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

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
