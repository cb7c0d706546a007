// Line tables (analysis/model/lines.hpp): PROF_LINE sums from the trace's LineCounts and LineStats,
// scopes from the call profile, per thread and compensated by the clock reads around a line.
#include "unit/analysis/analysis_support.hpp"

#include "analysis/model/lines.hpp"

using namespace prof;
using namespace prof::test;

namespace {

void put_u64(std::vector<uint8_t>& p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p.push_back(uint8_t(v >> (8 * i)));
}
void put_str(std::vector<uint8_t>& p, const std::string& s) {
    p.push_back(uint8_t(s.size()));
    p.insert(p.end(), s.begin(), s.end());
}

TraceBuilder& site(TraceBuilder& b, uint64_t address, format::SiteKind kind, uint8_t line,
                   const std::string& function, const std::string& label) {
    std::vector<uint8_t> p;
    put_u64(p, address);
    p.push_back(uint8_t(kind));
    p.push_back(line);
    put_str(p, "/src/app.cpp");
    put_str(p, function);
    put_str(p, label);
    return b.sized(format::Tag::kSite, p);
}

TraceBuilder& line_counts(TraceBuilder& b, uint64_t site, uint64_t hits, uint64_t ticks) {
    std::vector<uint8_t> p;
    put_u64(p, site);
    put_u64(p, hits);
    put_u64(p, ticks);
    return b.sized(format::Tag::kLineCounts, p);
}

// Thread 1: main 0..100 runs the scope "setup" 10..50, and line 12 five times in 100 ticks
// (LineCounts) and twice in 20 (LineStats); thread 2 runs line 12 three times in 30 ticks and
// line 14 once in 9. Each hit's clock reads cost 2 ticks.
std::string lines_trace() {
    TraceBuilder b;
    b.chunk(0);
    overheads(b, "0.00", "0.00", "2.00");
    site(b, 0x5000, format::SiteKind::kLine, 12, "int main()", "work()");
    site(b, 0x5100, format::SiteKind::kLine, 14, "int main()", "more()");
    site(b, 0x6000, format::SiteKind::kScope, 20, "int main()", "setup");
    b.chunk(1, 0).function(0x1000).function(0x6000);
    b.enter(0, 0).enter(1, 10).exit(40);
    line_counts(b, 0x5000, 5, 100);
    std::vector<uint8_t> stats = {1}; // stream 1, site 0x5000, 2 hits, 20 ticks, no RSS
    put_u64(stats, 0x5000);
    for (uint8_t v : {2, 20, 0, 0, 0, 0}) stats.push_back(v);
    b.sized(format::Tag::kLineStats, stats);
    b.exit(50);
    b.chunk(2, 0).tag(format::Tag::kThreadBegin).uleb(0).u32(2002).str("");
    line_counts(b, 0x5000, 3, 30);
    line_counts(b, 0x5100, 1, 9);
    b.chunk(0).symbol(0x1000, "main", "/src/app.cpp", 10).end_record(100);
    return save_trace(b, "lines.trace");
}

const analysis::LineRow& row(const analysis::LineTable& t, uint32_t line) {
    for (const analysis::LineRow& r : t.rows)
        if (r.line == line) return r;
    FAIL("no row for line " << line);
    return t.rows.front();
}

} // namespace

TEST_CASE("line tables: hits and times per line, scopes from the profile, all threads") {
    analysis::Session s;
    s.add_trace(lines_trace());
    std::vector<analysis::LineTable> tables = analysis::line_tables(s.profile());
    REQUIRE(tables.size() == 1);
    const analysis::LineTable& t = tables[0];
    CHECK(t.file == "/src/app.cpp");
    CHECK(t.function == "main()");
    REQUIRE(t.rows.size() == 3);
    CHECK(t.rows[0].line == 12); // by line
    const analysis::LineRow& l12 = row(t, 12);
    CHECK(l12.kind == "line");
    CHECK(l12.mark == "PROF_LINE(work())");
    CHECK(l12.hits == 5 + 2 + 3);
    // (100 - 5 x 2) + (20 - 2 x 2) + (30 - 3 x 2)
    CHECK(l12.time == approx((90 + 16 + 24) * 1e-9));
    CHECK(row(t, 14).hits == 1);
    CHECK(row(t, 14).time == approx(7e-9));
    const analysis::LineRow& scope = row(t, 20);
    CHECK(scope.kind == "scope");
    CHECK(scope.mark == "PROF_SCOPE(\"setup\")");
    CHECK(scope.hits == 1);
    CHECK(scope.time == approx(40e-9));
    CHECK(t.total_time == approx((130 + 7 + 40) * 1e-9));
    CHECK_FALSE(t.heap);
}

TEST_CASE("line tables: raw ticks without compensation, one thread, a function filter") {
    std::string path = lines_trace();
    analysis::Session raw(analysis::SessionOptions{false, true, {}, nullptr});
    raw.add_trace(path);
    std::vector<analysis::LineTable> tables = analysis::line_tables(raw.profile());
    REQUIRE(tables.size() == 1);
    CHECK(row(tables[0], 12).time == approx(150e-9));
    CHECK(row(tables[0], 14).time == approx(9e-9));

    analysis::Session s;
    s.add_trace(path);
    tables = analysis::line_tables(s.profile(s.thread_list().at(1)));
    REQUIRE(tables.size() == 1);
    REQUIRE(tables[0].rows.size() == 2); // no scope in thread 2
    CHECK(row(tables[0], 12).hits == 3);
    CHECK(row(tables[0], 12).time == approx(24e-9));
    CHECK(tables[0].total_time == approx(31e-9));

    CHECK(analysis::line_tables(s.profile(), "app.cpp:main").size() == 1);
    CHECK(analysis::line_tables(s.profile(), "nothing").empty());
}

// The memory columns: a 1.10 record of hits that measured the heap only (rss_reads 0) and a 1.9
// one, whose hits all read the RSS (no rss_reads field).
TEST_CASE("line tables: heap-only hits have no RSS samples, older records read the RSS") {
    TraceBuilder b;
    b.chunk(0);
    site(b, 0x5000, format::SiteKind::kLine, 12, "int main()", "grow()");
    site(b, 0x5100, format::SiteKind::kLine, 14, "int main()", "more()");
    b.chunk(1, 0).function(0x1000);
    b.enter(0, 0);
    // stream 1, site, hits, ticks, rss_samples, rss_increment, rss_last, heap_increment[, reads]
    std::vector<uint8_t> heap_only = {1};
    put_u64(heap_only, 0x5000);
    for (uint8_t v : {3, 30, 3, 0, 0, 48, 0}) heap_only.push_back(v); // heap +48, no read
    b.sized(format::Tag::kLineStats, heap_only);
    std::vector<uint8_t> read = {1};
    put_u64(read, 0x5100);
    for (uint8_t v : {2, 20, 2, 8, 50, 16}) read.push_back(v);
    b.sized(format::Tag::kLineStats, read);
    b.exit(50);
    b.chunk(0).symbol(0x1000, "main", "/src/app.cpp", 10).end_record(100);
    analysis::Session s;
    s.add_trace(save_trace(b, "memory-lines.trace"));
    std::vector<analysis::LineTable> tables = analysis::line_tables(s.profile());
    REQUIRE(tables.size() == 1);
    const analysis::LineRow& grow = row(tables[0], 12);
    CHECK(grow.hits == 3);
    CHECK(grow.memory_samples == 3);
    CHECK(grow.rss_samples == 0);
    CHECK(grow.rss_increment == 0);
    CHECK(grow.rss_last == 0);
    CHECK(grow.heap_increment == 48);
    const analysis::LineRow& more = row(tables[0], 14);
    CHECK(more.memory_samples == 2);
    CHECK(more.rss_samples == 2);
    CHECK(more.rss_increment == 8);
    CHECK(more.rss_last == 50);
    CHECK(more.heap_increment == 16);
    CHECK(tables[0].heap);
}
