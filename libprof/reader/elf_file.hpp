// One reading of 64-bit ELF files for the tools: a file mapped read-only (or the vDSO image this
// process has), its headers and bytes with bounds checks, its GNU build id and the load base of
// a mapping of it. Used by the symbol fallback (elf_symbols) and the outside sampler (load
// bases, build ids, the unwind tables of the stack unwinder). The runtime has its own reading
// of the loaded images (runtime/modules.cpp), which must not allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <elf.h>
#include <optional>
#include <string>
#include <vector>

namespace prof::reader {

class ElfFile {
  public:
    enum class Status {
        kOk,
        kNotRegular, // missing, not a regular file, or larger than asked for
        kCannotOpen, // open or mmap failed
        kNotElf64,   // no ELF magic, or not 64-bit (the byte order is the caller's to check)
    };

    // Maps the regular file `path` whole, if it is at most `max_size` bytes.
    explicit ElfFile(const std::string& path, uint64_t max_size = UINT64_MAX);
    // The ELF image the kernel mapped into this process (the vDSO, AT_SYSINFO_EHDR): not owned,
    // and only its headers are read, so its size is where its program headers end.
    static ElfFile image(const uint8_t* bytes);

    ElfFile(ElfFile&& o) noexcept;
    ElfFile& operator=(ElfFile&&) = delete;
    ElfFile(const ElfFile&) = delete;
    ~ElfFile();

    Status status() const { return status_; }
    bool ok() const { return status_ == Status::kOk; }
    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    // Whether `n` bytes from `offset` lie in the file.
    bool in_bounds(uint64_t offset, uint64_t n) const {
        return offset <= size_ && n <= size_ - offset;
    }
    const Elf64_Ehdr& header() const { return header_; }

    // The program headers; empty when their entry size is not Elf64_Phdr's or the table lies
    // outside the file.
    std::vector<Elf64_Phdr> segments() const;
    // The section headers; nullopt when their entry size is not Elf64_Shdr's or the table lies
    // outside the file.
    std::optional<std::vector<Elf64_Shdr>> sections() const;

    // The GNU build id (raw bytes; empty when none) of the first PT_NOTE segment (of at most
    // 64 KiB) that holds one: what the loader maps, so what a running process has.
    std::string build_id_in_segments() const;
    // The GNU build id of each SHT_NOTE section that holds one, in section order (one, in any
    // file a linker made).
    std::vector<std::string> build_ids_in_sections() const;

    // Where a mapping of this file at `start`, from file offset `offset`, puts its addresses:
    // runtime address - address in the file, from the PT_LOAD segment that holds the offset.
    std::optional<uint64_t> load_base(uint64_t start, uint64_t offset) const;

  private:
    ElfFile() = default;
    void check_header();

    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    bool mapped_ = false; // data_ is this object's mapping
    Elf64_Ehdr header_{};
    Status status_ = Status::kNotElf64;
};

// The first GNU build id (raw bytes) among the ELF notes in `size` bytes at `notes`; empty when
// none.
std::string gnu_build_id(const uint8_t* notes, size_t size);

} // namespace prof::reader
