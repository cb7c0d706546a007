// render/rows: the NDJSON and CSV rows of a process, its functions and its allocation sites
// (render_support.hpp's traces).
#include "unit/render/render_support.hpp"

#include "render/rows.hpp"

using namespace prof;
using namespace prof::test;

TEST_CASE("rows NDJSON: one object per function and per allocation site, every column") {
    analysis::Profile p = render_profile();
    analysis::Session mem;
    mem.add_trace(memory_trace());
    render::RowsProcess proc;
    proc.run = "r1", proc.host = "h", proc.exe = "/bin/app", proc.trace = "t.trace";
    proc.pid = 42, proc.profile = &p, proc.memory = &mem.memory();
    std::string out =
        capture([&](std::FILE* f) { render::write_rows(f, {proc}, render::RowsFormat::kNdjson); });
    std::vector<std::string> l = lines_of(out);
    REQUIRE(l.size() == 6); // 4 functions, 2 sites
    const auto& columns = render::rows_columns();
    uint64_t calls = 0, bytes = 0;
    double own = 0;
    for (size_t i = 0; i < l.size(); ++i) {
        CAPTURE(l[i]);
        Json j = parse_json(l[i]);
        REQUIRE(j.size() == columns.size());
        for (size_t c = 0; c < columns.size(); ++c) CHECK(j.fields[c].first == columns[c]);
        CHECK(j["schema"].integer() == render::kRowsSchema);
        CHECK(j["pid"].integer() == 42);
        CHECK(j["run"].text == "r1");
        if (i < 4) {
            CHECK(j["kind"].text == "function");
            CHECK(j["time_source"].text == "hooks");
            calls += j["ncalls"].integer();
            own += j["tottime"].number;
        } else {
            CHECK(j["kind"].text == "memory_site");
            bytes += j["alloc_bytes"].integer();
        }
    }
    CHECK(parse_json(l[2])["function"].text == kB);
    CHECK(parse_json(l[4])["stack"].text == "main;work<&>");
    CHECK(calls == 8);
    CHECK(own == doctest::Approx(0.150));
    CHECK(bytes == 550);
}

TEST_CASE("rows CSV: the header, then the same rows") {
    analysis::Profile p = render_profile();
    render::RowsProcess proc;
    proc.pid = 42, proc.profile = &p;
    std::string out =
        capture([&](std::FILE* f) { render::write_rows(f, {proc}, render::RowsFormat::kCsv); });
    std::vector<std::string> l = lines_of(out);
    REQUIRE(l.size() == 5);
    std::string header;
    for (const std::string& c : render::rows_columns()) header += (header.empty() ? "" : ",") + c;
    CHECK(l[0] == header);
    CHECK(count_of(out, ",\"b<int>(x, y)\",") == 1);
    CHECK(count_of(out, ",\"c;\"\"q\"\"\",") == 1);
}
