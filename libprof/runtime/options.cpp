// Reads every PROF_* environment variable once, at start, without allocating: the variables
// are declared once, in options.inc (kind, name, default, what they accept), and parsed in the
// table's order. docs/configuration.md is the user-facing table; a unit test keeps the two in step.
//
// The start may come before the C library has set `environ`: a function of the program's
// .preinit_array (as a malloc-hook library installs one) runs before every constructor, and
// its first hook starts the runtime. The environment is then read from /proc/self/environ,
// into memory of the runtime's own; what needs `environ` itself (removing PROF_FORCE from it)
// waits for the library's constructor (options_after_environ).
#include "runtime.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/auxv.h>
#include <unistd.h>

namespace prof::rt {

Options g_options;

namespace {

// The environment read from /proc/self/environ when `environ` was not set yet at start: a
// null-terminated array of "NAME=value" strings, in one mapping. Null otherwise.
constinit const char* const* g_proc_environ = nullptr;
constinit bool g_environ_unread = false; // neither `environ` nor /proc/self/environ at start
constinit bool g_force_pending = false;  // PROF_FORCE to remove from `environ` once it exists

// One pass over /proc/self/environ: its bytes and strings counted, and copied into `text` when
// given (of the size the counting pass found). False when it cannot be read.
PROF_NOINSTR bool scan_proc_environ(int fd, size_t& bytes, size_t& strings, char* text) {
    if (lseek(fd, 0, SEEK_SET) != 0) return false;
    char buf[4096];
    bytes = strings = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        if (n == 0) return true;
        for (ssize_t i = 0; i < n; ++i) strings += buf[i] == '\0';
        if (text) memcpy(text + bytes, buf, size_t(n));
        bytes += size_t(n);
    }
}

// The process's environment as the kernel holds it (the strings execve was given, which no
// setenv changes): read twice, to count and to copy, since its size is known only by reading.
PROF_NOINSTR const char* const* read_proc_environ() {
    int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    size_t bytes = 0, strings = 0;
    const char** vars = nullptr;
    if (scan_proc_environ(fd, bytes, strings, nullptr)) {
        // The pointers first, then the text (one more NUL for an unterminated last string).
        size_t table = (strings + 2) * sizeof(char*);
        void* m = map_anon(table + bytes + 1);
        size_t copied = 0, copied_strings = 0;
        if (m && scan_proc_environ(fd, copied, copied_strings, static_cast<char*>(m) + table) &&
            copied == bytes) {
            vars = static_cast<const char**>(m);
            char* text = static_cast<char*>(m) + table;
            size_t n = 0;
            for (size_t at = 0; at < bytes; at += strlen(text + at) + 1) vars[n++] = text + at;
            vars[n] = nullptr;
        }
    }
    close(fd);
    return vars;
}

// setuid/setgid programs must not let the environment choose where they write (read_options
// reads nothing of theirs).
PROF_NOINSTR const char* env(const char* name) {
    return environ ? secure_getenv(name) : start_env(name);
}

PROF_NOINSTR void copy(char* dst, size_t cap, const char* src) {
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

PROF_NOINSTR bool parse_bool(const char* v, bool& out) {
    if (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on"))
        return out = true, true;
    if (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off"))
        return out = false, true;
    return false;
}

// Accepts plain bytes or a K/M suffix (powers of 1024).
PROF_NOINSTR bool parse_size(const char* v, uint64_t& out) {
    char* endp = nullptr;
    errno = 0;
    unsigned long long n = strtoull(v, &endp, 10);
    if (errno || endp == v) return false;
    if (*endp == 'k' || *endp == 'K') n <<= 10, ++endp;
    else if (*endp == 'm' || *endp == 'M') n <<= 20, ++endp;
    if (*endp == 'i' || *endp == 'b' || *endp == 'B') ++endp;
    if (*endp == 'B') ++endp;
    if (*endp) return false;
    out = n;
    return true;
}

// The index of `v` among the '|'-separated words of `accepted`, or -1.
PROF_NOINSTR int choice_index(const char* accepted, const char* v) {
    size_t n = strlen(v);
    for (int i = 0;; ++i) {
        const char* bar = strchr(accepted, '|');
        size_t len = bar ? size_t(bar - accepted) : strlen(accepted);
        if (len == n && !strncmp(accepted, v, n)) return i;
        if (!bar) return -1;
        accepted = bar + 1;
    }
}

enum class Kind { kBool, kOwnBool, kChoice, kWord, kSize, kPow2Size, kPath, kText };

// One row of options.inc: where its value goes in Options, and how it is read.
struct Option {
    Kind kind;
    const char* name;
    const char* fallback; // the default, in the variable's syntax
    const char* accepted;
    uint32_t min, max;
    size_t offset, size;
};

// clang-format off
constexpr Option kOptions[] = {
#define PROF_OPTION(kind, field, name, fallback, accepted, min, max, description)                  \
    {Kind::k##kind, name, fallback, accepted, min, max, offsetof(Options, field),                 \
     sizeof(Options::field)},
#include "options.inc"
#undef PROF_OPTION
};
// clang-format on

// Each kind's field has the size its value is stored with.
constexpr bool fields_fit() {
    for (const Option& o : kOptions) {
        bool ok = false;
        switch (o.kind) {
        case Kind::kBool:
        case Kind::kOwnBool:
            ok = o.size == sizeof(bool);
            break;
        case Kind::kChoice:
            ok = o.size == 1 || o.size == 4;
            break;
        case Kind::kSize:
        case Kind::kPow2Size:
            ok = o.size == 4;
            break;
        case Kind::kWord:
        case Kind::kPath:
        case Kind::kText:
            ok = o.size > 1;
            break;
        }
        if (!ok) return false;
    }
    return true;
}
static_assert(fields_fit(), "an option of options.inc does not fit its field");
// PROF_LOG's choices are the levels in order.
static_assert(int(LogLevel::kQuiet) == 0 && int(LogLevel::kError) == 1 &&
              int(LogLevel::kWarn) == 2 && int(LogLevel::kInfo) == 3 && int(LogLevel::kDebug) == 4);
static_assert(sizeof(LogLevel) == 4);

PROF_NOINSTR void store(char* field, size_t size, uint32_t v) {
    if (size == 1) {
        uint8_t b = uint8_t(v);
        memcpy(field, &b, 1);
    } else {
        memcpy(field, &v, 4);
    }
}

PROF_NOINSTR uint32_t load(const char* field, size_t size) {
    if (size == 1) return uint8_t(*field);
    uint32_t v;
    memcpy(&v, field, 4);
    return v;
}

// Sets the option's field from `v`; false (the field untouched) for a value it refuses.
PROF_NOINSTR bool apply(const Option& opt, char* field, const char* v) {
    switch (opt.kind) {
    case Kind::kBool:
    case Kind::kOwnBool: {
        bool b = false;
        if (!parse_bool(v, b)) return false;
        store(field, opt.size, b);
        return true;
    }
    case Kind::kChoice: {
        int i = choice_index(opt.accepted, v);
        if (i < 0) return false;
        store(field, opt.size, uint32_t(i));
        return true;
    }
    case Kind::kWord:
        if (choice_index(opt.accepted, v) < 0) return false;
        copy(field, opt.size, v);
        return true;
    case Kind::kSize:
    case Kind::kPow2Size: {
        uint64_t n = 0;
        if (!parse_size(v, n) || n < opt.min || n > opt.max) return false;
        if (opt.kind == Kind::kPow2Size && (n & (n - 1)) != 0) return false;
        store(field, opt.size, uint32_t(n));
        return true;
    }
    case Kind::kPath:
        if (!*v) return true; // empty: the default
        if (strlen(v) >= opt.size - 32) return false;
        copy(field, opt.size, v);
        return true;
    case Kind::kText:
        copy(field, opt.size, v);
        return true;
    }
    return false;
}

// The complaint about a refused value names the variable, what it accepts and what is used.
PROF_NOINSTR void refuse(const Option& opt, const char* field, const char* v) {
    char shown[80]; // the value as it may appear in a log line
    const char* value = log_safe(v, shown, sizeof shown);
    switch (opt.kind) {
    case Kind::kBool:
    case Kind::kOwnBool:
        log(LogLevel::kWarn, "bad_option", "name=%s value=\"%s\" expected=bool using=%d", opt.name,
            value, int(load(field, opt.size)));
        break;
    case Kind::kChoice:
    case Kind::kWord:
        log(LogLevel::kWarn, "bad_option", "name=%s value=\"%s\" expected=%s using=%s", opt.name,
            value, opt.accepted, opt.fallback);
        break;
    case Kind::kSize:
    case Kind::kPow2Size:
        log(LogLevel::kWarn, "bad_option", "name=%s value=\"%s\" expected=\"%s\" using=%u",
            opt.name, value, opt.accepted, load(field, opt.size));
        break;
    case Kind::kPath:
        log(LogLevel::kError, "bad_option", "name=%s reason=\"path too long\"", opt.name);
        break;
    case Kind::kText:
        break; // takes any value
    }
}

} // namespace

PROF_NOINSTR const char* const* start_environ() {
    return environ ? environ : g_proc_environ;
}

PROF_NOINSTR const char* start_env(const char* name) {
    if (environ) return getenv(name);
    size_t n = strlen(name);
    for (const char* const* e = g_proc_environ; e && *e; ++e)
        if (!strncmp(*e, name, n) && (*e)[n] == '=') return *e + n + 1;
    return nullptr;
}

PROF_NOINSTR void read_options() {
    Options& o = g_options;
    memset(&o, 0, sizeof o);
    char* base = reinterpret_cast<char*>(&o);
    for (const Option& opt : kOptions) apply(opt, base + opt.offset, opt.fallback);
    // setuid/setgid programs: the environment is not trusted to choose files (secure_getenv
    // hides it), and a privileged program must not write traces where it was started.
    if (getauxval(AT_SECURE)) {
        o.disabled = true;
        o.secure = true;
        return;
    }
    if (!environ) {
        g_proc_environ = read_proc_environ();
        g_environ_unread = !g_proc_environ;
    }
    // In the table's order: the log settings come first, so that complaints about other
    // options honour them.
    for (const Option& opt : kOptions) {
        const char* v = env(opt.name);
        if (!v) continue;
        if (!apply(opt, base + opt.offset, v)) refuse(opt, base + opt.offset, v);
        // Not passed on to the children: each decides for its own file. Before `environ`
        // exists, unsetenv would find nothing, and the C library would set it afterwards.
        if (opt.kind == Kind::kOwnBool) {
            if (environ)
                unsetenv(opt.name);
            else
                g_force_pending = true;
        }
    }
    o.out_given = o.out[0] != '\0';
}

PROF_NOINSTR void options_after_environ() {
    if (!environ) return;
    if (g_force_pending) {
        g_force_pending = false;
        for (const Option& opt : kOptions)
            if (opt.kind == Kind::kOwnBool) unsetenv(opt.name);
    }
    if (g_environ_unread) {
        g_environ_unread = false;
        // The log settings, now readable, decide whether and how this is said (and the
        // runtime's later messages).
        char* base = reinterpret_cast<char*>(&g_options);
        for (const Option& opt : kOptions)
            if (!strncmp(opt.name, "PROF_LOG", 8))
                if (const char* v = secure_getenv(opt.name)) apply(opt, base + opt.offset, v);
        log(LogLevel::kWarn, "options_unread",
            "reason=\"the runtime started before the C library set environ, and "
            "/proc/self/environ could not be read\" using=defaults");
    }
}

} // namespace prof::rt
