// What a report says about the traces themselves rather than their profile: the description
// of `profreport --info`, the note printed when no line was marked, and where the sources of
// marked lines are looked for.
#pragma once

#include "render/model.hpp"

#include "analysis/model/profile.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace prof::render {

// Per trace: path, format, process, clock, state, symbols, threads and modules.
void print_info(std::FILE* out, const Profile& p);

// The line view's text when `p` has no line table: no marked lines, or counts lost because a
// trace is incomplete.
std::string no_lines_text(const Profile& p);

// `given` then the directory each traced program ran in (relative source paths are relative
// to it).
std::vector<std::string> source_dirs(const Profile& p, std::vector<std::string> given);

} // namespace prof::render
