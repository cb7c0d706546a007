// The text helpers of text.hpp.
#include "text/text.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace prof::text {

std::string printable(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (unsigned char c : s) {
        if (c < 0x20 || c == 0x7f)
            out += fmt::format("\\x{:02x}", c);
        else
            out += char(c);
    }
    return out;
}

std::string json_escape(std::string_view s, JsonForm form) {
    const bool short_cr = form != JsonForm::kManifest;
    const bool escape_del = form != JsonForm::kManifest;
    const bool escape_markup = form == JsonForm::kEmbeddable;
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
        default:
            if (c == '\r' && short_cr)
                out += "\\r";
            else if (c < 0x20 || (c == 0x7f && escape_del) ||
                     (escape_markup && (c == '<' || c == '>' || c == '&')))
                out += fmt::format("\\u{:04x}", c);
            else
                out += char(c);
        }
    }
    return out;
}

std::string json_quoted(std::string_view s, JsonForm form) {
    return "\"" + json_escape(s, form) + "\"";
}

std::string csv_escape(std::string_view s) {
    bool quote = s.find_first_of(",\"\n\r") != std::string_view::npos;
    std::string out = printable(s);
    if (!quote) return out;
    std::string q = "\"";
    for (char c : out) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string xml_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (unsigned char c : s) {
        switch (c) {
        case '&':
            out += "&amp;";
            break;
        case '<':
            out += "&lt;";
            break;
        case '>':
            out += "&gt;";
            break;
        case '"':
            out += "&quot;";
            break;
        case '\'':
            out += "&#39;";
            break;
        default:
            if (c < 0x20 && c != '\t')
                out += "\xEF\xBF\xBD"; // U+FFFD: not allowed in XML 1.0
            else
                out += char(c);
        }
    }
    return out;
}

std::string grouped(uint64_t n) {
    std::string digits = std::to_string(n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

std::string format_bytes(double b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double v = b < 0 ? -b : b;
    while (v >= 1024 && u < 4) v /= 1024, ++u;
    return u == 0 ? fmt::format("{}{} B", b < 0 ? "-" : "", uint64_t(v))
                  : fmt::format("{}{:.2f} {}", b < 0 ? "-" : "", v, units[u]);
}

} // namespace prof::text
