// Escaping for the markup the renderings write (SVG, HTML): one definition for the flame
// graphs, the HTML report and the memory plot.
#pragma once

#include <string>
#include <string_view>

namespace prof::analysis {

// &, <, >, " and ' as entities; control characters (not allowed in XML 1.0) as U+FFFD, tab kept.
std::string xml_escape(std::string_view s);

} // namespace prof::analysis
