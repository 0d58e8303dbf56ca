#pragma once
// Node attributes: a small JSON-like value (null, bool, int, float, string,
// list). Maps of attributes are ordered by name, so their encoding is canonical.

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace kcache::cachekey {

struct AttrValue {
  using List = std::vector<AttrValue>;
  std::variant<std::monostate, bool, std::int64_t, double, std::string, List> value;

  AttrValue() = default;
  AttrValue(bool v) : value(v) {}
  AttrValue(int v) : value(std::int64_t{v}) {}
  AttrValue(std::int64_t v) : value(v) {}
  AttrValue(double v) : value(v) {}
  AttrValue(const char* v) : value(std::string(v)) {}
  AttrValue(std::string v) : value(std::move(v)) {}
  AttrValue(List v) : value(std::move(v)) {}

  friend bool operator==(const AttrValue&, const AttrValue&) = default;
};

using Attrs = std::map<std::string, AttrValue, std::less<>>;

// Compact, deterministic text ("{axis=1, tile=[64,64]}") for explain output.
std::string to_string(const Attrs& attrs);

} // namespace kcache::cachekey
