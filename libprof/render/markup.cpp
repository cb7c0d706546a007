#include "render/markup.hpp"

namespace prof::analysis {

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
                out += "\xEF\xBF\xBD"; // not allowed in XML 1.0
            else
                out += char(c);
        }
    }
    return out;
}

} // namespace prof::analysis
