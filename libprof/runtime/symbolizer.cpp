// Names code addresses at the finish: a function's name (demangled and as in the object file)
// and the source file and line of its address.
//
// libdwfl (elfutils) does the work: it reads the symbol table of a module, and its DWARF line
// tables, only when an address in that module is asked about. libbacktrace (Boost.Stacktrace),
// the fallback for an address libdwfl cannot name, reads the DWARF of every loaded object on
// first use: with glibc's debugging information installed (Debian's libc6-dbg, which valgrind
// recommends) that is about 80 ms at every exit, even for a program whose functions all live in
// a small executable. libdwfl names those in well under a millisecond.
//
// Runs at exit with the calling thread's hooks blocked; both libraries allocate through the
// process's allocator. Without libdw (libdw1) installed, Boost.Stacktrace names everything.
#include "symbolizer.hpp"

#include "runtime.hpp"

#include <boost/stacktrace/frame.hpp>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <dlfcn.h>
#include <type_traits>
#include <unistd.h>

namespace prof::rt {
namespace {

// libdw is loaded when the finish needs it, not linked: it would bring libelf, zlib, liblzma
// and libbz2 into every traced program at start-up. The few entry points used:
struct Dw {
    decltype(&dwfl_begin) begin;
    decltype(&dwfl_report_begin) report_begin;
    decltype(&dwfl_linux_proc_report) proc_report;
    decltype(&dwfl_report_end) report_end;
    decltype(&dwfl_addrmodule) addrmodule;
    decltype(&dwfl_module_addrinfo) addrinfo;
    decltype(&dwfl_module_getsrc) getsrc;
    decltype(&dwfl_lineinfo) lineinfo;
    decltype(&dwfl_module_info) info;
    decltype(&dwfl_end) end;
    decltype(&dwfl_linux_proc_find_elf) find_elf;
    decltype(&dwfl_build_id_find_debuginfo) find_debuginfo;
    // Line lookup without .debug_aranges (optional: null when missing).
    decltype(&dwfl_module_nextcu) nextcu;
    decltype(&dwarf_haspc) haspc;
    decltype(&dwarf_getsrc_die) getsrc_die;
    decltype(&dwarf_linesrc) linesrc;
    decltype(&dwarf_lineno) lineno;
};

PROF_NOINSTR const Dw* load_dw() {
    static Dw dw;
    static bool tried = false, ok = false;
    if (tried) return ok ? &dw : nullptr;
    tried = true;
    void* h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return nullptr;
    auto sym = [h](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
        return fn != nullptr;
    };
    ok = sym(dw.begin, "dwfl_begin") && sym(dw.report_begin, "dwfl_report_begin") &&
         sym(dw.proc_report, "dwfl_linux_proc_report") && sym(dw.report_end, "dwfl_report_end") &&
         sym(dw.addrmodule, "dwfl_addrmodule") && sym(dw.addrinfo, "dwfl_module_addrinfo") &&
         sym(dw.getsrc, "dwfl_module_getsrc") && sym(dw.lineinfo, "dwfl_lineinfo") && sym(dw.info, "dwfl_module_info") &&
         sym(dw.end, "dwfl_end") && sym(dw.find_elf, "dwfl_linux_proc_find_elf") &&
         sym(dw.find_debuginfo, "dwfl_build_id_find_debuginfo");
    if (!(sym(dw.nextcu, "dwfl_module_nextcu") && sym(dw.haspc, "dwarf_haspc") &&
          sym(dw.getsrc_die, "dwarf_getsrc_die") && sym(dw.linesrc, "dwarf_linesrc") &&
          sym(dw.lineno, "dwarf_lineno")))
        dw.nextcu = nullptr;
    return ok ? &dw : nullptr;
}

// Separate debugging information only from the local build-id tree (Debian's -dbg and -dbgsym
// packages): the standard lookup would ask debuginfod servers over the network, and load
// libcurl and OpenSSL into the program at its exit to do so.
PROF_NOINSTR int find_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname,
                                Dwarf_Addr base, const char* file, const char* debuglink,
                                GElf_Word crc, char** debuginfo_file_name) {
    return load_dw()->find_debuginfo(mod, userdata, modname, base, file, debuglink, crc,
                                     debuginfo_file_name);
}

PROF_NOINSTR int find_elf(Dwfl_Module* mod, void** userdata, const char* modname, Dwarf_Addr base,
                          char** file_name, Elf** elfp) {
    return load_dw()->find_elf(mod, userdata, modname, base, file_name, elfp);
}

char* g_debuginfo_path = nullptr;
const Dwfl_Callbacks g_callbacks = {find_elf, find_debuginfo, nullptr, &g_debuginfo_path};

// Only C++ names are demangled: a C function named `f` or `Ss` is not `float` or `std::string`.
PROF_NOINSTR std::string demangle(const char* symbol) {
    if (strncmp(symbol, "_Z", 2) != 0) return symbol;
    int status = 0;
    char* d = abi::__cxa_demangle(symbol, nullptr, nullptr, &status);
    if (!d) return symbol;
    std::string out = d;
    free(d);
    return out;
}

} // namespace

PROF_NOINSTR Symbolizer::Symbolizer() {
    const Dw* dw = load_dw();
    Dwfl* d = dw ? dw->begin(&g_callbacks) : nullptr;
    if (!d) return;
    dw->report_begin(d);
    int rc = dw->proc_report(d, getpid());
    dw->report_end(d, nullptr, nullptr);
    if (rc != 0) {
        dw->end(d);
        return;
    }
    dwfl_ = d;
}

PROF_NOINSTR Symbolizer::~Symbolizer() {
    if (dwfl_) load_dw()->end(static_cast<Dwfl*>(dwfl_));
}

PROF_NOINSTR bool Symbolizer::resolve(uintptr_t address, SymbolInfo& out) {
    out = SymbolInfo{};
    if (dwfl_) {
        const Dw* dw = load_dw();
        Dwfl_Module* m = dw->addrmodule(static_cast<Dwfl*>(dwfl_), address);
        GElf_Sym sym;
        GElf_Off offset = 0;
        const char* symbol =
            m ? dw->addrinfo(m, address, &offset, &sym, nullptr, nullptr, nullptr) : nullptr;
        // A module whose symbol tables (its own or its separate debug file's) do not cover the
        // address: libbacktrace reads the same tables, so it is not asked (its first use would
        // cost the parse of every loaded object's debugging information).
        if (m && !(symbol && *symbol)) return false;
        if (symbol && *symbol) {
            out.name = demangle(symbol);
            // The object file's spelling only for a function's own entry, as dladdr gives it.
            if (offset == 0) out.symbol = symbol;
            // A return address (a memory profiler's stack frame) in a library whose debugging
            // information is a separate file (glibc's from libc6-dbg) is named without file and
            // line: reading that file's line tables costs about 50 ms and 17 MB at exit for
            // frames such as start_thread, whose source is not on the user's disk anyway.
            const char *main_file = nullptr, *debug_file = nullptr;
            dw->info(m, nullptr, nullptr, nullptr, nullptr, nullptr, &main_file, &debug_file);
            bool separate = debug_file && (!main_file || strcmp(main_file, debug_file) != 0);
            if (offset != 0 && separate) return true;
            if (Dwfl_Line* l = dw->getsrc(m, address)) {
                int line = 0;
                const char* file = dw->lineinfo(l, nullptr, &line, nullptr, nullptr, nullptr);
                if (file) out.file = file;
                out.line = line > 0 ? size_t(line) : 0;
            } else if (dw->nextcu) {
                // libdwfl finds an address's unit through .debug_aranges, which Clang does not
                // write: then the units are searched by their own address ranges.
                Dwarf_Addr bias = 0;
                Dwarf_Die* cu = nullptr;
                while ((cu = dw->nextcu(m, cu, &bias)) != nullptr) {
                    if (dw->haspc(cu, address - bias) != 1) continue;
                    if (Dwarf_Line* dl = dw->getsrc_die(cu, address - bias)) {
                        int line = 0;
                        const char* file = dw->linesrc(dl, nullptr, nullptr);
                        if (file && dw->lineno(dl, &line) == 0 && line > 0) {
                            out.file = file;
                            out.line = size_t(line);
                        }
                    }
                    break;
                }
            }
            return true;
        }
    }
    // Not in a module libdwfl knows (code generated at run time, an object it cannot read).
    boost::stacktrace::frame fr(reinterpret_cast<const void*>(address));
    out.name = fr.name();
    out.file = fr.source_file();
    out.line = fr.source_line();
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(address), &info) && info.dli_sname &&
        reinterpret_cast<uintptr_t>(info.dli_saddr) == address)
        out.symbol = info.dli_sname;
    return !out.name.empty();
}

} // namespace prof::rt
