#pragma once
// JSON serialization that cannot throw on bad input: invalid UTF-8 in strings
// (a binary file name, a key from a fuzzer) is replaced with U+FFFD rather
// than raising nlohmann's type_error in the middle of a request.

#include <nlohmann/json.hpp>

#include <string>

namespace kcache::cachekey {

inline std::string json_text(const nlohmann::json& value, int indent = -1) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

} // namespace kcache::cachekey
