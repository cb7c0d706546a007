// perf_event_open sampling of another process: see perf_sampler.hpp.
#include "sampling/perf_sampler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <linux/perf_event.h>
#include <poll.h>
#include <set>
#include <sstream>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace prof::sampling {
namespace {

// x86-64 user registers taken with each sample (perf_regs.h: PERF_REG_X86_BP, _SP, _IP), in
// the order the kernel writes them (by register number).
constexpr uint64_t kRegBp = 6, kRegSp = 7, kRegIp = 8;
constexpr uint64_t kRegsMask = (1ull << kRegBp) | (1ull << kRegSp) | (1ull << kRegIp);

// Data pages per CPU buffer: 512 KiB, what perf_event_mlock_kb (516 by default) lets any user
// map per CPU without touching RLIMIT_MEMLOCK; 4 MiB where the limits allow (root), since an
// 8 KiB stack copy per sample fills 512 KiB in 60 samples.
constexpr size_t kDataPages = 128, kLargeDataPages = 1024;

int perf_event_open(perf_event_attr* attr, pid_t pid, int cpu) {
    return int(syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

int read_int_file(const char* path, int fallback) {
    std::ifstream in(path);
    int v;
    return in >> v ? v : fallback;
}

std::vector<int> online_cpus() {
    std::vector<int> cpus;
    std::ifstream in("/sys/devices/system/cpu/online");
    std::string list;
    if (in >> list) {
        size_t pos = 0;
        while (pos < list.size()) {
            size_t comma = list.find(',', pos);
            std::string part = list.substr(pos, comma == std::string::npos ? std::string::npos
                                                                            : comma - pos);
            int a = 0, b = 0;
            if (std::sscanf(part.c_str(), "%d-%d", &a, &b) == 2)
                for (int c = a; c <= b; ++c) cpus.push_back(c);
            else if (std::sscanf(part.c_str(), "%d", &a) == 1)
                cpus.push_back(a);
            if (comma == std::string::npos) break;
            pos = comma + 1;
        }
    }
    if (cpus.empty())
        for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN); ++c) cpus.push_back(int(c));
    return cpus;
}

} // namespace

std::vector<pid_t> threads_of(pid_t pid) {
    std::vector<pid_t> tids;
    DIR* d = opendir(fmt::format("/proc/{}/task", pid).c_str());
    if (!d) return tids;
    while (dirent* e = readdir(d))
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9') tids.push_back(pid_t(std::atoi(e->d_name)));
    closedir(d);
    std::sort(tids.begin(), tids.end());
    return tids;
}

std::string arguments_of(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}

std::string command_line_of(pid_t pid) {
    std::string s = arguments_of(pid);
    std::replace(s.begin(), s.end(), '\0', ' ');
    return s;
}

// The executable mappings of process `pid` now (/proc/PID/maps).
std::vector<Mapping> executable_maps(uint32_t pid) {
    std::vector<Mapping> out;
    std::ifstream maps(fmt::format("/proc/{}/maps", pid));
    std::string line;
    while (std::getline(maps, line)) {
        std::istringstream in(line);
        std::string range, perms, offset, dev, inode, path;
        in >> range >> perms >> offset >> dev >> inode;
        std::getline(in >> std::ws, path);
        size_t dash = range.find('-');
        if (dash == std::string::npos || perms.size() < 3 || perms[2] != 'x') continue;
        Mapping m;
        m.pid = m.tid = pid;
        m.start = std::stoull(range.substr(0, dash), nullptr, 16);
        m.length = std::stoull(range.substr(dash + 1), nullptr, 16) - m.start;
        m.offset = std::stoull(offset, nullptr, 16);
        m.executable = true;
        m.path = path;
        out.push_back(std::move(m));
    }
    return out;
}

std::optional<BlockedRegisters> blocked_registers(uint32_t pid, uint32_t tid) {
    int fd = open(fmt::format("/proc/{}/task/{}/syscall", pid, tid).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return std::nullopt;
    buf[n] = 0;
    if (std::strncmp(buf, "running", 7) == 0) return std::nullopt;
    // "NR ARG1..ARG6 SP PC" in a system call; "-1 SP PC" blocked outside one.
    std::vector<uint64_t> fields;
    for (char* p = buf; *p;) {
        char* end = nullptr;
        uint64_t v = std::strtoull(p, &end, 0);
        if (end == p) break;
        fields.push_back(v);
        p = end;
        while (*p == ' ' || *p == '\n') ++p;
    }
    if (fields.size() < 3) return std::nullopt;
    BlockedRegisters r;
    r.syscall = long(int64_t(fields[0]));
    r.sp = fields[fields.size() - 2];
    r.pc = fields.back();
    if (!r.sp || !r.pc) return std::nullopt;
    return r;
}

struct PerfSampler::Buffer {
    int fd = -1;
    void* base = nullptr;
    size_t size = 0; // of the mapping
    perf_event_mmap_page* page() const { return static_cast<perf_event_mmap_page*>(base); }
    uint8_t* data() const { return static_cast<uint8_t*>(base) + size_t(sysconf(_SC_PAGESIZE)); }
    size_t data_size() const { return size - size_t(sysconf(_SC_PAGESIZE)); }
};

std::string explain_perf_error(int err, pid_t target) {
    int paranoid = read_int_file("/proc/sys/kernel/perf_event_paranoid", 2);
    switch (err) {
    case ESRCH:
        return fmt::format("no process {} (it exited?)", target);
    case ENOSYS:
        return "this kernel has no perf_event_open (CONFIG_PERF_EVENTS is off)";
    case ENOENT:
    case EOPNOTSUPP:
        return "this kernel has no cpu-clock software event";
    case EACCES:
    case EPERM:
        if (paranoid >= 3)
            return fmt::format("kernel.perf_event_paranoid is {}: perf events are closed to every "
                               "user but root (sysctl -w kernel.perf_event_paranoid=2 opens them "
                               "to a user's own processes)",
                               paranoid);
        if (geteuid() != 0) {
            struct stat st;
            if (stat(fmt::format("/proc/{}", target).c_str(), &st) == 0 && st.st_uid != geteuid())
                return fmt::format("process {} belongs to another user (uid {}): only root (or "
                                   "CAP_PERFMON) may sample it",
                                   target, st.st_uid);
        }
        return fmt::format("the kernel refused perf_event_open ({}) although "
                           "kernel.perf_event_paranoid is {}: a seccomp filter (a container's "
                           "default profile) or a security module blocks it",
                           std::strerror(err), paranoid);
    case EMFILE:
    case ENFILE:
        return "too many open files for one event per thread and CPU (raise ulimit -n)";
    default:
        return fmt::format("perf_event_open failed: {}", std::strerror(err));
    }
}

PerfSampler::~PerfSampler() {
    for (auto& b : buffers_)
        if (b->base) munmap(b->base, b->size);
    for (int fd : fds_) close(fd);
}

bool PerfSampler::open_on(pid_t tid, bool launch, std::string& error) {
    std::vector<int> cpus = online_cpus();
    if (buffers_.empty())
        for (size_t i = 0; i < cpus.size(); ++i) buffers_.push_back(std::make_unique<Buffer>());
    for (size_t i = 0; i < cpus.size(); ++i) {
        perf_event_attr a{};
        a.size = sizeof a;
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_CPU_CLOCK;
        a.sample_period = period_ns_;
        a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD |
                        PERF_SAMPLE_CALLCHAIN;
        if (stack_bytes_) {
            a.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
            a.sample_regs_user = kRegsMask;
            a.sample_stack_user = stack_bytes_;
        }
        a.disabled = 1;
        a.inherit = 1;
        // Samples taken in the kernel (a system call) keep the user stack and registers, so their
        // time goes to the code that called in; perf_event_paranoid 2 allows that to root only,
        // and a user's events then count user time alone.
        a.exclude_kernel = kernel_ ? 0 : 1;
        a.exclude_hv = 1;
        a.exclude_callchain_kernel = 1;
        a.mmap = 1;
        a.mmap2 = 1;
        a.comm = 1;
        a.comm_exec = 1;
        a.task = 1;
        a.sample_id_all = 1;
        a.use_clockid = 1;
        a.clockid = CLOCK_MONOTONIC;
        a.enable_on_exec = launch ? 1 : 0;
        a.watermark = 1;
        a.wakeup_watermark = uint32_t(kDataPages * size_t(sysconf(_SC_PAGESIZE)) / 4);
        a.build_id = 1;
        a.context_switch = idle_ ? 1 : 0;
        int fd = perf_event_open(&a, tid, cpus[i]);
        if (fd < 0 && (errno == EACCES || errno == EPERM) && kernel_) {
            kernel_ = false;
            a.exclude_kernel = 1;
            fd = perf_event_open(&a, tid, cpus[i]);
        }
        if (fd < 0 && errno == EINVAL) { // kernels before 5.12: no build ids in MMAP2 records
            a.build_id = 0;
            fd = perf_event_open(&a, tid, cpus[i]);
        }
        if (fd < 0) {
            if (errno == ESRCH && !launch) continue; // the thread ended meanwhile
            last_errno_ = errno;
            error = explain_perf_error(errno, tid);
            return false;
        }
        fds_.push_back(fd);
        Buffer& b = *buffers_[i];
        if (b.fd < 0) {
            size_t page = size_t(sysconf(_SC_PAGESIZE));
            b.size = (kLargeDataPages + 1) * page;
            b.base = mmap(nullptr, b.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (b.base == MAP_FAILED) {
                b.size = (kDataPages + 1) * page;
                b.base = mmap(nullptr, b.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            }
            if (b.base == MAP_FAILED) {
                b.base = nullptr;
                error = fmt::format("cannot map the sample buffer: {} (perf_event_mlock_kb and "
                                    "ulimit -l limit it)",
                                    std::strerror(errno));
                return false;
            }
            b.fd = fd;
        } else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, b.fd) != 0) {
            error = fmt::format("cannot share the sample buffer: {}", std::strerror(errno));
            return false;
        }
        if (switch_stacks_ && !open_switch_event(a, tid, cpus[i], b.fd)) switch_stacks_ = false;
    }
    return true;
}

// The software context-switch event, sampled at every switch out of the thread: the kernel
// takes it in the scheduler, so it needs events in the kernel (root, or paranoid <= 1), and
// its user registers, stack copy and call chain are those the thread left user space with.
// Its records go to the cpu-clock event's buffer; a period of 1 tells its samples apart (a
// cpu-clock period is at least 50 us). False when the kernel refuses it.
bool PerfSampler::open_switch_event(const perf_event_attr& clock, pid_t tid, int cpu,
                                    int buffer_fd) {
    perf_event_attr a = clock;
    a.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
    a.sample_period = 1;
    a.exclude_kernel = 0;
    // The side records (mappings, names, tasks, switches) come once, from the clock event.
    a.mmap = a.mmap2 = a.comm = a.comm_exec = a.task = a.context_switch = a.build_id = 0;
    a.watermark = 0;
    a.wakeup_events = 0;
    int fd = perf_event_open(&a, tid, cpu);
    if (fd < 0) return false;
    if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, buffer_fd) != 0) {
        close(fd);
        return false;
    }
    fds_.push_back(fd);
    return true;
}

namespace {
bool is_refusal(int err) {
    return err == EACCES || err == EPERM || err == ENOSYS || err == ENOENT || err == EOPNOTSUPP;
}
} // namespace

std::unique_ptr<PerfSampler> PerfSampler::launch(pid_t child, const SamplerOptions& o,
                                                 std::string& error, bool* refused) {
    std::unique_ptr<PerfSampler> s(new PerfSampler);
    s->period_ns_ = uint64_t(1e9 / std::max(o.hz, 1.0));
    s->stack_bytes_ = o.stack_bytes & ~7u;
    s->idle_ = s->switch_stacks_ = o.idle;
    if (!s->open_on(child, true, error)) {
        if (refused) *refused = is_refusal(s->last_errno_);
        return nullptr;
    }
    s->switch_stacks_ &= s->kernel_;
    return s;
}

std::unique_ptr<PerfSampler> PerfSampler::attach(pid_t pid, const SamplerOptions& o,
                                                 std::vector<pid_t>& threads, std::string& error,
                                                 bool* refused) {
    std::unique_ptr<PerfSampler> s(new PerfSampler);
    s->period_ns_ = uint64_t(1e9 / std::max(o.hz, 1.0));
    s->stack_bytes_ = o.stack_bytes & ~7u;
    s->idle_ = s->switch_stacks_ = o.idle;
    // Threads created between the listing and their creator's event are not inherited: list
    // again until no new one appears.
    std::set<pid_t> opened;
    for (int round = 0; round < 100; ++round) {
        bool fresh = false;
        for (pid_t tid : threads_of(pid)) {
            if (!opened.insert(tid).second) continue;
            fresh = true;
            if (!s->open_on(tid, false, error)) {
                if (refused) *refused = is_refusal(s->last_errno_);
                return nullptr;
            }
        }
        if (!fresh) break;
    }
    if (opened.empty()) {
        error = explain_perf_error(ESRCH, pid);
        return nullptr;
    }
    threads.assign(opened.begin(), opened.end());
    s->switch_stacks_ &= s->kernel_;
    for (int fd : s->fds_) ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    return s;
}

void PerfSampler::disable() {
    for (int fd : fds_) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
}

bool PerfSampler::wait(int timeout_ms) {
    std::vector<pollfd> p;
    for (auto& b : buffers_)
        if (b->fd >= 0) p.push_back(pollfd{b->fd, POLLIN, 0});
    return poll(p.data(), p.size(), timeout_ms) >= 0;
}

void PerfSampler::drain(RecordSink& sink) {
    for (auto& b : buffers_)
        if (b->base) read_buffer(*b, sink);
}

void PerfSampler::read_buffer(Buffer& b, RecordSink& sink) {
    perf_event_mmap_page* meta = b.page();
    uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    RingStats stats{sample_bytes_, samples_};
    uint64_t tail = parse_ring(b.data(), b.data_size(), meta->data_tail, head,
                               RingLayout{stack_bytes_ != 0, idle_}, scratch_, stats, sink);
    sample_bytes_ = stats.sample_bytes;
    samples_ = stats.samples;
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

uint64_t parse_ring(const uint8_t* data, size_t size, uint64_t tail, uint64_t head,
                    const RingLayout& layout, std::vector<uint8_t>& scratch, RingStats& stats,
                    RecordSink& sink) {
    while (tail + sizeof(perf_event_header) <= head) {
        perf_event_header h;
        size_t at = size_t(tail % size);
        // A record may wrap around the end of the buffer: copy it out whole.
        auto copy = [&](void* out, size_t offset, size_t n) {
            size_t from = (at + offset) % size;
            size_t first = std::min(n, size - from);
            std::memcpy(out, data + from, first);
            if (first < n) std::memcpy(static_cast<uint8_t*>(out) + first, data, n - first);
        };
        copy(&h, 0, sizeof h);
        if (h.size < sizeof h || tail + h.size > head) break;
        const uint8_t* rec;
        if (at + h.size <= size) {
            rec = data + at;
        } else {
            scratch.resize(h.size);
            copy(scratch.data(), 0, h.size);
            rec = scratch.data();
        }
        const uint8_t* p = rec + sizeof h;
        const uint8_t* end = rec + h.size;
        auto u64 = [&](uint64_t& v) {
            if (end - p < 8) return false;
            std::memcpy(&v, p, 8);
            p += 8;
            return true;
        };
        auto u32pair = [&](uint32_t& a, uint32_t& c) {
            if (end - p < 8) return false;
            std::memcpy(&a, p, 4);
            std::memcpy(&c, p + 4, 4);
            p += 8;
            return true;
        };
        // The sample_id trailer of the other records: pid, tid, time (PERF_SAMPLE_TID | TIME).
        auto trailer_time = [&]() {
            uint64_t t = 0;
            if (h.size >= sizeof h + 16) std::memcpy(&t, end - 8, 8);
            return t;
        };
        switch (h.type) {
        case PERF_RECORD_SAMPLE: {
            Sample s;
            uint64_t nr = 0;
            if (!u32pair(s.pid, s.tid) || !u64(s.time_ns) || !u64(s.period_ns) || !u64(nr) ||
                uint64_t(end - p) / 8 < nr)
                break;
            // The chain: context markers (PERF_CONTEXT_USER, ...) are above -4096.
            const uint64_t* chain = reinterpret_cast<const uint64_t*>(p);
            p += nr * 8;
            thread_local std::vector<uint64_t> user;
            user.clear();
            for (uint64_t i = 0; i < nr; ++i) {
                uint64_t v;
                std::memcpy(&v, chain + i, 8);
                if (v < uint64_t(-4095)) user.push_back(v);
            }
            s.chain = user.data();
            s.chain_size = uint32_t(user.size());
            if (layout.stack) {
                uint64_t abi = 0;
                if (u64(abi) && abi != 0) {
                    s.regs = u64(s.bp) && u64(s.sp) && u64(s.ip);
                }
                uint64_t size = 0;
                if (u64(size) && size && uint64_t(end - p) >= size + 8) {
                    const uint8_t* stack = p;
                    p += size;
                    uint64_t dyn = 0;
                    u64(dyn);
                    s.stack = stack;
                    s.stack_size = std::min(dyn, size);
                }
            }
            s.switch_out = layout.idle && s.period_ns == 1;
            if (!s.switch_out) {
                stats.sample_bytes += h.size;
                ++stats.samples;
            }
            sink.on_sample(s);
            break;
        }
        case PERF_RECORD_MMAP2: {
            Mapping m;
            uint64_t ino = 0, ino_generation = 0;
            uint32_t prot = 0, flags = 0;
            if (!u32pair(m.pid, m.tid) || !u64(m.start) || !u64(m.length) || !u64(m.offset))
                break;
            // maj, min, ino, ino_generation; or, with the build id flag, its size and 20 bytes.
            const uint8_t* ids = p;
            uint64_t skipped;
            if (!u64(skipped) || !u64(ino) || !u64(ino_generation) || !u32pair(prot, flags)) break;
            if (h.misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
                uint8_t n = std::min<uint8_t>(ids[0], 20);
                m.build_id.assign(reinterpret_cast<const char*>(ids + 4), n);
            }
            m.executable = prot & PROT_EXEC;
            size_t room = size_t(end - p) > 16 ? size_t(end - p) - 16 : 0;
            m.path.assign(reinterpret_cast<const char*>(p), strnlen(reinterpret_cast<const char*>(p), room));
            m.time_ns = trailer_time();
            sink.on_mapping(m);
            break;
        }
        case PERF_RECORD_COMM: {
            CommEvent c;
            if (!u32pair(c.pid, c.tid)) break;
            size_t room = size_t(end - p) > 16 ? size_t(end - p) - 16 : 0;
            c.name.assign(reinterpret_cast<const char*>(p), strnlen(reinterpret_cast<const char*>(p), room));
            c.exec = h.misc & PERF_RECORD_MISC_COMM_EXEC;
            c.time_ns = trailer_time();
            sink.on_comm(c);
            break;
        }
        case PERF_RECORD_FORK:
        case PERF_RECORD_EXIT: {
            TaskEvent t;
            t.exit = h.type == PERF_RECORD_EXIT;
            if (!u32pair(t.pid, t.ppid) || !u32pair(t.tid, t.ptid) || !u64(t.time_ns)) break;
            sink.on_task(t);
            break;
        }
        case PERF_RECORD_SWITCH: {
            SwitchEvent e;
            if (!u32pair(e.pid, e.tid) || !u64(e.time_ns)) break;
            e.out = h.misc & PERF_RECORD_MISC_SWITCH_OUT;
            e.preempted = h.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT;
            sink.on_switch(e);
            break;
        }
        case PERF_RECORD_LOST: {
            uint64_t id = 0, lost = 0;
            if (u64(id) && u64(lost)) sink.on_lost(lost);
            break;
        }
        default:
            break;
        }
        tail += h.size;
    }
    return tail;
}

} // namespace prof::sampling
