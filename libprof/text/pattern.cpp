// The regular expressions of pattern.hpp: the one file that instantiates std::regex.
#include "text/pattern.hpp"

#include <regex>

namespace prof::text {

struct Pattern::Compiled {
    std::regex re;
};

Pattern::Pattern(const std::string& expression)
    : compiled_(std::make_unique<Compiled>(Compiled{std::regex(expression)})) {}

Pattern::~Pattern() = default;
Pattern::Pattern(Pattern&&) noexcept = default;
Pattern& Pattern::operator=(Pattern&&) noexcept = default;

bool Pattern::search(std::string_view text) const {
    return std::regex_search(text.begin(), text.end(), compiled_->re);
}

std::string Pattern::error(const std::string& expression) {
    try {
        std::regex check(expression);
    } catch (const std::regex_error& e) {
        return e.what();
    }
    return {};
}

} // namespace prof::text
