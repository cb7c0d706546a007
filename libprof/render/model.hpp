// The models the renderers read (analysis/model and the engine's session), named in render's
// namespace as the analysis names them: a renderer takes a model and writes bytes, and its code
// reads `Profile` and `CallTree`, not their full names. Each render header includes this.
#pragma once

#include "analysis/engine/session.hpp"
#include "analysis/model/call_tree.hpp"
#include "analysis/model/diff.hpp"
#include "analysis/model/lines.hpp"
#include "analysis/model/memory.hpp"
#include "analysis/model/profile.hpp"
#include "analysis/model/ranks.hpp"

namespace prof::render {
using namespace prof::analysis;
using namespace prof::analysis::views;
} // namespace prof::render
