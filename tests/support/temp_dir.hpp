// A scratch directory per test process, removed at exit.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>
#include <unistd.h>

namespace prof::test {

inline const std::string& temp_dir() {
    static const std::string dir = [] {
        std::string tmpl = (std::filesystem::temp_directory_path() / "libprof-test-XXXXXX").string();
        char* made = mkdtemp(tmpl.data());
        std::string d = made ? made : "/tmp";
        static struct Cleanup {
            std::string path;
            pid_t owner = getpid();
            ~Cleanup() {
                std::error_code ec;
                if (getpid() == owner && !std::getenv("PROF_KEEP_TEST_FILES"))
                    std::filesystem::remove_all(path, ec);
            }
        } cleanup{d};
        return d;
    }();
    return dir;
}

inline std::string temp_path(const std::string& name) { return temp_dir() + "/" + name; }

// The traces written next to `trace` in the scratch directory (`<trace>.<pid>`: forked
// children, exec'd images).
inline std::vector<std::string> traces_next_to(const std::string& trace) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(temp_dir()))
        if (e.path().string().rfind(trace + ".", 0) == 0) out.push_back(e.path().string());
    return out;
}

// A forked child's trace next to `trace`, or "" when there is none.
inline std::string child_trace(const std::string& trace) {
    std::vector<std::string> next = traces_next_to(trace);
    return next.empty() ? std::string() : next.back();
}

} // namespace prof::test
