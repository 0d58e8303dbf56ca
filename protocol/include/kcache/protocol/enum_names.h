#pragma once
// One name table per enum: the same table writes the name into JSON and reads
// it back (requests, the job journal), so the two cannot drift apart.

#include <tl/expected.hpp>

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kcache::protocol {

template <typename E, std::size_t N> class EnumNames {
public:
  constexpr explicit EnumNames(std::array<std::pair<E, std::string_view>, N> rows) : rows_(rows) {}

  constexpr std::string_view name(E value) const {
    for (const auto& [v, n] : rows_) {
      if (v == value) {
        return n;
      }
    }
    return "unknown";
  }

  constexpr std::optional<E> parse(std::string_view text) const {
    for (const auto& [v, n] : rows_) {
      if (n == text) {
        return v;
      }
    }
    return std::nullopt;
  }

  // parse, or "unknown <what> '<text>' (a, b, c)".
  tl::expected<E, std::string> parse_or_error(std::string_view what, std::string_view text) const {
    if (auto value = parse(text)) {
      return *value;
    }
    return tl::unexpected("unknown " + std::string(what) + " '" + std::string(text) + "' (" +
                          choices() + ")");
  }

  // "a, b, c": for messages that name the valid values.
  std::string choices() const {
    std::string out;
    for (const auto& [v, n] : rows_) {
      out += out.empty() ? "" : ", ";
      out += n;
    }
    return out;
  }

private:
  std::array<std::pair<E, std::string_view>, N> rows_;
};

} // namespace kcache::protocol
