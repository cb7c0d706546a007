// A regular expression compiled once and searched many times (--match, --callers, --callees):
// the one wrapper of std::regex, so that only pattern.cpp instantiates it. A file that builds
// and searches a std::regex takes about 5 s of CPU to compile for that alone (GCC 12, -O2 -g),
// and five files of the report tool did.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace prof::text {

// An ECMAScript regular expression (std::regex's default grammar).
class Pattern {
  public:
    // Throws std::regex_error when `expression` is not a regular expression.
    explicit Pattern(const std::string& expression);
    ~Pattern();
    Pattern(Pattern&&) noexcept;
    Pattern& operator=(Pattern&&) noexcept;

    // Whether some part of `text` matches (std::regex_search).
    bool search(std::string_view text) const;

    // Why `expression` is not a regular expression (std::regex_error's message), or "" when it is.
    static std::string error(const std::string& expression);

  private:
    struct Compiled;
    std::unique_ptr<Compiled> compiled_;
};

} // namespace prof::text
