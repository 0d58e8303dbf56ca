// kcached's TOML file, read through the settings table (settings.h): a key the
// table does not know is an error naming it and the file, so a typo cannot
// leave a default in place unnoticed.

#include "token_config.h"

#include <kcache/service/config.h>
#include <kcache/service/settings.h>
#include <kcache/service/tokens.h>

#include <toml++/toml.h>

#include <algorithm>
#include <set>

namespace kcache::service {
namespace {

tl::unexpected<std::string> file_error(std::string message) {
  return tl::unexpected(std::move(message));
}

const Setting* find_by_toml(std::string_view key) {
  for (const Setting& s : settings()) {
    if (!s.toml.empty() && s.toml == key) {
      return &s;
    }
  }
  return nullptr;
}

bool is_section(std::string_view name) {
  for (const Setting& s : settings()) {
    if (s.toml.size() > name.size() && s.toml.starts_with(name) && s.toml[name.size()] == '.') {
      return true;
    }
  }
  return false;
}

// "unknown key limits.max_conections (did you mean limits.max_connections?)".
std::string unknown(std::string_view what, std::string_view key,
                    std::span<const std::string_view> candidates) {
  std::string message = "unknown " + std::string(what) + " " + std::string(key);
  if (const std::string_view close = closest_name(key, candidates); !close.empty()) {
    message += " (did you mean " + std::string(close) + "?)";
  }
  return message;
}

std::vector<std::string_view> toml_keys() {
  std::vector<std::string_view> keys;
  for (const Setting& s : settings()) {
    if (!s.toml.empty()) {
      keys.push_back(s.toml);
    }
  }
  keys.emplace_back("tokens");
  return keys;
}

std::vector<std::string> section_names() {
  std::set<std::string> names;
  for (const Setting& s : settings()) {
    if (const std::size_t dot = s.toml.find('.'); dot != std::string_view::npos) {
      names.insert("[" + std::string(s.toml.substr(0, dot)) + "]");
    }
  }
  return {names.begin(), names.end()};
}

std::string_view toml_type_name(const toml::node& node) {
  switch (node.type()) {
  case toml::node_type::string:
    return "a string";
  case toml::node_type::integer:
    return "an integer";
  case toml::node_type::floating_point:
    return "a float";
  case toml::node_type::boolean:
    return "a boolean";
  case toml::node_type::array:
    return "an array";
  case toml::node_type::table:
    return "a table";
  default:
    return "a date or time";
  }
}

tl::expected<SettingValue, std::string> value_of(const Setting& s, const toml::node& node,
                                                 const std::string& where) {
  const std::string wrong_type = where + " must be " + std::string(type_description(s.type)) +
                                 ", not " + std::string(toml_type_name(node));
  switch (s.type) {
  case SettingType::kString:
  case SettingType::kLogLevel:
  case SettingType::kOctalMode:
    if (const auto* text = node.as_string()) {
      auto value = parse_setting_text(s, where, text->get());
      if (!value && s.type == SettingType::kOctalMode) {
        return file_error(where + " must be " + std::string(type_description(s.type)));
      }
      return value;
    }
    return file_error(wrong_type);
  case SettingType::kSize:
    if (const auto* n = node.as_integer(); n != nullptr && n->get() >= 0) {
      return static_cast<std::uint64_t>(n->get());
    }
    if (const auto* text = node.as_string()) {
      return parse_setting_text(s, where, text->get());
    }
    return file_error(wrong_type);
  case SettingType::kCount:
    if (const auto* n = node.as_integer(); n != nullptr && n->get() >= 0) {
      return static_cast<std::uint64_t>(n->get());
    }
    return file_error(where + " must be " + std::string(type_description(s.type)));
  case SettingType::kBool:
    if (const auto* b = node.as_boolean()) {
      return b->get();
    }
    return file_error(wrong_type);
  case SettingType::kList:
    if (const auto* array = node.as_array()) {
      std::vector<std::string> items;
      for (const toml::node& item : *array) {
        if (!item.is_string()) {
          return file_error(where + " must be " + std::string(type_description(s.type)));
        }
        items.push_back(*item.value<std::string>());
      }
      return items;
    }
    return file_error(wrong_type);
  }
  return file_error(wrong_type);
}

} // namespace

tl::expected<ServiceConfig, std::string> load_config_file(const std::string& path,
                                                          ServiceConfig c) {
  toml::table doc;
  try {
    doc = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    // toml++ reports syntax errors by exception; they end here, as a value.
    return file_error(path + ": " + std::string(e.description()));
  }
  const std::vector<std::string_view> known = toml_keys();
  std::set<std::string_view> given;
  auto apply = [&](const std::string& key,
                   const toml::node& node) -> tl::expected<void, std::string> {
    const Setting* s = find_by_toml(key);
    if (s == nullptr) {
      return file_error(path + ": " + unknown("key", key, known));
    }
    auto value = value_of(*s, node, path + ": " + key);
    if (!value) {
      return tl::unexpected(value.error());
    }
    if (s->store != nullptr) {
      s->store(c, *value);
    }
    given.insert(s->toml);
    return {};
  };
  for (const auto& [k, node] : doc) {
    const std::string key(k.str());
    if (key == "tokens") {
      continue; // [[tokens]]: tokens_from_toml below reads and checks them
    }
    if (is_section(key)) {
      const toml::table* section = node.as_table();
      if (section == nullptr) {
        std::string message = path;
        message.append(": ").append(key).append(" must be a table ([").append(key).append("])");
        return file_error(std::move(message));
      }
      for (const auto& [sub, value] : *section) {
        if (auto ok = apply(key + "." + std::string(sub.str()), value); !ok) {
          return tl::unexpected(ok.error());
        }
      }
      continue;
    }
    if (node.is_table()) {
      const std::vector<std::string> sections = section_names();
      const std::vector<std::string_view> names(sections.begin(), sections.end());
      return file_error(path + ": " + unknown("section", "[" + key + "]", names));
    }
    if (auto ok = apply(key, node); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  if (given.contains("stores")) {
    for (const char* tier_key : {"memory_capacity", "disk_capacity", "redis_url"}) {
      if (given.contains(tier_key)) {
        return file_error(path + ": stores replaces " + tier_key + "; give one or the other");
      }
    }
  }
  // Tokens (tokens.h): this file's [[tokens]] (plaintext only when the file
  // is private), then token_file's; every one checked at start-up.
  auto is_private = file_is_private(path);
  auto tokens = tokens_from_toml(doc, path, is_private.value_or(false), c.tokens.size());
  if (!tokens) {
    return tl::unexpected(tokens.error());
  }
  c.tokens.insert(c.tokens.end(), tokens->begin(), tokens->end());
  if (const toml::node* n = doc.get("token_file")) {
    auto more = load_token_file(*n->value<std::string>(), c.tokens.size());
    if (!more) {
      return tl::unexpected(more.error());
    }
    c.tokens.insert(c.tokens.end(), more->begin(), more->end());
  }
  if (auto unique = check_unique_tokens(c.tokens); !unique) {
    return file_error(path + ": " + unique.error());
  }
  return c;
}

} // namespace kcache::service
