// Reading 64-bit ELF files with bounds checks: see elf_file.hpp.
#include "reader/elf_file.hpp"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace prof::reader {

ElfFile::ElfFile(const std::string& path, uint64_t max_size) {
    // Paths come from traces and /proc: only regular files (never a device or a FIFO, which
    // could hang), and stat before open, since opening a FIFO blocks.
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || uint64_t(st.st_size) > max_size) {
        status_ = Status::kNotRegular;
        return;
    }
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        status_ = Status::kCannotOpen;
        return;
    }
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        void* m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            status_ = Status::kCannotOpen;
            return;
        }
        data_ = static_cast<const uint8_t*>(m);
        size_ = size_t(st.st_size);
        mapped_ = true;
    }
    close(fd);
    check_header();
}

ElfFile ElfFile::image(const uint8_t* bytes) {
    ElfFile f;
    if (!bytes) return f;
    f.data_ = bytes;
    f.size_ = sizeof(Elf64_Ehdr);
    f.check_header();
    if (f.ok())
        f.size_ =
            std::max<size_t>(sizeof(Elf64_Ehdr),
                             f.header_.e_phoff + size_t(f.header_.e_phnum) * f.header_.e_phentsize);
    return f;
}

ElfFile::ElfFile(ElfFile&& o) noexcept
    : data_(o.data_), size_(o.size_), mapped_(o.mapped_), header_(o.header_), status_(o.status_) {
    o.data_ = nullptr;
    o.mapped_ = false;
}

ElfFile::~ElfFile() {
    if (mapped_) munmap(const_cast<uint8_t*>(data_), size_);
}

void ElfFile::check_header() {
    status_ = Status::kNotElf64;
    if (!in_bounds(0, sizeof(Elf64_Ehdr))) return;
    std::memcpy(&header_, data_, sizeof header_);
    if (std::memcmp(header_.e_ident, ELFMAG, SELFMAG) != 0 ||
        header_.e_ident[EI_CLASS] != ELFCLASS64)
        return;
    status_ = Status::kOk;
}

std::vector<Elf64_Phdr> ElfFile::segments() const {
    std::vector<Elf64_Phdr> ph;
    if (!ok() || header_.e_phentsize != sizeof(Elf64_Phdr) ||
        !in_bounds(header_.e_phoff, uint64_t(header_.e_phnum) * sizeof(Elf64_Phdr)))
        return ph;
    ph.resize(header_.e_phnum);
    std::memcpy(ph.data(), data_ + header_.e_phoff, ph.size() * sizeof(Elf64_Phdr));
    return ph;
}

std::optional<std::vector<Elf64_Shdr>> ElfFile::sections() const {
    if (!ok() || header_.e_shentsize != sizeof(Elf64_Shdr) ||
        !in_bounds(header_.e_shoff, uint64_t(header_.e_shnum) * sizeof(Elf64_Shdr)))
        return std::nullopt;
    std::vector<Elf64_Shdr> sh(header_.e_shnum);
    std::memcpy(sh.data(), data_ + header_.e_shoff, sh.size() * sizeof(Elf64_Shdr));
    return sh;
}

std::string gnu_build_id(const uint8_t* notes, size_t size) {
    for (size_t at = 0; at + sizeof(Elf64_Nhdr) <= size;) {
        Elf64_Nhdr nh;
        std::memcpy(&nh, notes + at, sizeof nh);
        size_t name = at + sizeof nh, desc = name + ((size_t(nh.n_namesz) + 3) & ~size_t(3));
        if (desc + nh.n_descsz > size) break;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            std::memcmp(notes + name, "GNU", 4) == 0)
            return std::string(reinterpret_cast<const char*>(notes + desc), nh.n_descsz);
        at = desc + ((size_t(nh.n_descsz) + 3) & ~size_t(3));
    }
    return {};
}

std::string ElfFile::build_id_in_segments() const {
    for (const Elf64_Phdr& p : segments()) {
        if (p.p_type != PT_NOTE || p.p_filesz > (1u << 16) || !in_bounds(p.p_offset, p.p_filesz))
            continue;
        std::string id = gnu_build_id(data_ + p.p_offset, p.p_filesz);
        if (!id.empty()) return id;
    }
    return {};
}

std::vector<std::string> ElfFile::build_ids_in_sections() const {
    std::vector<std::string> ids;
    if (auto sh = sections())
        for (const Elf64_Shdr& s : *sh) {
            if (s.sh_type != SHT_NOTE || !in_bounds(s.sh_offset, s.sh_size)) continue;
            std::string id = gnu_build_id(data_ + s.sh_offset, s.sh_size);
            if (!id.empty()) ids.push_back(std::move(id));
        }
    return ids;
}

std::optional<uint64_t> ElfFile::load_base(uint64_t start, uint64_t offset) const {
    for (const Elf64_Phdr& p : segments()) {
        if (p.p_type != PT_LOAD) continue;
        uint64_t page_offset = p.p_offset & ~uint64_t(0xfff);
        if (offset < page_offset || offset >= p.p_offset + std::max(p.p_filesz, uint64_t(1)))
            continue;
        return start - (p.p_vaddr - p.p_offset + offset);
    }
    return std::nullopt;
}

} // namespace prof::reader
