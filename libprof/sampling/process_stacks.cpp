// The call stacks of one running process's threads: see process_stacks.hpp.
#include "sampling/process_stacks.hpp"

#include "reader/dwarf_lines.hpp"
#include "reader/elf_file.hpp"
#include "reader/elf_symbols.hpp"
#include "reader/trace_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace prof::sampling {
namespace {

constexpr uint32_t kMaxFrames = 1024;
// A missing address makes the maps be read again at most this often (a frame in garbage
// would otherwise read them for every sample).
constexpr uint64_t kReloadEveryNs = 100'000'000;

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

std::vector<ProcessMap> maps_of(pid_t pid) {
    std::vector<ProcessMap> out;
    std::ifstream in(fmt::format("/proc/{}/maps", pid));
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string range, perms, offset, dev, inode, path;
        fields >> range >> perms >> offset >> dev >> inode;
        std::getline(fields >> std::ws, path);
        size_t dash = range.find('-');
        if (dash == std::string::npos || perms.size() < 3) continue;
        ProcessMap m;
        m.start = std::strtoull(range.substr(0, dash).c_str(), nullptr, 16);
        m.end = std::strtoull(range.substr(dash + 1).c_str(), nullptr, 16);
        m.offset = std::strtoull(offset.c_str(), nullptr, 16);
        m.executable = perms[2] == 'x';
        m.path = path;
        out.push_back(std::move(m));
    }
    return out;
}

// A file on disk behind a mapping ("[stack]", "[vdso]", anonymous memory and deleted files
// are not).
bool on_disk(const ProcessMap& m) {
    return !m.path.empty() && m.path[0] == '/' && m.path.find(" (deleted)") == std::string::npos;
}

} // namespace

struct ProcessStacks::Names {
    std::unique_ptr<reader::ElfSymbols> elf;
    std::unique_ptr<reader::DwarfLines> dwarf;
};

ProcessStacks::ProcessStacks(pid_t pid, bool inlined)
    : pid_(pid), inlined_(inlined), maps_(maps_of(pid)) {}

ProcessStacks::~ProcessStacks() = default;

void ProcessStacks::reload_maps() {
    std::vector<ProcessMap> now = maps_of(pid_);
    if (!now.empty()) maps_ = std::move(now);
}

const ProcessMap* ProcessStacks::map_at(uint64_t address) {
    auto find = [&]() -> const ProcessMap* {
        auto it = std::upper_bound(maps_.begin(), maps_.end(), address,
                                   [](uint64_t a, const ProcessMap& m) { return a < m.start; });
        if (it == maps_.begin()) return nullptr;
        --it;
        return address < it->end ? &*it : nullptr;
    };
    if (const ProcessMap* m = find()) return m;
    uint64_t now = now_ns();
    if (now - reloaded_ns_ < kReloadEveryNs) return nullptr;
    reloaded_ns_ = now;
    reload_maps();
    return find();
}

std::vector<uint64_t> ProcessStacks::unwind(const StackCopy& c, std::string& end, bool& complete) {
    std::vector<uint64_t> pcs;
    end.clear();
    complete = false;
    UnwindResult u = UnwindResult::kNone;
    if (c.size)
        u = unwinder_.unwind(
            c.ip, c.sp, c.bp_known ? c.bp : 0, c.stack, c.size,
            [&](uint64_t address) { return module_at(address); }, pcs, kMaxFrames);
    if (u == UnwindResult::kComplete) {
        complete = true;
        return pcs;
    }
    // The frame-pointer chain from the frame the tables could not describe: the rest of the
    // stack where it was built with frame pointers.
    std::vector<uint64_t> chain = c.chain_size ? std::vector<uint64_t>(c.chain, c.chain + c.chain_size)
                                               : frame_chain(c);
    if (pcs.size() > 1) {
        uint64_t last = pcs.back();
        size_t from = chain.size();
        for (size_t i = 1; i < chain.size(); ++i)
            if (chain[i] == last) from = i + 1;
        for (size_t i = from; i < chain.size() && pcs.size() < kMaxFrames; ++i)
            pcs.push_back(chain[i]);
    } else {
        pcs = chain.empty() ? std::vector<uint64_t>{c.ip} : chain;
    }
    const ProcessMap* outer = map_at(pcs.back());
    if (!c.size)
        end = "its stack could not be read";
    else if (!c.bp_known && pcs.size() > 1)
        end = "the next frame is found through the frame pointer, which a thread left blocked "
              "in the kernel does not show";
    else if (!outer || !outer->executable)
        end = "the last address is in no mapped code";
    else
        end = "no unwind table or frame pointer describes the next frame";
    return pcs;
}

std::vector<NamedFrame> ProcessStacks::frames(const std::vector<uint64_t>& pcs) {
    std::vector<NamedFrame> out;
    for (size_t i = 0; i < pcs.size(); ++i) {
        NamedFrame f;
        f.address = pcs[i];
        // A return address is looked up at the call: one byte back.
        uint64_t at = i == 0 ? pcs[i] : pcs[i] - 1;
        const ProcessMap* m = map_at(at);
        if (!m || !m->executable) {
            out.push_back(f);
            continue;
        }
        f.module = m->path;
        uint64_t base = m->start - m->offset;
        if (on_disk(*m))
            if (std::optional<uint64_t> b = load_base(*m)) base = *b;
        uint64_t vaddr = at - base;
        f.offset = pcs[i] - base;
        if (!on_disk(*m)) {
            out.push_back(f);
            continue;
        }
        // Threads waiting or working in the same place share their addresses: each is named
        // once.
        std::string path = m->path;
        auto key = std::make_pair(path, vaddr);
        auto cached = named_.find(key);
        if (cached == named_.end()) cached = named_.emplace(key, name(path, vaddr, f)).first;
        for (NamedFrame frame : cached->second) {
            frame.address = f.address;
            frame.offset = f.offset;
            out.push_back(std::move(frame));
        }
    }
    return out;
}

// The frames of one address (`vaddr` in the file at `path`): the functions inlined there,
// innermost first, then the function it is in. `f` has its module filled in.
std::vector<NamedFrame> ProcessStacks::name(const std::string& path, uint64_t vaddr, NamedFrame f) {
    std::vector<NamedFrame> out;
    Names& n = names(path);
    std::string symbol;
    if (!n.dwarf->function(vaddr, symbol))
        if (const reader::ElfSymbols::Entry* e = n.elf->find(vaddr)) symbol = e->name;
    if (!symbol.empty()) f.function = reader::demangle(reader::unversioned(symbol));
    n.dwarf->lookup(vaddr, f.file, f.line);
    std::vector<reader::DwarfLines::InlinedCall> calls;
    if (inlined_) calls = n.dwarf->inlined(vaddr);
    // The function inlined last holds the address's own line; each one out is at the line its
    // callee was inlined at.
    std::string file = f.file;
    uint32_t line = f.line;
    for (size_t k = calls.size(); k-- > 0;) {
        NamedFrame inl = f;
        inl.function = reader::demangle(calls[k].symbol);
        inl.file = file;
        inl.line = line;
        inl.inlined = true;
        out.push_back(inl);
        file = calls[k].call_file;
        line = calls[k].call_line;
    }
    f.file = file;
    f.line = line;
    out.push_back(f);
    return out;
}

const UnwindModule* ProcessStacks::module_at(uint64_t address) {
    const ProcessMap* m = map_at(address);
    if (!m || !m->executable) return nullptr;
    if (m->path == "[vdso]") return unwinder_.vdso(m->start);
    if (!on_disk(*m)) return nullptr;
    std::optional<uint64_t> base = load_base(*m);
    return base ? unwinder_.module(m->path, *base) : nullptr;
}

std::optional<uint64_t> ProcessStacks::load_base(const ProcessMap& m) {
    auto key = std::make_pair(m.path, m.start);
    if (auto it = bases_.find(key); it != bases_.end()) return it->second;
    return bases_[key] = reader::ElfFile(m.path).load_base(m.start, m.offset);
}

ProcessStacks::Names& ProcessStacks::names(const std::string& path) {
    std::unique_ptr<Names>& n = names_[path];
    if (!n) {
        n = std::make_unique<Names>();
        n->elf = std::make_unique<reader::ElfSymbols>(path);
        n->dwarf = std::make_unique<reader::DwarfLines>(path);
    }
    return *n;
}

// The frame-pointer chain within the copy (what a kernel's frame-pointer walk gives).
std::vector<uint64_t> ProcessStacks::frame_chain(const StackCopy& c) {
    std::vector<uint64_t> chain;
    if (!c.bp_known) return chain;
    chain.push_back(c.ip);
    uint64_t bp = c.bp;
    while (chain.size() < kMaxFrames && bp >= c.sp && bp + 16 <= c.sp + c.size && (bp & 7) == 0) {
        uint64_t next, ret;
        std::memcpy(&next, c.stack + (bp - c.sp), 8);
        std::memcpy(&ret, c.stack + (bp - c.sp) + 8, 8);
        const ProcessMap* m = map_at(ret);
        if (!m || !m->executable) break;
        chain.push_back(ret);
        if (next <= bp) break;
        bp = next;
    }
    return chain;
}

} // namespace prof::sampling
