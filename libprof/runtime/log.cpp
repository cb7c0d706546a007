// Structured log lines from the runtime: `libprof: level=… event=… key=value…` on stderr, or one
// JSON object per line with PROF_LOG_FORMAT=json. Formats into a stack buffer and writes with
// one write(2): no allocation, safe to call from the hooks' slow paths.
#include "runtime.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace prof::rt {

namespace {

const char* level_name(LogLevel l) {
    switch (l) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
    default: return "quiet";
    }
}

// Appends `s` (length n) as a JSON string body, escaping what JSON requires.
PROF_NOINSTR size_t json_escape(char* out, size_t cap, size_t pos, const char* s, size_t n) {
    for (size_t i = 0; i < n && pos + 7 < cap; ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '"' || c == '\\') {
            out[pos++] = '\\';
            out[pos++] = char(c);
        } else if (c < 0x20) {
            pos += size_t(snprintf(out + pos, cap - pos, "\\u%04x", c));
        } else {
            out[pos++] = char(c);
        }
    }
    return pos;
}

// Converts `key=value key="quoted value"` into `,"key":"value",...`.
PROF_NOINSTR size_t pairs_to_json(char* out, size_t cap, size_t pos, const char* p) {
    while (*p && pos + 16 < cap) {
        while (*p == ' ') ++p;
        const char* key = p;
        while (*p && *p != '=' && *p != ' ') ++p;
        size_t klen = size_t(p - key);
        if (!klen) break;
        const char* val = p;
        size_t vlen = 0;
        if (*p == '=') {
            ++p;
            if (*p == '"') {
                val = ++p;
                while (*p && *p != '"') ++p;
                vlen = size_t(p - val);
                if (*p == '"') ++p;
            } else {
                val = p;
                while (*p && *p != ' ') ++p;
                vlen = size_t(p - val);
            }
        }
        out[pos++] = ',';
        out[pos++] = '"';
        pos = json_escape(out, cap, pos, key, klen);
        out[pos++] = '"';
        out[pos++] = ':';
        out[pos++] = '"';
        pos = json_escape(out, cap, pos, val, vlen);
        out[pos++] = '"';
    }
    return pos;
}

} // namespace

PROF_NOINSTR const char* log_safe(const char* s, char* buf, size_t cap) {
    size_t i = 0;
    for (; s[i] && i + 1 < cap; ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        buf[i] = c == '"' || c == '\\' || c < 0x20 || c == 0x7f ? '?' : char(c);
    }
    buf[i] = '\0';
    return buf;
}

PROF_NOINSTR void log(LogLevel level, const char* event, const char* fields, ...) {
    if (int(level) > int(g_options.log_level)) return;
    int saved = errno;
    char pairs[1024];
    va_list ap;
    va_start(ap, fields);
    vsnprintf(pairs, sizeof pairs, fields, ap);
    va_end(ap);

    char line[2048];
    size_t n;
    if (g_options.log_json) {
        n = size_t(snprintf(line, sizeof line,
                            "{\"tool\":\"libprof\",\"level\":\"%s\",\"event\":\"%s\",\"pid\":\"%d\"",
                            level_name(level), event, int(getpid())));
        n = pairs_to_json(line, sizeof line - 3, n, pairs);
        line[n++] = '}';
    } else {
        n = size_t(snprintf(line, sizeof line, "libprof: level=%s event=%s pid=%d %s",
                            level_name(level), event, int(getpid()), pairs));
        if (n > sizeof line - 2) n = sizeof line - 2;
    }
    line[n++] = '\n';
    ssize_t r = write(STDERR_FILENO, line, n);
    (void)r;
    errno = saved;
}

} // namespace prof::rt
