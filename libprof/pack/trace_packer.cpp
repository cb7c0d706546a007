// profpack: a finished trace rewritten in the packed form (format 2.2).
//
// Two passes. The first reads the trace through TraceReader and replays its allocations and
// releases in time order, as the memory report does, to learn which block every release
// releases. The second rewrites the file chunk by chunk: a release names its block by how far
// back it lies among its own thread's allocations, which the second pass can follow thread by
// thread from pointers alone; the first pass only has to hand over the exceptions, releases of
// a block another thread allocated (or of a pointer reused meanwhile by another thread).
#include "pack/trace_packer.hpp"
#include "reader/address_map.hpp"
#include "reader/cursor.hpp"
#include "reader/time_order.hpp"
#include "reader/trace_reader.hpp"

#include <prof/record_codec.hpp>
#include <prof/trace_framing.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>
#include <vector>
#include <zstd.h>

namespace prof::pack {

using format::ChunkHeader;
using format::FileHeader;
using format::Tag;
using reader::AddressMap;
using reader::Cursor;
using reader::EventSink;
using reader::TimeOrderedReplay;
using reader::TraceError;
using reader::TraceInfo;
using reader::TraceReader;

namespace {

constexpr unsigned kOrdinalBits = 40; // as the reader names blocks

void put_uleb(std::vector<uint8_t>& b, uint64_t v) {
    uint8_t bytes[format::kMaxUleb];
    b.insert(b.end(), bytes, format::put_uleb(bytes, v));
}
uint64_t block_name(uint64_t stream, uint64_t ordinal) {
    return (stream << kOrdinalBits) | ordinal;
}

// What both passes know of one thread's allocations in its own order: how many blocks it has
// allocated, how many releases it has made, and which of its own blocks each pointer was last
// handed out for. A release is looked up here first; the first pass corrects the guesses that
// are wrong.
struct OwnBlocks {
    uint64_t blocks = 0;
    uint64_t releases = 0;
    AddressMap<uint64_t> by_ptr; // pointer -> ordinal

    uint64_t allocate(uint64_t ptr) {
        by_ptr.set(ptr, ++blocks);
        return blocks;
    }
    // The ordinal this thread's own bookkeeping gives the block at `ptr` (0: none), forgotten.
    uint64_t release(uint64_t ptr) {
        ++releases;
        uint64_t* found = by_ptr.find(ptr);
        if (!found) return 0;
        uint64_t ordinal = *found;
        by_ptr.erase(found);
        return ordinal;
    }
};

// The releases whose block is not the one OwnBlocks guesses, per stream in the stream's order
// (the order in which the first pass finds them and the second consumes them): a release of a
// block another thread allocated, or of a pointer another thread reused meanwhile. Varints, a
// few bytes each: a program whose threads free each other's blocks has one per release.
class Exceptions {
  public:
    // `release`: the stream's release number (OwnBlocks::releases), increasing per stream;
    // `block`: block_name, 0 for none of the trace's blocks.
    void add(uint32_t stream, uint64_t release, uint64_t block) {
        Stream& st = streams_[stream];
        put(st.bytes, release - st.last_added);
        st.last_added = release;
        put(st.bytes, block >> kOrdinalBits);
        put(st.bytes, block & ((uint64_t(1) << kOrdinalBits) - 1));
    }
    // The block of release `release` of `stream` when it is an exception; called for every
    // release of the stream in order.
    bool take(uint32_t stream, uint64_t release, uint64_t& block) {
        auto it = streams_.find(stream);
        if (it == streams_.end()) return false;
        Stream& st = it->second;
        if (!st.next && st.read < st.bytes.size()) st.next = st.last_taken + get(st);
        if (st.next != release) return false;
        uint64_t s = get(st);
        block = block_name(s, get(st));
        st.last_taken = release;
        st.next = 0;
        return true;
    }

  private:
    struct Stream {
        std::vector<uint8_t> bytes;
        uint64_t last_added = 0, last_taken = 0, next = 0;
        size_t read = 0;
    };
    std::unordered_map<uint32_t, Stream> streams_;
    static void put(std::vector<uint8_t>& b, uint64_t v) { put_uleb(b, v); }
    static uint64_t get(Stream& st) {
        uint64_t v = 0;
        for (unsigned shift = 0; st.read < st.bytes.size(); shift += 7) {
            uint8_t byte = st.bytes[st.read++];
            v |= uint64_t(byte & 0x7f) << shift;
            if (!(byte & 0x80)) break;
        }
        return v;
    }
};

// Pass 1: the releases whose block is not the one OwnBlocks guesses, with the true block
// (block_name, 0 for none of the trace's blocks).
class ReleaseMatcher : public EventSink {
  public:
    Exceptions exceptions;

    void on_function(uint32_t, uint32_t, uint64_t) override {}
    void on_enter(uint32_t, uint32_t, uint64_t) override {}
    void on_enter_address(uint32_t, uint64_t, uint64_t) override {}
    void on_exit(uint32_t, uint64_t) override {}
    void on_scope_run(uint32_t, uint32_t, uint64_t, uint64_t, uint64_t) override {}
    void on_abandon(uint32_t, uint32_t, uint64_t) override {}

    void on_alloc(uint32_t stream, uint64_t ticks, uint64_t ptr, uint64_t, uint32_t,
                  format::AllocKind, uint64_t) override {
        allocated(stream, ticks, ptr);
    }
    void on_free(uint32_t stream, uint64_t ticks, uint64_t ptr, format::FreeKind,
                 uint64_t) override {
        released(stream, ticks, ptr);
    }
    void on_realloc(uint32_t stream, uint64_t ticks, uint64_t old_ptr, uint64_t ptr, uint64_t,
                    uint32_t) override {
        if (old_ptr) released(stream, ticks, old_ptr);
        allocated(stream, ticks, ptr);
    }
    void on_chunk_done(uint64_t sync_ticks) override {
        replay_.chunk_done(sync_ticks, [&](const Event& e) { replayed(e); });
    }
    void finish() {
        replay_.replay(UINT64_MAX, [&](const Event& e) { replayed(e); });
    }

  private:
    struct Event {
        uint64_t ticks, seq, ptr;
        uint64_t block; // allocations: block_name; releases: the stream's release number
        uint64_t guess; // releases: OwnBlocks' block_name (0: none)
        bool allocation;
        uint32_t stream;
    };
    std::unordered_map<uint32_t, OwnBlocks> own_;
    TimeOrderedReplay<Event> replay_; // the memory report's order
    AddressMap<uint64_t> live_;       // pointer -> block_name

    void allocated(uint32_t stream, uint64_t ticks, uint64_t ptr) {
        uint64_t ordinal = own_[stream].allocate(ptr);
        replay_.push(stream, {ticks, 0, ptr, block_name(stream, ordinal), 0, true, stream});
    }
    void released(uint32_t stream, uint64_t ticks, uint64_t ptr) {
        OwnBlocks& own = own_[stream];
        uint64_t ordinal = own.release(ptr);
        replay_.push(stream, {ticks, 0, ptr, own.releases,
                              ordinal ? block_name(stream, ordinal) : 0, false, stream});
    }
    void replayed(const Event& e) {
        if (e.allocation) {
            live_.set(e.ptr, e.block);
            return;
        }
        uint64_t truth = 0;
        if (uint64_t* found = live_.find(e.ptr)) {
            truth = *found;
            live_.erase(found);
        }
        if (truth != e.guess) exceptions.add(e.stream, e.block, truth);
    }
};

struct Output {
    std::vector<uint8_t> b;
    void bytes(const uint8_t* p, size_t n) { b.insert(b.end(), p, p + n); }
    // One record of at most `max` bytes, written by a codec encoder: `encode(p)` returns its end.
    template <size_t max = 64, class Encode>
    void put(Encode encode) {
        uint8_t rec[max];
        bytes(rec, size_t(encode(rec) - rec));
    }
};

class Packer {
  public:
    Packer(const std::string& path, unsigned shift, Exceptions exceptions)
        : path_(path), shift_(shift), exceptions_(std::move(exceptions)) {}

    PackResult result;

    // The records of one thread chunk, rewritten into `out`.
    void thread_chunk(uint32_t stream, const uint8_t* p, const uint8_t* end, uint64_t offset,
                      Output& out) {
        OwnBlocks& own = streams_[stream];
        Cursor c{p, end};
        uint64_t pending = 0; // ticks of memory records' deltas carried to the next timed record
        uint64_t last_ptr = 0;
        // A time delta to the tick, and one in units of 2^shift_ ticks (the rest carried over).
        auto exact = [&](uint64_t dt) {
            uint64_t total = dt + pending;
            pending = 0;
            return total;
        };
        auto rounded = [&](uint64_t dt) {
            uint64_t total = dt + pending;
            uint64_t q = total >> shift_;
            pending = total - (q << shift_);
            return q;
        };
        while (c.p < c.end) {
            const uint8_t* rec = c.p;
            auto tag = Tag(c.u8());
            switch (tag) {
            case Tag::kEnter: {
                uint64_t fn = c.uleb();
                uint64_t dt = c.uleb();
                out.put([&](uint8_t* r) { return format::put_enter(r, fn, exact(dt)); });
                break;
            }
            case Tag::kAbandon: {
                uint64_t count = c.uleb();
                uint64_t dt = c.uleb();
                out.put([&](uint8_t* r) { return format::put_abandon(r, count, exact(dt)); });
                break;
            }
            case Tag::kExit: {
                uint64_t dt = c.uleb();
                out.put([&](uint8_t* r) { return format::put_exit(r, exact(dt)); });
                break;
            }
            case Tag::kThreadEnd: {
                uint64_t dt = c.uleb();
                out.put([&](uint8_t* r) { return format::put_thread_end(r, exact(dt)); });
                break;
            }
            case Tag::kThreadBegin: {
                uint64_t dt = c.uleb();
                uint32_t tid = c.u32();
                std::string_view name = c.str();
                out.put<1 + 2 * format::kMaxUleb + 4 + format::kMaxString>([&](uint8_t* r) {
                    return format::put_thread_begin(r, exact(dt), tid, name.data(), name.size());
                });
                break;
            }
            case Tag::kEnterAddress: {
                uint64_t address = c.u64();
                uint64_t dt = c.uleb();
                out.put(
                    [&](uint8_t* r) { return format::put_enter_address(r, address, exact(dt)); });
                break;
            }
            case Tag::kFunction:
            case Tag::kDropped:
                if (tag == Tag::kFunction)
                    c.u64();
                else
                    c.uleb();
                out.bytes(rec, size_t(c.p - rec));
                break;
            default: {
                uint64_t n = c.uleb();
                if (uint8_t(tag) < uint8_t(Tag::kFirstSized) || !c.ok || !c.has(n))
                    throw TraceError(path_, offset + uint64_t(rec - p),
                                     fmt::format("record 0x{:02x} cannot be packed", uint8_t(tag)));
                Cursor m{c.p, c.p + n};
                c.p += n;
                if (tag == Tag::kMemAligned) {
                    // A record of packed files only: in a trace as written it means nothing
                    // (readers skip it), and copied it would mean something.
                } else if (tag == Tag::kAlloc || tag == Tag::kFree || tag == Tag::kRealloc) {
                    memory(own, stream, tag, m, last_ptr, rounded, exact, out);
                } else if (tag == Tag::kRss || tag == Tag::kScopeRun || tag == Tag::kSample ||
                           tag == Tag::kStackSample || tag == Tag::kOffCpu ||
                           tag == Tag::kCounting) {
                    // Timed by their first field; the rest is kept as it is.
                    uint8_t dt[format::kMaxUleb];
                    size_t dt_len = size_t(format::put_uleb(dt, exact(m.uleb())) - dt);
                    size_t rest = size_t(m.end - m.p);
                    out.put(
                        [&](uint8_t* r) { return format::put_sized_head(r, tag, dt_len + rest); });
                    out.bytes(dt, dt_len);
                    out.bytes(m.p, rest);
                } else {
                    out.bytes(rec, size_t(c.p - rec));
                }
                break;
            }
            }
            if (!c.ok)
                throw TraceError(path_, offset + uint64_t(rec - p),
                                 fmt::format("record 0x{:02x} runs past its chunk", uint8_t(tag)));
        }
    }

  private:
    std::string path_;
    unsigned shift_;
    Exceptions exceptions_;
    std::unordered_map<uint32_t, OwnBlocks> streams_; // pass 2's bookkeeping per stream

    // The block a release in `stream` releases: block_name, 0 for none of the trace's.
    uint64_t released_block(OwnBlocks& own_blocks, uint32_t stream, uint64_t ptr) {
        uint64_t ordinal = own_blocks.release(ptr);
        uint64_t block;
        if (exceptions_.take(stream, own_blocks.releases, block)) return block;
        return ordinal ? block_name(stream, ordinal) : 0;
    }

    template <class Rounded, class Exact>
    void memory(OwnBlocks& own_blocks, uint32_t stream, Tag tag, Cursor& m, uint64_t& last_ptr,
                Rounded& rounded, Exact& exact, Output& out) {
        const uint64_t own_mask = (uint64_t(1) << kOrdinalBits) - 1;
        uint64_t dt = m.uleb();
        // A release, as its record names its block: in another stream (`remote`, by that
        // stream and the block's ordinal there), else by how far back it lies in this one
        // (`back`, to which `extra` is added; 0 for none of the trace's blocks).
        struct Release {
            bool remote;
            uint64_t stream, ordinal, back;
        };
        auto release = [&](uint64_t ptr, uint64_t extra) {
            uint64_t block = released_block(own_blocks, stream, ptr);
            if (block && (block >> kOrdinalBits) != stream) {
                // Timed to the tick: its block's allocation, in another stream, is older, and
                // rounded down it stays older; rounded down too, this release could come first.
                ++result.remote_frees;
                return Release{true, block >> kOrdinalBits, block & own_mask, 0};
            }
            uint64_t back = block   ? own_blocks.blocks - (block & own_mask) + 1 + extra
                            : extra ? 1
                                    : 0;
            return Release{false, 0, 0, back};
        };
        // The alignment of an operator new or delete form (1.4): a MemAligned record first.
        auto aligned = [&](uint64_t alignment) {
            if (alignment)
                out.put([&](uint8_t* r) { return format::put_mem_aligned(r, alignment); });
        };
        if (tag == Tag::kAlloc) {
            last_ptr += uint64_t(m.sleb());
            uint64_t size = m.uleb();
            uint64_t stack = m.uleb();
            uint8_t kind = m.u8();
            uint64_t alignment = m.p < m.end ? m.uleb() : 0;
            if (!m.ok || kind < 1 || kind > 4 || stack > UINT32_MAX) return; // ignored by readers
            own_blocks.allocate(last_ptr);
            aligned(alignment);
            out.put([&](uint8_t* r) {
                return format::put_mem_alloc(r, format::AllocKind(kind), rounded(dt), size, stack);
            });
        } else if (tag == Tag::kFree) {
            last_ptr += uint64_t(m.sleb());
            uint8_t kind = m.u8();
            uint64_t alignment = m.p < m.end ? m.uleb() : 0;
            if (!m.ok || kind < 1 || kind > 3) return;
            aligned(alignment);
            Release rel = release(last_ptr, 0);
            auto free_kind = format::FreeKind(kind);
            out.put([&](uint8_t* r) {
                return rel.remote ? format::put_mem_free_remote(r, free_kind, exact(dt), rel.stream,
                                                                rel.ordinal)
                                  : format::put_mem_free(r, free_kind, rounded(dt), rel.back);
            });
        } else {
            uint64_t old_ptr = last_ptr += uint64_t(m.sleb());
            uint64_t ptr = last_ptr += uint64_t(m.sleb());
            uint64_t size = m.uleb();
            uint64_t stack = m.uleb();
            if (!m.ok || stack > UINT32_MAX) return;
            Release rel = old_ptr ? release(old_ptr, 1) : Release{false, 0, 0, 0};
            out.put([&](uint8_t* r) {
                return rel.remote ? format::put_mem_realloc_remote(r, exact(dt), rel.stream,
                                                                   rel.ordinal, size, stack)
                                  : format::put_mem_realloc(r, rounded(dt), rel.back, size, stack);
            });
            own_blocks.allocate(ptr);
        }
        ++result.memory_records;
    }
};

struct Mapping {
    int fd = -1;
    const uint8_t* data = nullptr;
    uint64_t size = 0;
    ~Mapping() {
        if (data) munmap(const_cast<uint8_t*>(data), size);
        if (fd >= 0) ::close(fd);
    }
};

// The temporary file being written, for the handlers of remove_partial_pack_on_signals().
char g_partial[4096];

// The packed file under a temporary name of its own next to `out` (another profpack may be
// packing the same trace), made durable and renamed over `out` once written. `out` is the file a
// symbolic link there points to, so that packing a link packs what it names.
class PackedFile {
  public:
    // `like`: the input's status. The permissions are kept (the runtime creates traces 0600:
    // they name files and functions of the program), and the owner when root packs a trace
    // in place.
    PackedFile(const std::string& out, const struct stat& like, bool in_place) : out_(out) {
        struct stat st;
        if (lstat(out.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
            char* target = realpath(out.c_str(), nullptr);
            if (target) out_ = target;
            std::free(target);
        }
        tmp_ = out_ + ".packing.XXXXXX";
        fd_ = mkostemp(tmp_.data(), O_CLOEXEC);
        if (fd_ < 0)
            throw std::runtime_error(
                fmt::format("{}: cannot write: {}", out, std::strerror(errno)));
        if (tmp_.size() < sizeof g_partial) std::memcpy(g_partial, tmp_.c_str(), tmp_.size() + 1);
        fchmod(fd_, like.st_mode & 0777);
        if (in_place && geteuid() == 0) {
            // Should it fail, the packed trace is root's, which can still read it.
            [[maybe_unused]] int ignored = fchown(fd_, like.st_uid, like.st_gid);
        }
    }
    ~PackedFile() {
        if (fd_ >= 0) {
            ::close(fd_);
            discard();
        }
    }
    void write(const void* p, size_t n) {
        auto* b = static_cast<const uint8_t*>(p);
        while (n) {
            ssize_t w = ::write(fd_, b, n);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) fail("cannot write");
            b += w, n -= size_t(w), written_ += uint64_t(w);
        }
    }
    void rewrite_header(const FileHeader& h) {
        if (pwrite(fd_, &h, sizeof h, 0) != ssize_t(sizeof h)) fail("cannot write");
    }
    uint64_t commit() {
        // On disk before the rename: a crash of the machine leaves the trace as it was, not
        // an empty file in its place.
        if (fsync(fd_) != 0 && errno != EINVAL) fail("cannot write");
        int closed = ::close(fd_);
        fd_ = -1;
        if (closed != 0) {
            int e = errno;
            discard();
            throw std::runtime_error(fmt::format("{}: cannot write: {}", out_, std::strerror(e)));
        }
        if (::rename(tmp_.c_str(), out_.c_str()) != 0) {
            int e = errno;
            discard();
            throw std::runtime_error(fmt::format("{}: cannot write: {}", out_, std::strerror(e)));
        }
        g_partial[0] = 0;
        return written_;
    }

  private:
    std::string out_, tmp_;
    int fd_ = -1;
    uint64_t written_ = 0;
    void discard() {
        g_partial[0] = 0;
        ::unlink(tmp_.c_str());
    }
    [[noreturn]] void fail(const char* what) {
        throw std::runtime_error(fmt::format("{}: {}: {}", out_, what, std::strerror(errno)));
    }
};

} // namespace

void remove_partial_pack_on_signals() {
    for (int sig : {SIGINT, SIGQUIT, SIGTERM, SIGHUP})
        std::signal(sig, [](int caught) {
            if (g_partial[0]) unlink(g_partial); // async-signal-safe
            std::signal(caught, SIG_DFL);
            std::raise(caught);
        });
}

PackResult pack_trace(const std::string& in, const std::string& out, const PackOptions& options) {
    // Pass 1, which also checks the whole trace: corruption throws here, before any output.
    // Pass 2 must read the same file: another profpack may rename a packed one over `in`.
    struct stat before;
    if (stat(in.c_str(), &before) != 0)
        throw TraceError(in, fmt::format("cannot open: {}", std::strerror(errno)));
    ReleaseMatcher matcher;
    uint64_t ticks_per_second = 0;
    {
        TraceReader reader(in);
        if (reader.info().header.flags & format::kFilePacked)
            throw TraceError(in, "already packed");
        const TraceInfo& info = reader.read(matcher);
        if (info.incomplete)
            throw TraceError(in, "not packed, incomplete: " + info.incomplete_reason +
                                     ". Only finished traces are packed; this one stays as it is");
        ticks_per_second = uint64_t(info.ticks_per_second);
    }
    matcher.finish();

    // Memory record times are kept to the largest power of two of ticks not above 4 us: finer
    // than a memory timeline shows, and about half the bytes of times to the tick (2.0 against
    // 4.1 B per allocator call on a producer/consumer program).
    unsigned shift = 0;
    if (!options.exact_times && ticks_per_second >= 500000)
        shift = unsigned(std::floor(std::log2(double(ticks_per_second) * 4e-6)));

    Mapping map;
    map.fd = ::open(in.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (map.fd < 0 || fstat(map.fd, &st) != 0)
        throw TraceError(in, fmt::format("cannot open: {}", std::strerror(errno)));
    if (st.st_dev != before.st_dev || st.st_ino != before.st_ino || st.st_size != before.st_size ||
        st.st_mtim.tv_sec != before.st_mtim.tv_sec || st.st_mtim.tv_nsec != before.st_mtim.tv_nsec)
        throw TraceError(in, "changed while it was being packed; nothing written");
    map.size = uint64_t(st.st_size);
    void* m = mmap(nullptr, map.size, PROT_READ, MAP_PRIVATE, map.fd, 0);
    if (m == MAP_FAILED) throw TraceError(in, fmt::format("cannot map: {}", std::strerror(errno)));
    map.data = static_cast<const uint8_t*>(m);
    madvise(m, map.size, MADV_SEQUENTIAL);

    FileHeader h;
    std::memcpy(&h, map.data, sizeof h);
    const uint64_t cs = h.chunk_size;
    Packer packer(in, shift, std::move(matcher.exceptions));
    struct stat out_st;
    bool in_place =
        stat(out.c_str(), &out_st) == 0 && out_st.st_dev == st.st_dev && out_st.st_ino == st.st_ino;
    PackedFile file(out, st, in_place);
    file.write(&h, sizeof h); // rewritten at the end

    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    if (!cctx) throw std::runtime_error("cannot create a zstd context");
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, options.level);
    std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx_owner(cctx, ZSTD_freeCCtx);
    std::vector<uint8_t> frame(ZSTD_compressBound(cs));
    Output records;
    uint32_t chunks = 0;
    for (uint64_t off = h.header_size; off + sizeof(ChunkHeader) <= map.size; off += cs) {
        ChunkHeader ch;
        std::memcpy(&ch, map.data + off, sizeof ch);
        if (ch.magic == 0) continue;
        // Pass 1 read these chunks; checked again all the same, as the reader does.
        if (ch.magic != format::kChunkMagic || ch.used > cs - sizeof ch ||
            off + sizeof ch + ch.used > map.size)
            throw TraceError(in, off, "chunk changed since it was read");
        const uint8_t* p = map.data + off + sizeof ch;
        records.b.clear();
        if (ch.kind == uint16_t(format::StreamKind::kThread))
            packer.thread_chunk(ch.stream, p, p + ch.used, off + sizeof ch, records);
        else
            records.bytes(p, ch.used);
        if (records.b.size() > cs - sizeof ch)
            throw TraceError(in, off,
                             fmt::format("chunk grows to {} bytes when packed, more than "
                                         "fit in {}",
                                         records.b.size(), cs - sizeof ch));
        // One zstd stream through the whole file, flushed at the end of every chunk: each
        // chunk's bytes are complete blocks, and the chunks share one history, which packs a
        // few times better than a frame per chunk.
        ZSTD_inBuffer src{records.b.data(), records.b.size(), 0};
        ZSTD_outBuffer dst{frame.data(), frame.size(), 0};
        size_t left;
        do {
            left = ZSTD_compressStream2(cctx, &dst, &src, ZSTD_e_flush);
            if (ZSTD_isError(left))
                throw std::runtime_error(fmt::format("zstd: {}", ZSTD_getErrorName(left)));
            if (left && dst.pos == dst.size) {
                frame.resize(frame.size() * 2);
                dst.dst = frame.data();
                dst.size = frame.size();
            }
        } while (left);
        size_t n = dst.pos;
        format::pack_chunk_header(ch, uint32_t(records.b.size()), uint32_t(n));
        file.write(&ch, sizeof ch);
        file.write(frame.data(), n);
        ++chunks;
        madvise(const_cast<uint8_t*>(map.data) + off, std::min<uint64_t>(cs, map.size - off),
                MADV_DONTNEED);
    }
    format::pack_file_header(h, shift, chunks);
    file.rewrite_header(h);

    PackResult r = packer.result;
    r.bytes_in = map.size;
    r.chunks = chunks;
    r.time_shift = shift;
    r.time_unit_seconds =
        ticks_per_second ? double(uint64_t(1) << shift) / double(ticks_per_second) : 0;
    r.bytes_out = file.commit();
    return r;
}

} // namespace prof::pack
