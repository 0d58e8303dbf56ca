#pragma once
// JSON serialization that cannot throw on bad input: invalid UTF-8 in strings
// (a binary file name, a key from a fuzzer) is replaced with U+FFFD rather
// than raising nlohmann's type_error in the middle of a request.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

namespace kcache::cachekey {

inline std::string json_text(const nlohmann::json& value, int indent = -1) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

// An integer of type T from untrusted JSON. nlohmann turns a float into an
// integer with a plain cast, undefined behaviour when out of range: anything
// but an integer that fits T is a json type_error here, for the caller's catch.
template <typename T> T json_integer(const nlohmann::json& v) {
  static_assert(std::is_integral_v<T>);
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
      return static_cast<T>(u);
    }
  } else if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    const bool fits =
        i < 0 ? std::is_signed_v<T> && i >= static_cast<std::int64_t>(std::numeric_limits<T>::min())
              : static_cast<std::uint64_t>(i) <=
                    static_cast<std::uint64_t>(std::numeric_limits<T>::max());
    if (fits) {
      return static_cast<T>(i);
    }
  }
  throw nlohmann::json::type_error::create(302, "expected an integer in range, got " + json_text(v),
                                           &v);
}

// The member `key` of an object as json_integer, or `fallback` when absent.
template <typename T> T json_integer(const nlohmann::json& object, const char* key, T fallback) {
  const auto it = object.find(key);
  return it == object.end() ? fallback : json_integer<T>(*it);
}

} // namespace kcache::cachekey
