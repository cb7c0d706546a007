// The script and style of the HTML report and the flame graph: the files of
// libprof/analysis/assets/, embedded at build time (cmake/embed_asset.cmake).
#pragma once

#include "render/model.hpp"

#include <string_view>

namespace prof::render::assets {

extern const std::string_view report_css;    // assets/report.css: the HTML report's <style>
extern const std::string_view page_js;       // assets/page.js: what both pages' scripts share
extern const std::string_view report_js;     // assets/report.js: the HTML report's <script>
extern const std::string_view flamegraph_js; // assets/flamegraph.js: the flame graph's script
extern const std::string_view diff_css;      // assets/diff.css: the diff page's, after report.css
extern const std::string_view diff_js;       // assets/diff.js: the diff page's <script>
// A page's script element holds page_js, then its own script.

} // namespace prof::render::assets
