// The memory report as a call tree, and how its views name and weigh allocation sites.
#include "analysis/model/memory.hpp"

#include <fmt/format.h>

#include <map>

namespace prof::analysis::views {

std::optional<MemoryWeight> parse_memory_weight(const std::string& s) {
    if (s == "bytes") return MemoryWeight::kBytes;
    if (s == "allocations" || s == "calls") return MemoryWeight::kAllocations;
    if (s == "leaked" || s == "leaks") return MemoryWeight::kLeaked;
    if (s == "peak") return MemoryWeight::kPeak;
    return std::nullopt;
}

const char* memory_weight_name(MemoryWeight w) {
    switch (w) {
    case MemoryWeight::kAllocations:
        return "allocations";
    case MemoryWeight::kLeaked:
        return "leaked";
    case MemoryWeight::kPeak:
        return "peak";
    default:
        return "bytes";
    }
}

uint64_t memory_weight(const MemorySite& s, MemoryWeight w) {
    switch (w) {
    case MemoryWeight::kAllocations:
        return s.allocations;
    case MemoryWeight::kLeaked:
        return s.leaked_bytes;
    case MemoryWeight::kPeak:
        return s.peak_bytes;
    default:
        return s.bytes;
    }
}

std::string memory_frame_name(const MemoryFrame& f) {
    std::string name = f.name.empty() ? std::string("??") : f.name;
    if (name.rfind("0x", 0) == 0 && !f.module.empty())
        name += " (in " + f.module.substr(f.module.rfind('/') + 1) + ")";
    return name;
}

CallTree memory_call_tree(const MemoryReport& m, MemoryWeight w) {
    CallTree t;
    t.nodes.push_back(CallTreeNode{});
    t.nodes[0].label = "all";
    // Frames are one function wherever they called from (the line is the call's, not the
    // function's): keyed by name and file, or module when there is no file.
    std::map<std::pair<std::string, std::string>, size_t> functions;
    auto function = [&](const MemoryFrame& f) {
        std::string name = memory_frame_name(f);
        auto [it, fresh] = functions.try_emplace(
            std::make_pair(name, f.file.empty() ? f.module : f.file), t.functions.size());
        if (fresh) {
            Function fn;
            fn.name = name;
            fn.file = f.file;
            fn.module = f.module;
            fn.line = f.line;
            t.functions.push_back(std::move(fn));
        }
        return it->second;
    };
    const MemoryFrame no_stack{"[no stack]", "", "", 0};
    std::map<std::pair<size_t, size_t>, size_t> child_of; // (parent node, function) -> node
    for (const MemorySite& s : m.sites) {
        uint64_t v = memory_weight(s, w);
        if (!v) continue;
        uint64_t count = w == MemoryWeight::kLeaked ? s.leaked_blocks : s.allocations;
        size_t node = 0;
        t.nodes[0].total_ns += v;
        t.nodes[0].calls += count;
        size_t frames = s.stack.empty() ? 1 : s.stack.size();
        for (size_t i = frames; i-- > 0;) { // outermost first
            size_t fn = function(s.stack.empty() ? no_stack : s.stack[i]);
            auto [it, fresh] = child_of.try_emplace(std::make_pair(node, fn), t.nodes.size());
            if (fresh) {
                CallTreeNode n;
                n.parent = node;
                n.function = fn;
                n.depth = t.nodes[node].depth + 1;
                n.inlined = !s.stack.empty() && s.stack[i].inlined;
                t.nodes.push_back(std::move(n));
                t.nodes[node].children.push_back(it->second);
            }
            node = it->second;
            t.nodes[node].total_ns += v;
            t.nodes[node].calls += count;
        }
        t.nodes[node].self_ns += v; // a recursive frame may be both a leaf and a parent
    }
    return t;
}

} // namespace prof::analysis::views
