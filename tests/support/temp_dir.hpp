// A scratch directory per test process, removed at exit.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
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

} // namespace prof::test
