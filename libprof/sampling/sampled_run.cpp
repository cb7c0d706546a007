// The traces of a sampled run: see sampled_run.hpp.
#include "sampling/sampled_run.hpp"

#include "reader/dwarf_lines.hpp"
#include "reader/elf_file.hpp"
#include "reader/elf_symbols.hpp"
#include "reader/trace_reader.hpp"
#include "sampling/stack_unwinder.hpp"

#include <prof/record_codec.hpp>
#include <prof/trace_format.hpp>
#include <prof/trace_framing.hpp>
#include <prof/version.h>

#include <fmt/format.h>

#include <cstdlib>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <linux/capability.h>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>

namespace prof::sampling {
namespace {

namespace fmt_ = prof::format;

// The smallest chunk the format allows (it holds any process record): profrun keeps one per
// thread stream in memory.
constexpr uint32_t kChunkSize = fmt_::kMinChunkSize;
constexpr uint32_t kMaxFrames = 1024; // the format's bound on a Stack record
constexpr const char* kVdsoName = "linux-vdso.so.1";
constexpr uint64_t kInlinedIds = uint64_t(1) << 63;

uint64_t now_ns(clockid_t c) {
    timespec ts;
    clock_gettime(c, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

std::string host_name() {
    char buf[256] = {};
    gethostname(buf, sizeof buf - 1);
    return buf;
}

std::string basename_of(const std::string& p) {
    size_t s = p.rfind('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

// Where a file's mapping puts its addresses (runtime address - address in the file).
bool load_base_of(const std::string& path, uint64_t start, uint64_t offset, uint64_t& base) {
    std::optional<uint64_t> b = reader::ElfFile(path).load_base(start, offset);
    if (b) base = *b;
    return b.has_value();
}

// The GNU build-id note of an ELF file (raw bytes; empty when none), from its PT_NOTE
// segments: the file is mapped and only its headers and notes are touched, while the program
// runs (the symbol tables wait for the end).
std::string build_id_of(const std::string& path) {
    return reader::ElfFile(path).build_id_in_segments();
}

// ---- writing a trace file ----------------------------------------------------------------

// One stream's current chunk: its records, and the place in the file it was given when opened
// (chunks of a stream get places in increasing order, as the format requires).
struct Stream {
    uint32_t id = 0, tid = 0;
    uint32_t seq = 0;
    int64_t place = -1;
    std::vector<uint8_t> chunk; // allocated with the first record; released when it ends
    uint32_t used = 0;
    uint64_t base = 0, last = 0; // base_ticks of the chunk; time of the last timed record
    uint64_t sync = 0;           // sync_ticks of the chunk: the time it was opened
    bool ended = false;
    // Stacks already written in this stream: their addresses -> id.
    std::unordered_map<std::string, uint32_t> stacks;
    // --idle: the stack of the last CPU sample, the one taken at the last switch out, and when
    // the thread left the CPU (0: it is on it).
    uint32_t last_stack = 0, switch_stack = 0;
    uint64_t off_since = 0;
    bool preempted = false; // it left the CPU runnable: the stretch is waiting for a CPU
    // The stack read from /proc while the thread was off CPU, and the clock before and after.
    uint32_t snapshot_stack = 0;
    uint64_t snapshot_from = 0, snapshot_to = 0;
};

class TraceFile {
  public:
    explicit TraceFile(std::string path) : path_(std::move(path)) {}
    ~TraceFile() {
        if (fd_ >= 0) close(fd_);
    }
    const std::string& path() const { return path_; }

    bool create(uint32_t pid, uint32_t ppid, uint64_t start_ns, std::string& error) {
        fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd_ < 0) {
            error = fmt::format("cannot write {}: {}", path_, std::strerror(errno));
            return false;
        }
        fmt_::start_file_header(header_, kChunkSize, fmt_::ClockKind::kMonotonic, pid, ppid);
        header_.ticks_per_second = 1000000000ull;
        header_.start_ticks = header_.start_mono_ns = start_ns;
        header_.start_real_ns = now_ns(CLOCK_REALTIME) - (now_ns(CLOCK_MONOTONIC) - start_ns);
        process_.id = 0;
        write_header();
        return true;
    }

    Stream& process() { return process_; }
    Stream* thread(uint32_t tid) {
        auto it = threads_.find(tid);
        return it == threads_.end() ? nullptr : it->second.get();
    }
    Stream& new_thread(uint32_t tid, uint64_t ticks, const std::string& name) {
        auto s = std::make_unique<Stream>();
        s->id = ++thread_count_;
        s->tid = tid;
        s->base = s->last = ticks;
        Stream& r = *s;
        threads_[tid] = std::move(s);
        uint8_t rec[64 + 16];
        put(r, rec, fmt_::put_thread_begin(rec, 0, tid, name.data(), std::min<size_t>(name.size(), 15)));
        return r;
    }
    // A timed record's delta from the stream's last one (never negative).
    static uint64_t delta(Stream& s, uint64_t ticks) {
        uint64_t t = std::max(ticks, s.last);
        uint64_t d = t - s.last;
        s.last = t;
        return d;
    }
    // Appends a record (encoded at [rec, end)) to the stream, in a new chunk when it does not fit.
    void put(Stream& s, const uint8_t* rec, const uint8_t* end) {
        size_t n = size_t(end - rec);
        if (s.chunk.size() < kChunkSize) s.chunk.resize(kChunkSize);
        if (s.place < 0 || s.used + sizeof(fmt_::ChunkHeader) + n > kChunkSize) {
            if (s.place >= 0) {
                flush(s);
                ++s.seq;
            }
            s.place = next_place_++;
            s.used = 0;
            s.base = s.last; // the first delta of a chunk counts from the previous record
            s.sync = s.last;
        }
        std::memcpy(s.chunk.data() + sizeof(fmt_::ChunkHeader) + s.used, rec, n);
        s.used += uint32_t(n);
    }
    // Writes the stream's current chunk at its place, as it is now.
    void flush(Stream& s) {
        if (s.place < 0 || fd_ < 0 || s.chunk.empty()) return;
        fmt_::ChunkHeader h;
        fmt_::fill_chunk_header(h, s.id ? fmt_::StreamKind::kThread : fmt_::StreamKind::kProcess,
                                s.id, s.seq, s.used, s.tid, s.base, s.sync, s.sync);
        h.magic = fmt_::kChunkMagic;
        std::memcpy(s.chunk.data(), &h, sizeof h);
        off_t at = off_t(fmt_::chunk_offset(kChunkSize, uint64_t(s.place)));
        if (pwrite(fd_, s.chunk.data(), sizeof h + s.used, at) < 0) failed_ = errno;
    }
    void flush_all() {
        flush(process_);
        for (auto& [tid, s] : threads_) flush(*s);
    }
    void finish(uint64_t end_ns) {
        uint8_t rec[64];
        put(process_, rec, fmt_::put_end(rec, end_ns, end_ns, 1000000000ull, thread_count_, 0));
        flush_all();
        fmt_::finish_file_header(header_, end_ns, end_ns, uint32_t(next_place_));
        // The file's size covers every chunk, also the last one's unused tail.
        if (ftruncate(fd_, off_t(fmt_::chunk_offset(kChunkSize, uint64_t(next_place_)))) != 0)
            failed_ = errno;
        write_header();
    }
    std::map<uint32_t, std::unique_ptr<Stream>>& threads() { return threads_; }
    int failed() const { return failed_; }

  private:
    void write_header() {
        if (pwrite(fd_, &header_, sizeof header_, 0) != ssize_t(sizeof header_)) failed_ = errno;
    }
    std::string path_;
    int fd_ = -1;
    int failed_ = 0;
    fmt_::FileHeader header_{};
    Stream process_;
    std::map<uint32_t, std::unique_ptr<Stream>> threads_;
    uint32_t thread_count_ = 0;
    int64_t next_place_ = 0;
};

} // namespace

// ---- the run --------------------------------------------------------------------------------

namespace {

struct ModuleMap {
    struct Entry {
        uint64_t start, end, base;
        std::string path;     // as mapped; "linux-vdso.so.1" for the vDSO
        std::string build_id; // raw bytes
        bool file = true;     // a file on disk (not the vDSO)
    };
    std::vector<Entry> entries; // the mappings present, by start
    const Entry* at(uint64_t address) const {
        auto it = std::upper_bound(entries.begin(), entries.end(), address,
                                   [](uint64_t a, const Entry& e) { return a < e.start; });
        if (it == entries.begin()) return nullptr;
        --it;
        return address < it->end ? &*it : nullptr;
    }
    // Adds a mapping; the ones it overlaps are gone (returned for their Unload records).
    std::vector<Entry> add(Entry e) {
        std::vector<Entry> gone;
        std::erase_if(entries, [&](const Entry& o) {
            bool overlap = o.start < e.end && e.start < o.end;
            if (overlap) gone.push_back(o);
            return overlap;
        });
        entries.insert(std::upper_bound(entries.begin(), entries.end(), e.start,
                                        [](uint64_t a, const Entry& x) { return a < x.start; }),
                       std::move(e));
        return gone;
    }
};

// One process of the run and its trace.
struct Process {
    uint32_t pid = 0;
    std::unique_ptr<TraceFile> file;
    ModuleMap modules;
    // Every module ever recorded (for symbols): the index of a sampled address's module.
    std::vector<ModuleMap::Entry> recorded;
    std::unordered_map<uint64_t, size_t> address_module; // sampled address -> recorded index
    std::map<uint32_t, std::string> names;               // tid -> thread name
    bool ended = false;
    uint64_t approximate_off_cpu_ns = 0; // --idle: at a thread's last CPU sample's stack
};

// A record of the target, owned, waiting to be put in time order.
struct Pending {
    enum Kind { kSample, kMapping, kTask, kComm, kSwitch } kind;
    uint64_t time = 0;
    uint64_t order = 0; // arrival, to keep equal times stable
    Sample sample;
    std::vector<uint64_t> chain;
    std::vector<uint8_t> stack;
    Mapping mapping;
    TaskEvent task;
    CommEvent comm;
    SwitchEvent switched;
};

} // namespace

struct SampledRun::Impl {
    RunDescription d;
    uint64_t start_ns = 0;
    std::map<uint32_t, std::unique_ptr<Process>> processes;
    std::vector<std::string> trace_paths;
    std::vector<Pending> pending;
    uint64_t arrivals = 0;
    RunSummary summary;
    StackUnwinder unwinder;
    std::unordered_set<std::string> warned;
    uint64_t last_flush = 0;

    Pending& arrive(int kind, uint64_t time);

    Process* process(uint32_t pid) {
        auto it = processes.find(pid);
        return it == processes.end() ? nullptr : it->second.get();
    }

    void warn_once(const std::string& key, const std::string& line) {
        if (warned.insert(key).second) summary.warnings.push_back(line);
    }

    void write_meta(Process& p, const char* key, const std::string& value) {
        std::vector<uint8_t> rec(32 + key_len(key) + value.size());
        uint8_t* end = fmt_::put_meta(rec.data(), key, key_len(key), value.data(),
                                      std::min<size_t>(value.size(), fmt_::kMaxString));
        p.file->put(p.file->process(), rec.data(), end);
    }
    static size_t key_len(const char* k) { return std::strlen(k); }

    Process* open_process(uint32_t pid, uint32_t ppid, const std::string& path, std::string& error) {
        auto p = std::make_unique<Process>();
        p->pid = pid;
        p->file = std::make_unique<TraceFile>(path);
        if (!p->file->create(pid, ppid, start_ns, error)) return nullptr;
        Process& r = *p;
        processes[pid] = std::move(p);
        trace_paths.push_back(path);
        write_meta(r, "exe", d.exe);
        write_meta(r, "cmdline", d.cmdline);
        if (!d.argv.empty()) write_meta(r, "argv", d.argv);
        write_meta(r, "cwd", d.cwd);
        write_meta(r, "pid", std::to_string(pid));
        write_meta(r, "ppid", std::to_string(ppid));
        write_meta(r, "host", host_name());
        if (!d.run_id.empty()) write_meta(r, "run", d.run_id);
        // A program profrun started has profrun's environment: an MPI launcher's rank is its
        // own (a process attached to has its own environment, not read).
        if (d.how == "launch")
            for (const auto& names : format::kRankVariables) {
                const char* rank = std::getenv(names[0]);
                if (!rank || !*rank || std::strspn(rank, "0123456789") != std::strlen(rank))
                    continue;
                write_meta(r, "mpi_rank", rank);
                write_meta(r, "mpi_rank_from", names[0]);
                const char* size = std::getenv(names[1]);
                if (size && *size && std::strspn(size, "0123456789") == std::strlen(size))
                    write_meta(r, "mpi_size", size);
                break;
            }
        write_meta(r, "runtime", std::string("libprof ") + PROF_VERSION_STRING);
        write_meta(r, "sampler", d.sampler);
        write_meta(r, "sampled", d.how);
        write_meta(r, "sample_hz", fmt::format("{:.0f}", d.hz));
        write_meta(r, "sample_clock", d.sampler == "ptrace" ? "wall (weighed by schedstat CPU time)" : "cpu-clock");
        write_meta(r, "sample_stack_bytes", std::to_string(d.stack_bytes));
        write_meta(r, "sample_kernel", d.kernel ? "1" : "0");
        if (!d.idle.empty()) write_meta(r, "sample_idle", d.idle);
        return &r;
    }

    void add_module(Process& p, ModuleMap::Entry e, uint64_t ticks) {
        for (const ModuleMap::Entry& gone : p.modules.add(e)) {
            uint8_t rec[64];
            p.file->put(p.file->process(), rec,
                        fmt_::put_unload(rec, ticks, gone.base, gone.start, gone.end));
        }
        std::vector<uint8_t> rec(64 + e.path.size() + e.build_id.size());
        fmt_::ModuleFields m{ticks, e.base, e.start, e.end,
                             e.path.data(), e.path.size(),
                             reinterpret_cast<const uint8_t*>(e.build_id.data()), std::min<size_t>(e.build_id.size(), 64)};
        p.file->put(p.file->process(), rec.data(), fmt_::put_module(rec.data(), m));
        p.recorded.push_back(std::move(e));
    }

    void mapping(Process& p, const Mapping& m) {
        if (!m.executable || m.path.empty()) return;
        ModuleMap::Entry e{m.start, m.start + m.length, 0, m.path, m.build_id, true};
        if (m.path == "[vdso]") {
            e.path = kVdsoName;
            e.base = m.start;
            e.file = false;
        } else if (m.path[0] == '[' || m.path.rfind("//anon", 0) == 0 ||
                   m.path.rfind("/memfd:", 0) == 0) {
            return; // generated code: its addresses stay unnamed
        } else {
            std::string path = m.path;
            bool deleted = false;
            if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0) {
                path.resize(path.size() - 10);
                deleted = true;
            }
            e.path = path;
            if (!load_base_of(path, m.start, m.offset, e.base)) e.base = m.start - m.offset;
            std::string disk_id = build_id_of(path);
            if (e.build_id.empty()) e.build_id = disk_id;
            if (deleted || (!m.build_id.empty() && !disk_id.empty() && disk_id != m.build_id)) {
                e.file = false;
                warn_once(path, fmt::format("{} was replaced or removed after process {} loaded "
                                            "it: its code is shown by address",
                                            path, p.pid));
            }
        }
        add_module(p, std::move(e), m.time_ns);
    }

    Stream& stream(Process& p, uint32_t tid, uint64_t time) {
        if (Stream* st = p.file->thread(tid)) return *st;
        auto name = p.names.find(tid);
        return p.file->new_thread(tid, time, name == p.names.end() ? std::string() : name->second);
    }

    void sample(Process& p, const Pending& r) {
        const Sample& s = r.sample;
        Stream* st = &stream(p, s.tid, s.time_ns);
        if (st->ended) return;
        uint32_t id = stack_of(p, *st, r);
        if (s.switch_out) { // where the thread is leaving the CPU: for the stretch off it
            st->switch_stack = id;
            return;
        }
        st->last_stack = id;
        uint8_t rec[fmt_::kMaxStackSampleRecord];
        uint64_t dt = TraceFile::delta(*st, s.time_ns);
        p.file->put(*st, rec, fmt_::put_stack_sample(rec, dt, id, s.period_ns));
        ++summary.samples;
    }

    // --idle: a switch out opens a stretch off CPU, the next switch in closes it; its time goes
    // to the stack of the switch out, or where the kernel gives none, of the last CPU sample.
    void switched(Process& p, const SwitchEvent& e) {
        Stream& st = stream(p, e.tid, e.time_ns);
        if (st.ended) return;
        if (e.out) {
            if (!st.off_since) {
                st.off_since = e.time_ns;
                st.preempted = e.preempted;
            }
            return;
        }
        close_off_cpu(p, st, e.time_ns);
    }
    void close_off_cpu(Process& p, Stream& st, uint64_t time) {
        if (!st.off_since) return;
        uint64_t ns = time > st.off_since ? time - st.off_since : 0;
        // A snapshot read wholly within the stretch is where the thread waited in it.
        bool snapshot = st.snapshot_stack && st.snapshot_from > st.off_since &&
                        st.snapshot_to < time;
        uint32_t id = st.switch_stack ? st.switch_stack
                      : snapshot      ? st.snapshot_stack
                                      : st.last_stack;
        if (!st.switch_stack && !snapshot && id) {
            summary.approximate_off_cpu_ns += ns;
            p.approximate_off_cpu_ns += ns;
        }
        st.off_since = 0;
        st.switch_stack = 0;
        // A snapshot read after this stretch ended is of a later one: the records reach us later
        // than /proc does, so the thread may be waiting again already. It is kept for that
        // stretch (which otherwise would never be read: one snapshot per stretch).
        if (snapshot || st.snapshot_from <= time) st.snapshot_stack = 0;
        if (!ns) return;
        if (!id) {
            summary.unplaced_off_cpu_ns += ns;
            return;
        }
        uint8_t rec[fmt_::kMaxOffCpuRecord];
        p.file->put(
            st, rec,
            fmt_::put_off_cpu(rec, TraceFile::delta(st, time), id, ns, st.preempted ? 1 : 0));
        ++summary.off_cpu_stretches;
        summary.off_cpu_ns += ns;
    }

    // --idle without stacks of the switches: the threads off CPU now (a stretch open after the
    // records read so far), their stacks read from /proc and unwound, once per stretch.
    void snapshot_waiting(Process& p) {
        for (auto& [tid, st] : p.file->threads()) {
            if (st->ended || !st->off_since || st->switch_stack ||
                st->snapshot_from > st->off_since)
                continue;
            uint64_t from = now_ns(CLOCK_MONOTONIC);
            Pending r;
            r.sample.pid = p.pid;
            r.sample.tid = tid;
            std::optional<BlockedRegisters> blocked = blocked_registers(p.pid, tid);
            if (!blocked) continue;
            r.sample.sp = blocked->sp;
            r.sample.ip = blocked->pc;
            r.stack.resize(d.stack_bytes ? d.stack_bytes : 8192);
            iovec local{r.stack.data(), r.stack.size()}, remote{reinterpret_cast<void*>(r.sample.sp), r.stack.size()};
            ssize_t n = process_vm_readv(pid_t(p.pid), &local, 1, &remote, 1, 0);
            if (n <= 0) continue;
            r.stack.resize(size_t(n));
            r.sample.regs = true;
            // Still blocked after the copy: the registers and the stack are of one wait.
            std::optional<BlockedRegisters> still = blocked_registers(p.pid, tid);
            if (!still || still->sp != r.sample.sp || still->pc != r.sample.ip) continue;
            st->snapshot_stack = stack_of(p, *st, r);
            st->snapshot_from = from;
            st->snapshot_to = now_ns(CLOCK_MONOTONIC);
            ++summary.snapshots;
        }
    }

    // The id of the sample's call stack in the stream, its Stack record written the first time.
    uint32_t stack_of(Process& p, Stream& stream, const Pending& r) {
        const Sample& s = r.sample;
        Stream* st = &stream;
        // The stack: unwound from the copy where its tables allow, the kernel's frame-pointer
        // chain where the copy ends.
        thread_local std::vector<uint64_t> pcs;
        pcs.clear();
        UnwindResult u = UnwindResult::kNone;
        if (!r.stack.empty() && s.regs) {
            u = unwinder.unwind(
                s.ip, s.sp, s.bp, r.stack.data(), r.stack.size(),
                [&](uint64_t address) -> const UnwindModule* {
                    const ModuleMap::Entry* e = p.modules.at(address);
                    if (e && !e->file && e->path == kVdsoName) return unwinder.vdso(e->start);
                    if (!e || !e->file) return nullptr;
                    return unwinder.module(e->path, e->base);
                },
                pcs, kMaxFrames);
        }
        if (u == UnwindResult::kComplete) {
            ++summary.dwarf_stacks;
        } else if (u == UnwindResult::kPartial && pcs.size() > 1) {
            // Splice: the chain's frames from the first return address the walk did not reach.
            ++summary.dwarf_stacks;
            ++summary.spliced_stacks;
            uint64_t last = pcs.back();
            size_t from = r.chain.size();
            for (size_t i = 1; i < r.chain.size(); ++i)
                if (r.chain[i] == last) from = i + 1;
            for (size_t i = from; i < r.chain.size() && pcs.size() < kMaxFrames; ++i)
                pcs.push_back(r.chain[i]);
        } else {
            ++summary.fp_stacks;
            pcs.assign(r.chain.begin(), r.chain.begin() + std::min<size_t>(r.chain.size(), kMaxFrames));
        }
        // A chain that ran into garbage (a frame pointer used as a register) ends there: no user
        // code lies in the first page or above the user address space.
        for (size_t i = 1; i < pcs.size(); ++i)
            if (pcs[i] < 4096 || pcs[i] >= (uint64_t(1) << 47)) {
                pcs.resize(i);
                break;
            }
        if (pcs.empty()) pcs.push_back(s.ip);
        // Return addresses name the call: one byte back, inside the call instruction.
        for (size_t i = 1; i < pcs.size(); ++i) pcs[i] -= 1;
        std::string key(reinterpret_cast<const char*>(pcs.data()), pcs.size() * 8);
        auto [it, fresh] = st->stacks.try_emplace(key, uint32_t(st->stacks.size() + 1));
        if (fresh) {
            std::vector<uint8_t> rec(16 + pcs.size() * 8 + 3 * fmt_::kMaxUleb);
            uint8_t* end = fmt_::put_stack(rec.data(), it->second,
                                           reinterpret_cast<const uintptr_t*>(pcs.data()),
                                           uint32_t(pcs.size()));
            p.file->put(*st, rec.data(), end);
            for (uint64_t a : pcs) {
                auto [m, first] = p.address_module.try_emplace(a, SIZE_MAX);
                if (!first) continue;
                const ModuleMap::Entry* e = p.modules.at(a);
                if (e)
                    for (size_t i = p.recorded.size(); i-- > 0;)
                        if (p.recorded[i].start == e->start && p.recorded[i].path == e->path) {
                            m->second = i;
                            if (p.recorded[i].file)
                                ahead_batch.push_back({{p.recorded[i].path, p.recorded[i].build_id},
                                                       a - p.recorded[i].base});
                            break;
                        }
            }
        }
        return it->second;
    }

    void task(const TaskEvent& t) {
        if (!t.exit && t.pid != t.ppid) { // a new process
            Process* parent = process(t.ppid);
            if (!parent || process(t.pid) || !d.subprocesses) return;
            std::string error;
            // In a run's directory, named as the runtime names its traces there.
            std::string path = d.run_dir.empty()
                                   ? fmt::format("{}.{}", d.output, t.pid)
                                   : fmt::format("{}/{}.{}.trace", d.run_dir, d.run_name, t.pid);
            Process* child = open_process(t.pid, t.ppid, path, error);
            if (!child) {
                warn_once("child" + std::to_string(t.pid), error);
                return;
            }
            for (const ModuleMap::Entry& e : parent->modules.entries) add_module(*child, e, t.time_ns);
            child->names = parent->names;
            child->names[t.tid] = parent->names[t.ptid];
            return;
        }
        Process* p = process(t.pid);
        if (!p) return;
        if (t.exit) {
            Stream* st = p->file->thread(t.tid);
            if (st && !st->ended) {
                st->off_since = 0; // the switch out of an exiting thread is no time off CPU
                uint8_t rec[16];
                p->file->put(*st, rec, fmt_::put_thread_end(rec, TraceFile::delta(*st, t.time_ns)));
                st->ended = true;
                // Nothing follows ThreadEnd: its chunk goes to the file and out of memory.
                p->file->flush(*st);
                std::vector<uint8_t>().swap(st->chunk);
                decltype(st->stacks)().swap(st->stacks);
            }
            if (t.tid == t.pid) p->ended = true;
        } else if (auto name = p->names.find(t.ptid); name != p->names.end()) {
            p->names[t.tid] = name->second;
        }
    }

    void comm(const CommEvent& c) {
        Process* p = process(c.pid);
        if (!p) return;
        p->names[c.tid] = c.name;
        if (!c.exec) return;
        // A new program image: the old mappings are gone (their Unload records say when).
        for (const ModuleMap::Entry& e : p->modules.entries) {
            uint8_t rec[64];
            p->file->put(p->file->process(), rec, fmt_::put_unload(rec, c.time_ns, e.base, e.start, e.end));
        }
        p->modules.entries.clear();
        // The program it runs now (a later Meta value replaces an earlier one), if /proc still
        // has the process.
        char exe[4096];
        ssize_t n = readlink(fmt::format("/proc/{}/exe", c.pid).c_str(), exe, sizeof exe - 1);
        if (n > 0) write_meta(*p, "exe", std::string(exe, size_t(n)));
        std::ifstream in(fmt::format("/proc/{}/cmdline", c.pid), std::ios::binary);
        std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
        if (!cmdline.empty()) write_meta(*p, "argv", cmdline);
        std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
        if (!cmdline.empty()) write_meta(*p, "cmdline", cmdline);
    }

    // ---- symbols ----------------------------------------------------------------------------
    struct Names {
        std::unique_ptr<reader::DwarfLines> dwarf;
        std::unique_ptr<reader::ElfSymbols> elf;
        std::unordered_map<std::string, uint64_t> by_symbol; // function symbol -> start
        bool other_file = false; // the file read was not the one mapped (its build-id differs)
    };
    // Ids of inlined functions without an out-of-line copy, by (object, symbol): from
    // kInlinedIds on, where no user address lies.
    std::map<std::pair<std::string, std::string>, uint64_t> inlined_ids;
    // By (path, build-id as mapped): a path rebuilt between two processes of the run is two
    // binaries, and each process's addresses are named from its own.
    using Binary = std::pair<std::string, std::string>;
    std::map<Binary, Names> names_of;

    // The symbols of a binary, read from its path. If the file there now is another build
    // (`other_file`), it is read again when `again` (the end, which has checked the file on
    // disk is the one mapped) and left as it is otherwise.
    Names& names(const Binary& b, bool again = false) {
        Names& n = names_of[b];
        if (!n.elf || (again && n.other_file)) {
            n.elf = std::make_unique<reader::ElfSymbols>(b.first);
            n.dwarf = std::make_unique<reader::DwarfLines>(b.first);
            n.by_symbol.clear();
            std::string mapped;
            for (unsigned char c : b.second) mapped += fmt::format("{:02x}", c);
            n.other_file =
                !mapped.empty() && !n.elf->build_id().empty() && n.elf->build_id() != mapped;
        }
        return n;
    }

    // ---- naming ahead -------------------------------------------------------------------------
    // Naming the sampled addresses is libdw's work: its first look at a unit decodes the line
    // table and indexes the functions (about 80 ms for sqlite3.c's one unit), and each symbol
    // lookup scans the symbol table. Done at the end, the user would wait for it after the
    // program ended (0.13 s of a 1.2 s SQLite run). A worker thread resolves each address
    // while the program runs, when its first stack is seen, and keeps the answer (resolved).
    // It runs as SCHED_IDLE where it may be raised again at the end (may_leave_idle), only on
    // a CPU nobody else wants: a program that keeps every CPU busy finds it out of the way,
    // and the end then resolves the rest. The worker owns
    // names_of and resolved from its start until stop_ahead() has joined it; only
    // write_symbols, after that, touches them otherwise.
    struct Address {
        Binary binary;
        uint64_t vaddr;
    };
    std::vector<Address> ahead_batch; // addresses first seen since the last process()
    std::mutex ahead_mutex;
    std::condition_variable ahead_wake;
    std::vector<Address> ahead_queue;
    bool ahead_stop = false;
    std::thread ahead;
    pid_t ahead_tid = 0; // 0 until the worker has started

    // What the binary says of one address: its function (symbol, entry, the entry's source
    // line), its own source line and the calls inlined there. Kept, since libdwfl's symbol
    // lookup scans the whole symbol table on every call (56 ms for SQLite's 1,000 addresses).
    struct Resolved {
        bool named = false;
        std::string symbol, file, entry_file;
        uint64_t start = 0;
        uint32_t line = 0, entry_line = 0;
        std::vector<reader::DwarfLines::InlinedCall> calls;
    };
    std::map<std::pair<Binary, uint64_t>, Resolved> resolved;

    // Null when the file at the path is another build than the one mapped and `again` is
    // false (the worker): nothing is kept then, and the end decides.
    const Resolved* resolve(const Binary& b, uint64_t vaddr, bool again) {
        auto key = std::make_pair(b, vaddr);
        if (auto it = resolved.find(key); it != resolved.end()) return &it->second;
        Names& n = names(b, again);
        if (n.other_file && !again) return nullptr;
        Resolved& r = resolved[key];
        r.named = n.dwarf->function(vaddr, r.symbol, r.start);
        if (!r.named)
            if (const reader::ElfSymbols::Entry* e = n.elf->find(vaddr)) {
                r.symbol = e->name;
                r.start = e->start;
                r.named = true;
            }
        n.dwarf->lookup(vaddr, r.file, r.line);
        r.calls = n.dwarf->inlined(vaddr);
        if (r.named) n.dwarf->lookup(r.start, r.entry_file, r.entry_line);
        return &r;
    }

    void hand_ahead() {
        if (ahead_batch.empty()) return;
        {
            std::lock_guard<std::mutex> lock(ahead_mutex);
            if (ahead_stop) {
                ahead_batch.clear(); // the end resolves them
                return;
            }
            ahead_queue.insert(ahead_queue.end(), std::make_move_iterator(ahead_batch.begin()),
                               std::make_move_iterator(ahead_batch.end()));
        }
        ahead_batch.clear();
        if (!ahead.joinable()) {
            // Every signal blocked in the worker: profrun's handlers (the signals it passes on
            // to the program) and its signal masks stay the main thread's alone.
            sigset_t all, before;
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &before);
            try {
                ahead = std::thread([this] { run_ahead(); });
            } catch (const std::system_error&) {
                // No thread: the end resolves every address, as it would have.
                std::lock_guard<std::mutex> lock(ahead_mutex);
                ahead_stop = true;
                ahead_queue.clear();
            }
            pthread_sigmask(SIG_SETMASK, &before, nullptr);
        } else {
            ahead_wake.notify_one();
        }
    }

    void run_ahead() {
        {
            // Under the lock, so that stop_ahead() either finds the tid to raise again or
            // comes first and the worker stays a normal thread. A refusal leaves it one too.
            std::lock_guard<std::mutex> lock(ahead_mutex);
            ahead_tid = pid_t(gettid());
            sched_param idle{};
            if (!ahead_stop && may_leave_idle()) sched_setscheduler(0, SCHED_IDLE, &idle);
        }
        std::vector<Address> work;
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(ahead_mutex);
                ahead_wake.wait(lock, [&] { return ahead_stop || !ahead_queue.empty(); });
                if (ahead_stop) return;
                work.swap(ahead_queue);
            }
            for (const Address& a : work) {
                if (__atomic_load_n(&ahead_stop, __ATOMIC_RELAXED)) return;
                try {
                    resolve(a.binary, a.vaddr, false);
                } catch (const std::exception&) {
                    // (Out of memory reading a binary.) The end tries again, and says so.
                    resolved.erase({a.binary, a.vaddr});
                    names_of.erase(a.binary);
                }
            }
            work.clear();
        }
    }

    // Whether a thread made SCHED_IDLE may become a normal one again: the kernel allows it
    // with CAP_SYS_NICE, or when RLIMIT_NICE allows nice 0 (it is 0 by default, and an
    // ordinary user's idle thread then stays idle). Without that the worker stays a normal
    // thread: the end must never wait behind a thread starved by a busy machine.
    static bool may_leave_idle() {
        rlimit nice{};
        if (getrlimit(RLIMIT_NICE, &nice) == 0 && nice.rlim_cur >= 20) return true;
        __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct data[2]{};
        if (syscall(SYS_capget, &header, data) != 0) return false;
        return data[CAP_SYS_NICE / 32].effective & (1u << (CAP_SYS_NICE % 32));
    }

    // The worker stops after the lookup it is in, raised back to a normal priority so that a
    // busy machine cannot hold the end up behind it.
    void stop_ahead() {
        if (!ahead.joinable()) return;
        {
            std::lock_guard<std::mutex> lock(ahead_mutex);
            __atomic_store_n(&ahead_stop, true, __ATOMIC_RELAXED);
            if (ahead_tid) {
                sched_param normal{};
                sched_setscheduler(ahead_tid, SCHED_OTHER, &normal);
            }
        }
        ahead_wake.notify_one();
        ahead.join();
    }

    ~Impl() { stop_ahead(); }

    void write_symbols(Process& p) {
        struct FunctionName {
            std::string name, symbol, file;
            uint32_t line = 0;
        };
        std::map<uint64_t, FunctionName> functions; // entry -> name
        std::map<std::string, std::string> disk_ids; // path -> build-id of the file there now
        Stream& ps = p.file->process();
        for (const auto& [address, index] : p.address_module) {
            uint64_t entry = 0;
            std::string file;
            uint32_t line = 0;
            std::vector<reader::DwarfLines::InlinedCall> calls;
            std::vector<uint64_t> call_ids;
            if (index != SIZE_MAX) {
                const ModuleMap::Entry& m = p.recorded[index];
                std::string symbol;
                uint64_t vaddr = address - m.base, start = 0;
                bool named = false;
                bool same_file = m.file;
                if (same_file && !m.build_id.empty()) {
                    // The file at the path now may not be the one the process mapped.
                    auto [at, fresh] = disk_ids.try_emplace(m.path);
                    if (fresh) at->second = build_id_of(m.path);
                    if (at->second != m.build_id) {
                        same_file = false;
                        warn_once(m.path, fmt::format("{} was replaced or removed after process {} loaded "
                                                      "it (its build-id differs): its code is "
                                                      "shown by object",
                                                      m.path, p.pid));
                    }
                }
                const Resolved* r =
                    same_file ? resolve({m.path, m.build_id}, vaddr, true) : nullptr;
                if (r) {
                    named = r->named;
                    symbol = r->symbol;
                    start = r->start;
                    file = r->file;
                    line = r->line;
                    calls = r->calls;
                }
                if (named) symbol = reader::unversioned(symbol);
                if (named) {
                    entry = m.base + start;
                    if (!functions.count(entry)) {
                        FunctionName f;
                        f.symbol = symbol;
                        f.name = reader::demangle(symbol);
                        f.file = r->entry_file;
                        f.line = r->entry_line;
                        functions.emplace(entry, std::move(f));
                    }
                    // Each function inlined there: its out-of-line copy's entry where the
                    // object has one (the two are one function in the report), else an id of
                    // its own, above every user address.
                    for (const auto& c : calls) {
                        uint64_t id = 0;
                        Names& nm = names({m.path, m.build_id});
                        if (nm.by_symbol.empty() && nm.elf->ok())
                            for (const reader::ElfSymbols::Entry& e : nm.elf->entries()) {
                                if (e.name.ends_with("@plt")) continue; // a stub, not a copy
                                std::string s = reader::unversioned(e.name);
                                nm.by_symbol.emplace(s, e.start);
                            }
                        if (auto it = nm.by_symbol.find(c.symbol); it != nm.by_symbol.end()) {
                            id = m.base + it->second;
                        } else {
                            auto [at, fresh] = inlined_ids.try_emplace(
                                {m.path, c.symbol}, kInlinedIds + inlined_ids.size());
                            id = at->second;
                        }
                        call_ids.push_back(id);
                        if (!functions.count(id)) {
                            FunctionName f;
                            f.symbol = c.symbol;
                            f.name = reader::demangle(c.symbol);
                            if (id >= kInlinedIds) {
                                f.file = c.decl_file;
                                f.line = c.decl_line;
                            } else {
                                nm.dwarf->lookup(id - m.base, f.file, f.line);
                            }
                            functions.emplace(id, std::move(f));
                        }
                    }
                } else {
                    // Code no symbol covers: one function per object, at its last address.
                    entry = m.end - 1;
                    if (!functions.count(entry))
                        functions.emplace(entry, FunctionName{"[" + basename_of(m.path) + "]", "", "", 0});
                }
            }
            file.resize(std::min<size_t>(file.size(), 4096));
            std::vector<fmt_::InlinedCallFields> fields;
            size_t bytes = 64 + file.size();
            for (size_t i = 0; i < call_ids.size() && i < 256; ++i) {
                std::string& cf = calls[i].call_file;
                cf.resize(std::min<size_t>(cf.size(), 4096));
                fields.push_back({call_ids[i], cf.data(), cf.size(), calls[i].call_line});
                bytes += 32 + cf.size();
            }
            std::vector<uint8_t> rec(bytes);
            uint8_t* end = fmt_::put_location(rec.data(), address, entry, file.data(), file.size(),
                                              line, fields.data(), fields.size());
            p.file->put(ps, rec.data(), end);
        }
        for (auto& [entry, f] : functions) {
            f.name.resize(std::min<size_t>(f.name.size(), 16384));
            f.symbol.resize(std::min<size_t>(f.symbol.size(), 16384));
            f.file.resize(std::min<size_t>(f.file.size(), 4096));
            std::vector<uint8_t> rec(64 + f.name.size() + f.symbol.size() + f.file.size());
            uint8_t* end = fmt_::put_symbol(rec.data(), entry, f.name.data(), f.name.size(),
                                            f.symbol.data(), f.symbol.size(), f.file.data(),
                                            f.file.size(), f.line);
            p.file->put(ps, rec.data(), end);
        }
    }
};

SampledRun::SampledRun(RunDescription d) : impl_(std::make_unique<Impl>()) {
    impl_->d = std::move(d);
}
SampledRun::~SampledRun() = default;

bool SampledRun::start(std::string& error) {
    impl_->start_ns = now_ns(CLOCK_MONOTONIC);
    return impl_->open_process(impl_->d.pid, impl_->d.ppid, impl_->d.output, error) != nullptr;
}

void SampledRun::add_existing(uint32_t pid, const std::vector<pid_t>& threads) {
    Process* p = impl_->process(pid);
    if (!p) return;
    uint64_t attached = now_ns(CLOCK_MONOTONIC);
    for (pid_t tid : threads) {
        std::ifstream in(fmt::format("/proc/{}/task/{}/comm", pid, tid));
        std::string name;
        std::getline(in, name);
        p->names[uint32_t(tid)] = name;
        if (impl_->d.idle.empty()) continue;
        // --idle: a thread waiting now is off CPU from the attach on (its stack is read from
        // /proc, the switch out is long past).
        std::ifstream stat(fmt::format("/proc/{}/task/{}/stat", pid, tid));
        std::string line;
        std::getline(stat, line);
        size_t close = line.rfind(')');
        char state = close != std::string::npos && close + 2 < line.size() ? line[close + 2] : 'R';
        if (state == 'S' || state == 'D')
            impl_->stream(*p, uint32_t(tid), attached).off_since = attached;
    }
    uint64_t now = now_ns(CLOCK_MONOTONIC);
    for (Mapping& m : executable_maps(pid)) {
        m.time_ns = now;
        impl_->mapping(*p, m);
    }
}

// Records wait in arrival order until process() puts them in time order.
Pending& SampledRun::Impl::arrive(int kind, uint64_t time) {
    Pending& r = pending.emplace_back();
    r.kind = Pending::Kind(kind);
    r.time = time;
    r.order = arrivals++;
    return r;
}

void SampledRun::on_sample(const Sample& s) {
    Pending& r = impl_->arrive(Pending::kSample, s.time_ns);
    r.sample = s;
    r.chain.assign(s.chain, s.chain + s.chain_size);
    if (s.stack && s.stack_size) r.stack.assign(s.stack, s.stack + s.stack_size);
    r.sample.chain = nullptr;
    r.sample.stack = nullptr;
}
void SampledRun::on_mapping(const Mapping& m) { impl_->arrive(Pending::kMapping, m.time_ns).mapping = m; }
void SampledRun::on_task(const TaskEvent& t) { impl_->arrive(Pending::kTask, t.time_ns).task = t; }
void SampledRun::on_comm(const CommEvent& c) { impl_->arrive(Pending::kComm, c.time_ns).comm = c; }
void SampledRun::on_switch(const SwitchEvent& e) {
    impl_->arrive(Pending::kSwitch, e.time_ns).switched = e;
}
void SampledRun::on_lost(uint64_t samples) { impl_->summary.lost += samples; }

void SampledRun::process() {
    Impl& m = *impl_;
    std::stable_sort(m.pending.begin(), m.pending.end(), [](const Pending& a, const Pending& b) {
        return a.time != b.time ? a.time < b.time : a.order < b.order;
    });
    for (const Pending& r : m.pending) {
        switch (r.kind) {
        case Pending::kSample:
            if (Process* p = m.process(r.sample.pid)) m.sample(*p, r);
            break;
        case Pending::kMapping:
            if (Process* p = m.process(r.mapping.pid)) m.mapping(*p, r.mapping);
            break;
        case Pending::kTask:
            m.task(r.task);
            break;
        case Pending::kComm:
            m.comm(r.comm);
            break;
        case Pending::kSwitch:
            if (Process* p = m.process(r.switched.pid)) m.switched(*p, r.switched);
            break;
        }
    }
    m.pending.clear();
    m.hand_ahead();
    if (!m.d.idle.empty())
        for (auto& [pid, p] : m.processes) m.snapshot_waiting(*p);
    // What is recorded reaches the file about once a second, so that a profrun killed
    // mid-run leaves a trace of what it had.
    uint64_t now = now_ns(CLOCK_MONOTONIC);
    if (now - m.last_flush > 1000000000ull) {
        m.last_flush = now;
        for (auto& [pid, p] : m.processes) p->file->flush_all();
    }
}

RunSummary SampledRun::finish(uint64_t sample_bytes) {
    Impl& m = *impl_;
    process();
    m.stop_ahead();
    uint64_t end = now_ns(CLOCK_MONOTONIC);
    for (auto& [pid, p] : m.processes) {
        if (m.summary.lost)
            m.write_meta(*p, "lost_samples", std::to_string(m.summary.lost));
        if (!m.d.idle.empty())
            m.write_meta(*p, "off_cpu_approximate_ns", std::to_string(p->approximate_off_cpu_ns));
        // Threads still off CPU when sampling ended (an attached process's idle threads).
        for (auto& [tid, s] : p->file->threads())
            if (!s->ended) m.close_off_cpu(*p, *s, std::max(end, s->last));
        m.write_symbols(*p);
        uint64_t last = end;
        for (auto& [tid, s] : p->file->threads()) last = std::max(last, s->last);
        // The trace clock is CLOCK_MONOTONIC: the end's (CLOCK_REALTIME, ticks) pair.
        m.write_meta(*p, "clock_end",
                     fmt::format("{} {}", now_ns(CLOCK_REALTIME) - (now_ns(CLOCK_MONOTONIC) - last),
                                 last));
        p->file->finish(last);
        if (p->file->failed())
            m.summary.warnings.push_back(fmt::format("writing {} failed: {}", p->file->path(),
                                                     std::strerror(p->file->failed())));
        struct stat st;
        if (stat(p->file->path().c_str(), &st) == 0) m.summary.trace_bytes += uint64_t(st.st_blocks) * 512;
    }
    m.summary.traces = m.trace_paths;
    m.summary.sample_bytes = sample_bytes;
    return m.summary;
}

} // namespace prof::sampling
