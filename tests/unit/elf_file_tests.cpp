// The tools' ELF reading (reader::ElfFile): build ids against readelf's, load bases against the
// loader's, refusals of what is not an ELF file, and the note walk on bytes built by hand.
#include "reader/elf_file.hpp"
#include "reader/elf_symbols.hpp"
#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <link.h>
#include <string>
#include <unistd.h>
#include <vector>

using namespace prof;

namespace {

std::string hex(const std::string& raw) {
    std::string out;
    for (char c : raw) out += fmt::format("{:02x}", uint8_t(c));
    return out;
}

std::string self_path() {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    return n > 0 ? std::string(self, size_t(n)) : std::string();
}

// readelf's "Build ID: <hex>" of `path`.
std::string readelf_build_id(const std::string& path) {
    test::RunResult r = test::run({"/usr/bin/readelf", "-n", path});
    size_t at = r.out.find("Build ID: ");
    if (at == std::string::npos) return {};
    at += 10;
    return r.out.substr(at, r.out.find_first_of(" \n", at) - at);
}

} // namespace

TEST_CASE("ELF file: the build id of the notes is readelf's, from segments and sections") {
    REQUIRE_MESSAGE(test::run({"/usr/bin/readelf", "--version"}).exit_code == 0,
                    "readelf (binutils) is needed");
    std::string self = self_path();
    REQUIRE_FALSE(self.empty());
    std::string expected = readelf_build_id(self);
    REQUIRE(expected.size() == 40); // the linker's default, a SHA-1
    reader::ElfFile file(self);
    REQUIRE(file.ok());
    CHECK(hex(file.build_id_in_segments()) == expected);
    CHECK(file.build_ids_in_sections() == std::vector<std::string>{file.build_id_in_segments()});
    CHECK(reader::ElfSymbols(self).build_id() == expected);
}

TEST_CASE("ELF file: load bases of this process's code mappings are the loader's") {
    struct Seen {
        size_t objects = 0, checked = 0, wrong = 0;
    } seen;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            auto* seen = static_cast<Seen*>(data);
            std::string path = info->dlpi_name[0] ? info->dlpi_name : self_path();
            if (path.find("linux-vdso") != std::string::npos) return 0;
            reader::ElfFile file(path);
            if (!file.ok()) return 0;
            ++seen->objects;
            long page = sysconf(_SC_PAGESIZE);
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
                // The executable mapping the loader made (what the sampler is told of):
                // page-aligned start and file offset.
                uint64_t start = (info->dlpi_addr + ph.p_vaddr) & ~uint64_t(page - 1);
                uint64_t offset = ph.p_offset & ~uint64_t(page - 1);
                std::optional<uint64_t> base = file.load_base(start, offset);
                ++seen->checked;
                if (!base || *base != info->dlpi_addr) ++seen->wrong;
            }
            return 0;
        },
        &seen);
    CHECK(seen.objects >= 3); // this binary, libc, libstdc++ at least
    CHECK(seen.checked >= seen.objects);
    CHECK(seen.wrong == 0);
    // An offset past every segment has no base.
    reader::ElfFile self(self_path());
    CHECK_FALSE(self.load_base(0x1000, uint64_t(1) << 40).has_value());
}

TEST_CASE("ELF file: what is not a 64-bit ELF file is refused") {
    CHECK(reader::ElfFile("/nonexistent/file").status() == reader::ElfFile::Status::kNotRegular);
    CHECK(reader::ElfFile("/dev/null").status() == reader::ElfFile::Status::kNotRegular);
    CHECK(reader::ElfFile("/proc/self").status() == reader::ElfFile::Status::kNotRegular);
    std::string text = test::temp_path("not_elf.txt");
    std::ofstream(text) << "#!/bin/sh\necho this is no ELF file, but it is longer than a header\n";
    reader::ElfFile t(text);
    CHECK(t.status() == reader::ElfFile::Status::kNotElf64);
    CHECK(t.segments().empty());
    CHECK_FALSE(t.sections().has_value());
    CHECK(t.build_id_in_segments().empty());
    std::string empty = test::temp_path("empty");
    std::ofstream{empty};
    CHECK(reader::ElfFile(empty).status() == reader::ElfFile::Status::kNotElf64);
    // A size limit: a file above it is refused as not regular (the symbol fallback's 4 GiB).
    CHECK(reader::ElfFile(self_path(), 64).status() == reader::ElfFile::Status::kNotRegular);
    CHECK(reader::ElfSymbols(text).error() == "not a 64-bit little-endian ELF file");
    CHECK(reader::ElfSymbols("/dev/null").error() == "not a regular file");
}

TEST_CASE("ELF file: the note walk finds the GNU build id after other notes") {
    std::vector<uint8_t> notes;
    auto note = [&](uint32_t type, const std::string& name, const std::vector<uint8_t>& desc) {
        Elf64_Nhdr h{uint32_t(name.size() + 1), uint32_t(desc.size()), type};
        const auto* p = reinterpret_cast<const uint8_t*>(&h);
        notes.insert(notes.end(), p, p + sizeof h);
        notes.insert(notes.end(), name.begin(), name.end());
        notes.push_back(0);
        while (notes.size() % 4) notes.push_back(0);
        notes.insert(notes.end(), desc.begin(), desc.end());
        while (notes.size() % 4) notes.push_back(0);
    };
    note(NT_GNU_ABI_TAG, "GNU", {0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0});
    note(NT_GNU_BUILD_ID, "Go", {9, 9, 9, 9}); // another owner's note of the same type
    note(NT_GNU_BUILD_ID, "GNU", {0xde, 0xad, 0xbe, 0xef, 0x01});
    CHECK(reader::gnu_build_id(notes.data(), notes.size()) == "\xde\xad\xbe\xef\x01");
    // A note whose description runs past the end ends the walk.
    CHECK(reader::gnu_build_id(notes.data(), notes.size() - 4).empty());
    CHECK(reader::gnu_build_id(notes.data(), 0).empty());
}
