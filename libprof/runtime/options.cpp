// Reads every PROF_* environment variable once, at start, without allocating.
// docs/configuration.md is the user-facing table of these variables; keep the two in step.
#include "runtime.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/auxv.h>
#include <unistd.h>

namespace prof::rt {

Options g_options;

namespace {

// setuid/setgid programs must not let the environment choose where they write.
PROF_NOINSTR const char* env(const char* name) { return secure_getenv(name); }

PROF_NOINSTR void copy(char* dst, size_t cap, const char* src) {
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

PROF_NOINSTR bool parse_bool(const char* name, const char* v, bool fallback) {
    if (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on"))
        return true;
    if (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off"))
        return false;
    char shown[80];
    log(LogLevel::kWarn, "bad_option", "name=%s value=\"%s\" expected=bool using=%d", name,
        log_safe(v, shown, sizeof shown), int(fallback));
    return fallback;
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

} // namespace

PROF_NOINSTR void read_options() {
    Options& o = g_options;
    char shown[80]; // an option's value as it may appear in a log line
    memset(&o, 0, sizeof o);
    o.log_level = LogLevel::kWarn;
    // setuid/setgid programs: the environment is not trusted to choose files (secure_getenv
    // hides it), and a privileged program must not write traces where it was started.
    if (getauxval(AT_SECURE)) {
        o.disabled = true;
        o.secure = true;
        return;
    }
    o.chunk_size = 256u << 10;
    o.max_depth = 1u << 20;
    o.log_level = LogLevel::kWarn;
    o.symbols = true;
    o.mem_rss_interval_ms = 10;
    o.calibrate = true;
    o.scope_runs = true;
    copy(o.clock, sizeof o.clock, "auto");

    // The log settings come first so that complaints about other options honour them.
    if (const char* v = env("PROF_LOG_FORMAT")) {
        if (!strcmp(v, "json")) o.log_json = true;
        else if (strcmp(v, "text"))
            log(LogLevel::kWarn, "bad_option", "name=PROF_LOG_FORMAT value=\"%s\" "
                "expected=text|json using=text", log_safe(v, shown, sizeof shown));
    }
    if (const char* v = env("PROF_LOG")) {
        if (!strcmp(v, "quiet")) o.log_level = LogLevel::kQuiet;
        else if (!strcmp(v, "error")) o.log_level = LogLevel::kError;
        else if (!strcmp(v, "warn")) o.log_level = LogLevel::kWarn;
        else if (!strcmp(v, "info")) o.log_level = LogLevel::kInfo;
        else if (!strcmp(v, "debug")) o.log_level = LogLevel::kDebug;
        else log(LogLevel::kWarn, "bad_option", "name=PROF_LOG value=\"%s\" "
                 "expected=quiet|error|warn|info|debug using=warn", log_safe(v, shown, sizeof shown));
    }
    if (const char* v = env("PROF_OUT"); v && *v) {
        if (strlen(v) >= sizeof o.out - 32)
            log(LogLevel::kError, "bad_option", "name=PROF_OUT reason=\"path too long\"");
        else {
            copy(o.out, sizeof o.out, v);
            o.out_given = true;
        }
    }
    if (const char* v = env("PROF_DISABLE")) o.disabled = parse_bool("PROF_DISABLE", v, false);
    if (const char* v = env("PROF_FORCE")) {
        o.force = parse_bool("PROF_FORCE", v, false);
        // Meant for this process only: a child it starts must not delete the trace this
        // process is writing at the same path.
        unsetenv("PROF_FORCE");
    }
    if (const char* v = env("PROF_SYMBOLS")) o.symbols = parse_bool("PROF_SYMBOLS", v, true);
    if (const char* v = env("PROF_LINE_RSS")) o.line_rss = parse_bool("PROF_LINE_RSS", v, false);
    if (const char* v = env("PROF_CALIBRATE")) o.calibrate = parse_bool("PROF_CALIBRATE", v, true);
    if (const char* v = env("PROF_SCOPE_RUNS"))
        o.scope_runs = parse_bool("PROF_SCOPE_RUNS", v, true);
    if (const char* v = env("PROF_MEM_UNWIND")) {
        if (!strcmp(v, "dwarf")) o.mem_unwind_dwarf = true;
        else if (strcmp(v, "fp") != 0)
            log(LogLevel::kWarn, "bad_option", "name=PROF_MEM_UNWIND value=\"%s\" expected=fp|dwarf using=fp",
                log_safe(v, shown, sizeof shown));
    }
    if (const char* v = env("PROF_MEM_RSS_INTERVAL")) {
        uint64_t n = 0;
        if (parse_size(v, n) && n <= 3600000) o.mem_rss_interval_ms = uint32_t(n);
        else
            log(LogLevel::kWarn, "bad_option", "name=PROF_MEM_RSS_INTERVAL value=\"%s\" "
                "expected=\"milliseconds, 0 to 3600000 (0 = off)\" using=%u",
                log_safe(v, shown, sizeof shown), o.mem_rss_interval_ms);
    }
    if (const char* v = env("PROF_CHUNK_SIZE")) {
        uint64_t n = 0;
        if (parse_size(v, n) && n >= format::kMinChunkSize && n <= format::kMaxChunkSize &&
            (n & (n - 1)) == 0)
            o.chunk_size = uint32_t(n);
        else
            log(LogLevel::kWarn, "bad_option", "name=PROF_CHUNK_SIZE value=\"%s\" "
                "expected=\"power of two from 64K to 64M\" using=%u", log_safe(v, shown, sizeof shown), o.chunk_size);
    }
    if (const char* v = env("PROF_MAX_DEPTH")) {
        uint64_t n = 0;
        if (parse_size(v, n) && n >= 16 && n <= (1u << 24)) o.max_depth = uint32_t(n);
        else
            log(LogLevel::kWarn, "bad_option", "name=PROF_MAX_DEPTH value=\"%s\" "
                "expected=\"16 to 16777216\" using=%u", log_safe(v, shown, sizeof shown), o.max_depth);
    }
    if (const char* v = env("PROF_CLOCK")) {
        if (!strcmp(v, "tsc") || !strcmp(v, "monotonic") || !strcmp(v, "auto"))
            copy(o.clock, sizeof o.clock, v);
        else
            log(LogLevel::kWarn, "bad_option", "name=PROF_CLOCK value=\"%s\" "
                "expected=auto|tsc|monotonic using=auto", log_safe(v, shown, sizeof shown));
    }
    if (const char* v = env("PROF_EXCLUDE")) copy(o.exclude, sizeof o.exclude, v);
    if (const char* v = env("PROF_EXCLUDE_MODULES"))
        copy(o.exclude_modules, sizeof o.exclude_modules, v);
}

} // namespace prof::rt
