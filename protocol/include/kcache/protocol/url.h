#pragma once
// Query strings and percent-encoding, for request targets the client builds,
// kcached reads, and store URLs.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::protocol {

// "%2F" -> "/", "+" -> " "; a malformed escape is kept as it is.
std::string percent_decode(std::string_view text);
// RFC 3986 decoding outside a query (a URL's userinfo): only %XX ('+' stays
// '+'); nullopt for a malformed escape, which is refused rather than guessed at.
std::optional<std::string> percent_decode_strict(std::string_view text);

// Everything but [A-Za-z0-9-_.~:] as %XX (upper-case hex).
std::string url_encode(std::string_view text);

struct QueryParam {
  std::string_view name, value; // as written: not decoded
  bool has_value = false;       // "a=" has one (empty), "a" has none
};

// "a=1&b&c=" -> {a,1}, {b}, {c,""}. Callers decide whether to decode
// (kcached's request targets do) and what a repeat or a bare name means.
std::vector<QueryParam> split_query(std::string_view query);

} // namespace kcache::protocol
