#pragma once
// The one table of kcached's settings (settings_table.cpp). Each row names a
// setting's TOML key, flag, KCACHED_* environment variable, type, default and
// help, and stores a value into a ServiceConfig. The TOML loader, the command
// line (CLI11), the environment, the usage text and the test of
// deploy/kcached.toml all read this table, so they cannot drift apart.
//
// Precedence, highest first: a flag, its KCACHED_* variable, the --config file
// (or $KCACHED_CONFIG), the default. A list setting (stores, trusted keys)
// given by a higher source replaces the lower one's list.

#include <kcache/protocol/did_you_mean.h>
#include <kcache/service/config.h>

#include <tl/expected.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kcache::service {

enum class SettingType {
  kString,
  kSize,      // an integer of bytes or a string with units: "10GiB"
  kCount,     // a non-negative integer
  kBool,      // a flag without a value; true/false in TOML; 1/0 in the environment
  kList,      // strings: a TOML array, a repeated flag, a comma-separated variable
  kOctalMode, // "0660"
  kLogLevel,  // spdlog's level names
};

// kString, kOctalMode, kLogLevel: string; kSize, kCount: uint64; kBool: bool;
// kList: vector.
using SettingValue = std::variant<std::string, std::uint64_t, bool, std::vector<std::string>>;

struct Setting {
  std::string_view toml; // "limits.max_body_bytes"; "": not in the file
  std::string_view flag; // "max-body-bytes" (after "--"); "": not on the command line
  std::string_view env;  // "KCACHED_MAX_BODY_BYTES"; "": no variable
  SettingType type = SettingType::kString;
  std::string_view value_name;   // "SIZE" in the usage text
  std::string_view default_text; // as the usage text and the example file show it
  std::string_view help;         // one line
  void (*store)(ServiceConfig&, const SettingValue&) = nullptr;
};

std::span<const Setting> settings();

// The keys a [[tokens]] table may hold (tokens.cpp reads their values).
std::span<const std::string_view> token_keys();

// "a string", "a size (integer or \"10GiB\")": for wrong-type messages.
std::string_view type_description(SettingType type);

// A flag's or variable's text as a value of the setting's type; `name` (the
// flag or the variable) opens the error message.
tl::expected<SettingValue, std::string>
parse_setting_text(const Setting& setting, std::string_view name, std::string_view text);

// For "did you mean" in unknown-key and unknown-flag errors.
using protocol::closest_name;

} // namespace kcache::service
