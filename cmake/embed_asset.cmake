# Build step: turns one file (the JavaScript and CSS of the HTML report and the flame graph,
# libprof/analysis/assets/) into a C++ source that defines its bytes as
# `const std::string_view prof::render::assets::NAME`, declared by render/assets.hpp.
#
#   cmake -DINPUT=file -DOUTPUT=file.cpp -DNAME=identifier [-DFORBID=text] -P embed_asset.cmake
#
# FORBID: text that must not occur in the file (what would end the element it is written into,
# such as "</script"); the build fails if it does.
foreach(var INPUT OUTPUT NAME)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_asset.cmake: ${var} not set")
  endif()
endforeach()

if(DEFINED FORBID AND NOT FORBID STREQUAL "")
  file(READ "${INPUT}" text)
  string(TOLOWER "${text}" text)
  string(TOLOWER "${FORBID}" forbid)
  string(FIND "${text}" "${forbid}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${INPUT}: contains \"${FORBID}\", which would end the element it is embedded in")
  endif()
endif()

file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR size "${digits} / 2")
# 16 bytes a line, then each byte as 0xNN.
string(REGEX REPLACE "([0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])"
       "\\1\n" hex "${hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REPLACE "\n" "\n    " bytes "${bytes}")
get_filename_component(input_name "${INPUT}" NAME)

set(source "// Generated from ${input_name} by cmake/embed_asset.cmake at build time: do not edit.
#include \"render/assets.hpp\"

namespace prof::render::assets {
namespace {
constexpr char kBytes[] = {
    ${bytes}0x00};
} // namespace
extern const std::string_view ${NAME}{kBytes, ${size}};
} // namespace prof::render::assets
")
file(WRITE "${OUTPUT}" "${source}")
