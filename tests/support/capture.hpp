// What a renderer writes to a FILE*, as a string: the tests' one way to read a view's bytes.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace prof::test {

inline std::string capture(const std::function<void(std::FILE*)>& write) {
    char* data = nullptr;
    size_t size = 0;
    std::FILE* out = open_memstream(&data, &size);
    REQUIRE(out);
    write(out);
    std::fclose(out);
    std::string s(data, size);
    std::free(data);
    return s;
}

} // namespace prof::test
