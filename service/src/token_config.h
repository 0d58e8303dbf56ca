#pragma once
// The [[tokens]] tables of a parsed TOML document, for config.cpp and
// tokens.cpp (kept out of the public headers: they do not expose toml++).

#include <kcache/service/config.h>

#include <tl/expected.hpp>
#include <toml++/toml.h>

#include <string_view>
#include <vector>

namespace kcache::service {

tl::expected<std::vector<Token>, std::string> tokens_from_toml(const toml::table& doc,
                                                               std::string_view source,
                                                               bool source_private,
                                                               std::size_t first_index);

} // namespace kcache::service
