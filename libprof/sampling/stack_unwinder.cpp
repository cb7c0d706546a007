// Unwinding stack copies with the binaries' .eh_frame: see stack_unwinder.hpp.
#include "sampling/stack_unwinder.hpp"

#include "reader/elf_file.hpp"

#include <prof/cfi_rules.hpp>

#include <cstring>
#include <elf.h>
#include <sys/auxv.h>

namespace prof::sampling {

// A binary mapped read-only, whole, and where its .eh_frame_hdr is.
struct StackUnwinder::File {
    explicit File(const std::string& path) : elf(path) {}
    reader::ElfFile elf;
    const uint8_t* hdr = nullptr;
    size_t hdr_size = 0;
    uint64_t hdr_vaddr = 0;
};

StackUnwinder::StackUnwinder() = default;
StackUnwinder::~StackUnwinder() = default;

const UnwindModule* StackUnwinder::module(const std::string& path, uint64_t base) {
    auto key = std::make_pair(path, base);
    if (auto it = modules_.find(key); it != modules_.end()) return it->second.get();
    auto& slot = modules_[key];
    auto& file = files_[path];
    if (!file) {
        file = std::make_unique<File>(path);
        for (const Elf64_Phdr& ph : file->elf.segments()) {
            if (ph.p_type != PT_GNU_EH_FRAME || !file->elf.in_bounds(ph.p_offset, ph.p_filesz))
                continue;
            file->hdr = file->elf.data() + ph.p_offset;
            file->hdr_size = ph.p_filesz;
            file->hdr_vaddr = ph.p_vaddr;
        }
    }
    if (!file->hdr) return nullptr;
    slot = std::make_unique<UnwindModule>();
    slot->base = base;
    // The tables' pointers are relative to where their bytes lie; .eh_frame_hdr and .eh_frame
    // share a segment, so every address they give is moved by the hdr's own distance.
    slot->delta = int64_t(reinterpret_cast<uintptr_t>(file->hdr)) - int64_t(file->hdr_vaddr);
    slot->hdr = file->hdr;
    slot->hdr_size = file->hdr_size;
    return slot.get();
}

const UnwindModule* StackUnwinder::vdso(uint64_t base) {
    if (auto it = vdso_modules_.find(base); it != vdso_modules_.end()) return it->second.get();
    auto& slot = vdso_modules_[base];
    const auto* image = reinterpret_cast<const uint8_t*>(getauxval(AT_SYSINFO_EHDR));
    // Addresses in the image: its first PT_LOAD's vaddr is at the image's start.
    uint64_t load_vaddr = UINT64_MAX, hdr_vaddr = 0, hdr_size = 0;
    for (const Elf64_Phdr& ph : reader::ElfFile::image(image).segments()) {
        if (ph.p_type == PT_LOAD && load_vaddr == UINT64_MAX) load_vaddr = ph.p_vaddr;
        if (ph.p_type == PT_GNU_EH_FRAME) {
            hdr_vaddr = ph.p_vaddr;
            hdr_size = ph.p_memsz;
        }
    }
    if (load_vaddr == UINT64_MAX || !hdr_size || hdr_vaddr < load_vaddr) return nullptr;
    slot = std::make_unique<UnwindModule>();
    slot->base = base - load_vaddr;
    slot->hdr = image + (hdr_vaddr - load_vaddr);
    slot->hdr_size = hdr_size;
    slot->delta = int64_t(reinterpret_cast<uintptr_t>(slot->hdr)) - int64_t(hdr_vaddr);
    return slot.get();
}

UnwindResult StackUnwinder::unwind(uint64_t ip, uint64_t sp, uint64_t bp, const uint8_t* stack,
                                   size_t size,
                                   const std::function<const UnwindModule*(uint64_t)>& module_at,
                                   std::vector<uint64_t>& pcs, uint32_t max) {
    const uint64_t bottom = sp;
    uint64_t pc = ip;
    bool first = true;
    auto read = [&](uint64_t address, uint64_t& v) {
        if (address < bottom || address - bottom > size || size - (address - bottom) < 8)
            return false;
        std::memcpy(&v, stack + (address - bottom), 8);
        return true;
    };
    for (;;) {
        if (pcs.size() >= max) return UnwindResult::kPartial;
        pcs.push_back(pc);
        const UnwindModule* m = module_at(pc);
        if (!m) return pcs.size() > 1 ? UnwindResult::kPartial : UnwindResult::kNone;
        // A return address's rule is the call's: one byte back.
        uint64_t vaddr = (first ? pc : pc - 1) - m->base;
        uint64_t rule;
        if (auto it = m->rules.find(vaddr); it != m->rules.end()) {
            rule = it->second;
        } else {
            uintptr_t at = uintptr_t(int64_t(vaddr) + m->delta);
            const uint8_t* fde = cfi::fde_in_hdr(m->hdr, m->hdr_size, at);
            rule = fde ? cfi::rule_from_fde(fde, cfi::EhBases{}, at, true) : 0;
            m->rules.emplace(vaddr, rule);
        }
        if (!rule || cfi::rule_kind(rule) == cfi::kKindUnsupported)
            return pcs.size() > 1 ? UnwindResult::kPartial : UnwindResult::kNone;
        if (cfi::rule_kind(rule) == cfi::kKindLast) return UnwindResult::kComplete;
        uint64_t cfa = ((rule & cfi::kCfaRbp) ? bp : sp) + uint64_t(int64_t(int32_t(rule >> 32)));
        uint64_t ra;
        if (!read(cfa - 8, ra)) return UnwindResult::kPartial;
        if (rule & cfi::kRbpSaved) {
            uint64_t saved;
            if (!read(cfa + uint64_t(int64_t(int16_t(uint16_t(rule >> 16)))), saved))
                return UnwindResult::kPartial;
            bp = saved;
        }
        if (ra == 0) return UnwindResult::kComplete;
        if (cfa <= sp && !first) return UnwindResult::kPartial; // no progress: a bad table
        sp = cfa;
        pc = ra;
        first = false;
    }
}

} // namespace prof::sampling
