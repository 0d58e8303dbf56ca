#pragma once
// The JSON graph format (documented in cachekey/GRAPH_FORMAT.md).

#include <kcache/cachekey/graph.h>

#include <tl/expected.hpp>

#include <string>
#include <string_view>

namespace kcache::cachekey {

tl::expected<Graph, GraphError> parse_graph_json(std::string_view text);
std::string graph_to_json(const Graph& graph);

} // namespace kcache::cachekey
