#include <kcache/protocol/units.h>

#include <charconv>
#include <cstdio>
#include <map>

namespace kcache::protocol {

tl::expected<std::uint64_t, std::string> parse_size(std::string_view text) {
  std::uint64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr == text.data()) {
    return tl::unexpected("bad size '" + std::string(text) + "'");
  }
  static const std::map<std::string, std::uint64_t, std::less<>> kUnits = {
      {"", 1},
      {"B", 1},
      {"KiB", 1ULL << 10},
      {"MiB", 1ULL << 20},
      {"GiB", 1ULL << 30},
      {"TiB", 1ULL << 40},
      {"KB", 1000},
      {"MB", 1000'000},
      {"GB", 1000'000'000},
      {"TB", 1000'000'000'000}};
  const std::string_view unit(ptr, static_cast<std::size_t>(text.data() + text.size() - ptr));
  const auto it = kUnits.find(unit);
  if (it == kUnits.end()) {
    return tl::unexpected("bad size unit in '" + std::string(text) +
                          "' (use B, KiB, MiB, GiB, TiB)");
  }
  if (value > UINT64_MAX / it->second) {
    return tl::unexpected("size '" + std::string(text) + "' overflows");
  }
  return value * it->second;
}

tl::expected<std::uint64_t, std::string> parse_duration_s(std::string_view text) {
  std::uint64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string_view unit(ptr, static_cast<std::size_t>(text.data() + text.size() - ptr));
  std::uint64_t scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60;
  } else if (unit == "h") {
    scale = 3600;
  } else if (unit == "d") {
    scale = 86400;
  }
  if (ec != std::errc() || ptr == text.data() || scale == 0) {
    return tl::unexpected("bad duration '" + std::string(text) +
                          "' (a number with s, m, h or d: \"7d\", \"12h\")");
  }
  if (value > (1ULL << 32) / scale) {
    return tl::unexpected("duration '" + std::string(text) + "' is too long");
  }
  return value * scale;
}

std::string format_size(std::uint64_t bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.1f %s", v, kNames[unit]);
  return buf;
}

} // namespace kcache::protocol
