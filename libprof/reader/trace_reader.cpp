// Trace reader: file header checks, the chunk walk and the event records (calls, scopes,
// Meta and the process stream's); the call tree's and the memory records: stream_records.cpp.
#include "reader/trace_reader.hpp"
#include "reader/cursor.hpp"
#include "reader/stream_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cxxabi.h>
#include <fcntl.h>
#include <memory>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

namespace prof::reader {

using format::ChunkHeader;
using format::FileHeader;
using format::Tag;

TraceError::TraceError(const std::string& path, uint64_t offset, const std::string& what)
    : std::runtime_error(fmt::format("{}: corrupt trace at byte {}: {}", path, offset, what)),
      offset_(offset) {}

TraceError::TraceError(const std::string& path, const std::string& what)
    : std::runtime_error(fmt::format("{}: {}", path, what)) {}

namespace {

std::string hex(std::string_view bytes) {
    std::string out;
    for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
    return out;
}

} // namespace

TraceReader::TraceReader(std::string path) {
    info_.path = std::move(path);
    const std::string& p = info_.path;
    fd_ = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw TraceError(p, fmt::format("cannot open: {}", std::strerror(errno)));
    try {
        check_header();
    } catch (...) { // no destructor runs for an object whose constructor throws
        if (data_) munmap(const_cast<uint8_t*>(data_), mapped_);
        ::close(fd_);
        throw;
    }
}

// The file's size, mapping and header, from fd_.
void TraceReader::check_header() {
    const std::string& p = info_.path;
    struct stat st;
    if (fstat(fd_, &st) != 0) throw TraceError(p, std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw TraceError(p, "not a regular file");
    size_ = uint64_t(st.st_size);
    info_.bytes = size_;
    if (size_ == 0) throw TraceError(p, "empty file, not a libprof trace");
    if (size_ < sizeof(FileHeader)) {
        char head[8] = {};
        ssize_t n = pread(fd_, head, sizeof head, 0);
        if (n == 8 && std::memcmp(head, format::kMagic, 8) == 0)
            throw TraceError(p, fmt::format("truncated: only {} bytes, the header alone is {}",
                                            size_, sizeof(FileHeader)));
        throw TraceError(p, "not a libprof trace (file too short)");
    }
    FileHeader head{};
    if (pread(fd_, &head, sizeof head, 0) != ssize_t(sizeof head))
        throw TraceError(p, fmt::format("cannot read: {}", std::strerror(errno)));
    // The size again, after the header: a writer trims its file before it marks it finished, so
    // a finished header means the size read now is final (the first one may predate the trim).
    if (fstat(fd_, &st) != 0) throw TraceError(p, std::strerror(errno));
    if (uint64_t(st.st_size) < sizeof(FileHeader)) throw TraceError(p, "truncated while opened");
    size_ = info_.bytes = uint64_t(st.st_size);
    void* m = MAP_FAILED;
    if (format::header_magic_ok(head) && !(head.flags & format::kFileFinished)) {
        // A trace still being written (or left by a crash) is copied, not mapped: its writer
        // trims the space it reserved when it finishes, and a mapping's pages past the new end
        // would raise SIGBUS here. A finished trace is trimmed before it says so.
        m = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            throw TraceError(p, fmt::format("cannot allocate: {}", std::strerror(errno)));
        uint64_t got = 0;
        while (got < size_) {
            ssize_t n = pread(fd_, static_cast<uint8_t*>(m) + got, size_ - got, off_t(got));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                int e = errno;
                munmap(m, size_);
                throw TraceError(p, fmt::format("cannot read: {}", std::strerror(e)));
            }
            if (n == 0) break; // the writer trimmed it meanwhile: what was read is the trace
            got += uint64_t(n);
        }
        if (got < sizeof(FileHeader)) {
            munmap(m, size_);
            throw TraceError(p, "truncated while being read");
        }
        mapped_ = size_;
        size_ = info_.bytes = got;
    } else {
        m = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
        if (m == MAP_FAILED)
            throw TraceError(p, fmt::format("cannot map: {}", std::strerror(errno)));
        mapped_ = size_;
    }
    data_ = static_cast<const uint8_t*>(m);
    madvise(m, size_, MADV_SEQUENTIAL);
    std::memcpy(&info_.header, data_, sizeof(FileHeader));
    const FileHeader& h = info_.header;
    if (!format::header_magic_ok(h)) throw TraceError(p, "not a libprof trace (bad magic)");
    if (h.major != format::kMajor && h.major != format::kPackedMajor)
        throw TraceError(p, fmt::format("trace format version {}.{} is not supported: this "
                                        "profreport reads version {}.x (and {}.x, packed){}",
                                        h.major, h.minor, format::kMajor, format::kPackedMajor,
                                        h.major > format::kPackedMajor ? "; upgrade libprof" : ""));
    if (h.header_size != format::kHeaderSize)
        throw TraceError(p, 12, fmt::format("header size {} (expected {})", h.header_size,
                                           format::kHeaderSize));
    if (h.chunk_size < format::kMinChunkSize || h.chunk_size > format::kMaxChunkSize ||
        (h.chunk_size & (h.chunk_size - 1)))
        throw TraceError(p, 16, fmt::format("chunk size {} is out of range", h.chunk_size));
    if (h.clock_kind != uint32_t(format::ClockKind::kTsc) &&
        h.clock_kind != uint32_t(format::ClockKind::kMonotonic))
        throw TraceError(p, 24, fmt::format("unknown clock kind {}", h.clock_kind));
    packed_ = h.major == format::kPackedMajor;
    if (packed_ != ((h.flags & format::kFilePacked) != 0))
        throw TraceError(p, 20, fmt::format("a version {} file {} the packed flag", h.major,
                                            packed_ ? "without" : "with"));
    if (packed_ && h.memory_time_shift > 32)
        throw TraceError(p, 36,
                         fmt::format("memory time shift {} is out of range", h.memory_time_shift));
    // `finished` waits for the End record: a finished header on a file cut short is not.
}

void TraceReader::ZstdFree::operator()(ZSTD_DCtx_s* d) const {
    ZSTD_freeDCtx(d);
}

TraceReader::~TraceReader() {
    if (data_) munmap(const_cast<uint8_t*>(data_), mapped_);
    if (fd_ >= 0) ::close(fd_);
}

size_t TraceInfo::module_index_at(uint64_t address, uint64_t ticks) const {
    // Objects at the same addresses follow one another in file order. The runtime records an
    // object when it first needs it, possibly after its first event there, but its unloading
    // exactly (at dlclose), so the unload times are what separate them.
    size_t best = kNoModule, last = kNoModule;
    for (size_t i = 0; i < modules.size(); ++i) {
        const Module& m = modules[i];
        if (address < m.start || address >= m.end) continue;
        last = i;
        if (m.unload_ticks <= ticks) continue;
        if (best == kNoModule || m.ticks <= ticks) best = i;
    }
    return best != kNoModule ? best : last;
}

const Module* TraceInfo::module_at(uint64_t address, uint64_t ticks) const {
    size_t i = module_index_at(address, ticks);
    return i == kNoModule ? nullptr : &modules[i];
}

AddressHistory::AddressHistory(const TraceInfo& info) : modules_(&info.modules) {
    // Where two or more modules overlap: a sweep over their starts and ends.
    std::vector<std::pair<uint64_t, int>> edges;
    for (const Module& m : info.modules)
        if (m.start < m.end) edges.insert(edges.end(), {{m.start, +1}, {m.end, -1}});
    std::sort(edges.begin(), edges.end()); // an end before a start at the same address
    int depth = 0;
    for (const auto& [at, step] : edges) {
        int before = depth;
        depth += step;
        if (before < 2 && depth >= 2) {
            if (!reused_.empty() && reused_.back().second == at) continue; // adjacent: extend
            reused_.emplace_back(at, at);
        } else if (before >= 2 && depth < 2) {
            reused_.back().second = at;
        }
    }
}

bool AddressHistory::reused(uint64_t address) const {
    auto it = std::upper_bound(reused_.begin(), reused_.end(), address,
                               [](uint64_t a, const auto& r) { return a < r.first; });
    return it != reused_.begin() && address < std::prev(it)->second;
}

size_t AddressHistory::module_at(uint64_t address, uint64_t ticks) {
    const std::vector<Module>& mods = *modules_;
    std::vector<size_t>& list = covering_[address];
    if (list.empty())
        for (size_t i = 0; i < mods.size(); ++i)
            if (address >= mods[i].start && address < mods[i].end) list.push_back(i);
    if (list.empty()) return kNoModule;
    // The rule of TraceInfo::module_index_at. Objects at one address follow one another, so
    // along `list` both the recording and the unloading times grow: two binary searches. (On a
    // trace where they do not, the answer is still one of the objects.)
    auto first_true = [&](size_t lo, auto pred) {
        size_t hi = list.size();
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (pred(mods[list[mid]]))
                hi = mid;
            else
                lo = mid + 1;
        }
        return lo;
    };
    size_t live = first_true(0, [&](const Module& m) { return m.unload_ticks > ticks; });
    if (live == list.size()) return list.back();
    size_t later = first_true(live, [&](const Module& m) { return m.ticks > ticks; });
    return list[later > live + 1 ? later - 1 : live];
}

const Symbol* TraceInfo::symbol_at(uint64_t address, size_t module) const {
    auto it = symbols.find(address);
    if (it != symbols.end() &&
        (module == kNoModule || it->second.module == module || it->second.module == kNoModule))
        return &it->second;
    auto r = replaced_symbols.find({module, address});
    return r == replaced_symbols.end() ? nullptr : &r->second;
}

// A Symbol record names the address in the object loaded there when it was written: the latest
// Module record covering it that no Unload record has ended yet, in process-stream order.
void TraceReader::add_symbol(uint64_t address, Symbol s) {
    for (size_t i = info_.modules.size(); i-- > 0;) {
        const Module& m = info_.modules[i];
        if (address >= m.start && address < m.end && m.unload_ticks == UINT64_MAX) {
            s.module = i;
            break;
        }
    }
    auto [it, fresh] = info_.symbols.try_emplace(address);
    Symbol& held = it->second;
    if (fresh || held.module == s.module || held.module == kNoModule || s.module == kNoModule) {
        held = std::move(s); // a later record for the same object replaces an earlier one
    } else if (s.module > held.module) {
        info_.replaced_symbols[{held.module, address}] = std::move(held);
        held = std::move(s);
    } else {
        info_.replaced_symbols[{s.module, address}] = std::move(s);
    }
}

void TraceReader::process_records(const uint8_t* p, const uint8_t* end, uint64_t offset,
                                  uint64_t ticks, EventSink* sink) {
    Cursor c{p, end};
    while (c.p < c.end) {
        const uint8_t* rec = c.p;
        auto tag = Tag(c.u8());
        switch (tag) {
        case Tag::kMeta: {
            auto key = c.str();
            auto value = c.str();
            if (c.ok) {
                std::string v(value);
                auto number = [&] { return std::max(0.0, std::strtod(v.c_str(), nullptr)); };
                if (key == "overhead_in_ticks") info_.overhead_in = number();
                else if (key == "overhead_out_ticks") info_.overhead_out = number();
                else if (key == "line_overhead_ticks") info_.line_overhead = number();
                if (key == "sample_hz") info_.sample_hz = number(); // 1.5
                info_.meta[std::string(key)] = std::move(v);
            }
            break;
        }
        case Tag::kModule: {
            Module m;
            m.ticks = c.u64();
            m.base = c.u64();
            m.start = c.u64();
            m.end = c.u64();
            m.path = std::string(c.str());
            m.build_id = hex(c.str());
            if (c.ok) info_.modules.push_back(std::move(m));
            break;
        }
        case Tag::kSymbol: {
            uint64_t address = c.u64();
            Symbol s;
            s.name = std::string(c.str());
            s.symbol = std::string(c.str());
            s.file = std::string(c.str());
            s.line = uint32_t(c.uleb());
            if (c.ok) add_symbol(address, std::move(s));
            break;
        }
        case Tag::kEnd: {
            uint64_t end_ticks = c.u64();
            c.u64(); // end_mono_ns
            uint64_t tps = c.u64();
            c.uleb(); // threads
            c.uleb(); // dropped
            if (c.ok) {
                info_.end_ticks = end_ticks;
                if (tps) info_.ticks_per_second = double(tps);
                info_.finished = true;
            }
            break;
        }
        case Tag::kRss: { // 1.11: the RSS timer's readings, timed within the stream
            uint64_t n = c.uleb();
            if (!c.ok || !c.has(n)) {
                c.ok = false;
                break;
            }
            Cursor m{c.p, c.p + n};
            c.p += n;
            ticks += m.uleb();
            uint64_t bytes = m.uleb();
            if (!m.ok)
                throw TraceError(info_.path, offset + uint64_t(rec - p), "malformed RSS record");
            if (sink) sink->on_rss(0, ticks, bytes);
            break;
        }
        default:
            if (uint8_t(tag) >= uint8_t(Tag::kFirstSized)) {
                uint64_t n = c.uleb();
                if (c.ok && c.has(n)) {
                    sized_record(uint8_t(tag), c.p, n, 0, offset + uint64_t(rec - p));
                    c.p += n;
                } else {
                    c.ok = false;
                }
                break;
            }
            throw TraceError(info_.path, offset + uint64_t(rec - p),
                             fmt::format("unknown record tag 0x{:02x} in the process stream",
                                         uint8_t(tag)));
        }
        if (!c.ok)
            throw TraceError(info_.path, offset + uint64_t(rec - p),
                             fmt::format("process record 0x{:02x} runs past its chunk",
                                         uint8_t(tag)));
    }
}

namespace {

// The longest Enter record: a tag and two 10-byte LEB128 numbers.
constexpr ptrdiff_t kLongestCall = 21;

// A LEB128 number known to lie within the chunk (at most 10 bytes are read); false for one
// longer than 10 bytes.
inline bool fast_uleb(const uint8_t*& p, uint64_t& v) {
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        uint8_t b = *p++;
        r |= uint64_t(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            v = r;
            return true;
        }
    }
    return false;
}

} // namespace

// Decodes one chunk of a thread stream. `cut` says the chunk is the last, cut-short one of the
// file: a record that runs past the end is then the end of the data, not corruption.
bool TraceReader::thread_records(StreamState& st, Thread& th, const uint8_t* p,
                                 const uint8_t* end, uint64_t ticks, uint64_t offset, bool cut,
                                 EventSink* sink) {
    Cursor c{p, end};
    const uint32_t stream = th.stream;
    uint64_t last_ptr = 0; // pointer deltas restart in every chunk
    // A MemAligned record's alignment (2.1): for the record right after it, if that is a packed
    // memory record; any other record, and the end of the chunk, drop it.
    uint64_t next_alignment = 0;
    // Enter and Exit records go to the sink in batches; any other record first delivers the
    // batch before it, so the sink sees the stream's order.
    constexpr size_t kBatch = 512;
    CallRecord batch[kBatch];
    size_t queued = 0;
    auto deliver = [&] {
        if (queued && sink) sink->on_calls(stream, batch, queued);
        queued = 0;
    };
    auto fail = [&](const uint8_t* rec, const std::string& what) -> bool {
        deliver();
        if (cut) return false;
        throw TraceError(info_.path, offset + uint64_t(rec - p), what);
    };
    while (c.p < c.end) {
        // Enter and Exit records, the bulk of every trace, without the cursor's checks while
        // the longest of them fits in what is left of the chunk. Anything else, or a record
        // that does not decode, goes through the checked switch below, which reports it.
        if (!st.ended && !st.counting && c.end - c.p >= kLongestCall) {
            const uint8_t* q = c.p;
            uint64_t decoded = 0, first = 0;
            while (c.end - q >= kLongestCall) {
                const uint8_t* r = q;
                uint8_t t = *r++;
                uint64_t fn = 0, delta;
                if (t == uint8_t(Tag::kExit)) {
                    if (!fast_uleb(r, delta)) break;
                } else if (t == uint8_t(Tag::kEnter)) {
                    if (!fast_uleb(r, fn) || !fast_uleb(r, delta) || fn >= st.functions) break;
                } else {
                    break;
                }
                q = r;
                ticks += delta;
                if (!decoded++) first = ticks;
                batch[queued++] = CallRecord{ticks, uint32_t(fn), t == uint8_t(Tag::kExit)};
                if (queued == kBatch) deliver();
            }
            if (decoded) {
                c.p = q;
                next_alignment = 0;
                th.events += decoded;
                // Within the run time only grows: its first and last records bound it.
                if (!th.first_ticks || first < th.first_ticks) th.first_ticks = first;
                if (ticks > th.last_ticks) th.last_ticks = ticks;
                continue;
            }
        }
        const uint8_t* rec = c.p;
        uint64_t alignment = next_alignment;
        next_alignment = 0;
        if (st.ended) return fail(rec, fmt::format("stream {} has records after its end", stream));
        auto tag = Tag(c.u8());
        if (tag != Tag::kEnter && tag != Tag::kExit) deliver();
        if (st.counting && (tag == Tag::kEnter || tag == Tag::kExit || tag == Tag::kEnterAddress ||
                            tag == Tag::kAbandon || tag == Tag::kScopeRun))
            return fail(rec, fmt::format("call record 0x{:02x} after stream {} began counting "
                                         "its calls in a call tree",
                                         uint8_t(tag), stream));
        switch (tag) {
        case Tag::kEnter: {
            uint64_t fn = c.uleb();
            ticks += c.uleb();
            if (!c.ok) return fail(rec, "enter record runs past its chunk");
            if (fn >= st.functions)
                return fail(rec, fmt::format("enter of undefined function {} in stream {}", fn,
                                             stream));
            ++th.events;
            batch[queued++] = CallRecord{ticks, uint32_t(fn), 0};
            if (queued == kBatch) deliver();
            break;
        }
        case Tag::kExit:
            ticks += c.uleb();
            if (!c.ok) return fail(rec, "exit record runs past its chunk");
            ++th.events;
            batch[queued++] = CallRecord{ticks, 0, 1};
            if (queued == kBatch) deliver();
            break;
        case Tag::kFunction: {
            uint64_t address = c.u64();
            if (!c.ok) return fail(rec, "function record runs past its chunk");
            if (sink) sink->on_function(stream, st.functions, address);
            ++st.functions;
            break;
        }
        case Tag::kEnterAddress: {
            uint64_t address = c.u64();
            ticks += c.uleb();
            if (!c.ok) return fail(rec, "enter record runs past its chunk");
            ++th.events;
            if (sink) sink->on_enter_address(stream, address, ticks);
            break;
        }
        case Tag::kAbandon: {
            uint64_t n = c.uleb();
            ticks += c.uleb();
            if (!c.ok || n > UINT32_MAX) return fail(rec, "abandon record is malformed");
            th.abandoned += n;
            if (sink) sink->on_abandon(stream, uint32_t(n), ticks);
            break;
        }
        case Tag::kThreadBegin: {
            ticks += c.uleb();
            uint32_t tid = c.u32();
            auto name = c.str();
            if (!c.ok) return fail(rec, "thread record runs past its chunk");
            th.tid = tid;
            th.name = std::string(name);
            if (sink) sink->on_thread_begin(stream, ticks);
            break;
        }
        case Tag::kThreadEnd:
            ticks += c.uleb();
            if (!c.ok) return fail(rec, "thread end record runs past its chunk");
            th.ended = st.ended = true;
            if (sink) sink->on_thread_end(stream, ticks);
            break;
        case Tag::kDropped:
            th.dropped += c.uleb();
            if (!c.ok) return fail(rec, "dropped record runs past its chunk");
            break;
        case Tag::kScopeRun: { // sized (1.3): later minors may append fields
            uint64_t n = c.uleb();
            if (!c.ok || !c.has(n)) return fail(rec, "scope run record runs past its chunk");
            Cursor m{c.p, c.p + n};
            c.p += n;
            ticks += m.uleb();
            uint64_t fn = m.uleb();
            uint64_t count = m.u64();
            uint64_t total = m.u64();
            if (!m.ok) return fail(rec, "malformed scope run record");
            if (fn >= st.functions)
                return fail(rec, fmt::format("scope run of undefined function {} in stream {}", fn,
                                             stream));
            if (count == 0) return fail(rec, "scope run of no activation");
            th.events += 2 * count;
            // Its activations ran until ticks + total at least (the end of a killed trace).
            if (ticks + total > th.last_ticks) th.last_ticks = ticks + total;
            if (sink) sink->on_scope_run(stream, uint32_t(fn), ticks, count, total);
            break;
        }
        default:
            if (format::is_packed_memory_tag(uint8_t(tag))) {
                if (!packed_)
                    return fail(rec, fmt::format("packed memory record 0x{:02x} in a file that "
                                                 "is not packed",
                                                 uint8_t(tag)));
                if (!packed_memory_record(uint8_t(tag), c, st, stream, ticks, alignment, sink))
                    return fail(rec, fmt::format("malformed packed memory record 0x{:02x}",
                                                 uint8_t(tag)));
                break;
            }
            if (uint8_t(tag) >= uint8_t(Tag::kFirstSized)) {
                uint64_t n = c.uleb();
                if (!c.ok || !c.has(n)) return fail(rec, "sized record runs past its chunk");
                Cursor m{c.p, c.p + n};
                c.p += n;
                if (tag == Tag::kMemAligned && packed_) {
                    next_alignment = m.uleb();
                    if (!m.ok || !valid_alignment(next_alignment, true))
                        return fail(rec, "malformed MemAligned record");
                    break;
                }
                std::string wrong;
                if (!call_tree_record(tag, m, st, th, ticks, sink, wrong) &&
                    !memory_record(tag, m, stream, ticks, last_ptr, sink))
                    sized_record(uint8_t(tag), m.p, n, stream, offset + uint64_t(rec - p));
                if (!wrong.empty()) return fail(rec, wrong);
                if (!m.ok) return fail(rec, fmt::format("malformed record 0x{:02x}", uint8_t(tag)));
                break;
            }
            return fail(rec, fmt::format("unknown record tag 0x{:02x} in thread stream {}",
                                         uint8_t(tag), stream));
        }
        if (!th.first_ticks || ticks < th.first_ticks) th.first_ticks = ticks;
        if (ticks > th.last_ticks) th.last_ticks = ticks;
    }
    deliver();
    return true;
}

void TraceReader::read_chunks(EventSink* sink) {
    const FileHeader& h = info_.header;
    std::unordered_map<uint32_t, StreamState> streams;
    uint64_t off = h.header_size;
    const uint64_t cs = h.chunk_size;
    uint64_t chunks = 0;
    while (off < size_) {
        uint64_t avail = std::min<uint64_t>(cs, size_ - off);
        ChunkHeader ch{};
        if (avail < sizeof ch) {
            info_.incomplete = info_.partial = true;
            info_.incomplete_reason = fmt::format("the file ends inside a chunk header at byte {}", off);
            break;
        }
        std::memcpy(&ch, data_ + off, sizeof ch);
        if (ch.magic == 0 && !packed_) { // reserved by the writer but never used
            off += cs;
            continue;
        }
        if (ch.magic != (packed_ ? format::kPackedChunkMagic : format::kChunkMagic))
            throw TraceError(info_.path, off, fmt::format("bad chunk magic 0x{:08x}", ch.magic));
        if (ch.used > cs - sizeof ch)
            throw TraceError(info_.path, off + 16,
                             fmt::format("chunk claims {} bytes of records, more than fit in {}",
                                         ch.used, cs - sizeof ch));
        // A packed chunk is as long as its header and frame; a cut one cannot be unpacked.
        const uint64_t stride = packed_ ? sizeof ch + uint64_t(ch.packed_size) : cs;
        if (packed_) avail = std::min<uint64_t>(stride, size_ - off);
        bool cut = packed_ ? stride > avail : sizeof ch + ch.used > avail;
        const uint8_t* p = data_ + off + sizeof ch;
        const uint8_t* end = data_ + off + std::min<uint64_t>(avail, sizeof ch + ch.used);
        if (packed_ && cut) {
            if (ch.sync_ticks > last_sync_ticks_)
                last_sync_ticks_ = ch.sync_ticks, last_sync_ns_ = ch.sync_mono_ns;
            info_.incomplete = info_.partial = true;
            info_.incomplete_reason = fmt::format(
                "the file ends inside packed chunk {} at byte {} ({} of {} bytes present)", chunks,
                size_, avail, stride);
            break;
        }
        if (packed_) {
            // The chunks' bytes are one zstd stream, flushed at the end of every chunk.
            if (!unpack_) {
                unpack_.reset(ZSTD_createDCtx());
                if (!unpack_) throw TraceError(info_.path, "cannot create a zstd context");
            }
            // One byte more than a chunk's records: a chunk that fills its records exactly may
            // still have input left that unpacks to nothing; one that unpacks to more is caught.
            unpacked_.resize(cs);
            ZSTD_inBuffer src{p, ch.packed_size, 0};
            ZSTD_outBuffer dst{unpacked_.data(), cs - sizeof ch + 1, 0};
            while (src.pos < src.size) {
                size_t r = ZSTD_decompressStream(unpack_.get(), &dst, &src);
                if (ZSTD_isError(r))
                    throw TraceError(
                        info_.path, off + sizeof ch,
                        fmt::format("packed chunk does not unpack: {}", ZSTD_getErrorName(r)));
                if (dst.pos == dst.size && src.pos < src.size) break;
            }
            if (dst.pos != ch.used || src.pos != src.size)
                throw TraceError(info_.path, off + sizeof ch,
                                 fmt::format("packed chunk unpacks to {}{} bytes, not {}", dst.pos,
                                             src.pos < src.size ? " or more" : "", ch.used));
            p = unpacked_.data();
            end = p + dst.pos;
        }
        if (cut) {
            info_.incomplete = info_.partial = true;
            info_.incomplete_reason = fmt::format(
                "the file ends inside chunk {} at byte {} ({} of {} bytes present)",
                (off - h.header_size) / cs,
                size_, avail, sizeof ch + ch.used);
        }
        if (ch.sync_ticks) {
            if (!first_sync_ticks_) first_sync_ticks_ = ch.sync_ticks, first_sync_ns_ = ch.sync_mono_ns;
            if (ch.sync_ticks > last_sync_ticks_) last_sync_ticks_ = ch.sync_ticks, last_sync_ns_ = ch.sync_mono_ns;
        }
        StreamState& st = streams[ch.stream];
        if (ch.seq != st.next_seq)
            throw TraceError(info_.path, off + 12,
                             fmt::format("stream {} continues with chunk {} where {} was due",
                                         ch.stream, ch.seq, st.next_seq));
        ++st.next_seq;
        if (ch.kind == uint16_t(format::StreamKind::kProcess)) {
            if (ch.stream != 0)
                throw TraceError(info_.path, off + 8, "process chunk with a thread stream id");
            if (cut) break; // a cut process record cannot be trusted; the events before it stand
            process_records(p, end, off + sizeof ch, ch.base_ticks, sink);
        } else if (ch.kind == uint16_t(format::StreamKind::kThread)) {
            if (ch.stream == 0)
                throw TraceError(info_.path, off + 8, "thread chunk with stream id 0");
            if (!wanted_ || wanted_(ch.stream)) {
                Thread& th = info_.threads[ch.stream];
                th.stream = ch.stream;
                if (!th.tid) th.tid = ch.tid;
                if (ch.base_ticks && (!th.first_ticks || ch.base_ticks < th.first_ticks))
                    th.first_ticks = ch.base_ticks;
                if (sink)
                    thread_records(st, th, p, end, ch.base_ticks, off + sizeof ch, cut, sink);
            }
        } else {
            throw TraceError(info_.path, off + 4, fmt::format("unknown chunk kind {}", ch.kind));
        }
        ++chunks;
        if (cut) break;
        if (sink) sink->on_chunk_done(ch.sync_ticks);
        // The file is read front to back: the pages of a chunk done with leave this process's
        // resident set (they stay in the page cache, and come back if read again), so that the
        // memory of a report does not grow with the trace.
        madvise(const_cast<uint8_t*>(data_) + off, std::min<uint64_t>(stride, size_ - off),
                MADV_DONTNEED);
        off += stride;
    }
    info_.chunks = chunks;
    // A finished writer recorded how many chunks it wrote: whole chunks cut off the end of a
    // copy are noticed even when the records that remain look complete.
    if (h.chunk_count && chunks < h.chunk_count && !info_.incomplete) {
        info_.incomplete = info_.partial = true;
        info_.incomplete_reason = fmt::format("the file ends after {} of its {} chunks", chunks,
                                              h.chunk_count);
    }
    if (auto stop = info_.meta.find("stopped_early"); stop != info_.meta.end() && !info_.incomplete) {
        info_.incomplete = true;
        info_.incomplete_reason = "recording stopped before the end (" + stop->second +
                                  "); later events are missing";
    }
    if (!info_.finished && !info_.incomplete) {
        info_.incomplete = true;
        info_.partial = (h.flags & format::kFileFinished) != 0;
        info_.incomplete_reason =
            info_.partial ? "the end record is missing (the file was cut short)"
                          : "the process did not finish the trace (still running, or it was "
                            "killed, crashed or ended with _exit); times end at its last event";
    }
    // A partial trace ends where its reading ended, whatever its End record said: the process
    // ran on past the cut, but nothing after it is known.
    if (info_.partial) info_.end_ticks = 0;
    for (auto& [s, t] : info_.threads)
        if (t.last_ticks > info_.end_ticks && (!info_.finished || info_.partial))
            info_.end_ticks = t.last_ticks;
    // The chunk clocks are non-decreasing in file order: the latest read is that of the chunk
    // the file cuts, or of the last one before the cut.
    if (info_.partial)
        info_.read_up_to_ticks = last_sync_ticks_ ? last_sync_ticks_ : info_.end_ticks;
    finish_timing();
}

// Records with a length (format 1.1 and later). Fields past the ones known here are ignored,
// so a later minor version may append fields.
void TraceReader::sized_record(uint8_t tag, const uint8_t* p, uint64_t n, uint32_t stream,
                               uint64_t offset) {
    Cursor c{p, p + n};
    switch (Tag(tag)) {
    case Tag::kSite: {
        uint64_t address = c.u64();
        Site s;
        uint8_t kind = c.u8();
        s.line = uint32_t(c.uleb());
        s.file = std::string(c.str());
        s.function = std::string(c.str());
        s.label = std::string(c.str());
        // Line numbers index source files: 0 or absurd values are corruption, not sites.
        if (!c.ok || kind < 1 || kind > 4 || s.line == 0 || s.line > 10000000)
            throw TraceError(info_.path, offset, "malformed site record");
        s.kind = format::SiteKind(kind);
        info_.sites[address] = std::move(s);
        return;
    }
    case Tag::kLineStats: {
        uint64_t in_stream = c.uleb();
        uint64_t site = c.u64();
        LineStats ls;
        ls.hits = c.uleb();
        ls.ticks = c.uleb();
        ls.rss_samples = c.uleb();
        ls.rss_increment = c.sleb();
        ls.rss_last = c.uleb();
        if (c.ok && c.p < c.end) ls.heap_increment = c.sleb(); // added within 1.1
        // 1.10: before, every hit that measured memory read the RSS.
        ls.rss_reads = c.ok && c.p < c.end ? c.uleb() : ls.rss_samples;
        if (c.ok && ls.rss_reads > ls.rss_samples)
            throw TraceError(info_.path, offset, "malformed line statistics record");
        if (!c.ok || in_stream > UINT32_MAX)
            throw TraceError(info_.path, offset, "malformed line statistics record");
        info_.lines[{in_stream ? uint32_t(in_stream) : stream, site}].add(ls);
        return;
    }
    case Tag::kLineCounts: { // 1.3
        if (stream == 0) break; // the writer puts it in thread streams only
        uint64_t site = c.u64();
        LineStats ls;
        ls.hits = c.u64();
        ls.ticks = c.u64();
        if (!c.ok) throw TraceError(info_.path, offset, "malformed line counts record");
        info_.lines[{stream, site}].add(ls);
        return;
    }
    case Tag::kLocation: { // 1.7
        if (stream != 0) break; // the writer puts it in the process stream only
        uint64_t address = c.u64();
        Location l;
        l.function = c.u64();
        l.file = std::string(c.str());
        uint64_t line = c.uleb();
        if (!c.ok || line > 10000000)
            throw TraceError(info_.path, offset, "malformed location record");
        l.line = uint32_t(line);
        if (c.p < c.end) { // 1.8: the functions inlined there
            uint64_t n = c.uleb();
            if (!c.ok || n > 256) throw TraceError(info_.path, offset, "malformed location record");
            for (uint64_t i = 0; i < n; ++i) {
                InlinedCall call;
                call.function = c.u64();
                call.call_file = std::string(c.str());
                uint64_t call_line = c.uleb();
                if (!c.ok || call_line > 10000000 || call.function == 0)
                    throw TraceError(info_.path, offset, "malformed location record");
                call.call_line = uint32_t(call_line);
                l.inlined.push_back(std::move(call));
            }
        }
        info_.locations[address] = std::move(l);
        return;
    }
    case Tag::kUnload: {
        if (stream != 0) break; // the writer puts it in the process stream only
        uint64_t ticks = c.u64();
        uint64_t base = c.u64();
        uint64_t start = c.u64();
        uint64_t end = c.u64();
        if (!c.ok) throw TraceError(info_.path, offset, "malformed unload record");
        for (size_t i = info_.modules.size(); i-- > 0;) {
            Module& m = info_.modules[i];
            if (m.base == base && m.start == start && m.end == end) {
                if (m.unload_ticks == UINT64_MAX) m.unload_ticks = ticks;
                break;
            }
        }
        return;
    }
    default:
        break;
    }
    ++info_.minor_unknown_records;
}

const TraceInfo& TraceReader::read_metadata() {
    read_chunks(nullptr);
    return info_;
}

std::vector<StreamExtent> TraceReader::stream_extents() const {
    std::vector<StreamExtent> out;
    if (packed_) return out;
    const uint64_t cs = info_.header.chunk_size;
    std::unordered_map<uint32_t, size_t> at; // stream -> index in `out`
    uint64_t chunk = 0;
    for (uint64_t off = info_.header.header_size; off + sizeof(ChunkHeader) <= size_;
         off += cs, ++chunk) {
        ChunkHeader ch;
        std::memcpy(&ch, data_ + off, sizeof ch);
        if (ch.magic != format::kChunkMagic || ch.kind != uint16_t(format::StreamKind::kThread))
            continue;
        auto [it, fresh] = at.try_emplace(ch.stream, out.size());
        if (fresh) out.push_back(StreamExtent{ch.stream, 0, chunk});
        out[it->second].bytes += std::min<uint64_t>(ch.used, cs);
    }
    return out;
}

const TraceInfo& TraceReader::read(EventSink& sink) {
    read_chunks(&sink);
    return info_;
}

void TraceReader::finish_timing() {
    const FileHeader& h = info_.header;
    if (h.clock_kind == uint32_t(format::ClockKind::kMonotonic)) {
        info_.ticks_per_second = 1e9;
        return;
    }
    if (info_.ticks_per_second > 0) return; // End record
    if (h.ticks_per_second) {
        info_.ticks_per_second = double(h.ticks_per_second);
        return;
    }
    // A trace without an end: derive the frequency from the clock pairs in the header and
    // in the chunk headers (the wider apart, the better).
    uint64_t dt = last_sync_ticks_ - h.start_ticks, dns = last_sync_ns_ - h.start_mono_ns;
    if (last_sync_ticks_ > h.start_ticks && dns > 0) info_.ticks_per_second = double(dt) * 1e9 / dns;
}

} // namespace prof::reader

namespace prof::reader {

std::string demangle(std::string_view symbol) {
    std::string s(symbol);
    if (s.size() < 2 || s[0] != '_' || s[1] != 'Z') return s;
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(s.c_str(), nullptr, nullptr, &status),
                                               std::free);
    return status == 0 && out ? std::string(out.get()) : s;
}

} // namespace prof::reader
