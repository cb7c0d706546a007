// Chrome Trace Event and speedscope writers: observers of the replay engine (engine/session.hpp).
//
// Chrome: a complete event ("X") is written when an activation closes; viewers sort by time.
// speedscope: evented profiles need their open/close events in time order per thread, and an
// open cannot be written before the activation is known to pass --min-duration. An open is
// therefore written lazily, at the thread's next event once the frame is old enough, with its
// own (earlier) time; since a frame's ancestors are older, and every event written before it
// either closed before it began or belongs to an ancestor, the times stay in order and the
// events balanced. Each thread's events go to a temporary file, joined at the end.
#include "render/timeline.hpp"
#include "render/model.hpp"

#include "analysis/engine/session.hpp"
#include "analysis/model/profile.hpp"
#include "render/report.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace prof::render {
namespace {

std::string micros(uint64_t ns) {
    return fmt::format("{}.{:03}", ns / 1000, ns % 1000);
}

std::string base_name(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

struct FrameInfo {
    std::string name; // JSON-escaped
    std::string file; // JSON-escaped
    uint32_t line = 0;
    std::string kind;
};

struct ThreadOut {
    bool skip = false; // filtered out by --thread
    uint32_t tid = 0;
    uint64_t events = 0;
    uint64_t first = UINT64_MAX, last = 0; // times written
    std::FILE* tmp = nullptr;              // speedscope
};

// An open activation, as the writers keep it.
struct OpenFrame {
    uint32_t function = 0; // of the trace being read
    uint64_t enter_ns = 0;
    uint64_t count = 1;   // activations of a scope run
    bool emitted = false; // speedscope: its open event is written
};

class TimelineBase : public ActivationObserver {
  public:
    explicit TimelineBase(const TimelineOptions& o) : o_(o) {}
    ~TimelineBase() override {
        for (ThreadOut& t : out_)
            if (t.tmp) std::fclose(t.tmp);
    }
    void attach(Session& s) { session_ = &s; }
    std::vector<FrameInfo> frames;
    std::vector<ThreadOut> out_;
    TimelineResult result;

  protected:
    const TimelineOptions o_;
    Session* session_ = nullptr;
    std::vector<std::vector<OpenFrame>> stacks_; // by thread

    const reader::TraceInfo& current() const {
        return session_->trace_info(session_->current_trace());
    }
    uint32_t frame(uint32_t function) {
        size_t trace = session_->current_trace();
        if (cache_.size() <= trace) cache_.resize(trace + 1);
        std::vector<uint32_t>& v = cache_[trace];
        if (v.size() <= function) v.resize(function + 1, UINT32_MAX);
        if (v[function] == UINT32_MAX) {
            v[function] = uint32_t(frames.size());
            Function f = resolver_.describe(current(), session_->function_address(trace, function),
                                            session_->function_module(trace, function));
            frames.push_back(FrameInfo{text::json_escape(text::printable(f.name)),
                                       text::json_escape(f.file), f.line, f.kind});
        }
        return v[function];
    }
    ThreadOut& out(size_t thread) { return out_[thread]; }
    void thread_started(size_t thread, const analysis::ThreadFilter&) override {
        if (out_.size() <= thread) out_.resize(thread + 1);
        if (stacks_.size() <= thread) stacks_.resize(thread + 1);
        ThreadOut& to = out_[thread];
        to.tid = session_->thread(thread).tid;
        to.skip = o_.tid && to.tid != o_.tid;
    }
    void opened(size_t thread, uint32_t function, uint64_t enter_ns, uint64_t count) override {
        stacks_[thread].push_back(OpenFrame{function, enter_ns, count, false});
        if (!out_[thread].skip) opened_frame(thread);
    }
    void closed(size_t thread, uint64_t exit_ns) override {
        std::vector<OpenFrame>& stack = stacks_[thread];
        OpenFrame f = stack.back();
        stack.pop_back();
        if (!out_[thread].skip) closed_frame(thread, f, std::max(exit_ns, f.enter_ns));
    }
    virtual void opened_frame(size_t /*thread*/) {}
    virtual void closed_frame(size_t thread, const OpenFrame& f, uint64_t exit_ns) = 0;

    // Whether a closed activation [e, x] is kept.
    bool kept(uint64_t e, uint64_t x) const {
        return x - e >= o_.min_duration_ns && x >= o_.from_ns && e <= o_.to_ns;
    }
    uint64_t clip(uint64_t ns) const { return std::clamp(ns, o_.from_ns, o_.to_ns); }

  private:
    FunctionResolver resolver_;
    std::vector<std::vector<uint32_t>> cache_; // [trace][function] -> frames index
};

class ChromeWriter : public TimelineBase {
  public:
    ChromeWriter(std::FILE* f, const TimelineOptions& o) : TimelineBase(o), f_(f) {}
    void write(const std::string& s) {
        std::fputs(s.c_str(), f_);
        result.bytes += s.size();
    }
    bool first = true;
    // Per trace: where its start is on the file's timeline. Several processes (a run) share
    // one timeline, from the earliest start, by the wall-clock time each trace started at
    // (read with its trace clock, as a pair); one trace starts at 0.
    std::vector<uint64_t> origin_ns;
    uint64_t shifted(size_t trace, uint64_t ns) const {
        return trace < origin_ns.size() ? ns + origin_ns[trace] : ns;
    }

  private:
    std::FILE* f_;
    void closed_frame(size_t thread, const OpenFrame& fr, uint64_t x) override {
        ThreadOut& to = out(thread);
        if (!kept(fr.enter_ns, x)) return;
        uint64_t e = clip(fr.enter_ns), c = clip(x);
        const FrameInfo& fi = frames[frame(fr.function)];
        // A scope run: its activations' summed time from the first one's start.
        // A frame a forked child inherited open: the parent's call, continued here.
        std::string args = fr.count > 1 ? fmt::format(",\"args\":{{\"activations\":{}}}", fr.count)
                           : fr.count == 0 ? std::string(",\"args\":{\"inherited\":true}")
                                           : "";
        write(fmt::format("{}\n{{\"ph\":\"X\",\"cat\":\"{}\",\"name\":\"{}\",\"ts\":{},\"dur\":{},"
                          "\"pid\":{},\"tid\":{}{}}}",
                          first ? "" : ",", fi.kind, fi.name,
                          micros(shifted(session_->current_trace(), e)), micros(c - e),
                          current().header.pid,
                          to.tid ? to.tid : session_->thread_list()[thread].stream, args));
        first = false;
        ++to.events;
        ++result.events;
    }
};

class SpeedscopeWriter : public TimelineBase {
  public:
    explicit SpeedscopeWriter(const TimelineOptions& o) : TimelineBase(o) {}

  private:
    void emit(size_t thread, char type, const OpenFrame& fr, uint64_t at) {
        ThreadOut& to = out(thread);
        if (!to.tmp) {
            to.tmp = std::tmpfile();
            if (!to.tmp)
                throw std::runtime_error("cannot create a temporary file for speedscope events");
        }
        std::string s = fmt::format("{}{{\"type\":\"{}\",\"frame\":{},\"at\":{}}}",
                                    to.events ? ",\n" : "\n", type, frame(fr.function), at);
        if (std::fputs(s.c_str(), to.tmp) < 0)
            throw std::runtime_error("cannot write a temporary file for speedscope events");
        to.first = std::min(to.first, at);
        to.last = std::max(to.last, at);
        ++to.events;
        if (type == 'O') ++result.events;
    }
    // Writes the opens of frames now known to pass the filters, outermost first.
    void flush(size_t thread, uint64_t now) {
        for (OpenFrame& f : stacks_[thread]) {
            if (f.emitted) continue;
            if (now - f.enter_ns < o_.min_duration_ns || now < o_.from_ns || f.enter_ns > o_.to_ns)
                return; // deeper frames are younger: they fail too
            emit(thread, 'O', f, clip(f.enter_ns));
            f.emitted = true;
        }
    }
    void opened_frame(size_t thread) override { flush(thread, stacks_[thread].back().enter_ns); }
    void closed_frame(size_t thread, const OpenFrame& f, uint64_t x) override {
        if (!f.emitted && !kept(f.enter_ns, x)) return;
        flush(thread, x);
        if (!f.emitted) emit(thread, 'O', f, clip(f.enter_ns));
        emit(thread, 'C', f, clip(x));
    }
};

// Heap and RSS of one trace as Chrome counter events, merged in time order and cut to the
// window: the value a counter had when the window opens is repeated at its start.
void write_memory_counters(ChromeWriter& w, const MemoryReport& m, uint32_t pid, size_t trace,
                           const TimelineOptions& o) {
    struct Point {
        uint64_t ns;
        int series; // 0 heap, 1 RSS
        double bytes;
    };
    std::vector<Point> points;
    const std::vector<std::pair<double, double>>* series[] = {&m.heap_timeline, &m.rss_timeline};
    for (int k = 0; k < 2; ++k) {
        bool carried = false; // in.back() is the value at the window's start
        std::vector<Point> in;
        for (const auto& [t, v] : *series[k]) { // each timeline is in time order
            uint64_t ns = t > 0 ? uint64_t(std::llround(t * 1e9)) : 0;
            if (ns < o.from_ns) {
                in.assign(1, Point{o.from_ns, k, v});
                carried = true;
                continue;
            }
            if (ns > o.to_ns) break;
            if (carried && ns == o.from_ns) in.pop_back(); // a real sample at the start
            carried = false;
            in.push_back(Point{ns, k, v});
        }
        points.insert(points.end(), in.begin(), in.end());
    }
    std::stable_sort(points.begin(), points.end(),
                     [](const Point& a, const Point& b) { return a.ns < b.ns; });
    for (const Point& p : points) {
        w.write(fmt::format("{}\n{{\"ph\":\"C\",\"cat\":\"memory\",\"name\":\"{}\",\"ts\":{},"
                            "\"pid\":{},\"tid\":{},\"args\":{{\"bytes\":{:.0f}}}}}",
                            w.first ? "" : ",", p.series ? "RSS" : "heap",
                            micros(w.shifted(trace, p.ns)), pid, pid, p.bytes));
        w.first = false;
        ++w.result.counters;
    }
}

// The wall-clock time a trace started at, from its header alone (0: unknown).
uint64_t start_real_ns(const std::string& path) {
    format::FileHeader h{};
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    bool ok = pread(fd, &h, sizeof h, 0) == ssize_t(sizeof h) && format::header_magic_ok(h);
    ::close(fd);
    return ok ? h.start_real_ns : 0;
}

} // namespace

TimelineResult write_chrome_trace(std::FILE* f, const std::vector<std::string>& traces,
                                  const TimelineOptions& o) {
    ChromeWriter w(f, o);
    SessionOptions so;
    so.compensate = o.compensate;
    so.memory = o.memory_counters;
    so.progress = o.progress;
    so.observer = &w;
    so.time = o.time;
    Session session(so);
    w.attach(session);
    // One timeline for several traces: each from its wall-clock start (in every trace's header),
    // when all have one.
    if (traces.size() > 1) {
        std::vector<uint64_t> starts;
        for (const std::string& path : traces) starts.push_back(start_real_ns(path));
        uint64_t earliest = *std::min_element(starts.begin(), starts.end());
        if (earliest > 0)
            for (uint64_t start : starts) w.origin_ns.push_back(start - earliest);
    }
    w.write("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
    std::vector<bool> counted; // traces with memory counters
    for (const std::string& path : traces) {
        // The heap and RSS timelines of this trace (process) alone: what it added.
        size_t heap_from = session.memory().heap_timeline.size();
        size_t rss_from = session.memory().rss_timeline.size();
        const reader::TraceInfo& info = session.add_trace(path);
        counted.push_back(false);
        if (!o.memory_counters || !info.memory_records) continue;
        const MemoryReport& all = session.memory();
        MemoryReport m;
        m.heap_timeline.assign(all.heap_timeline.begin() + ptrdiff_t(heap_from), all.heap_timeline.end());
        m.rss_timeline.assign(all.rss_timeline.begin() + ptrdiff_t(rss_from), all.rss_timeline.end());
        uint64_t before = w.result.counters;
        write_memory_counters(w, m, info.header.pid, counted.size() - 1, o);
        counted.back() = w.result.counters > before;
    }
    std::vector<ThreadFilter> threads = session.thread_list();
    // Names of processes and threads that have events.
    const std::vector<reader::TraceInfo>& infos = session.traces();
    std::vector<bool> named(infos.size(), false);
    for (size_t index = 0; index < threads.size(); ++index) {
        const ThreadFilter* tp = &threads[index];
        const ThreadOut& to = w.out_[index];
        if (!to.events) continue;
        ++w.result.threads;
        const reader::TraceInfo& info = infos[tp->trace];
        uint32_t pid = info.header.pid;
        if (!named[tp->trace]) {
            named[tp->trace] = true;
            auto exe = info.meta.find("exe");
            std::string name =
                exe == info.meta.end() ? std::string("process") : base_name(exe->second);
            w.write(fmt::format("{}\n{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,"
                                "\"args\":{{\"name\":\"{}\"}}}}",
                                w.first ? "" : ",", pid, text::json_escape(text::printable(name))));
            w.first = false;
        }
        std::string tname;
        if (auto it = info.threads.find(tp->stream); it != info.threads.end())
            tname = it->second.name;
        uint32_t tid = to.tid ? to.tid : tp->stream;
        if (tname.empty()) tname = tid == pid ? "main" : fmt::format("thread {}", tid);
        w.write(fmt::format(",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},"
                            "\"args\":{{\"name\":\"{}\"}}}}",
                            pid, tid, text::json_escape(text::printable(tname))));
    }
    w.result.sampled_time = session.time_basis().sampled_traces > 0;
    w.result.partial = partial_warnings(infos);
    // Processes with counters but no complete events (a program run under profrun --mem alone).
    for (size_t i = 0; i < infos.size(); ++i) {
        if (named[i] || !counted[i]) continue;
        const reader::TraceInfo& info = infos[i];
        auto exe = info.meta.find("exe");
        std::string name = exe == info.meta.end() ? std::string("process") : base_name(exe->second);
        w.write(fmt::format("{}\n{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,"
                            "\"args\":{{\"name\":\"{}\"}}}}",
                            w.first ? "" : ",", info.header.pid,
                            text::json_escape(text::printable(name))));
        w.first = false;
    }
    w.write(fmt::format(
        "\n],\"otherData\":{{\"producer\":\"libprof profreport\",\"clock\":\"ns since "
        "the trace started (several traces: since the earliest start, each placed by its "
        "wall-clock start; --from and --to per "
        "trace){}\",\"from_ns\":{},\"to_ns\":{},\"min_duration_ns\":{}}}}}\n",
        o.compensate ? ", on each thread's clock less the profiler's measured cost" : "", o.from_ns,
        o.to_ns == UINT64_MAX ? std::string("null") : fmt::format("{}", o.to_ns),
        o.min_duration_ns));
    return w.result;
}

namespace {

// The name of a thread's profile: its name, pid and tid, and the trace's file when there are
// several.
std::string profile_name(const std::vector<reader::TraceInfo>& infos, const ThreadFilter& t,
                         uint32_t tid) {
    const reader::TraceInfo& info = infos[t.trace];
    std::string tname;
    if (auto it = info.threads.find(t.stream); it != info.threads.end()) tname = it->second.name;
    return fmt::format("{} (pid {}, tid {}){}{}", tname.empty() ? "thread" : tname, info.header.pid,
                       tid, infos.size() > 1 ? " " : "",
                       infos.size() > 1 ? base_name(info.path) : "");
}

// Sampled times have no per-call timestamps to put on a timeline: each thread becomes a sampled
// profile of its call tree instead, one sample per call path weighted by the path's own time,
// so that speedscope's totals are the table's. Returns the threads written; `samples_written`
// counts the samples.
uint64_t write_sampled_profiles(const Session& session, uint32_t tid,
                                const std::function<void(const std::string&)>& write,
                                uint64_t& samples_written) {
    const std::vector<reader::TraceInfo>& infos = session.traces();
    std::map<std::string, size_t> frame_of; // the frame's JSON -> its index
    std::vector<const std::string*> frames;
    uint64_t written = 0;
    std::vector<ThreadFilter> threads = session.thread_list();
    for (size_t index = 0; index < threads.size(); ++index) {
        const ThreadFilter& t = threads[index];
        uint32_t thread_tid = session.thread(index).tid;
        if (!thread_tid) thread_tid = t.stream;
        if (tid && thread_tid != tid) continue;
        CallTreeOptions co;
        co.thread = t;
        CallTree tree = session.call_tree(co);
        std::vector<size_t> frame(tree.functions.size(), SIZE_MAX);
        std::string samples, weights;
        uint64_t total = 0;
        for (size_t n = 1; n < tree.nodes.size(); ++n) {
            const CallTreeNode& node = tree.nodes[n];
            if (!node.self_ns || node.function == kNoFunction) continue;
            std::string stack;
            for (size_t p : tree.path(n)) {
                size_t fn = tree.nodes[p].function;
                if (fn == kNoFunction) continue;
                if (frame[fn] == SIZE_MAX) {
                    const Function& f = tree.functions[fn];
                    std::string json = fmt::format("{{\"name\":\"{}\"",
                                                   text::json_escape(text::printable(f.name)));
                    if (!f.file.empty())
                        json += fmt::format(",\"file\":\"{}\",\"line\":{}",
                                            text::json_escape(text::printable(f.file)), f.line);
                    json += "}";
                    auto [it, fresh] = frame_of.emplace(std::move(json), frames.size());
                    if (fresh) frames.push_back(&it->first);
                    frame[fn] = it->second;
                }
                stack += fmt::format("{}{}", stack.empty() ? "" : ",", frame[fn]);
            }
            samples += fmt::format("{}[{}]", samples.empty() ? "" : ",", stack);
            weights += fmt::format("{}{}", weights.empty() ? "" : ",", node.self_ns);
            total += node.self_ns;
            ++samples_written;
        }
        if (samples.empty()) continue;
        write(fmt::format("{}\n{{\"type\":\"sampled\",\"name\":\"{}\",\"unit\":\"nanoseconds\","
                          "\"startValue\":0,\"endValue\":{},\"samples\":[{}],\"weights\":[{}]}}",
                          written ? "," : "",
                          text::json_escape(text::printable(profile_name(infos, t, thread_tid))),
                          total, samples, weights));
        ++written;
    }
    write("\n],\"shared\":{\"frames\":[");
    for (size_t i = 0; i < frames.size(); ++i)
        write(fmt::format("{}\n{}", i ? "," : "", *frames[i]));
    write("\n]}}\n");
    return written;
}

} // namespace

// The speedscope file's head, named after the first trace's program.
std::string speedscope_head(const std::vector<reader::TraceInfo>& infos) {
    std::string title = "libprof";
    if (!infos.empty()) {
        const reader::TraceInfo& info = infos.front();
        auto exe = info.meta.find("exe");
        if (exe != info.meta.end()) title = base_name(exe->second);
    }
    return fmt::format(
        "{{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
        "\"exporter\":\"libprof profreport\",\"name\":\"{}\",\"activeProfileIndex\":0,"
        "\"profiles\":[",
        text::json_escape(text::printable(title)));
}

TimelineResult write_speedscope(std::FILE* f, const std::vector<std::string>& traces,
                                const TimelineOptions& o) {
    TimelineResult result;
    auto write_to = [f](TimelineResult& r) {
        return [f, &r](const std::string& s) {
            std::fputs(s.c_str(), f);
            r.bytes += s.size();
        };
    };
    // Timed by samples, and no time window asked for: the call trees, with the table's times.
    // Whether the samples are enough is known once the traces are read: traces with a sampling
    // rate are read without the timeline first, and only if too few samples time them again
    // with it (short traces: a trace long enough to be large has its samples).
    bool window = o.from_ns || o.to_ns != UINT64_MAX || o.min_duration_ns;
    bool sampling = false;
    for (const std::string& path : traces) {
        reader::TraceInfo info = reader::TraceReader(path).read_metadata();
        sampling = sampling || info.meta.count("sample_hz");
    }
    if (!window && sampling && o.time != TimeSource::kTraced) {
        SessionOptions so;
        so.compensate = o.compensate;
        so.memory = false;
        so.progress = o.progress;
        so.time = o.time;
        so.clock = o.clock;
        Session session(so);
        session.add_traces(traces);
        if (session.time_basis().sampled_traces) {
            write_to(result)(speedscope_head(session.traces()));
            result.sampled_time = result.sampled_profiles = true;
            result.partial = partial_warnings(session.traces());
            result.threads =
                write_sampled_profiles(session, o.tid, write_to(result), result.events);
            return result;
        }
    }
    if (o.clock == Clock::kCpu)
        throw std::runtime_error("--clock cpu: an evented timeline (a time window, or a trace "
                                 "without samples enough) is on the hooks' wall clock; leave "
                                 "out --clock cpu");
    SpeedscopeWriter w(o);
    SessionOptions so;
    so.compensate = o.compensate;
    so.memory = false;
    so.progress = o.progress;
    so.observer = &w;
    so.time = TimeSource::kTraced; // the timeline's clock
    Session session(so);
    w.attach(session);
    for (const std::string& path : traces) session.add_trace(path);
    std::vector<ThreadFilter> threads = session.thread_list();
    const std::vector<reader::TraceInfo>& infos = session.traces();
    TimelineResult& r = w.result;
    r.partial = partial_warnings(infos);
    auto write = write_to(r);
    write(speedscope_head(infos));
    bool first = true;
    for (size_t index = 0; index < threads.size(); ++index) {
        const ThreadFilter* tp = &threads[index];
        ThreadOut& to = w.out_[index];
        if (!to.events || !to.tmp) continue;
        ++r.threads;
        std::string name = profile_name(infos, *tp, to.tid ? to.tid : tp->stream);
        write(fmt::format("{}\n{{\"type\":\"evented\",\"name\":\"{}\",\"unit\":\"nanoseconds\","
                          "\"startValue\":{},\"endValue\":{},\"events\":[",
                          first ? "" : ",", text::json_escape(text::printable(name)), to.first,
                          to.last));
        first = false;
        std::rewind(to.tmp);
        char buf[1 << 16];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, to.tmp)) > 0) {
            std::fwrite(buf, 1, n, f);
            r.bytes += n;
        }
        if (std::ferror(to.tmp)) throw std::runtime_error("cannot read back a temporary file");
        std::fclose(to.tmp);
        to.tmp = nullptr;
        write("\n]}");
    }
    write("\n],\"shared\":{\"frames\":[");
    for (size_t i = 0; i < w.frames.size(); ++i) {
        const FrameInfo& fi = w.frames[i];
        write(fmt::format("{}\n{{\"name\":\"{}\"", i ? "," : "", fi.name));
        if (!fi.file.empty()) write(fmt::format(",\"file\":\"{}\",\"line\":{}", fi.file, fi.line));
        write("}");
    }
    write("\n]}}\n");
    return r;
}

} // namespace prof::render
