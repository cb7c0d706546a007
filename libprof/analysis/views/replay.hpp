// Replays each thread's enter/exit events of a trace on a shadow stack, in nanoseconds since
// the trace started, and reports every activation when it opens and when it closes. The views
// that need more than ProfileBuilder's per-function sums (call tree, timelines) derive from it.
//
// Times are converted per event, not per duration, so a child's [enter, exit] always lies
// inside its parent's and self times add up exactly; within a thread time never goes back
// (a later event earlier than the last one is taken at the last one's time). Frames that are
// abandoned (longjmp, exceptions through uninstrumented code), still open when their thread
// ends, or still open when the trace ends are closed then, as ProfileBuilder does.
#pragma once

#include "reader/trace_reader.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace prof::analysis::views {

struct ReplayFrame {
    uint64_t address = 0;  // runtime address of the function or marked site
    // At an address that several objects occupied in turn (dlclose, then dlopen of another):
    // the one this call ran in (index into TraceInfo::modules); otherwise kNoModule.
    size_t module = reader::kNoModule;
    uint64_t enter_ns = 0; // since the trace's start
    uint64_t user = 0;     // for the derived view (a call-tree node, a flag)
    // Activations the frame stands for: more than 1 for a scope run (format 1.3), which
    // opens once at its first activation's start and closes after their summed time.
    uint64_t count = 1;
};

struct ReplayThread {
    size_t trace = 0; // index of the trace in this replay
    uint32_t stream = 0;
    size_t index = 0;                // order of first appearance over all traces
    std::vector<uint64_t> functions; // stream-local function index -> address
    std::vector<ReplayFrame> stack;
    uint64_t first_ns = UINT64_MAX, last_ns = 0;
    uint64_t unmatched_exits = 0;
};

class Replay : public reader::EventSink {
  public:
    ~Replay() override;
    // Reads one trace: a metadata pass for the clock, then the events (throws TraceError).
    // Returns the trace's information; it stays valid as long as the Replay.
    const reader::TraceInfo& add_trace(const std::string& path);
    const std::vector<std::unique_ptr<reader::TraceInfo>>& traces() const { return traces_; }
    const std::vector<std::unique_ptr<ReplayThread>>& threads() const { return threads_; }
    uint64_t ns(uint64_t ticks) const; // of the trace being read
    // While a trace is read: its process records (symbols, sites, threads), from a first pass.
    const reader::TraceInfo& current() const { return *meta_; }
    size_t current_index() const { return trace_index_; }
    // Show "reading N%" on standard error while reading, when it is a terminal.
    void show_progress(bool on) { progress_ = on; }

  protected:
    // `t.stack.back()` is the frame just entered.
    virtual void opened(ReplayThread& t) = 0;
    // The frame has been popped; `t.stack` holds its ancestors.
    virtual void closed(ReplayThread& t, const ReplayFrame& f, uint64_t exit_ns) = 0;
    // Every event of a thread passes here first, with its (monotonic) time.
    virtual void advanced(ReplayThread& /*t*/, uint64_t /*ns*/) {}
    virtual void thread_created(ReplayThread& /*t*/) {}

  private:
    ReplayThread& thread(uint32_t stream);
    uint64_t now(ReplayThread& t, uint64_t ticks);
    void enter(ReplayThread& t, uint64_t address, uint64_t ticks, uint64_t count = 1);
    void pop(ReplayThread& t, uint64_t ns);

    void on_function(uint32_t stream, uint32_t fn, uint64_t address) override;
    void on_enter(uint32_t stream, uint32_t fn, uint64_t ticks) override;
    void on_enter_address(uint32_t stream, uint64_t address, uint64_t ticks) override;
    void on_exit(uint32_t stream, uint64_t ticks) override;
    void on_scope_run(uint32_t stream, uint32_t fn, uint64_t ticks, uint64_t count,
                      uint64_t total) override;
    void on_abandon(uint32_t stream, uint32_t frames, uint64_t ticks) override;
    void on_thread_begin(uint32_t stream, uint64_t ticks) override;
    void on_thread_end(uint32_t stream, uint64_t ticks) override;

    std::vector<std::unique_ptr<reader::TraceInfo>> traces_;
    std::vector<std::unique_ptr<ReplayThread>> threads_;
    std::unordered_map<uint32_t, ReplayThread*> current_; // stream -> thread, this trace
    size_t trace_index_ = 0;
    std::unique_ptr<reader::TraceInfo> meta_;
    std::unique_ptr<reader::AddressHistory> history_; // of meta_
    bool progress_ = false, progress_shown_ = false;
    uint64_t events_ = 0, end_ns_ = 0;
    uint64_t start_ticks_ = 0;
    long double ns_per_tick_ = 1;
};

// "1.5s", "200ms", "30us", "100ns" or plain seconds -> nanoseconds; false when malformed.
bool parse_duration(const std::string& text, uint64_t& ns);
// 1234567 -> "1.235 ms": three significant decimals, for people.
std::string human_ns(uint64_t ns);

} // namespace prof::analysis::views
