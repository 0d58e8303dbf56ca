#pragma once
// JSON text in and out of kcache, safe on untrusted input.
//
// Serialization cannot throw on bad input: invalid UTF-8 in strings (a binary
// file name, a key from a fuzzer) is replaced with U+FFFD rather than raising
// nlohmann's type_error in the middle of a request. Parsing is bounded in
// depth: nlohmann's serializer and comparisons recurse, so a body of 100,000
// nested '[' would overflow the stack wherever the document is used.

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

namespace kcache::protocol {

inline std::string json_text(const nlohmann::json& value, int indent = -1) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

// Deeper than any document kcache writes (graphs nest a few levels per op
// attribute), far below what the stack holds.
inline constexpr std::size_t kMaxJsonDepth = 256;

// `text` parsed, or why not: malformed, or arrays and objects nested deeper
// than `max_depth`. Never throws.
tl::expected<nlohmann::json, std::string> parse_json(std::string_view text,
                                                     std::size_t max_depth = kMaxJsonDepth);

// parse_json's value, or a discarded one (is_discarded(), not an object) on
// any failure: a bounded drop-in for json::parse(text, nullptr, false).
nlohmann::json parse_json_or_discarded(std::string_view text,
                                       std::size_t max_depth = kMaxJsonDepth);

// Whether no array or object in `text` nests deeper than `max_depth`
// (a linear scan that skips strings; it does not check the syntax).
bool json_depth_within(std::string_view text, std::size_t max_depth);

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

} // namespace kcache::protocol
