// CallTree's paths (the tree itself is built by the replay engine, engine/session.cpp).
#include "analysis/model/call_tree.hpp"

#include <algorithm>

namespace prof::analysis::views {

std::vector<size_t> CallTree::path(size_t node) const {
    std::vector<size_t> out;
    for (size_t n = node; n != 0 && n < nodes.size(); n = nodes[n].parent) out.push_back(n);
    std::reverse(out.begin(), out.end());
    return out;
}

} // namespace prof::analysis::views
