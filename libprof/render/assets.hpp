// The script and style of the HTML report and the flame graph: the files of
// libprof/analysis/assets/, embedded at build time (cmake/embed_asset.cmake).
#pragma once

#include "render/model.hpp"

#include <string_view>

namespace prof::render::assets {

extern const std::string_view report_css;    // assets/report.css: the HTML report's <style>
extern const std::string_view report_js;     // assets/report.js: the HTML report's <script>
extern const std::string_view flamegraph_js; // assets/flamegraph.js: the flame graph's script

} // namespace prof::render::assets
