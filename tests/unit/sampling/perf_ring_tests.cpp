// perf ring-buffer parsing (sampling::parse_ring) on records built byte by byte: samples with
// call chain, registers and stack copy, lost records, side records, and a ring that wraps.
#include "sampling/perf_sampler.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <linux/perf_event.h>
#include <string>
#include <sys/mman.h>
#include <vector>

using namespace prof::sampling;

namespace {

// PERF_RECORD_LOST_SAMPLES (linux/perf_event.h since 4.2): records the sampler skips.
constexpr uint32_t kLostSamples = 13;

// One record: header, then fields appended in the order the kernel writes them.
struct Record {
    std::vector<uint8_t> bytes;
    Record(uint32_t type, uint16_t misc = 0) {
        bytes.resize(sizeof(perf_event_header));
        perf_event_header h{type, misc, 0};
        std::memcpy(bytes.data(), &h, sizeof h);
    }
    Record& u32s(uint32_t a, uint32_t b) {
        put(&a, 4);
        return put(&b, 4);
    }
    Record& u64(uint64_t v) { return put(&v, 8); }
    Record& put(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        bytes.insert(bytes.end(), b, b + n);
        return *this;
    }
    Record& str(const std::string& s) { // NUL-terminated, padded to 8 bytes
        put(s.c_str(), s.size() + 1);
        while (bytes.size() % 8) bytes.push_back(0);
        return *this;
    }
    std::vector<uint8_t> done() const {
        std::vector<uint8_t> out = bytes;
        uint16_t size = uint16_t(out.size());
        std::memcpy(out.data() + offsetof(perf_event_header, size), &size, 2);
        return out;
    }
};

// The sample_id trailer of side records: pid, tid, time.
Record& trailer(Record& r, uint32_t pid, uint32_t tid, uint64_t time) {
    return r.u32s(pid, tid).u64(time);
}

// A ring of `size` bytes whose records start at position `tail` (which may exceed `size`).
struct Ring {
    std::vector<uint8_t> data;
    uint64_t tail, head;
    Ring(size_t size, uint64_t start) : data(size, 0xEE), tail(start), head(start) {}
    void add(const std::vector<uint8_t>& rec) {
        for (size_t i = 0; i < rec.size(); ++i) data[(head + i) % data.size()] = rec[i];
        head += rec.size();
    }
};

// What the sink was given, copied out of the ring.
struct Seen {
    Sample s;
    std::vector<uint64_t> chain;
    std::vector<uint8_t> stack;
};

struct Collect : RecordSink {
    std::vector<Seen> samples;
    std::vector<Mapping> mappings;
    std::vector<TaskEvent> tasks;
    std::vector<CommEvent> comms;
    std::vector<SwitchEvent> switches;
    std::vector<uint64_t> lost;
    std::vector<std::string> order; // record kinds, in delivery order
    void on_sample(const Sample& s) override {
        Seen seen{s, std::vector<uint64_t>(s.chain, s.chain + s.chain_size),
                  s.stack ? std::vector<uint8_t>(s.stack, s.stack + s.stack_size)
                          : std::vector<uint8_t>{}};
        seen.s.chain = nullptr;
        seen.s.stack = nullptr;
        samples.push_back(std::move(seen));
        order.push_back("sample");
    }
    void on_mapping(const Mapping& m) override {
        mappings.push_back(m);
        order.push_back("mapping");
    }
    void on_task(const TaskEvent& t) override {
        tasks.push_back(t);
        order.push_back(t.exit ? "exit" : "fork");
    }
    void on_comm(const CommEvent& c) override {
        comms.push_back(c);
        order.push_back("comm");
    }
    void on_lost(uint64_t n) override {
        lost.push_back(n);
        order.push_back("lost");
    }
    void on_switch(const SwitchEvent& e) override {
        switches.push_back(e);
        order.push_back("switch");
    }
};

constexpr uint64_t kContextUser = uint64_t(PERF_CONTEXT_USER);

// A sample as the cpu-clock event writes it with a stack copy: pid/tid, time, period, the
// chain (`chain` as given, markers included), the ABI and bp, sp, ip, then the copy.
std::vector<uint8_t> stack_sample(uint32_t pid, uint32_t tid, uint64_t time, uint64_t period,
                                  const std::vector<uint64_t>& chain, uint64_t bp, uint64_t sp,
                                  uint64_t ip, const std::vector<uint8_t>& stack, uint64_t dyn) {
    Record r(PERF_RECORD_SAMPLE);
    r.u32s(pid, tid).u64(time).u64(period).u64(chain.size());
    for (uint64_t v : chain) r.u64(v);
    r.u64(PERF_SAMPLE_REGS_ABI_64).u64(bp).u64(sp).u64(ip);
    r.u64(stack.size()).put(stack.data(), stack.size()).u64(dyn);
    return r.done();
}

std::vector<uint8_t> bytes_from(uint8_t first, size_t n) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = uint8_t(first + i);
    return v;
}

uint64_t parse(Ring& ring, const RingLayout& layout, RingStats& stats, Collect& sink) {
    std::vector<uint8_t> scratch;
    return parse_ring(ring.data.data(), ring.data.size(), ring.tail, ring.head, layout, scratch,
                      stats, sink);
}

} // namespace

TEST_CASE("perf ring: a sample with call chain, registers and stack copy is decoded exactly") {
    Ring ring(4096, 0);
    std::vector<uint8_t> stack = bytes_from(1, 64);
    auto rec = stack_sample(41, 42, 1'000'000'123, 1'001'001,
                            {kContextUser, 0x401000, 0x401234, 0x7f0000001000}, 0x7ffd1000,
                            0x7ffd0f00, 0x401000, stack, 48);
    ring.add(rec);
    Collect sink;
    RingStats stats;
    CHECK(parse(ring, RingLayout{true, false}, stats, sink) == ring.head);
    REQUIRE(sink.samples.size() == 1);
    const Seen& s = sink.samples[0];
    CHECK(s.s.pid == 41);
    CHECK(s.s.tid == 42);
    CHECK(s.s.time_ns == 1'000'000'123);
    CHECK(s.s.period_ns == 1'001'001);
    // The context marker is dropped; the user addresses stay, innermost first.
    CHECK(s.chain == std::vector<uint64_t>{0x401000, 0x401234, 0x7f0000001000});
    CHECK(s.s.regs);
    CHECK(s.s.bp == 0x7ffd1000);
    CHECK(s.s.sp == 0x7ffd0f00);
    CHECK(s.s.ip == 0x401000);
    // The kernel copied 64 bytes but only 48 (dyn_size) were stack.
    CHECK(s.s.stack_size == 48);
    CHECK(s.stack == std::vector<uint8_t>(stack.begin(), stack.begin() + 48));
    CHECK_FALSE(s.s.switch_out);
    CHECK(stats.samples == 1);
    CHECK(stats.sample_bytes == rec.size());
}

TEST_CASE("perf ring: without a stack copy the sample ends at the chain") {
    Ring ring(1024, 0);
    Record r(PERF_RECORD_SAMPLE);
    r.u32s(7, 8).u64(500).u64(1000).u64(2).u64(0x1111).u64(0x2222);
    ring.add(r.done());
    Collect sink;
    RingStats stats{100, 3}; // counts add to what the buffer had
    CHECK(parse(ring, RingLayout{false, false}, stats, sink) == ring.head);
    REQUIRE(sink.samples.size() == 1);
    CHECK(sink.samples[0].chain == std::vector<uint64_t>{0x1111, 0x2222});
    CHECK_FALSE(sink.samples[0].s.regs);
    CHECK(sink.samples[0].s.stack_size == 0);
    CHECK(stats.samples == 4);
    CHECK(stats.sample_bytes == 100 + r.done().size());
}

TEST_CASE("perf ring: a sample taken in the kernel has no user registers (ABI none)") {
    Ring ring(1024, 0);
    Record r(PERF_RECORD_SAMPLE);
    r.u32s(7, 8).u64(500).u64(1000).u64(0);
    r.u64(PERF_SAMPLE_REGS_ABI_NONE).u64(0); // no registers, an empty stack copy
    ring.add(r.done());
    Collect sink;
    RingStats stats;
    parse(ring, RingLayout{true, false}, stats, sink);
    REQUIRE(sink.samples.size() == 1);
    CHECK_FALSE(sink.samples[0].s.regs);
    CHECK(sink.samples[0].s.stack_size == 0);
    CHECK(sink.samples[0].chain.empty());
}

TEST_CASE("perf ring: --idle switch-out samples (period 1) are marked and not counted") {
    Ring ring(1024, 0);
    ring.add(stack_sample(5, 6, 10, 1, {0xAAA}, 1, 2, 0xAAA, bytes_from(0, 16), 16));
    ring.add(stack_sample(5, 6, 20, 1'000'000, {0xBBB}, 1, 2, 0xBBB, bytes_from(0, 16), 16));
    Collect sink;
    RingStats stats;
    parse(ring, RingLayout{true, true}, stats, sink);
    REQUIRE(sink.samples.size() == 2);
    CHECK(sink.samples[0].s.switch_out);
    CHECK_FALSE(sink.samples[1].s.switch_out);
    CHECK(stats.samples == 1);
    // Without --idle, period 1 is an ordinary sample.
    Collect plain;
    RingStats plain_stats;
    parse(ring, RingLayout{true, false}, plain_stats, plain);
    CHECK_FALSE(plain.samples[0].s.switch_out);
    CHECK(plain_stats.samples == 2);
}

TEST_CASE("perf ring: LOST reports its count, LOST_SAMPLES is skipped and parsing goes on") {
    Ring ring(1024, 0);
    Record lost(PERF_RECORD_LOST);
    lost.u64(99).u64(17); // id, lost
    trailer(lost, 1, 1, 5);
    Record lost_samples(kLostSamples);
    lost_samples.u64(23);
    trailer(lost_samples, 1, 1, 6);
    Record exit(PERF_RECORD_EXIT);
    exit.u32s(10, 1).u32s(11, 10).u64(777);
    ring.add(lost.done());
    ring.add(lost_samples.done());
    ring.add(exit.done());
    Collect sink;
    RingStats stats;
    CHECK(parse(ring, RingLayout{true, false}, stats, sink) == ring.head);
    CHECK(sink.order == std::vector<std::string>{"lost", "exit"});
    CHECK(sink.lost == std::vector<uint64_t>{17});
    REQUIRE(sink.tasks.size() == 1);
    CHECK(sink.tasks[0].exit);
    CHECK(sink.tasks[0].pid == 10);
    CHECK(sink.tasks[0].ppid == 1);
    CHECK(sink.tasks[0].tid == 11);
    CHECK(sink.tasks[0].ptid == 10);
    CHECK(sink.tasks[0].time_ns == 777);
    CHECK(stats.samples == 0);
}

TEST_CASE("perf ring: MMAP2 with a build id, COMM at exec, FORK and SWITCH") {
    Ring ring(2048, 0);
    Record mmap(PERF_RECORD_MMAP2, PERF_RECORD_MISC_MMAP_BUILD_ID);
    mmap.u32s(300, 301).u64(0x555500000000).u64(0x3000).u64(0x1000);
    uint8_t id[24] = {20, 0, 0, 0}; // build id size, reserved, then the 20 bytes
    for (int i = 0; i < 20; ++i) id[4 + i] = uint8_t(0xA0 + i);
    mmap.put(id, sizeof id).u32s(PROT_READ | PROT_EXEC, MAP_PRIVATE).str("/usr/bin/prog");
    trailer(mmap, 300, 301, 4000);
    Record comm(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
    comm.u32s(300, 301).str("prog");
    trailer(comm, 300, 301, 4100);
    Record fork(PERF_RECORD_FORK);
    fork.u32s(300, 300).u32s(302, 301).u64(4200);
    Record sw(PERF_RECORD_SWITCH,
              PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT);
    trailer(sw, 300, 302, 4300);
    for (auto* r : {&mmap, &comm, &fork, &sw}) ring.add(r->done());
    Collect sink;
    RingStats stats;
    CHECK(parse(ring, RingLayout{true, false}, stats, sink) == ring.head);
    CHECK(sink.order == std::vector<std::string>{"mapping", "comm", "fork", "switch"});
    const Mapping& m = sink.mappings.at(0);
    CHECK(m.pid == 300);
    CHECK(m.tid == 301);
    CHECK(m.start == 0x555500000000);
    CHECK(m.length == 0x3000);
    CHECK(m.offset == 0x1000);
    CHECK(m.executable);
    CHECK(m.path == "/usr/bin/prog");
    CHECK(m.build_id == std::string(reinterpret_cast<const char*>(id + 4), 20));
    CHECK(m.time_ns == 4000);
    const CommEvent& c = sink.comms.at(0);
    CHECK(c.name == "prog");
    CHECK(c.exec);
    CHECK(c.time_ns == 4100);
    CHECK_FALSE(sink.tasks.at(0).exit);
    CHECK(sink.tasks.at(0).tid == 302);
    CHECK(sink.tasks.at(0).time_ns == 4200);
    const SwitchEvent& e = sink.switches.at(0);
    CHECK(e.tid == 302);
    CHECK(e.time_ns == 4300);
    CHECK(e.out);
    CHECK(e.preempted);
}

TEST_CASE("perf ring: a record that wraps around the end is decoded as a whole one") {
    std::vector<uint8_t> stack = bytes_from(0x10, 40);
    auto rec = stack_sample(1, 2, 3, 4, {0xC0DE, 0xCAFE}, 0xB0, 0x5B, 0xC0DE, stack, 40);
    // Positions past several turns of a 256-byte ring; the sample starts 24 bytes before the
    // end, so its header is whole but its body wraps (and then a header that wraps too).
    const size_t size = 256;
    Ring ring(size, 5 * size - 24);
    ring.add(rec);
    Record lost(PERF_RECORD_LOST);
    lost.u64(1).u64(3);
    trailer(lost, 1, 2, 9);
    ring.add(lost.done());
    Ring wrapped_header(size, 7 * size - 4); // the header itself wraps
    wrapped_header.add(rec);
    for (Ring* r : {&ring, &wrapped_header}) {
        Collect sink;
        RingStats stats;
        CHECK(parse(*r, RingLayout{true, false}, stats, sink) == r->head);
        REQUIRE(sink.samples.size() == 1);
        const Seen& s = sink.samples[0];
        CHECK(s.chain == std::vector<uint64_t>{0xC0DE, 0xCAFE});
        CHECK(s.s.ip == 0xC0DE);
        CHECK(s.s.sp == 0x5B);
        CHECK(s.s.bp == 0xB0);
        CHECK(s.stack == stack);
        CHECK(stats.sample_bytes == rec.size());
    }
}

TEST_CASE("perf ring: a record not yet whole stops the walk before it") {
    Ring ring(1024, 64);
    Record exit(PERF_RECORD_EXIT);
    exit.u32s(10, 1).u32s(11, 10).u64(777);
    ring.add(exit.done());
    uint64_t after_exit = ring.head;
    auto rec = stack_sample(1, 2, 3, 4, {0x1}, 0, 0, 0x1, bytes_from(0, 32), 32);
    ring.add(rec);
    ring.head -= 8; // the writer has not finished the sample
    Collect sink;
    RingStats stats;
    CHECK(parse(ring, RingLayout{true, false}, stats, sink) == after_exit);
    CHECK(sink.order == std::vector<std::string>{"exit"});
    // A header that claims less than itself is damage: nothing is read past it.
    Ring bad(1024, 0);
    Record zero(PERF_RECORD_EXIT);
    auto bytes = zero.done();
    bytes.resize(16, 0);
    uint16_t tiny = 4;
    std::memcpy(bytes.data() + offsetof(perf_event_header, size), &tiny, 2);
    bad.add(bytes);
    Collect none;
    CHECK(parse(bad, RingLayout{true, false}, stats, none) == 0);
    CHECK(none.order.empty());
}
