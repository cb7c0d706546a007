// The sized records of a thread stream beside its calls: the call tree's and the samples' (a
// counting thread's CallNode, CallCounts, Position, CallLatency; Sample, Counting) and the
// memory profiler's (Alloc, Free, Realloc, Stack, Rss and the packed forms of format 2.0), each
// checked against the stream's rules before the sink hears it.
#include "reader/cursor.hpp"
#include "reader/stream_state.hpp"
#include "reader/trace_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace prof::reader {

using format::Tag;

namespace {

uint64_t apply_delta(uint64_t& last, int64_t delta) {
    last += uint64_t(delta);
    return last;
}

} // namespace

// The records of a thread's samples and of its call tree (1.5 Sample, 1.9 Counting, CallNode,
// CallCounts, Position); false for any other tag. `m` covers the payload; `wrong` says why a
// record that decodes breaks the stream's rules.
bool TraceReader::call_tree_record(Tag tag, Cursor& m, StreamState& st, Thread& th, uint64_t& ticks,
                                   EventSink* sink, std::string& wrong) {
    const uint32_t stream = th.stream;
    if ((tag == Tag::kCallNode || tag == Tag::kCallCounts || tag == Tag::kPosition ||
         tag == Tag::kCallLatency) &&
        !st.counting) {
        wrong = fmt::format("call tree record 0x{:02x} in stream {}, which does not count its "
                            "calls in a call tree",
                            uint8_t(tag), stream);
        return true;
    }
    switch (tag) {
    case Tag::kSample: { // 1.5; 1.9: a counting thread's samples name their node
        SampleRecord s{};
        ticks += m.uleb();
        s.ticks = ticks;
        s.cpu_ns = m.uleb();
        s.own_ns = m.uleb();
        uint64_t own_count = m.uleb();
        uint64_t count = m.uleb();
        uint64_t node = st.counting ? m.uleb() : 0;
        s.ip = m.ok && m.p < m.end ? m.uleb() : 0; // 1.9, when the runtime knew it
        if (!m.ok || own_count > UINT32_MAX || count > UINT32_MAX) {
            m.ok = false;
            return true;
        }
        if (node > st.nodes) {
            wrong = fmt::format("sample in undefined call tree node {} of stream {}", node, stream);
            return true;
        }
        s.own_count = uint32_t(own_count);
        s.count = uint32_t(count);
        s.at_node = st.counting;
        s.node = uint32_t(node);
        info_.samples += count;
        info_.own_samples += own_count;
        th.samples += count;
        if (sink) sink->on_sample(stream, s);
        return true;
    }
    case Tag::kWaited: { // 1.11
        uint64_t run_delay = m.uleb();
        if (m.ok && sink) sink->on_waited(stream, run_delay);
        return true;
    }
    case Tag::kCounting: { // 1.9
        ticks += m.uleb();
        uint64_t cpu_ns = m.uleb();
        if (!m.ok) return true;
        if (st.counting) {
            wrong = fmt::format("stream {} begins counting its calls twice", stream);
            return true;
        }
        st.counting = true;
        th.counting = true;
        if (sink) sink->on_counting(stream, ticks, cpu_ns);
        return true;
    }
    case Tag::kCallNode: { // 1.9
        uint64_t node = m.uleb(), parent = m.uleb(), fn = m.uleb();
        if (!m.ok) return true;
        if (node != st.nodes + 1)
            wrong = fmt::format("call tree node {} of stream {} follows node {} (nodes are "
                                "numbered in order)",
                                node, stream, st.nodes);
        else if (parent >= node)
            wrong = fmt::format("call tree node {} of stream {} has parent {}, not an earlier "
                                "node",
                                node, stream, parent);
        else if (fn >= st.functions)
            wrong = fmt::format("call tree node {} of stream {} is of undefined function {}", node,
                                stream, fn);
        else if (node > UINT32_MAX)
            wrong = fmt::format("stream {} has more than 2^32 call tree nodes", stream);
        if (!wrong.empty()) return true;
        st.nodes = node;
        if (sink) sink->on_call_node(stream, uint32_t(node), uint32_t(parent), uint32_t(fn));
        return true;
    }
    case Tag::kCallCounts: { // 1.9
        uint64_t first = m.uleb(), n = m.uleb();
        uint8_t pad = m.u8();
        if (m.ok && pad <= 15 && m.has(pad)) m.p += pad;
        if (!m.ok || pad > 15 || n == 0 || n > uint64_t(m.end - m.p) / 8 ||
            uint64_t(m.end - m.p) != 8 * n) {
            m.ok = false;
            return true;
        }
        if (first != st.counted + 1 || first + n - 1 > UINT32_MAX) {
            wrong = fmt::format("call counts of nodes {}.. in stream {} do not follow those of "
                                "nodes up to {}",
                                first, stream, st.counted);
            return true;
        }
        st.counted = first + n - 1;
        std::vector<uint64_t> calls(n);
        for (uint64_t& v : calls) {
            v = m.u64();
            th.events += 2 * v;
        }
        if (sink) sink->on_call_counts(stream, uint32_t(first), calls);
        return true;
    }
    case Tag::kCallLatency: { // 1.13
        uint64_t node = m.uleb(), n = m.uleb();
        uint8_t pad = m.u8();
        if (m.ok && pad <= 15 && m.has(pad)) m.p += pad;
        if (!m.ok || pad > 15 || n == 0 || n > 4096 ||
            uint64_t(m.end - m.p) != format::latency_fields_size(n)) {
            m.ok = false;
            return true;
        }
        if (node == 0 || node > st.nodes) {
            wrong = fmt::format("call latency of undefined call tree node {} of stream {}", node,
                                stream);
            return true;
        }
        // One record per path, updated in place: a second one would count its calls twice.
        if (st.timed.size() <= node) st.timed.resize(node + 1);
        if (st.timed[node]) {
            wrong = fmt::format("second call latency record of call tree node {} of stream {}",
                                node, stream);
            return true;
        }
        st.timed[node] = true;
        CallLatencyRecord r;
        r.calls = m.u64();
        r.sum_ticks = m.u64();
        r.max_ticks = m.u64();
        r.max_end_ticks = m.u64();
        r.buckets.resize(n);
        for (uint32_t& b : r.buckets) b = m.u32();
        // The longest call is one of the calls, and ended after it began (on the trace's
        // clock, whose readings exceed any duration). A process killed while it updated the
        // record in place may leave it torn: its trace (not finished) keeps what adds up.
        bool torn = r.sum_ticks < r.max_ticks || r.max_end_ticks < r.max_ticks ||
                    (r.calls == 0 && r.sum_ticks != 0);
        if (torn && !(info_.header.flags & format::kFileFinished)) {
            r.max_ticks = std::min({r.max_ticks, r.sum_ticks, r.max_end_ticks});
            if (r.calls == 0) r.sum_ticks = r.max_ticks = 0;
        } else if (torn) {
            wrong = fmt::format("call latency of call tree node {} of stream {} holds a longest "
                                "call that is not among its calls",
                                node, stream);
            return true;
        }
        if (sink) sink->on_call_latency(stream, uint32_t(node), r);
        return true;
    }
    case Tag::kPosition: { // 1.9
        uint64_t node = m.uleb();
        if (!m.ok) return true;
        if (node > st.nodes) {
            wrong =
                fmt::format("position in undefined call tree node {} of stream {}", node, stream);
            return true;
        }
        if (sink) sink->on_position(stream, uint32_t(node));
        return true;
    }
    default:
        return false;
    }
}

// Sized records of a thread stream (the memory profiler's, Pause, sampled stacks); false for any
// other tag. `m` covers the payload.
bool TraceReader::memory_record(Tag tag, Cursor& m, uint32_t stream, uint64_t& ticks,
                                uint64_t& last_ptr, EventSink* sink) {
    switch (tag) {
    case Tag::kAlloc: {
        ticks += m.uleb();
        uint64_t ptr = apply_delta(last_ptr, m.sleb());
        uint64_t size = m.uleb();
        uint64_t stack = m.uleb();
        uint8_t kind = m.u8();
        uint64_t alignment = m.p < m.end ? m.uleb() : 0; // 1.4
        if (!valid_alignment(alignment, operator_form(format::AllocKind(kind)))) m.ok = false;
        if (m.ok && sink && kind >= 1 && kind <= 4 && stack <= UINT32_MAX)
            sink->on_alloc(stream, ticks, ptr, size, uint32_t(stack), format::AllocKind(kind),
                           alignment);
        ++info_.memory_records;
        return true;
    }
    case Tag::kFree: {
        ticks += m.uleb();
        uint64_t ptr = apply_delta(last_ptr, m.sleb());
        uint8_t kind = m.u8();
        uint64_t alignment = m.p < m.end ? m.uleb() : 0; // 1.4
        if (!valid_alignment(alignment, operator_form(format::FreeKind(kind)))) m.ok = false;
        if (m.ok && sink && kind >= 1 && kind <= 3)
            sink->on_free(stream, ticks, ptr, format::FreeKind(kind), alignment);
        ++info_.memory_records;
        return true;
    }
    case Tag::kRealloc: {
        ticks += m.uleb();
        uint64_t old_ptr = apply_delta(last_ptr, m.sleb());
        uint64_t ptr = apply_delta(last_ptr, m.sleb());
        uint64_t size = m.uleb();
        uint64_t stack = m.uleb();
        if (m.ok && sink && stack <= UINT32_MAX)
            sink->on_realloc(stream, ticks, old_ptr, ptr, size, uint32_t(stack));
        ++info_.memory_records;
        return true;
    }
    case Tag::kStack: {
        uint64_t id = m.uleb();
        uint64_t n = m.uleb();
        if (!m.ok || n > 1024 || !m.has(n * 8) || id > UINT32_MAX) {
            m.ok = false;
            return true;
        }
        std::vector<uint64_t> pcs(n);
        for (auto& pc : pcs) pc = m.u64();
        if (sink) sink->on_stack(stream, uint32_t(id), pcs);
        return true;
    }
    case Tag::kRss: {
        ticks += m.uleb();
        uint64_t bytes = m.uleb();
        if (m.ok && sink) sink->on_rss(stream, ticks, bytes);
        return true;
    }
    case Tag::kPause: {
        uint64_t spent = m.uleb();
        if (m.ok && sink) sink->on_pause(stream, spent);
        return true;
    }
    case Tag::kStackSample: { // 1.7
        ticks += m.uleb();
        uint64_t stack = m.uleb();
        uint64_t cpu_ns = m.uleb();
        // A sample stands for a sampling period: more than a CPU hour is no sample.
        if (!m.ok || stack == 0 || stack > UINT32_MAX || cpu_ns > 3600000000000ull) {
            m.ok = false;
            return true;
        }
        ++info_.stack_samples;
        ++info_.threads[stream].samples;
        if (sink) sink->on_stack_sample(stream, ticks, uint32_t(stack), cpu_ns);
        return true;
    }
    case Tag::kOffCpu: { // 1.8
        ticks += m.uleb();
        uint64_t stack = m.uleb();
        uint64_t ns = m.uleb();
        uint64_t runnable = m.ok && m.p < m.end ? m.uleb() : UINT64_MAX; // 1.11
        // One stretch off CPU within one run: more than a year of it is corruption.
        if (!m.ok || stack == 0 || stack > UINT32_MAX || ns > 366 * 86400000000000ull ||
            (runnable > 1 && runnable != UINT64_MAX)) {
            m.ok = false;
            return true;
        }
        ++info_.off_cpu_records;
        info_.off_cpu_ns += ns;
        if (sink)
            sink->on_off_cpu(stream, ticks, uint32_t(stack), ns,
                             runnable == UINT64_MAX ? -1 : int(runnable));
        return true;
    }
    default:
        return false;
    }
}

// The memory records of a packed file (2.0). Blocks get names of their own, never reused:
// (stream << 40) | ordinal, and frees of blocks the trace did not allocate get names from
// stream 0, which allocates nothing. The sink sees these names where a trace as written has
// pointers; the analysis only compares them. False when the record is malformed.
bool TraceReader::packed_memory_record(uint8_t tag, Cursor& c, StreamState& st, uint32_t stream,
                                       uint64_t& ticks, uint64_t alignment, EventSink* sink) {
    constexpr unsigned kOrdinalBits = 40;
    auto name = [](uint64_t s, uint64_t ordinal) { return (s << kOrdinalBits) | ordinal; };
    auto unknown = [&] { return name(0, ++unknown_blocks_); };
    // Releases of another stream's block are timed to the tick (their allocation must stay
    // older); the others in units of 2^memory_time_shift ticks.
    bool remote_release =
        (tag >= uint8_t(Tag::kMemFreeRemote) && tag < uint8_t(Tag::kMemRealloc)) ||
        tag == uint8_t(Tag::kMemReallocRemote);
    ticks += c.uleb() << (remote_release ? 0 : info_.header.memory_time_shift);
    // A block of another stream, named by that stream's ordinal (whose records may come later
    // in the file: the name is only compared, never looked up here).
    auto remote = [&](uint64_t& ptr) {
        uint64_t s = c.uleb();
        uint64_t ordinal = c.uleb();
        ptr = name(s, ordinal);
        return s >= 1 && s <= UINT32_MAX && ordinal >= 1 && ordinal < (uint64_t(1) << kOrdinalBits);
    };
    uint64_t ptr = 0;
    if (tag >= uint8_t(Tag::kMemAlloc) && tag < uint8_t(Tag::kMemFree)) {
        uint64_t size = c.uleb();
        uint64_t stack = c.uleb();
        if (!c.ok || stack > UINT32_MAX) return false;
        ++info_.memory_records;
        ptr = name(stream, ++st.blocks);
        auto kind = format::AllocKind(tag - uint8_t(Tag::kMemAlloc) + 1);
        if (!operator_form(kind)) alignment = 0;
        if (sink) sink->on_alloc(stream, ticks, ptr, size, uint32_t(stack), kind, alignment);
        return true;
    }
    if (tag >= uint8_t(Tag::kMemFree) && tag < uint8_t(Tag::kMemRealloc)) {
        bool ok;
        auto kind = format::FreeKind((tag - uint8_t(Tag::kMemFree)) % 3 + 1);
        if (!operator_form(kind)) alignment = 0;
        if (tag < uint8_t(Tag::kMemFreeRemote)) {
            uint64_t back = c.uleb();
            ok = back <= st.blocks;
            ptr = back ? name(stream, st.blocks - back + 1) : unknown();
        } else {
            ok = remote(ptr);
        }
        if (!c.ok || !ok) return false;
        ++info_.memory_records;
        if (sink) sink->on_free(stream, ticks, ptr, kind, alignment);
        return true;
    }
    uint64_t old_ptr = 0;
    bool ok = true;
    if (tag == uint8_t(Tag::kMemRealloc)) {
        uint64_t old = c.uleb();
        ok = old <= st.blocks + 1;
        old_ptr = old == 0 ? 0 : old == 1 ? unknown() : name(stream, st.blocks - (old - 1) + 1);
    } else {
        ok = remote(old_ptr);
    }
    uint64_t size = c.uleb();
    uint64_t stack = c.uleb();
    if (!c.ok || !ok || stack > UINT32_MAX) return false;
    ++info_.memory_records;
    ptr = name(stream, ++st.blocks);
    if (sink) sink->on_realloc(stream, ticks, old_ptr, ptr, size, uint32_t(stack));
    return true;
}

} // namespace prof::reader
