#include <kcache/cachekey/attr_value.h>

#include <cstdio>

namespace kcache::cachekey {
namespace {
void append(std::string& out, const AttrValue& attr) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          out += "null";
        } else if constexpr (std::is_same_v<T, bool>) {
          out += v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          out += std::to_string(v);
        } else if constexpr (std::is_same_v<T, double>) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.17g", v);
          out += buf;
        } else if constexpr (std::is_same_v<T, std::string>) {
          out += '"' + v + '"';
        } else {
          out += '[';
          for (std::size_t i = 0; i < v.size(); ++i) {
            if (i > 0) {
              out += ',';
            }
            append(out, v[i]);
          }
          out += ']';
        }
      },
      attr.value);
}
} // namespace

std::string to_string(const Attrs& attrs) {
  std::string out = "{";
  bool first = true;
  for (const auto& [name, value] : attrs) {
    if (!first) {
      out += ", ";
    }
    first = false;
    out += name + '=';
    append(out, value);
  }
  return out + '}';
}

} // namespace kcache::cachekey
