// The Sample records of a trace (format 1.5), for tools/bench/sampling.py: one JSON line with
// the samples, those that landed in the profiler, the records and their bytes, and the CPU time
// they account for. Built by CMake (PROF_BUILD_BENCH=ON) against the reader library.
#include "reader/trace_reader.hpp"

#include <prof/record_codec.hpp>

#include <cstdio>
#include <map>

using namespace prof;

namespace {

// The time chain of every stream (the time of its latest timed record) gives each Sample's dt,
// and with it the record's size as the writer encoded it.
struct Sink : reader::EventSink {
    std::map<uint32_t, uint64_t> chain, last_cpu; // per stream
    uint64_t records = 0, bytes = 0, program_ns = 0, own_ns = 0;
    void on_calls(uint32_t stream, const reader::CallRecord* r, size_t n) override {
        if (n) chain[stream] = r[n - 1].ticks;
    }
    void on_function(uint32_t, uint32_t, uint64_t) override {}
    void on_enter(uint32_t, uint32_t, uint64_t) override {}
    void on_exit(uint32_t, uint64_t) override {}
    void on_enter_address(uint32_t stream, uint64_t, uint64_t ticks) override {
        chain[stream] = ticks;
    }
    void on_scope_run(uint32_t stream, uint32_t, uint64_t ticks, uint64_t, uint64_t) override {
        chain[stream] = ticks;
    }
    void on_abandon(uint32_t stream, uint32_t, uint64_t ticks) override { chain[stream] = ticks; }
    void on_thread_begin(uint32_t stream, uint64_t ticks) override { chain[stream] = ticks; }
    void on_thread_end(uint32_t stream, uint64_t ticks) override { chain[stream] = ticks; }
    void on_alloc(uint32_t stream, uint64_t ticks, uint64_t, uint64_t, uint32_t, format::AllocKind,
                  uint64_t) override {
        chain[stream] = ticks;
    }
    void on_free(uint32_t stream, uint64_t ticks, uint64_t, format::FreeKind, uint64_t) override {
        chain[stream] = ticks;
    }
    void on_realloc(uint32_t stream, uint64_t ticks, uint64_t, uint64_t, uint64_t,
                    uint32_t) override {
        chain[stream] = ticks;
    }
    void on_rss(uint32_t stream, uint64_t ticks, uint64_t) override { chain[stream] = ticks; }
    void on_sample(uint32_t stream, const reader::SampleRecord& s) override {
        uint64_t dt = s.ticks - chain[stream];
        chain[stream] = s.ticks;
        uint8_t rec[format::kMaxSampleRecord];
        bytes +=
            size_t(format::put_sample(rec, dt, s.cpu_ns, s.own_ns, s.own_count, s.count) - rec);
        ++records;
        auto it = last_cpu.find(stream);
        if (it != last_cpu.end()) {
            program_ns += s.cpu_ns - it->second - s.own_ns;
            own_ns += s.own_ns;
        }
        last_cpu[stream] = s.cpu_ns;
    }
};

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: sample_stats TRACE\n");
        return 2;
    }
    try {
        Sink sink;
        reader::TraceReader r(argv[1]);
        const reader::TraceInfo& info = r.read(sink);
        std::printf("{\"samples\": %llu, \"own_samples\": %llu, \"records\": %llu, \"bytes\": "
                    "%llu, \"program_ns\": %llu, \"own_ns\": %llu, \"threads\": %zu}\n",
                    (unsigned long long)info.samples, (unsigned long long)info.own_samples,
                    (unsigned long long)sink.records, (unsigned long long)sink.bytes,
                    (unsigned long long)sink.program_ns, (unsigned long long)sink.own_ns,
                    info.threads.size());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
