// Durations as people write and read them.
#include "render/durations.hpp"
#include "render/model.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

namespace prof::render {

bool parse_duration(const std::string& text, uint64_t& ns) {
    if (text.empty()) return false;
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    std::string unit = end ? std::string(end) : std::string();
    double scale;
    if (unit.empty() || unit == "s")
        scale = 1e9;
    else if (unit == "ms")
        scale = 1e6;
    else if (unit == "us")
        scale = 1e3;
    else if (unit == "ns")
        scale = 1;
    else
        return false;
    if (end == text.c_str() || !std::isfinite(v) || v < 0 || v * scale > 1.8e19) return false;
    ns = uint64_t(std::llround(v * scale));
    return true;
}

std::string human_ns(uint64_t ns) {
    if (ns >= 1'000'000'000) return fmt::format("{:.3f} s", ns / 1e9);
    if (ns >= 1'000'000) return fmt::format("{:.3f} ms", ns / 1e6);
    if (ns >= 1'000) return fmt::format("{:.3f} us", ns / 1e3);
    return fmt::format("{} ns", ns);
}

} // namespace prof::render
