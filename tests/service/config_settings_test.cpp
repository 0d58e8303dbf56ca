// The settings table (settings.h) against itself and against
// deploy/kcached.toml: every row documented and uniquely named, and the
// example file showing every setting (commented out or not) and no other.

#include <kcache/service/settings.h>

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace kcache::service {
namespace {

TEST(ConfigSettings, EveryRowHasHelpAndUniqueNames) {
  std::set<std::string_view> tomls;
  std::set<std::string_view> flags;
  std::set<std::string_view> envs;
  const std::regex flag_shape("[a-z][a-z0-9-]*");
  const std::regex env_shape("KCACHED_[A-Z0-9_]+");
  const std::regex toml_shape("([a-z_]+\\.)?[a-z_]+");
  for (const Setting& s : settings()) {
    const std::string name(!s.toml.empty() ? s.toml : s.flag);
    EXPECT_FALSE(s.toml.empty() && s.flag.empty()) << "a row nobody can set";
    EXPECT_FALSE(s.help.empty()) << name;
    EXPECT_FALSE(s.help.find('\n') != std::string_view::npos) << name << ": one line";
    EXPECT_TRUE(s.store != nullptr || s.toml == "token_file") << name;
    EXPECT_EQ(s.type == SettingType::kBool, s.value_name.empty()) << name;
    if (!s.toml.empty()) {
      EXPECT_TRUE(tomls.insert(s.toml).second) << "TOML key twice: " << s.toml;
      EXPECT_TRUE(std::regex_match(std::string(s.toml), toml_shape)) << s.toml;
    }
    if (!s.flag.empty()) {
      EXPECT_TRUE(flags.insert(s.flag).second) << "flag twice: --" << s.flag;
      EXPECT_TRUE(std::regex_match(std::string(s.flag), flag_shape)) << s.flag;
      EXPECT_NE(s.flag, "help");
      EXPECT_NE(s.flag, "version");
    }
    if (!s.env.empty()) {
      EXPECT_TRUE(envs.insert(s.env).second) << "variable twice: " << s.env;
      EXPECT_TRUE(std::regex_match(std::string(s.env), env_shape)) << s.env;
    }
    // A default must read as the setting's own type.
    if (!s.default_text.empty()) {
      EXPECT_TRUE(parse_setting_text(s, name, s.default_text).has_value())
          << name << " default " << s.default_text;
    }
  }
}

// The keys deploy/kcached.toml shows, "section.key", counting commented-out
// entries (`# key = value`, `# [tls]`) as shown.
std::set<std::string> example_keys(const std::string& path) {
  std::ifstream in(path);
  std::set<std::string> keys;
  const std::regex header(R"(^\[\[?([a-z_]+)\]\]?\s*(#.*)?$)");
  const std::regex entry(R"(^([a-z_]+)\s*=.*$)");
  std::string section;
  for (std::string line; std::getline(in, line);) {
    std::string text = line.substr(std::min(line.find_first_not_of(' '), line.size()));
    if (text.starts_with("#")) {
      text = text.substr(1);
      text = text.substr(std::min(text.find_first_not_of(' '), text.size()));
    }
    std::smatch m;
    if (std::regex_match(text, m, header)) {
      section = m[1];
    } else if (std::regex_match(text, m, entry)) {
      keys.insert(section.empty() ? std::string(m[1]) : section + "." + std::string(m[1]));
    }
  }
  return keys;
}

TEST(ConfigSettings, TheExampleFileShowsEverySettingAndNoOther) {
  const std::set<std::string> shown = example_keys(KCACHE_SOURCE_DIR "/deploy/kcached.toml");
  ASSERT_FALSE(shown.empty());
  std::set<std::string> known;
  for (const Setting& s : settings()) {
    if (!s.toml.empty()) {
      known.emplace(s.toml);
      EXPECT_TRUE(shown.contains(std::string(s.toml)))
          << "deploy/kcached.toml does not show " << s.toml << " (" << s.help << ")";
    }
  }
  for (const std::string_view key : token_keys()) {
    known.insert("tokens." + std::string(key));
  }
  for (const std::string& key : shown) {
    EXPECT_TRUE(known.contains(key))
        << "deploy/kcached.toml shows " << key << ", which the settings table does not know";
  }
}

} // namespace
} // namespace kcache::service
