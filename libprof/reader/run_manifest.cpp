// Run manifests (run.json): written by profrun, read by profreport. The JSON is this file's
// own: a writer for the one shape, and a small parser of the whole grammar (a manifest may have
// been edited or written by another tool), strict about what it accepts.
#include "run_manifest.hpp"

#include "text/text.hpp"
#include "trace_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <dirent.h>
#include <map>
#include <memory>
#include <stdexcept>
#include <sys/stat.h>

namespace prof::reader {

std::string RunProcess::command() const {
    std::string c = !argv.empty() && !argv[0].empty() ? argv[0] : exe;
    size_t slash = c.rfind('/');
    return slash == std::string::npos ? c : c.substr(slash + 1);
}

namespace {

std::optional<uint32_t> number_meta(const TraceInfo& info, const char* key) {
    auto it = info.meta.find(key);
    if (it == info.meta.end() || it->second.empty() ||
        it->second.find_first_not_of("0123456789") != std::string::npos || it->second.size() > 9)
        return std::nullopt;
    return uint32_t(std::strtoul(it->second.c_str(), nullptr, 10));
}

std::string meta_or(const TraceInfo& info, const char* key) {
    auto it = info.meta.find(key);
    return it == info.meta.end() ? std::string() : it->second;
}

// ---- writing ----------------------------------------------------------------------------------

// run.json's strings in the form it has always had (\r as \u000d, DEL as it is).
std::string quoted(std::string_view s) {
    return text::json_quoted(s, text::JsonForm::kManifest);
}

std::string utc(uint64_t ns) {
    time_t s = time_t(ns / 1000000000);
    tm t{};
    gmtime_r(&s, &t);
    char buf[32];
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &t);
    return fmt::format("{}.{:09d}Z", buf, ns % 1000000000);
}

template <class T>
std::string optional_json(const std::optional<T>& v) {
    return v ? fmt::format("{}", *v) : "null";
}

std::string clock_json(uint64_t utc_ns, uint64_t ticks) {
    if (!utc_ns) return "null";
    return fmt::format("{{\"utc\": {}, \"utc_ns\": {}, \"ticks\": {}}}", quoted(utc(utc_ns)),
                       utc_ns, ticks);
}

// ---- parsing ----------------------------------------------------------------------------------

struct Json {
    enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
    bool boolean = false;
    double number = 0;
    std::string text; // a string, or a number's digits (exact for 64-bit integers)
    std::vector<Json> items;
    std::map<std::string, Json> members;

    const Json* at(const std::string& key) const {
        auto it = members.find(key);
        return it == members.end() || it->second.kind == kNull ? nullptr : &it->second;
    }
};

class Parser {
  public:
    explicit Parser(const std::string& s) : s_(s) {}
    Json document() {
        Json v = value(0);
        space();
        if (i_ != s_.size()) fail("text after the end of the document");
        return v;
    }

  private:
    [[noreturn]] void fail(const std::string& what) const {
        size_t line = 1 + size_t(std::count(s_.begin(), s_.begin() + long(i_), '\n'));
        throw std::runtime_error(fmt::format("line {}: {}", line, what));
    }
    void space() {
        while (i_ < s_.size() &&
               (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
            ++i_;
    }
    bool take(const char* word) {
        size_t n = std::char_traits<char>::length(word);
        if (s_.compare(i_, n, word) != 0) return false;
        i_ += n;
        return true;
    }
    Json value(int depth) {
        if (depth > 32) fail("nested too deeply");
        space();
        if (i_ >= s_.size()) fail("unexpected end");
        Json v;
        char c = s_[i_];
        if (c == '{') {
            v.kind = Json::kObject;
            ++i_;
            space();
            if (i_ < s_.size() && s_[i_] == '}') return ++i_, v;
            for (;;) {
                space();
                if (i_ >= s_.size() || s_[i_] != '"') fail("expected a member name");
                std::string key = string();
                space();
                if (i_ >= s_.size() || s_[i_] != ':') fail("expected ':'");
                ++i_;
                v.members[key] = value(depth + 1);
                space();
                if (i_ < s_.size() && s_[i_] == ',') {
                    ++i_;
                    continue;
                }
                if (i_ < s_.size() && s_[i_] == '}') {
                    ++i_;
                    return v;
                }
                fail("expected ',' or '}'");
            }
        }
        if (c == '[') {
            v.kind = Json::kArray;
            ++i_;
            space();
            if (i_ < s_.size() && s_[i_] == ']') return ++i_, v;
            for (;;) {
                v.items.push_back(value(depth + 1));
                space();
                if (i_ < s_.size() && s_[i_] == ',') {
                    ++i_;
                    continue;
                }
                if (i_ < s_.size() && s_[i_] == ']') {
                    ++i_;
                    return v;
                }
                fail("expected ',' or ']'");
            }
        }
        if (c == '"') {
            v.kind = Json::kString;
            v.text = string();
            return v;
        }
        if (take("true")) {
            v.kind = Json::kBool;
            v.boolean = true;
            return v;
        }
        if (take("false")) {
            v.kind = Json::kBool;
            return v;
        }
        if (take("null")) return v;
        size_t start = i_;
        if (i_ < s_.size() && s_[i_] == '-') ++i_;
        while (i_ < s_.size() && (std::isdigit((unsigned char)s_[i_]) || s_[i_] == '.' ||
                                  s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-'))
            ++i_;
        if (i_ == start) fail(fmt::format("unexpected '{}'", c));
        v.kind = Json::kNumber;
        v.text = s_.substr(start, i_ - start);
        char* end = nullptr;
        v.number = std::strtod(v.text.c_str(), &end);
        if (!end || *end) fail(fmt::format("bad number '{}'", v.text));
        return v;
    }
    std::string string() {
        ++i_; // the opening quote
        std::string out;
        while (i_ < s_.size() && s_[i_] != '"') {
            char c = s_[i_++];
            if (c != '\\') {
                out += c;
                continue;
            }
            if (i_ >= s_.size()) break;
            char e = s_[i_++];
            switch (e) {
            case 'n':
                out += '\n';
                break;
            case 't':
                out += '\t';
                break;
            case 'r':
                out += '\r';
                break;
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case 'u': {
                if (i_ + 4 > s_.size()) fail("bad \\u escape");
                unsigned cp = unsigned(std::strtoul(s_.substr(i_, 4).c_str(), nullptr, 16));
                i_ += 4;
                if (cp < 0x80)
                    out += char(cp);
                else if (cp < 0x800)
                    out += char(0xc0 | (cp >> 6)), out += char(0x80 | (cp & 0x3f));
                else
                    out += char(0xe0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3f)),
                        out += char(0x80 | (cp & 0x3f));
                break;
            }
            default:
                out += e;
            }
        }
        if (i_ >= s_.size()) fail("unterminated string");
        ++i_;
        return out;
    }

    const std::string& s_;
    size_t i_ = 0;
};

uint64_t integer(const Json* v, const char* what) {
    if (!v) return 0;
    if (v->kind != Json::kNumber || v->text.find_first_not_of("0123456789") != std::string::npos)
        throw std::runtime_error(fmt::format("{} is not a non-negative integer", what));
    return std::strtoull(v->text.c_str(), nullptr, 10);
}

std::string text(const Json* v, const char* what) {
    if (!v) return {};
    if (v->kind != Json::kString) throw std::runtime_error(fmt::format("{} is not a string", what));
    return v->text;
}

} // namespace

RunProcess describe_trace(const TraceInfo& info, const std::string& file_name) {
    RunProcess p;
    p.trace = file_name;
    p.pid = info.header.pid;
    p.ppid = info.header.ppid;
    // argv: the arguments each ended by a NUL (the last one's left out), as /proc/self/cmdline
    // has them; older traces have only cmdline, the arguments separated by spaces.
    if (auto argv = info.meta.find("argv"); argv != info.meta.end()) {
        const std::string& a = argv->second;
        for (size_t at = 0; at <= a.size();) {
            size_t end = std::min(a.find('\0', at), a.size());
            p.argv.push_back(a.substr(at, end - at));
            at = end + 1;
        }
    } else {
        std::string cmdline = meta_or(info, "cmdline");
        for (size_t at = 0; at < cmdline.size();) {
            size_t end = cmdline.find(' ', at);
            if (end == std::string::npos) end = cmdline.size();
            if (end > at) p.argv.push_back(cmdline.substr(at, end - at));
            at = end + 1;
        }
    }
    p.exe = meta_or(info, "exe");
    p.host = meta_or(info, "host");
    p.start_utc_ns = info.header.start_real_ns;
    p.start_ticks = info.header.start_ticks;
    std::string end = meta_or(info, "clock_end");
    unsigned long long end_utc = 0, end_ticks = 0;
    if (std::sscanf(end.c_str(), "%llu %llu", &end_utc, &end_ticks) == 2) {
        p.end_utc_ns = end_utc;
        p.end_ticks = end_ticks;
    }
    p.ticks_per_second = info.ticks_per_second;
    p.finished = info.finished;
    p.rank = number_meta(info, "mpi_rank");
    p.size = number_meta(info, "mpi_size");
    p.rank_from = meta_or(info, "mpi_rank_from");
    const std::string prefix = "child_status.";
    for (auto it = info.meta.lower_bound(prefix);
         it != info.meta.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
        unsigned long child = std::strtoul(it->first.c_str() + prefix.size(), nullptr, 10);
        if (child && child <= UINT32_MAX) p.reaped[uint32_t(child)] = it->second;
    }
    return p;
}

void settle_exit_statuses(std::vector<RunProcess>& processes) {
    // The images of each process (host, pid): the last one's status is the process's.
    std::map<std::pair<std::string, uint32_t>, std::vector<const RunProcess*>> images;
    for (const RunProcess& q : processes) images[{q.host, q.pid}].push_back(&q);
    for (RunProcess& p : processes) {
        if (p.exit_code || p.signal) continue;
        const auto& same = images.at({p.host, p.pid});
        bool last_image = std::none_of(same.begin(), same.end(), [&](const RunProcess* q) {
            return q->start_utc_ns > p.start_utc_ns;
        });
        auto parents = images.find({p.host, p.ppid});
        if (!last_image || parents == images.end()) continue;
        const RunProcess* parent = nullptr;
        for (const RunProcess* q : parents->second)
            if (q->reaped.count(p.pid) && q->start_utc_ns <= p.start_utc_ns &&
                (!parent || q->start_utc_ns > parent->start_utc_ns))
                parent = q;
        if (!parent) continue;
        int n = 0;
        const std::string& status = parent->reaped.at(p.pid);
        if (std::sscanf(status.c_str(), "exit %d", &n) == 1)
            p.exit_code = n;
        else if (std::sscanf(status.c_str(), "signal %d", &n) == 1)
            p.signal = n;
    }
}

std::string manifest_json(const RunManifest& m) {
    std::string out = fmt::format("{{\n  \"format\": \"libprof-run\",\n  \"version\": {},\n"
                                  "  \"run\": {},\n  \"processes\": [",
                                  m.version, quoted(m.run));
    for (size_t k = 0; k < m.processes.size(); ++k) {
        const RunProcess& p = m.processes[k];
        std::string argv;
        for (size_t a = 0; a < p.argv.size(); ++a) argv += (a ? ", " : "") + quoted(p.argv[a]);
        out += fmt::format(
            "{}\n    {{\"trace\": {}, \"pid\": {}, \"ppid\": {}, \"argv\": [{}], \"exe\": {}, "
            "\"host\": {},\n     \"start\": {},\n     \"end\": {},\n     "
            "\"ticks_per_second\": {:.0f}, \"finished\": {}, \"exit_code\": {}, \"signal\": {}, "
            "\"rank\": {}, \"size\": {}, \"rank_from\": {}}}",
            k ? "," : "", p.trace.empty() ? "null" : quoted(p.trace), p.pid, p.ppid, argv,
            quoted(p.exe), quoted(p.host), clock_json(p.start_utc_ns, p.start_ticks),
            clock_json(p.end_utc_ns, p.end_ticks), p.ticks_per_second,
            p.finished ? "true" : "false", optional_json(p.exit_code), optional_json(p.signal),
            optional_json(p.rank), optional_json(p.size),
            p.rank_from.empty() ? "null" : quoted(p.rank_from));
    }
    out += "\n  ]\n}\n";
    return out;
}

RunManifest parse_manifest(const std::string& content) {
    Json doc = Parser(content).document();
    if (doc.kind != Json::kObject || text(doc.at("format"), "format") != "libprof-run")
        throw std::runtime_error("not a libprof run manifest (no \"format\": \"libprof-run\")");
    RunManifest m;
    m.version = int(integer(doc.at("version"), "version"));
    if (m.version > kManifestVersion)
        throw std::runtime_error(fmt::format("manifest version {} is newer than this reader's {}",
                                             m.version, kManifestVersion));
    m.run = text(doc.at("run"), "run");
    const Json* list = doc.at("processes");
    if (!list || list->kind != Json::kArray)
        throw std::runtime_error("\"processes\" is not an array");
    for (const Json& e : list->items) {
        if (e.kind != Json::kObject) throw std::runtime_error("a process is not an object");
        RunProcess p;
        p.trace = text(e.at("trace"), "trace");
        if (p.trace.find('/') != std::string::npos)
            throw std::runtime_error(fmt::format("trace '{}' is not a file name", p.trace));
        p.pid = uint32_t(integer(e.at("pid"), "pid"));
        p.ppid = uint32_t(integer(e.at("ppid"), "ppid"));
        if (const Json* a = e.at("argv"); a && a->kind == Json::kArray)
            for (const Json& s : a->items) p.argv.push_back(text(&s, "argv"));
        p.exe = text(e.at("exe"), "exe");
        p.host = text(e.at("host"), "host");
        if (const Json* s = e.at("start")) {
            p.start_utc_ns = integer(s->at("utc_ns"), "start.utc_ns");
            p.start_ticks = integer(s->at("ticks"), "start.ticks");
        }
        if (const Json* s = e.at("end")) {
            p.end_utc_ns = integer(s->at("utc_ns"), "end.utc_ns");
            p.end_ticks = integer(s->at("ticks"), "end.ticks");
        }
        if (const Json* t = e.at("ticks_per_second"); t && t->kind == Json::kNumber)
            p.ticks_per_second = t->number;
        if (const Json* f = e.at("finished"); f && f->kind == Json::kBool) p.finished = f->boolean;
        if (const Json* c = e.at("exit_code")) p.exit_code = int(integer(c, "exit_code"));
        if (const Json* c = e.at("signal")) p.signal = int(integer(c, "signal"));
        if (const Json* c = e.at("rank")) p.rank = uint32_t(integer(c, "rank"));
        if (const Json* c = e.at("size")) p.size = uint32_t(integer(c, "size"));
        p.rank_from = text(e.at("rank_from"), "rank_from");
        m.processes.push_back(std::move(p));
    }
    return m;
}

std::vector<std::string> run_traces(const std::string& dir) {
    std::vector<std::string> found;
    DIR* d = opendir(dir.c_str());
    if (!d) return found;
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name.size() > 6 && name.compare(name.size() - 6, 6, ".trace") == 0) {
            struct stat st;
            if (stat((dir + "/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode))
                found.push_back(name);
        }
    }
    closedir(d);
    std::sort(found.begin(), found.end());
    return found;
}

bool is_run_dir(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace prof::reader
