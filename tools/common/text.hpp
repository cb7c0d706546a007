// Small text helpers of the command-line tools: JSON string escaping for the structured
// messages, and byte counts for people. The tools keep these here rather than taking them from
// the analysis library, which renders reports and is not needed to run or pack a trace.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace prof::tools {

// The body of a JSON string: quotes, backslashes and control characters escaped.
inline std::string json_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    for (unsigned char c : s) {
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\r':
            out += "\\r";
            break;
        default:
            if (c < 0x20 || c == 0x7f)
                out += fmt::format("\\u{:04x}", c);
            else
                out += char(c);
        }
    }
    return out;
}

// "512 B", "9.81 MiB": binary units, two decimals above bytes.
inline std::string format_bytes(double b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double v = b < 0 ? -b : b;
    while (v >= 1024 && u < 4) v /= 1024, ++u;
    return u == 0 ? fmt::format("{}{} B", b < 0 ? "-" : "", uint64_t(v))
                  : fmt::format("{}{:.2f} {}", b < 0 ? "-" : "", v, units[u]);
}

} // namespace prof::tools
