// The atomic writer of profreport's outputs.
#include "output.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace prof::profreport {

bool Output::open(const tools::ToolLog& log) {
    if (stdout_path()) {
        f_ = stdout;
        return true;
    }
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) return fail(log, EISDIR);
        if (!S_ISREG(st.st_mode)) { // written in place: no O_TRUNC, no O_CREAT, never removed
            int fd = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
            if (fd < 0) return fail(log, errno);
            return wrap(log, fd);
        }
    } else if (errno != ENOENT) {
        return fail(log, errno);
    }
    // The file itself when the path is a symbolic link to one: the link stays.
    target_ = path_;
    if (char* real = ::realpath(path_.c_str(), nullptr)) {
        target_ = real;
        std::free(real);
    }
    std::string dir = ".", base = target_;
    if (size_t slash = target_.rfind('/'); slash != std::string::npos) {
        dir = slash ? target_.substr(0, slash) : "/";
        base = target_.substr(slash + 1);
    }
    for (int attempt = 0; attempt < 100 && !f_; ++attempt) {
        tmp_ = fmt::format("{}/.{}.{}-{}.tmp", dir, base, ::getpid(), attempt);
        int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0) {
            if (errno == EEXIST) continue;
            int err = errno;
            tmp_.clear();
            return fail(log, err);
        }
        if (S_ISREG(st.st_mode)) (void)::fchmod(fd, st.st_mode & 07777); // keep its mode
        if (!wrap(log, fd)) {
            ::unlink(tmp_.c_str());
            tmp_.clear();
            return false;
        }
    }
    if (!f_) return fail(log, EEXIST);
    return true;
}

bool Output::close(const tools::ToolLog& log) {
    if (!f_) return true;
    errno = 0;
    bool ok = std::fflush(f_) == 0 && !std::ferror(f_);
    int err = errno;
    if (f_ != stdout) {
        if (std::fclose(f_) != 0 && ok) ok = false, err = errno;
    }
    if (err_) err = err_; // the first failed write(2) says best what went wrong
    f_ = nullptr;
    if (ok && !tmp_.empty() && ::rename(tmp_.c_str(), target_.c_str()) != 0)
        ok = false, err = errno;
    if (ok) {
        tmp_.clear();
        return true;
    }
    discard();
    return fail(log, err ? err : EIO);
}

void Output::discard() {
    if (f_ && f_ != stdout) std::fclose(f_);
    f_ = nullptr;
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
    tmp_.clear();
}

bool Output::report_write_error(const tools::ToolLog& log, const std::system_error& e) {
    if (!f_ || !std::ferror(f_)) return false;
    discard();
    fail(log, err_ ? err_ : e.code().value() ? e.code().value() : EIO);
    return true;
}

ssize_t Output::write_fd(void* self, const char* buf, size_t n) {
    auto* o = static_cast<Output*>(self);
    size_t done = 0;
    while (done < n) {
        ssize_t w = ::write(o->fd_, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (!o->err_) o->err_ = w < 0 ? errno : EIO;
            return done ? ssize_t(done) : -1;
        }
        done += size_t(w);
    }
    return ssize_t(done);
}

int Output::close_fd(void* self) {
    auto* o = static_cast<Output*>(self);
    int r = ::close(o->fd_);
    if (r != 0 && !o->err_) o->err_ = errno;
    o->fd_ = -1;
    return r;
}

bool Output::wrap(const tools::ToolLog& log, int fd) {
    fd_ = fd;
    f_ = ::fopencookie(this, "w", cookie_io_functions_t{nullptr, write_fd, nullptr, close_fd});
    if (f_) return true;
    int err = errno;
    ::close(fd);
    fd_ = -1;
    return fail(log, err);
}

bool Output::fail(const tools::ToolLog& log, int err) {
    log.error(fmt::format("cannot write {}: {}", name(), std::strerror(err)));
    return false;
}

} // namespace prof::profreport
