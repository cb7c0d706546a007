// Text renderings of the call tree: collapsed stacks, callgrind, the terminal tree (text/CSV).
#include "render/report.hpp"
#include "render/model.hpp"
#include "render/render.hpp"
#include "render/durations.hpp"

#include "reader/trace_reader.hpp"
#include "text/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace prof::render {
namespace {

// A frame of a folded stack: printable, and without the separators of the format.
std::string folded_frame(const std::string& name) {
    std::string s = text::printable(name);
    std::replace(s.begin(), s.end(), ';', ':');
    return s;
}

// One line of a callgrind file: names run to the end of the line.
std::string callgrind_name(std::string_view s) {
    return text::printable(s);
}

} // namespace

void write_collapsed(std::FILE* out, const CallTree& t) {
    // Depth-first, so that the output is stable and stacks sharing a prefix are adjacent.
    std::vector<std::string> prefix;
    struct Item {
        size_t node;
        bool leave;
    };
    std::vector<Item> todo;
    for (auto it = t.root().children.rbegin(); it != t.root().children.rend(); ++it)
        todo.push_back({*it, false});
    std::string line;
    while (!todo.empty()) {
        Item item = todo.back();
        todo.pop_back();
        if (item.leave) {
            prefix.pop_back();
            continue;
        }
        const CallTreeNode& n = t.nodes[item.node];
        prefix.push_back(folded_frame(t.name(n)));
        if (n.self_ns) {
            line.clear();
            for (size_t i = 0; i < prefix.size(); ++i) {
                if (i) line += ';';
                line += prefix[i];
            }
            fmt::print(out, "{} {}\n", line, n.self_ns);
        }
        todo.push_back({item.node, true});
        for (auto it = n.children.rbegin(); it != n.children.rend(); ++it)
            todo.push_back({*it, false});
    }
}

void write_callgrind(std::FILE* out, const CallTree& t) {
    const std::vector<reader::TraceInfo>& traces = t.traces;
    // Callgrind is per function: self cost per function, and per caller -> callee pair the
    // calls and the inclusive cost. Call paths of the tree are summed into both.
    size_t nf = t.functions.size();
    std::vector<uint64_t> self(nf, 0);
    std::vector<bool> seen(nf, false);
    std::map<std::pair<size_t, size_t>, std::pair<uint64_t, uint64_t>> calls; // -> (count, ns)
    for (const CallTreeNode& n : t.nodes) {
        if (n.function == kNoFunction) continue;
        self[n.function] += n.self_ns;
        seen[n.function] = true;
        const CallTreeNode& parent = t.nodes[n.parent];
        if (parent.function != kNoFunction) {
            auto& c = calls[{parent.function, n.function}];
            c.first += n.calls;
            c.second += n.total_ns;
        }
    }
    fmt::print(out, "# callgrind format\nversion: 1\ncreator: libprof profreport\n");
    if (!traces.empty()) {
        const reader::TraceInfo& ti = traces.front();
        fmt::print(out, "pid: {}\n", ti.header.pid);
        if (auto it = ti.meta.find("cmdline"); it != ti.meta.end())
            fmt::print(out, "cmd: {}\n", callgrind_name(it->second));
    }
    fmt::print(out, "positions: line\nevent: ns : Time (ns)\nevents: ns\nsummary: {}\n\n",
               t.root().total_ns);

    // Name compression: `fl=(id) name` the first time, `fl=(id)` afterwards.
    std::map<std::string, size_t> files, objects;
    std::vector<bool> fn_named(nf, false);
    auto file_of = [&](const Function& f) {
        return f.file.empty() ? (f.module.empty() ? std::string("???") : f.module) : f.file;
    };
    auto compressed = [](std::map<std::string, size_t>& ids, const std::string& name) {
        auto [it, fresh] = ids.try_emplace(name, ids.size() + 1);
        return fresh ? fmt::format("({}) {}", it->second, callgrind_name(name))
                     : fmt::format("({})", it->second);
    };
    auto fn_ref = [&](size_t i) {
        if (fn_named[i]) return fmt::format("({})", i + 1);
        fn_named[i] = true;
        return fmt::format("({}) {}", i + 1, callgrind_name(t.functions[i].name));
    };
    std::map<size_t, std::vector<std::pair<size_t, std::pair<uint64_t, uint64_t>>>> by_caller;
    for (const auto& [k, v] : calls) by_caller[k.first].push_back({k.second, v});
    for (size_t i = 0; i < nf; ++i) {
        if (!seen[i]) continue;
        const Function& f = t.functions[i];
        if (!f.module.empty()) fmt::print(out, "ob={}\n", compressed(objects, f.module));
        fmt::print(out, "fl={}\nfn={}\n{} {}\n", compressed(files, file_of(f)), fn_ref(i), f.line,
                   self[i]);
        for (const auto& [callee, cv] : by_caller[i]) {
            const Function& g = t.functions[callee];
            if (!g.module.empty()) fmt::print(out, "cob={}\n", compressed(objects, g.module));
            fmt::print(out, "cfi={}\ncfn={}\ncalls={} {}\n{} {}\n", compressed(files, file_of(g)),
                       fn_ref(callee), cv.first, g.line, f.line, cv.second);
        }
        fmt::print(out, "\n");
    }
    fmt::print(out, "totals: {}\n", t.root().total_ns);
}

void print_tree(std::FILE* out, const CallTree& t, const TreeOptions& o) {
    const CallTreeNode& root = t.root();
    double total = double(root.total_ns);
    auto visible = [&](const CallTreeNode& n) {
        if (o.max_depth && n.depth > o.max_depth) return false;
        return total <= 0 || 100.0 * n.total_ns / total >= o.min_percent;
    };
    auto by_total = [&](std::vector<size_t> kids) {
        std::stable_sort(kids.begin(), kids.end(), [&](size_t a, size_t b) {
            return t.nodes[a].total_ns > t.nodes[b].total_ns;
        });
        std::erase_if(kids, [&](size_t c) { return !visible(t.nodes[c]); });
        return kids;
    };
    const bool counted = t.time.calls_counted();
    if (o.csv) {
        fmt::print(out, "id,parent,depth,calls,total_ns,self_ns,percent,name,file,line\n");
    } else {
        uint64_t calls = 0;
        for (const CallTreeNode& n : t.nodes) calls += n.function == kNoFunction ? 0 : n.calls;
        fmt::print(out, "# Call tree: {} in {} on {} thread{}",
                   counted ? fmt::format("{} calls", calls)
                           : std::string("calls not counted (sampled without instrumentation)"),
                   human_ns(root.total_ns), t.threads.size(), t.threads.size() == 1 ? "" : "s");
        if (o.max_depth || o.min_percent > 0)
            fmt::print(
                out, " (showing{}{})", o.max_depth ? fmt::format(" depth <= {}", o.max_depth) : "",
                o.min_percent > 0 ? fmt::format(" paths >= {}% of the total", o.min_percent) : "");
        if (std::string basis = time_basis_text(t.time); !basis.empty())
            fmt::print(out, "\n# {}", basis);
        fmt::print(out, "\n#\n#  TOTAL TIME    SELF TIME       CALLS  FUNCTION\n");
    }
    // Depth-first; `prefix` draws the tree lines as uftrace graph does.
    struct Item {
        size_t node;
        std::string prefix;
        bool last;
    };
    std::vector<Item> todo;
    std::vector<size_t> top = by_total(root.children);
    for (size_t i = top.size(); i-- > 0;) todo.push_back({top[i], "", i + 1 == top.size()});
    while (!todo.empty()) {
        Item item = todo.back();
        todo.pop_back();
        const CallTreeNode& n = t.nodes[item.node];
        double percent = total > 0 ? 100.0 * n.total_ns / total : 0;
        if (o.csv) {
            const Function* f = n.function == kNoFunction ? nullptr : &t.functions[n.function];
            fmt::print(out, "{},{},{},{},{},{},{:.4f},{},{},{}\n", item.node, n.parent, n.depth,
                       counted ? std::to_string(n.calls) : std::string(), n.total_ns, n.self_ns,
                       percent, text::csv_escape(t.name(n)),
                       text::csv_escape(f ? f->file : std::string()), f ? f->line : 0);
        } else {
            std::string branch = n.depth == 1 ? "" : "+-";
            fmt::print(out, "{:>13} {:>12} {:>11}  {}{}{}\n", human_ns(n.total_ns),
                       human_ns(n.self_ns),
                       n.function == kNoFunction ? std::string()
                       : counted                 ? fmt::format("{}", n.calls)
                                                 : std::string("?"),
                       item.prefix, branch, text::printable(t.name(n)));
        }
        std::vector<size_t> kids = by_total(n.children);
        std::string child_prefix = n.depth == 1 ? "" : item.prefix + (item.last ? "  " : "| ");
        for (size_t i = kids.size(); i-- > 0;)
            todo.push_back({kids[i], child_prefix, i + 1 == kids.size()});
    }
}

void print_callers_csv(std::FILE* out, const Profile& p, const std::string& filter, bool callees) {
    fmt::print(out,
               "function,function_file,function_line,{},other_file,other_line,ncalls,"
               "primitive_calls,tottime,cumtime\n",
               callees ? "callee" : "caller");
    std::vector<size_t> rows = filter.empty() ? std::vector<size_t>() : p.match(filter);
    if (filter.empty())
        for (size_t i = 0; i < p.functions.size(); ++i) rows.push_back(i);
    for (size_t i : rows) {
        const Function& f = p.functions[i];
        for (const Edge& e : p.edges) {
            if ((callees ? e.caller : e.callee) != i) continue;
            size_t other = callees ? e.callee : e.caller;
            const Function* g = other == kRoot ? nullptr : &p.functions[other];
            fmt::print(out, "{},{},{},{},{},{},{},{},{:.9f},{:.9f}\n", text::csv_escape(f.name),
                       text::csv_escape(f.file), f.line,
                       text::csv_escape(g ? g->name : std::string("<thread start>")),
                       text::csv_escape(g ? g->file : std::string()), g ? g->line : 0,
                       e.stats.ncalls, e.stats.pcalls, e.stats.tottime, e.stats.cumtime);
        }
    }
}

void print_lines_csv(std::FILE* out, const std::vector<LineTable>& tables) {
    fmt::print(out, "file,function,line,kind,hits,time,rss_samples,rss_increment,rss_last,"
                    "heap_increment\n");
    for (const LineTable& t : tables)
        for (const LineRow& r : t.rows)
            fmt::print(out, "{},{},{},{},{},{:.9f},{},{:.0f},{:.0f},{:.0f}\n",
                       text::csv_escape(t.file), text::csv_escape(t.function), r.line, r.kind,
                       r.hits, r.time, r.rss_samples, r.rss_increment, r.rss_last,
                       r.heap_increment);
}

} // namespace prof::render
