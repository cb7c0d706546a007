// The runtime's table of PROF_* variables (libprof/runtime/options.inc) against the table of
// docs/configuration.md: every variable documented, with the default the runtime uses, and
// nothing documented that the runtime does not read.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

struct Declared {
    std::string name, fallback;
};

const std::vector<Declared> kDeclared = {
#define PROF_OPTION(kind, field, name, fallback, accepted, min, max, description) {name, fallback},
#include "runtime/options.inc"
#undef PROF_OPTION
};

// The cells of each row of the "## Variables" table, by variable name.
std::map<std::string, std::vector<std::string>> documented() {
    std::ifstream in(PROF_DOCS_DIR "/configuration.md");
    REQUIRE(in);
    std::map<std::string, std::vector<std::string>> rows;
    bool in_section = false;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("## ", 0) == 0) in_section = line == "## Variables";
        if (!in_section || line.rfind("| `PROF_", 0) != 0) continue;
        std::vector<std::string> cells;
        size_t at = 1;
        for (size_t bar; (bar = line.find(" | ", at)) != std::string::npos; at = bar + 3)
            cells.push_back(line.substr(at, bar - at));
        for (std::string& c : cells) c.erase(0, c.find_first_not_of(' '));
        REQUIRE(cells.size() >= 3);
        std::string name = cells[0].substr(1, cells[0].size() - 2); // without the backquotes
        rows[name] = cells;
    }
    return rows;
}

} // namespace

TEST_CASE("every PROF_* variable the runtime reads is documented with its default") {
    auto rows = documented();
    for (const Declared& d : kDeclared) {
        CAPTURE(d.name);
        auto row = rows.find(d.name);
        REQUIRE_MESSAGE(row != rows.end(), d.name, " is not in docs/configuration.md");
        const std::string& fallback = row->second[2];
        if (d.fallback.empty())
            CHECK((fallback == "empty" || d.name == "PROF_OUT"));
        else
            CHECK(fallback == "`" + d.fallback + "`");
    }
    for (const auto& [name, cells] : rows) {
        bool declared = false;
        for (const Declared& d : kDeclared) declared |= d.name == name;
        CHECK_MESSAGE(declared, name, " is documented but not read by the runtime");
    }
    CHECK(rows.size() == kDeclared.size());
}
