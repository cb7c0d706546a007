#include "reader/dwarf_lines.hpp"

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
    Dwfl_Line* l = dwfl_module_getsrc(impl_->module, vaddr + impl_->bias);
    if (!l) return false;
    int n = 0;
    const char* f = dwfl_lineinfo(l, nullptr, &n, nullptr, nullptr, nullptr);
    if (!f || n <= 0) return false;
    file = f;
    line = uint32_t(n);
    return true;
}

bool DwarfLines::function(uint64_t vaddr, std::string& symbol) const {
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
    return true;
}

} // namespace prof::reader
