// The `NAME VALUE` lines a test program prints about itself (its own measure of what it did).
#pragma once

#include <map>
#include <sstream>
#include <string>

namespace prof::test {

inline std::map<std::string, double> figures(const std::string& out) {
    std::map<std::string, double> f;
    std::istringstream in(out);
    std::string name;
    double value;
    while (in >> name >> value) f[name] = value;
    return f;
}

} // namespace prof::test
