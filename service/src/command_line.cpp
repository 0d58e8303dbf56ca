// kcached's command line (CLI11) and KCACHED_* variables over its TOML file,
// all three read through the settings table (settings.h), and the usage text
// the table writes.

#include <kcache/protocol/build_info.h>
#include <kcache/service/config.h>
#include <kcache/service/settings.h>

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <set>

namespace kcache::service {
namespace {

tl::unexpected<CommandLineExit> exit_with(int code, std::string text) {
  return tl::unexpected(CommandLineExit{code, std::move(text)});
}

tl::unexpected<CommandLineExit> error(std::string message) {
  return exit_with(2, std::move(message) + "\n(kcached --help lists the options)");
}

constexpr std::size_t kHelpColumn = 34;
constexpr std::size_t kWidth = 100;

// Words of `text` in lines that end by kWidth, each after the first indented
// to kHelpColumn.
std::string wrap(std::string_view text) {
  std::string out;
  std::size_t column = kHelpColumn;
  while (!text.empty()) {
    const std::size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    if (column > kHelpColumn && column + 1 + word.size() > kWidth) {
      out += "\n" + std::string(kHelpColumn, ' ');
      column = kHelpColumn;
    } else if (column > kHelpColumn) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  }
  return out;
}

// The section a setting's TOML key names ("limits.x" -> "limits").
std::string_view section_of(std::string_view toml) {
  const std::size_t dot = toml.find('.');
  return dot == std::string_view::npos ? std::string_view() : toml.substr(0, dot);
}

std::string flag_column(const Setting& s) {
  std::string left = "  ";
  left += s.flag.empty() ? std::string(s.toml) + " (file only)" : "--" + std::string(s.flag);
  if (!s.value_name.empty()) {
    left += " " + std::string(s.value_name);
  }
  return left;
}

std::string sources(const Setting& s) {
  std::string out = "[";
  if (!s.default_text.empty()) {
    out += "default " + std::string(s.default_text) + "; ";
  }
  if (!s.toml.empty()) {
    out += "file " + std::string(s.toml) + "; ";
  }
  if (!s.env.empty()) {
    out += "env " + std::string(s.env) + "; ";
  }
  out.resize(out.size() - 2);
  return out + "]";
}

// One source's values (the flags, the environment): stored in table order,
// then --store against the tier options of the same source.
struct Layer {
  std::vector<std::pair<const Setting*, SettingValue>> values;
  std::set<std::string, std::less<>> names; // as the source spells them

  void add(const Setting& s, SettingValue value, std::string_view name) {
    values.emplace_back(&s, std::move(value));
    names.emplace(name);
  }
};

tl::expected<void, CommandLineExit> apply(const Layer& layer, ServiceConfig& c,
                                          std::string_view store_name,
                                          std::initializer_list<std::string_view> tier_names) {
  if (layer.names.contains(store_name)) {
    for (const std::string_view tier : tier_names) {
      if (layer.names.contains(tier)) {
        return error(std::string(store_name) + " replaces " + std::string(tier) +
                     "; give one or the other");
      }
    }
  }
  for (const auto& [s, value] : layer.values) {
    s->store(c, value);
  }
  return {};
}

tl::expected<Layer, CommandLineExit> environment_layer(const Environment& env) {
  Layer layer;
  for (const Setting& s : settings()) {
    if (s.env.empty() || s.flag == "config") {
      continue;
    }
    if (const auto it = env.find(s.env); it != env.end()) {
      auto value = parse_setting_text(s, s.env, it->second);
      if (!value) {
        return error(value.error());
      }
      layer.add(s, std::move(*value), s.env);
    }
  }
  return layer;
}

struct FlagOption {
  const Setting* setting;
  CLI::Option* option;
};

tl::expected<Layer, CommandLineExit> flag_layer(const std::vector<FlagOption>& options) {
  Layer layer;
  for (const auto& [s, option] : options) {
    if (option->count() == 0 || s->flag == "config") {
      continue;
    }
    const std::string name = "--" + std::string(s->flag);
    const std::vector<std::string>& results = option->results();
    if (s->type == SettingType::kList) {
      layer.add(*s, results, name); // one item per flag: commas are the item's own
      continue;
    }
    auto value = parse_setting_text(*s, name, results.empty() ? "" : results.back());
    if (!value) {
      return error(value.error());
    }
    layer.add(*s, std::move(*value), name);
  }
  return layer;
}

// Reports an argument CLI11 left over: a mistyped flag (with the closest
// one), or a stray word.
CommandLineExit unknown_argument(const std::vector<std::string>& remaining) {
  const std::string& arg = remaining.front();
  if (!arg.starts_with("-")) {
    return error("unexpected argument '" + arg + "': kcached takes options only").value();
  }
  const std::string flag = arg.substr(0, arg.find('='));
  std::vector<std::string> names = {"--help", "--version"};
  for (const Setting& s : settings()) {
    if (!s.flag.empty()) {
      names.push_back("--" + std::string(s.flag));
    }
  }
  const std::vector<std::string_view> views(names.begin(), names.end());
  std::string message = "unknown option " + flag;
  if (const std::string_view close = closest_name(flag, views); !close.empty()) {
    message += " (did you mean " + std::string(close) + "?)";
  }
  return error(message).value();
}

} // namespace

Environment kcached_environment() {
  Environment env;
  for (const Setting& s : settings()) {
    if (s.env.empty()) {
      continue;
    }
    // getenv reads the environment kcached was started with; nothing here
    // writes it. Unknown KCACHED_* names are not errors: Kubernetes sets
    // KCACHED_SERVICE_HOST and KCACHED_PORT for a Service named kcached.
    if (const char* value = std::getenv(std::string(s.env).c_str())) {
      env.emplace(std::string(s.env), value);
    }
  }
  return env;
}

std::string usage() {
  std::string out = R"(kcached: the kcache daemon (HTTP/1.1 over TCP and a Unix socket)

usage: kcached [--config FILE] [options]

Every setting comes, highest first, from its flag, its KCACHED_* environment variable,
the TOML file of --config (or KCACHED_CONFIG), or its default. A list given by a higher
source (repeated --store or --trusted-keys flags, comma-separated variables) replaces the
lower one's. deploy/kcached.toml shows every file key.

  -h, --help                      print this help and exit
  --version                       print the version, git revision, key schema and C ABI
)";
  std::string_view section = "-";
  for (const Setting& s : settings()) {
    if (!s.toml.empty() && section_of(s.toml) != section) {
      section = section_of(s.toml);
      out += section.empty() ? std::string("\n") : "\n[" + std::string(section) + "]\n";
    }
    std::string left = flag_column(s);
    left += left.size() + 2 > kHelpColumn ? "\n" + std::string(kHelpColumn, ' ')
                                          : std::string(kHelpColumn - left.size(), ' ');
    out += left + wrap(s.help) + "\n" + std::string(kHelpColumn, ' ') + wrap(sources(s)) + "\n";
  }
  out += "\n[[tokens]] tables (file only): name, sha256 or token, role or roles (README "
         "\"Security\")";
  return out;
}

tl::expected<ServiceConfig, CommandLineExit> parse_command_line(int argc, const char* const* argv) {
  return parse_command_line(argc, argv, kcached_environment());
}

tl::expected<ServiceConfig, CommandLineExit> parse_command_line(int argc, const char* const* argv,
                                                                const Environment& env) {
  CLI::App app("kcached", "kcached");
  app.allow_extras(); // reported below, with the closest flag
  app.set_version_flag("--version", protocol::version_line("kcached"));
  std::vector<FlagOption> options;
  for (const Setting& s : settings()) {
    if (s.flag.empty()) {
      continue;
    }
    const std::string name = "--" + std::string(s.flag);
    CLI::Option* option = s.type == SettingType::kBool ? app.add_flag(name) : app.add_option(name);
    option->description(std::string(s.help));
    if (s.type != SettingType::kBool) {
      // One value per flag; a repeated list flag adds to the list, a repeated
      // scalar flag keeps the last, as shells' "defaults, then overrides" want.
      option->expected(1)->multi_option_policy(s.type == SettingType::kList
                                                   ? CLI::MultiOptionPolicy::TakeAll
                                                   : CLI::MultiOptionPolicy::TakeLast);
    }
    options.push_back({&s, option});
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return exit_with(0, usage());
  } catch (const CLI::CallForVersion& e) {
    return exit_with(0, e.what());
  } catch (const CLI::ParseError& e) {
    return error(e.what());
  }
  if (!app.remaining().empty()) {
    return tl::unexpected(unknown_argument(app.remaining()));
  }

  ServiceConfig c;
  std::string config_file;
  if (const auto it = env.find("KCACHED_CONFIG"); it != env.end()) {
    config_file = it->second;
  }
  for (const auto& [s, option] : options) {
    if (s->flag == "config" && option->count() > 0) {
      config_file = option->results().back();
    }
  }
  if (!config_file.empty()) {
    auto loaded = load_config_file(config_file, c);
    if (!loaded) {
      return exit_with(2, loaded.error());
    }
    c = std::move(*loaded);
  }
  auto from_env = environment_layer(env);
  if (!from_env) {
    return tl::unexpected(from_env.error());
  }
  auto from_flags = flag_layer(options);
  if (!from_flags) {
    return tl::unexpected(from_flags.error());
  }
  if (auto ok = apply(*from_env, c, "KCACHED_STORES",
                      {"KCACHED_MEMORY_CAPACITY", "KCACHED_DISK_CAPACITY", "KCACHED_REDIS_URL"});
      !ok) {
    return tl::unexpected(ok.error());
  }
  if (auto ok =
          apply(*from_flags, c, "--store", {"--memory-capacity", "--disk-capacity", "--redis-url"});
      !ok) {
    return tl::unexpected(ok.error());
  }

  if (c.cluster.enabled && c.redis_url.empty()) {
    return exit_with(2, "cluster mode (--cluster, [cluster] enabled) needs redis_url "
                        "(--redis-url): the job queue lives on that Redis");
  }
  const std::uint64_t host_memory = host_memory_bytes();
  fit_default_worker_memory(c.jobs, host_memory);
  if (auto ok = check_worker_memory(c.jobs, host_memory); !ok) {
    return exit_with(2, ok.error());
  }
  if (auto ok = check_transport_security(c); !ok) {
    return exit_with(2, ok.error());
  }
  if (auto ok = check_eviction_scope(c); !ok) {
    return exit_with(2, ok.error());
  }
  return c;
}

} // namespace kcache::service
