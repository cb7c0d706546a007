// Where a report, view or plot goes, written atomically.
#pragma once

#include "common/tool_log.hpp"

#include <sys/types.h>

#include <cstdio>
#include <string>
#include <system_error>

namespace prof::profreport {

// Where a report, view or plot goes: -o, --flamegraph, --html, --plot, or standard output ("" or
// "-"). A regular file (or a new one) is written to a temporary file in its directory that is
// renamed over it only once everything was written, so a failed run never truncates, removes or
// half-writes a file it did not create. Anything else (a device, a fifo, a terminal) is written
// in place and never removed. Every failure is one error line that names the path.
class Output {
  public:
    explicit Output(std::string path) : path_(std::move(path)) {}
    Output(const Output&) = delete;
    Output& operator=(const Output&) = delete;
    ~Output() { discard(); }

    std::string name() const { return stdout_path() ? "standard output" : path_; }
    std::FILE* file() const { return f_; }

    bool open(const tools::ToolLog& log);

    // Flushes, closes and puts the file in place; false (and one error line) on a write error.
    bool close(const tools::ToolLog& log);

    // After a failure: the temporary file goes, the target is left as it was.
    void discard();

    // A write that threw (fmt reports a failed fwrite as std::system_error): whether it was
    // this output's, reported with its name.
    bool report_write_error(const tools::ToolLog& log, const std::system_error& e);

  private:
    // The stream writes through these, to keep the errno of the first write that failed: stdio
    // forgets it once its buffer is dropped.
    static ssize_t write_fd(void* self, const char* buf, size_t n);
    static int close_fd(void* self);
    bool wrap(const tools::ToolLog& log, int fd);

    bool stdout_path() const { return path_.empty() || path_ == "-"; }
    bool fail(const tools::ToolLog& log, int err);

    std::string path_, target_, tmp_;
    std::FILE* f_ = nullptr;
    int fd_ = -1;
    int err_ = 0; // errno of the first failed write
};

} // namespace prof::profreport
