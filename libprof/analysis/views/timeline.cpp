// Chrome Trace Event and speedscope writers on top of Replay.
//
// Chrome: a complete event ("X") is written when an activation closes; viewers sort by time.
// speedscope: evented profiles need their open/close events in time order per thread, and an
// open cannot be written before the activation is known to pass --min-duration. An open is
// therefore written lazily, at the thread's next event once the frame is old enough, with its
// own (earlier) time; since a frame's ancestors are older, and every event written before it
// either closed before it began or belongs to an ancestor, the times stay in order and the
// events balanced. Each thread's events go to a temporary file, joined at the end.
#include "analysis/views/timeline.hpp"

#include "analysis/profile.hpp"
#include "analysis/report.hpp"
#include "analysis/views/replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace prof::analysis::views {
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

class TimelineBase : public Replay {
  public:
    explicit TimelineBase(const TimelineOptions& o) : o_(o) {}
    ~TimelineBase() override {
        for (ThreadOut& t : out_)
            if (t.tmp) std::fclose(t.tmp);
    }
    std::vector<FrameInfo> frames;
    std::vector<ThreadOut> out_;
    TimelineResult result;

  protected:
    const TimelineOptions o_;

    uint32_t frame(const ReplayFrame& fr) {
        auto next = uint32_t(frames.size());
        // Objects loaded at one address in turn: a frame per object (rare, a slower map).
        uint32_t& index = fr.module == reader::kNoModule
                              ? cache_[current_index()].try_emplace(fr.address, next).first->second
                              : reused_cache_[current_index()]
                                    .try_emplace({fr.address, fr.module}, next)
                                    .first->second;
        if (index == next) {
            Function f = resolver_.describe(current(), fr.address, fr.module);
            frames.push_back(FrameInfo{json_escape(reader::printable(f.name)), json_escape(f.file),
                                       f.line, f.kind});
        }
        return index;
    }
    ThreadOut& out(const ReplayThread& t) { return out_[t.index]; }
    void thread_created(ReplayThread& t) override {
        if (out_.size() <= t.index) out_.resize(t.index + 1);
        ThreadOut& to = out_[t.index];
        if (auto it = current().threads.find(t.stream); it != current().threads.end())
            to.tid = it->second.tid;
        to.skip = o_.tid && to.tid != o_.tid;
    }
    // Whether a closed activation [e, x] is kept.
    bool kept(uint64_t e, uint64_t x) const {
        return x - e >= o_.min_duration_ns && x >= o_.from_ns && e <= o_.to_ns;
    }
    uint64_t clip(uint64_t ns) const { return std::clamp(ns, o_.from_ns, o_.to_ns); }

  private:
    FunctionResolver resolver_;
    std::unordered_map<size_t, std::unordered_map<uint64_t, uint32_t>> cache_;
    std::unordered_map<size_t, std::map<std::pair<uint64_t, size_t>, uint32_t>> reused_cache_;
};

class ChromeWriter : public TimelineBase {
  public:
    ChromeWriter(std::FILE* f, const TimelineOptions& o) : TimelineBase(o), f_(f) {}
    void write(const std::string& s) {
        std::fputs(s.c_str(), f_);
        result.bytes += s.size();
    }
    bool first = true;

  private:
    std::FILE* f_;
    void opened(ReplayThread&) override {}
    void closed(ReplayThread& t, const ReplayFrame& fr, uint64_t x) override {
        ThreadOut& to = out(t);
        if (to.skip || !kept(fr.enter_ns, x)) return;
        uint64_t e = clip(fr.enter_ns), c = clip(x);
        const FrameInfo& fi = frames[frame(fr)];
        // A scope run: its activations' summed time from the first one's start.
        std::string args =
            fr.count > 1 ? fmt::format(",\"args\":{{\"activations\":{}}}", fr.count) : "";
        write(fmt::format("{}\n{{\"ph\":\"X\",\"cat\":\"{}\",\"name\":\"{}\",\"ts\":{},\"dur\":{},"
                          "\"pid\":{},\"tid\":{}{}}}",
                          first ? "" : ",", fi.kind, fi.name, micros(e), micros(c - e),
                          current().header.pid, to.tid ? to.tid : t.stream, args));
        first = false;
        ++to.events;
        ++result.events;
    }
};

class SpeedscopeWriter : public TimelineBase {
  public:
    explicit SpeedscopeWriter(const TimelineOptions& o) : TimelineBase(o) {}

  private:
    static constexpr uint64_t kEmitted = 1;

    void emit(ReplayThread& t, char type, const ReplayFrame& fr, uint64_t at) {
        ThreadOut& to = out(t);
        if (!to.tmp) {
            to.tmp = std::tmpfile();
            if (!to.tmp)
                throw std::runtime_error("cannot create a temporary file for speedscope events");
        }
        std::string s = fmt::format("{}{{\"type\":\"{}\",\"frame\":{},\"at\":{}}}",
                                    to.events ? ",\n" : "\n", type, frame(fr), at);
        if (std::fputs(s.c_str(), to.tmp) < 0)
            throw std::runtime_error("cannot write a temporary file for speedscope events");
        to.first = std::min(to.first, at);
        to.last = std::max(to.last, at);
        ++to.events;
        if (type == 'O') ++result.events;
    }
    // Writes the opens of frames now known to pass the filters, outermost first.
    void flush(ReplayThread& t, uint64_t now) {
        for (ReplayFrame& f : t.stack) {
            if (f.user & kEmitted) continue;
            if (now - f.enter_ns < o_.min_duration_ns || now < o_.from_ns || f.enter_ns > o_.to_ns)
                return; // deeper frames are younger: they fail too
            emit(t, 'O', f, clip(f.enter_ns));
            f.user |= kEmitted;
        }
    }
    void opened(ReplayThread& t) override {
        if (!out(t).skip) flush(t, t.stack.back().enter_ns);
    }
    void closed(ReplayThread& t, const ReplayFrame& f, uint64_t x) override {
        if (out(t).skip) return;
        bool emitted = f.user & kEmitted;
        if (!emitted && !kept(f.enter_ns, x)) return;
        flush(t, x);
        if (!emitted) emit(t, 'O', f, clip(f.enter_ns));
        emit(t, 'C', f, clip(x));
    }
};

// Heap and RSS of one trace as Chrome counter events, merged in time order and cut to the
// window: the value a counter had when the window opens is repeated at its start.
void write_memory_counters(ChromeWriter& w, const MemoryReport& m, uint32_t pid,
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
                            w.first ? "" : ",", p.series ? "RSS" : "heap", micros(p.ns), pid, pid,
                            p.bytes));
        w.first = false;
        ++w.result.counters;
    }
}

} // namespace

TimelineResult write_chrome_trace(std::FILE* f, const std::vector<std::string>& traces,
                                  const TimelineOptions& o) {
    ChromeWriter w(f, o);
    w.show_progress(o.progress);
    w.write("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
    std::vector<bool> counted; // traces with memory counters
    for (const std::string& path : traces) {
        const reader::TraceInfo& info = w.add_trace(path);
        counted.push_back(false);
        if (!o.memory_counters || !info.memory_records) continue;
        ProfileBuilder memory; // the allocations of this trace (process) alone
        memory.add_trace(path);
        const MemoryReport& m = memory.memory();
        uint64_t before = w.result.counters;
        write_memory_counters(w, m, info.header.pid, o);
        counted.back() = w.result.counters > before;
    }
    // Names of processes and threads that have events.
    std::vector<bool> named(w.traces().size(), false);
    for (const auto& tp : w.threads()) {
        const ThreadOut& to = w.out_[tp->index];
        if (!to.events) continue;
        ++w.result.threads;
        const reader::TraceInfo& info = *w.traces()[tp->trace];
        uint32_t pid = info.header.pid;
        if (!named[tp->trace]) {
            named[tp->trace] = true;
            auto exe = info.meta.find("exe");
            std::string name =
                exe == info.meta.end() ? std::string("process") : base_name(exe->second);
            w.write(fmt::format("{}\n{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,"
                                "\"args\":{{\"name\":\"{}\"}}}}",
                                w.first ? "" : ",", pid, json_escape(reader::printable(name))));
            w.first = false;
        }
        std::string tname;
        if (auto it = info.threads.find(tp->stream); it != info.threads.end())
            tname = it->second.name;
        uint32_t tid = to.tid ? to.tid : tp->stream;
        if (tname.empty()) tname = tid == pid ? "main" : fmt::format("thread {}", tid);
        w.write(fmt::format(",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},"
                            "\"args\":{{\"name\":\"{}\"}}}}",
                            pid, tid, json_escape(reader::printable(tname))));
    }
    // Processes with counters but no complete events (a program run under profrun --mem alone).
    for (size_t i = 0; i < w.traces().size(); ++i) {
        if (named[i] || !counted[i]) continue;
        const reader::TraceInfo& info = *w.traces()[i];
        auto exe = info.meta.find("exe");
        std::string name = exe == info.meta.end() ? std::string("process") : base_name(exe->second);
        w.write(fmt::format("{}\n{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,"
                            "\"args\":{{\"name\":\"{}\"}}}}",
                            w.first ? "" : ",", info.header.pid,
                            json_escape(reader::printable(name))));
        w.first = false;
    }
    w.write(fmt::format(
        "\n],\"otherData\":{{\"producer\":\"libprof profreport\",\"clock\":\"ns since "
        "the trace started\",\"from_ns\":{},\"to_ns\":{},\"min_duration_ns\":{}}}}}\n",
        o.from_ns, o.to_ns == UINT64_MAX ? std::string("null") : fmt::format("{}", o.to_ns),
        o.min_duration_ns));
    return w.result;
}

TimelineResult write_speedscope(std::FILE* f, const std::vector<std::string>& traces,
                                const TimelineOptions& o) {
    SpeedscopeWriter w(o);
    w.show_progress(o.progress);
    for (const std::string& path : traces) w.add_trace(path);
    TimelineResult& r = w.result;
    auto write = [&](const std::string& s) {
        std::fputs(s.c_str(), f);
        r.bytes += s.size();
    };
    std::string title = "libprof";
    if (!w.traces().empty()) {
        const reader::TraceInfo& info = *w.traces().front();
        auto exe = info.meta.find("exe");
        if (exe != info.meta.end()) title = base_name(exe->second);
    }
    write(
        fmt::format("{{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
                    "\"exporter\":\"libprof profreport\",\"name\":\"{}\",\"activeProfileIndex\":0,"
                    "\"profiles\":[",
                    json_escape(reader::printable(title))));
    bool first = true;
    for (const auto& tp : w.threads()) {
        ThreadOut& to = w.out_[tp->index];
        if (!to.events || !to.tmp) continue;
        ++r.threads;
        const reader::TraceInfo& info = *w.traces()[tp->trace];
        std::string tname;
        if (auto it = info.threads.find(tp->stream); it != info.threads.end())
            tname = it->second.name;
        uint32_t tid = to.tid ? to.tid : tp->stream;
        std::string name = fmt::format("{} (pid {}, tid {}){}{}", tname.empty() ? "thread" : tname,
                                       info.header.pid, tid, w.traces().size() > 1 ? " " : "",
                                       w.traces().size() > 1 ? base_name(info.path) : "");
        write(fmt::format("{}\n{{\"type\":\"evented\",\"name\":\"{}\",\"unit\":\"nanoseconds\","
                          "\"startValue\":{},\"endValue\":{},\"events\":[",
                          first ? "" : ",", json_escape(reader::printable(name)), to.first,
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

} // namespace prof::analysis::views
