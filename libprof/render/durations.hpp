// Durations as people write them (--from, --to, --min-duration) and read them (the tree).
#pragma once

#include "render/model.hpp"

#include <cstdint>
#include <string>

namespace prof::render {

// "1.5s", "200ms", "30us", "100ns" or plain seconds -> nanoseconds; false when malformed.
bool parse_duration(const std::string& text, uint64_t& ns);
// 1234567 -> "1.235 ms": three significant decimals, for people.
std::string human_ns(uint64_t ns);

} // namespace prof::render
