#include "render/pprof.hpp"
#include "render/model.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

namespace prof::render {

namespace {

// Protocol buffers' wire format, for the few field kinds profile.proto uses.
class Message {
  public:
    void varint(uint64_t v) {
        while (v >= 0x80) {
            bytes_.push_back(char(uint8_t(v) | 0x80));
            v >>= 7;
        }
        bytes_.push_back(char(v));
    }
    void key(int field, int wire) { varint(uint64_t(field) << 3 | uint64_t(wire)); }
    // An int64/uint64 field; 0 is the default and is left out.
    void number(int field, int64_t v) {
        if (!v) return;
        key(field, 0);
        varint(uint64_t(v));
    }
    void boolean(int field, bool v) { number(field, v ? 1 : 0); }
    void bytes(int field, const std::string& b) {
        key(field, 2);
        varint(b.size());
        bytes_ += b;
    }
    void message(int field, const Message& m) { bytes(field, m.bytes_); }
    // A packed repeated int64/uint64 field.
    void packed(int field, const std::vector<int64_t>& values) {
        Message m;
        for (int64_t v : values) m.varint(uint64_t(v));
        bytes(field, m.bytes_);
    }
    const std::string& str() const { return bytes_; }

  private:
    std::string bytes_;
};

// profile.proto's field numbers.
namespace field {
constexpr int kSampleType = 1, kSample = 2, kMapping = 3, kLocation = 4, kFunction = 5,
              kStringTable = 6, kTimeNanos = 9, kDurationNanos = 10, kPeriodType = 11, kPeriod = 12,
              kComment = 13, kDefaultSampleType = 14;
}

class ProfileBuilder {
  public:
    ProfileBuilder() { string(""); } // string_table[0] is ""
    int64_t string(const std::string& s) {
        auto [it, fresh] = strings_.try_emplace(s, int64_t(strings_.size()));
        if (fresh) table_.push_back(s);
        return it->second;
    }
    void sample_type(const std::string& type, const std::string& unit) {
        Message m;
        m.number(1, string(type));
        m.number(2, string(unit));
        out_.message(field::kSampleType, m);
    }
    // A frame of a Location: a function, at its own line.
    struct Frame {
        std::string name, system_name, file, module, build_id;
        uint32_t line = 0;
    };
    // The location of one frame of machine code: `frames` innermost first, the functions
    // inlined there before the one whose code it is (the last, which names its mapping).
    uint64_t location(const std::vector<Frame>& frames) {
        std::vector<uint64_t> ids;
        for (const Frame& f : frames) ids.push_back(function_of(f));
        if (auto it = locations_.find(ids); it != locations_.end()) return it->second;
        uint64_t id = locations_.size() + 1;
        locations_[ids] = id;
        Message l;
        l.number(1, int64_t(id));
        l.number(2, int64_t(mapping_of(frames.back().module, frames.back().build_id)));
        for (size_t k = 0; k < frames.size(); ++k) {
            Message ln;
            ln.number(1, int64_t(ids[k]));
            ln.number(2, frames[k].line);
            l.message(4, ln);
        }
        locations_msg_.message(field::kLocation, l);
        return id;
    }
    // A sample: its locations innermost first, its values, its labels.
    void sample(const std::vector<int64_t>& locations, const std::vector<int64_t>& values,
                const PprofProcess& p) {
        Message s;
        s.packed(1, locations);
        s.packed(2, values);
        auto label = [&](const char* key, const std::string* text, int64_t num) {
            Message l;
            l.number(1, string(key));
            if (text)
                l.number(2, string(*text));
            else
                l.number(3, num);
            s.message(3, l);
        };
        label("host", &p.host, 0);
        label("pid", nullptr, p.pid);
        // A string: pprof drops a numeric label of value 0 that has no unit (rank 0).
        if (p.rank) {
            std::string rank = std::to_string(*p.rank);
            label("rank", &rank, 0);
        }
        out_.message(field::kSample, s);
    }
    std::string finish(uint64_t time_nanos, uint64_t duration_nanos, const std::string& period_type,
                       const std::string& period_unit, const std::string& default_type,
                       const std::string& comment) {
        int64_t comment_index = string(comment);
        Message period;
        period.number(1, string(period_type));
        period.number(2, string(period_unit));
        int64_t default_index = string(default_type);
        Message m;
        std::string head = out_.str(); // sample types and samples
        Message tail;
        tail.number(field::kTimeNanos, int64_t(time_nanos));
        tail.number(field::kDurationNanos, int64_t(duration_nanos));
        tail.message(field::kPeriodType, period);
        tail.number(field::kPeriod, 1);
        tail.packed(field::kComment, {comment_index});
        tail.number(field::kDefaultSampleType, default_index);
        Message strings;
        for (const std::string& s : table_) strings.bytes(field::kStringTable, s);
        return head + mappings_msg_.str() + locations_msg_.str() + functions_msg_.str() +
               strings.str() + tail.str();
    }

  private:
    uint64_t function_of(const Frame& fr) {
        auto key = std::make_tuple(fr.name, fr.file, fr.line, fr.module);
        auto [it, fresh] = functions_.try_emplace(key, functions_.size() + 1);
        if (fresh) {
            Message f;
            f.number(1, int64_t(it->second));
            f.number(2, string(fr.name));
            f.number(3, string(fr.system_name.empty() ? fr.name : fr.system_name));
            f.number(4, string(fr.file));
            f.number(5, fr.line);
            functions_msg_.message(field::kFunction, f);
        }
        return it->second;
    }
    uint64_t mapping_of(const std::string& module, const std::string& build_id) {
        auto [it, fresh] = mappings_.try_emplace(module, mappings_.size() + 1);
        if (fresh) {
            Message m;
            m.number(1, int64_t(it->second));
            m.number(5, string(module));
            m.number(6, string(build_id));
            m.boolean(7, true); // has_functions
            m.boolean(8, true); // has_filenames
            m.boolean(9, true); // has_line_numbers
            m.boolean(10, false);
            mappings_msg_.message(field::kMapping, m);
        }
        return it->second;
    }

    Message out_, mappings_msg_, locations_msg_, functions_msg_;
    std::map<std::string, int64_t> strings_;
    std::vector<std::string> table_;
    std::map<std::string, uint64_t> mappings_;
    std::map<std::tuple<std::string, std::string, uint32_t, std::string>, uint64_t> functions_;
    std::map<std::vector<uint64_t>, uint64_t> locations_;
};

std::string build_id_of(const std::vector<reader::TraceInfo>& traces, const std::string& module) {
    for (const reader::TraceInfo& t : traces)
        for (const reader::Module& m : t.modules)
            if (m.path == module) return m.build_id;
    return {};
}

} // namespace

std::string pprof_profile(const std::vector<PprofProcess>& processes, bool memory) {
    ProfileBuilder b;
    uint64_t start = UINT64_MAX, end = 0;
    for (const PprofProcess& p : processes) {
        if (p.start_utc_ns) start = std::min(start, p.start_utc_ns);
        end = std::max(end, p.end_utc_ns);
    }
    if (start == UINT64_MAX) start = 0;
    std::string comment;
    if (memory) {
        for (const PprofProcess& p : processes)
            if (!p.memory || !p.memory->present)
                throw std::invalid_argument(fmt::format(
                    "--export pprof --memory: process {} has no allocation records (profrun --mem)",
                    p.pid));
        b.sample_type("alloc_objects", "count");
        b.sample_type("alloc_space", "bytes");
        b.sample_type("inuse_objects", "count");
        b.sample_type("inuse_space", "bytes");
        for (const PprofProcess& p : processes)
            for (const MemorySite& s : p.memory->sites) {
                // A frame of code is one Location: the functions inlined there, then the
                // one whose code it is.
                std::vector<int64_t> locations;
                std::vector<ProfileBuilder::Frame> code;
                for (const MemoryFrame& f : s.stack) {
                    code.push_back({f.name, "", f.file, f.module,
                                    build_id_of(p.tree->traces, f.module), f.line});
                    if (f.inlined) continue;
                    locations.push_back(int64_t(b.location(code)));
                    code.clear();
                }
                if (!code.empty()) locations.push_back(int64_t(b.location(code)));
                b.sample(locations,
                         {int64_t(s.allocations), int64_t(s.bytes), int64_t(s.leaked_blocks),
                          int64_t(s.leaked_bytes)},
                         p);
            }
        comment = "libprof heap profile: in use = live at the end of the trace";
        return b.finish(start, end > start ? end - start : 0, "space", "bytes", "alloc_space",
                        comment);
    }
    size_t sampled = 0, counted = 0;
    for (const PprofProcess& p : processes) {
        sampled += p.tree->time.sampled_traces > 0;
        counted += p.tree->time.calls_counted();
    }
    if (sampled && sampled < processes.size())
        throw std::invalid_argument("--export pprof: some traces are timed by CPU samples, others "
                                    "by the hooks; export them apart (or choose with --time)");
    const bool cpu = sampled > 0, calls = counted == processes.size();
    const std::string time_type = cpu ? "cpu" : "wall";
    if (calls) b.sample_type("calls", "count");
    if (cpu) b.sample_type("samples", "count");
    b.sample_type(time_type, "nanoseconds");
    for (const PprofProcess& p : processes) {
        const views::CallTree& t = *p.tree;
        // A node's Location: its function, and while it was inlined (a sampled frame's
        // inline stack), those of the nodes above it down to the one whose code it is.
        auto frame_of = [&](size_t node) {
            const Function& f = t.functions[t.nodes[node].function];
            return ProfileBuilder::Frame{
                f.name, f.symbol, f.file, f.module, build_id_of(t.traces, f.module), f.line};
        };
        auto named = [&](size_t node) {
            return node != 0 && node != SIZE_MAX && t.nodes[node].function != views::kNoFunction;
        };
        std::vector<int64_t> node_location(t.nodes.size(), 0);
        for (size_t i = 0; i < t.nodes.size(); ++i) {
            if (!named(i)) continue;
            std::vector<ProfileBuilder::Frame> frames{frame_of(i)};
            for (size_t at = i; t.nodes[at].inlined && named(t.nodes[at].parent);) {
                at = t.nodes[at].parent;
                frames.push_back(frame_of(at));
            }
            node_location[i] = int64_t(b.location(frames));
        }
        for (size_t i = 1; i < t.nodes.size(); ++i) {
            const views::CallTreeNode& n = t.nodes[i];
            if (n.function == views::kNoFunction || (!n.calls && !n.self_ns && !n.samples))
                continue;
            std::vector<int64_t> locations; // innermost first, a Location per frame of code
            for (size_t at = i; named(at); at = t.nodes[at].parent) {
                locations.push_back(node_location[at]);
                while (t.nodes[at].inlined && named(t.nodes[at].parent)) at = t.nodes[at].parent;
            }
            std::vector<int64_t> values;
            if (calls) values.push_back(int64_t(n.calls));
            if (cpu) values.push_back(int64_t(n.samples));
            values.push_back(int64_t(n.self_ns));
            b.sample(locations, values, p);
        }
    }
    comment = cpu ? "libprof: times from CPU samples, calls counted by the hooks"
                  : "libprof: times traced by the hooks, less their measured cost";
    return b.finish(start, end > start ? end - start : 0, time_type, "nanoseconds", time_type,
                    comment);
}

std::string gzip(const std::string& data) {
    z_stream z{};
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::runtime_error("gzip: cannot start zlib");
    // In pieces: zlib's lengths are 32-bit.
    std::string out;
    constexpr size_t kPiece = size_t(1) << 30;
    char buffer[1 << 16];
    size_t at = 0;
    int rc = Z_OK;
    do {
        size_t n = std::min(kPiece, data.size() - at);
        z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + at));
        z.avail_in = uInt(n);
        at += n;
        int flush = at == data.size() ? Z_FINISH : Z_NO_FLUSH;
        do {
            z.next_out = reinterpret_cast<Bytef*>(buffer);
            z.avail_out = sizeof buffer;
            rc = deflate(&z, flush);
            if (rc == Z_STREAM_ERROR) break;
            out.append(buffer, sizeof buffer - z.avail_out);
        } while (z.avail_out == 0);
    } while (at < data.size() && rc != Z_STREAM_ERROR);
    deflateEnd(&z);
    if (rc != Z_STREAM_END) throw std::runtime_error("gzip: zlib failed");
    return out;
}

} // namespace prof::render
