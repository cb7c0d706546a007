// Helpers for tests that open pages in headless Chromium: find programs on PATH, run the
// browser on a file with the project's flags, and fail on console errors in its log.
#pragma once

#include "support/run.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace prof::test {

// The first executable `name` on PATH, or "".
inline std::string which(const std::string& name) {
    const char* path = std::getenv("PATH");
    std::stringstream ss(path ? path : "/usr/bin:/bin");
    std::string dir;
    while (std::getline(ss, dir, ':')) {
        std::string p = dir + "/" + name;
        if (!dir.empty() && access(p.c_str(), X_OK) == 0) return p;
    }
    return {};
}

inline std::string chromium() {
    std::string c = which("chromium");
    return c.empty() ? which("chromium-browser") : c;
}

// Headless Chromium on a file; stderr carries the page's console messages.
inline RunResult browse(const std::vector<std::string>& extra, const std::string& url) {
    std::vector<std::string> argv{which("timeout"),
                                  "120",
                                  chromium(),
                                  "--headless",
                                  "--no-sandbox",
                                  "--disable-gpu",
                                  "--disable-background-networking",
                                  "--disable-component-update",
                                  "--disable-sync",
                                  "--no-first-run",
                                  "--user-data-dir=" + temp_path("chromium-profile"),
                                  "--enable-logging=stderr",
                                  "--v=0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(url);
    return run(argv);
}

// Console messages and uncaught exceptions in Chromium's log.
inline void check_console(const std::string& err) {
    std::istringstream log(err);
    std::string line;
    while (std::getline(log, line))
        if (line.find(":CONSOLE(") != std::string::npos ||
            line.find("Uncaught") != std::string::npos)
            FAIL_CHECK(line);
}

// A page's DOM after its script ran with its interactions exercised once (#selftest), checked:
// the script finished, its self-test passed, and no error was thrown. "" when Chromium is not
// installed (said in a message: the caller skips its browser checks).
inline std::string selftest_dom(const std::string& page) {
    if (chromium().empty()) {
        MESSAGE("chromium not installed (Debian: chromium): skipping the browser check");
        return {};
    }
    auto dom = browse({"--dump-dom"}, "file://" + page + "#selftest");
    REQUIRE_MESSAGE(dom.exit_code == 0, dom.err);
    CHECK_MESSAGE(dom.out.find("data-ready=\"1\"") != std::string::npos, dom.err);
    CHECK(dom.out.find("data-selftest=\"ok\"") != std::string::npos);
    CHECK_MESSAGE(dom.out.find(" data-error=\"") == std::string::npos, dom.out.substr(0, 400));
    // No console errors (Chromium logs page console messages as CONSOLE lines).
    check_console(dom.err);
    return dom.out;
}

} // namespace prof::test
