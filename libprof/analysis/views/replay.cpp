// Replay: stream-ordered events -> activations with exact nanosecond times.
#include "analysis/views/replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace prof::analysis::views {

Replay::~Replay() = default;

uint64_t Replay::ns(uint64_t ticks) const {
    if (ticks <= start_ticks_) return 0;
    return uint64_t(static_cast<long double>(ticks - start_ticks_) * ns_per_tick_);
}

const reader::TraceInfo& Replay::add_trace(const std::string& path) {
    // The clock's frequency comes from the End record, at the end of the file: read the
    // process stream first (cheap: thread chunks are skipped) so that events can be converted
    // as they stream by.
    {
        reader::TraceReader meta(path);
        const reader::TraceInfo& m = meta.read_metadata();
        start_ticks_ = m.header.start_ticks;
        double tps = m.ticks_per_second > 0 ? m.ticks_per_second : 1e9;
        ns_per_tick_ = 1e9L / static_cast<long double>(tps);
        meta_ = std::make_unique<reader::TraceInfo>(m);
        history_ = std::make_unique<reader::AddressHistory>(*meta_);
        end_ns_ = ns(m.end_ticks);
    }
    progress_shown_ = false;
    reader::TraceReader r(path);
    trace_index_ = traces_.size();
    current_.clear();
    size_t first = threads_.size();
    const reader::TraceInfo& info = r.read(*this);
    if (progress_shown_) std::fputs("\r\033[K", stderr);
    // Frames still open when the trace ends are closed then.
    uint64_t end = ns(info.end_ticks);
    for (size_t i = first; i < threads_.size(); ++i) {
        ReplayThread& t = *threads_[i];
        uint64_t at = std::max(end, t.last_ns);
        while (!t.stack.empty()) pop(t, at);
    }
    traces_.push_back(std::make_unique<reader::TraceInfo>(info));
    return *traces_.back();
}

ReplayThread& Replay::thread(uint32_t stream) {
    auto it = current_.find(stream);
    if (it != current_.end()) return *it->second;
    threads_.push_back(std::make_unique<ReplayThread>());
    ReplayThread* t = threads_.back().get();
    t->trace = trace_index_;
    t->stream = stream;
    t->index = threads_.size() - 1;
    current_.emplace(stream, t);
    thread_created(*t);
    return *t;
}

uint64_t Replay::now(ReplayThread& t, uint64_t ticks) {
    uint64_t n = std::max(ns(ticks), t.last_ns);
    t.first_ns = std::min(t.first_ns, n);
    t.last_ns = n;
    // Every 4 M events: cheap enough to ask, and long traces take seconds per 100 M.
    if (progress_ && (++events_ & 0x3fffff) == 0 && end_ns_ && isatty(2)) {
        std::fprintf(stderr, "\rprofreport: reading %s: %3.0f%%", meta_->path.c_str(),
                     std::min(100.0, 100.0 * double(n) / double(end_ns_)));
        progress_shown_ = true;
    }
    advanced(t, n);
    return n;
}

void Replay::enter(ReplayThread& t, uint64_t address, uint64_t ticks, uint64_t count) {
    uint64_t n = now(t, ticks);
    size_t module =
        history_->reused(address) ? history_->module_at(address, ticks) : reader::kNoModule;
    t.stack.push_back(ReplayFrame{address, module, n, 0, count});
    opened(t);
}

void Replay::pop(ReplayThread& t, uint64_t n) {
    ReplayFrame f = t.stack.back();
    t.stack.pop_back();
    closed(t, f, std::max(n, f.enter_ns));
}

void Replay::on_function(uint32_t stream, uint32_t fn, uint64_t address) {
    ReplayThread& t = thread(stream);
    if (t.functions.size() <= fn) t.functions.resize(fn + 1);
    t.functions[fn] = address;
}

void Replay::on_enter(uint32_t stream, uint32_t fn, uint64_t ticks) {
    ReplayThread& t = thread(stream);
    enter(t, fn < t.functions.size() ? t.functions[fn] : 0, ticks);
}

void Replay::on_enter_address(uint32_t stream, uint64_t address, uint64_t ticks) {
    enter(thread(stream), address, ticks);
}

void Replay::on_exit(uint32_t stream, uint64_t ticks) {
    ReplayThread& t = thread(stream);
    uint64_t n = now(t, ticks);
    if (t.stack.empty()) {
        ++t.unmatched_exits;
        return;
    }
    pop(t, n);
}

void Replay::on_scope_run(uint32_t stream, uint32_t fn, uint64_t ticks, uint64_t count,
                          uint64_t total) {
    ReplayThread& t = thread(stream);
    enter(t, fn < t.functions.size() ? t.functions[fn] : 0, ticks, count);
    pop(t, now(t, ticks + total));
}

void Replay::on_abandon(uint32_t stream, uint32_t frames, uint64_t ticks) {
    ReplayThread& t = thread(stream);
    uint64_t n = now(t, ticks);
    for (uint32_t i = 0; i < frames && !t.stack.empty(); ++i) pop(t, n);
}

void Replay::on_thread_begin(uint32_t stream, uint64_t ticks) {
    now(thread(stream), ticks);
}

void Replay::on_thread_end(uint32_t stream, uint64_t ticks) {
    ReplayThread& t = thread(stream);
    uint64_t n = now(t, ticks);
    while (!t.stack.empty()) pop(t, n);
}

bool parse_duration(const std::string& text, uint64_t& ns) {
    if (text.empty()) return false;
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    std::string unit = end ? std::string(end) : std::string();
    double scale;
    if (unit.empty() || unit == "s")
        scale = 1e9;
    else if (unit == "ms")
        scale = 1e6;
    else if (unit == "us")
        scale = 1e3;
    else if (unit == "ns")
        scale = 1;
    else
        return false;
    if (end == text.c_str() || !std::isfinite(v) || v < 0 || v * scale > 1.8e19) return false;
    ns = uint64_t(std::llround(v * scale));
    return true;
}

std::string human_ns(uint64_t ns) {
    if (ns >= 1'000'000'000) return fmt::format("{:.3f} s", ns / 1e9);
    if (ns >= 1'000'000) return fmt::format("{:.3f} ms", ns / 1e6);
    if (ns >= 1'000) return fmt::format("{:.3f} us", ns / 1e3);
    return fmt::format("{} ns", ns);
}

} // namespace prof::analysis::views
