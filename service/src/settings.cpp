// A setting's value from text (a flag, an environment variable), and the
// messages every source shares.

#include <kcache/service/settings.h>
#include <kcache/storage/store_url.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace kcache::service {
namespace {

tl::unexpected<std::string> fail(std::string message) {
  return tl::unexpected(std::move(message));
}

// spdlog::level::from_str's names; anything else would turn logging off.
constexpr std::array<std::string_view, 9> kLogLevels = {
    "trace", "debug", "info", "warn", "warning", "err", "error", "critical", "off"};

tl::expected<std::uint64_t, std::string> parse_count(std::string_view name, std::string_view text) {
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return fail(std::string(name) + ": '" + std::string(text) + "' is not a non-negative integer");
  }
  return v;
}

tl::expected<bool, std::string> parse_bool(std::string_view name, std::string_view text) {
  for (std::string_view yes : {"1", "true", "yes", "on"}) {
    if (text == yes) {
      return true;
    }
  }
  for (std::string_view no : {"0", "false", "no", "off"}) {
    if (text == no) {
      return false;
    }
  }
  return fail(std::string(name) + ": '" + std::string(text) + "' is not true or false (1 or 0)");
}

// "0660" or "660"; "" is 0: the socket keeps what the umask gives.
tl::expected<std::uint64_t, std::string> parse_mode(std::string_view name, std::string_view text) {
  unsigned mode = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), mode, 8);
  if (!text.empty() && (ec != std::errc() || ptr != text.data() + text.size() || mode > 0777)) {
    return fail(std::string(name) + " must be octal, such as 0660 (got '" + std::string(text) +
                "')");
  }
  return mode;
}

// A comma-separated list, as a variable carries it; empty items dropped.
std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    if (!item.empty()) {
      out.emplace_back(item);
    }
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return out;
}

} // namespace

std::string_view type_description(SettingType type) {
  switch (type) {
  case SettingType::kString:
    return "a string";
  case SettingType::kSize:
    return "a size (an integer of bytes or a string such as \"10GiB\")";
  case SettingType::kCount:
    return "a non-negative integer";
  case SettingType::kBool:
    return "true or false";
  case SettingType::kList:
    return "an array of strings";
  case SettingType::kOctalMode:
    return "an octal string such as \"0660\"";
  case SettingType::kLogLevel:
    return "one of trace, debug, info, warn, error, critical, off";
  }
  return "a value";
}

tl::expected<SettingValue, std::string>
parse_setting_text(const Setting& setting, std::string_view name, std::string_view text) {
  switch (setting.type) {
  case SettingType::kString:
    return std::string(text);
  case SettingType::kSize: {
    auto size = storage::parse_size(text);
    if (!size) {
      return fail(std::string(name) + ": " + size.error().message);
    }
    return *size;
  }
  case SettingType::kCount:
    return parse_count(name, text);
  case SettingType::kBool:
    return parse_bool(name, text);
  case SettingType::kList:
    return split_list(text);
  case SettingType::kOctalMode:
    return parse_mode(name, text);
  case SettingType::kLogLevel:
    if (std::find(kLogLevels.begin(), kLogLevels.end(), text) == kLogLevels.end()) {
      return fail(std::string(name) + ": unknown log level '" + std::string(text) + "' (" +
                  std::string(type_description(setting.type)) + ")");
    }
    return std::string(text);
  }
  return fail(std::string(name) + ": unknown setting type");
}

} // namespace kcache::service
