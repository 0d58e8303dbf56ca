#include "command_line.h"

#include <kcache/protocol/build_info.h>
#include <kcache/protocol/did_you_mean.h>
#include <kcache/protocol/units.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <vector>

namespace kcache::cli {

namespace {

constexpr const char* kFooter = R"(
The server comes from --url, else $KCACHE_URL, else http://127.0.0.1:7070
(unix:///path for a Unix socket); the token from --token or $KCACHE_TOKEN.
For https:// URLs: --ca-file PEM (else $KCACHE_CA_FILE, else the system CAs)
verifies kcached's certificate; --client-cert PEM --client-key PEM (else
$KCACHE_CLIENT_CERT, $KCACHE_CLIENT_KEY) present one for mTLS.
--trusted-keys PEM[:PEM...] (files or directories of public keys, else
$KCACHE_TRUSTED_KEYS): `show` checks the record's signature against them and
`get` returns only artifacts signed by one of them whose bytes match the record.
`kcache COMMAND --help` lists a command's options.

exit codes:
  0 success   1 not found   2 usage error   3 daemon unreachable or timed out
  4 request refused or failed (or a job failed)   5 verify found problems)";

template <typename T> bool parse_whole(const std::string& text, T& out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// The deepest subcommand parsed: `kcache jobs watch` -> watch.
CLI::App* deepest(CLI::App* app) {
  for (CLI::App* sub = app; sub != nullptr;) {
    const std::vector<CLI::App*> parsed = sub->get_subcommands();
    if (parsed.empty()) {
      return sub;
    }
    sub = parsed.front();
  }
  return app;
}

// What `word` may have meant at `sub`: its options and its parents' (global
// options fall through), or its subcommands. Empty when nothing is close.
std::string nearest(const CLI::App* sub, std::string word) {
  word = word.substr(0, word.find('='));
  std::vector<std::string> candidates;
  if (word.starts_with("-")) {
    for (const CLI::App* app = sub; app != nullptr; app = app->get_parent()) {
      for (const CLI::Option* o : app->get_options()) {
        for (const std::string& l : o->get_lnames()) {
          candidates.push_back("--" + l);
        }
      }
    }
  } else {
    for (const CLI::App* s : sub->get_subcommands({})) {
      candidates.push_back(s->get_name());
    }
  }
  const std::vector<std::string_view> views(candidates.begin(), candidates.end());
  return std::string(protocol::closest_name(word, views));
}

// A bad command line: CLI11's message, or for an unknown word our own with
// the nearest match, then the pointer to --help. Always kUsage.
int report(CLI::App& app, const CLI::ParseError& e) {
  CLI::App* sub = deepest(&app);
  const std::vector<std::string> rest = app.remaining();
  std::string where = sub->get_name();
  for (const CLI::App* p = sub->get_parent(); p != nullptr; p = p->get_parent()) {
    where.insert(0, p->get_name() + " ");
  }
  std::string message = e.what();
  const bool extras = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
  if (!rest.empty() && (extras || sub == &app)) {
    const std::string& word = rest.front();
    message = word.starts_with("-") ? "unknown option '" + word + "' for '" + where + "'"
              : sub == &app         ? "unknown command '" + word + "'"
                                    : "unexpected argument '" + word + "' for '" + where + "'";
    if (const std::string near = nearest(sub, word); !near.empty()) {
      message += "; did you mean '" + near + "'?";
    }
  } else if (sub == &app && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    std::fputs(app.help().c_str(), stderr); // bare `kcache`: the usage
    return kUsage;
  }
  std::fprintf(stderr, "kcache: %s\n(%s --help for usage)\n", message.c_str(), where.c_str());
  return kUsage;
}

void add_global_options(CLI::App& app, client::ClientOptions& options, std::string& trusted_keys,
                        std::string& timeout_ms, Cli& cli) {
  app.add_option("--url", options.url, "kcached's URL: http://, https:// or unix:///path")
      ->envname("KCACHE_URL");
  app.add_option("--token", options.token, "bearer token")->envname("KCACHE_TOKEN");
  app.add_option("--timeout-ms", timeout_ms, "give up on a request after N ms (default 2000)")
      ->check(count_value());
  app.add_flag("--json", cli.json_output, "print JSON instead of tables");
  app.add_option("--ca-file", options.ca_file, "CA bundle (PEM) for https://")
      ->envname("KCACHE_CA_FILE");
  app.add_option("--client-cert", options.client_cert_file, "client certificate (PEM) for mTLS")
      ->envname("KCACHE_CLIENT_CERT");
  app.add_option("--client-key", options.client_key_file, "client key (PEM) for mTLS")
      ->envname("KCACHE_CLIENT_KEY");
  app.add_option("--trusted-keys", trusted_keys,
                 "PEM[:PEM...]: public keys records must be signed by")
      ->envname("KCACHE_TRUSTED_KEYS");
}

// A subcommand's arguments, options and flags into `cli`, the commands keep
// reading them by name.
void collect(const CLI::App& sub, Cli& cli) {
  for (const CLI::Option* o : sub.get_options()) {
    if (o->count() == 0 || o->get_name() == "--help") {
      continue;
    }
    if (!o->nonpositional()) {
      const auto& results = o->results();
      cli.args.insert(cli.args.end(), results.begin(), results.end());
    } else if (o->get_expected_max() == 0) {
      cli.flags.insert(o->get_single_name());
    } else {
      for (const std::string& r : o->results()) {
        cli.options.emplace(o->get_single_name(), r);
      }
    }
  }
}

} // namespace

CLI::App* CommandTable::add(CLI::App& parent, const std::string& name,
                            const std::string& description, Handler run, bool needs_daemon) {
  CLI::App* sub = parent.add_subcommand(name, description);
  if (run != nullptr) {
    commands_[sub] = {run, needs_daemon};
  }
  return sub;
}

std::optional<Command> CommandTable::find(const CLI::App* sub) const {
  const auto it = commands_.find(sub);
  return it == commands_.end() ? std::nullopt : std::optional<Command>(it->second);
}

const CLI::Validator& count_value() {
  static const CLI::Validator kCheck(
      [](std::string& text) {
        std::uint64_t n = 0;
        return parse_whole(text, n) ? std::string()
                                    : "takes a non-negative integer, got '" + text + "'";
      },
      "N");
  return kCheck;
}

const CLI::Validator& integer_value() {
  static const CLI::Validator kCheck(
      [](std::string& text) {
        std::int64_t n = 0;
        return parse_whole(text, n) ? std::string() : "takes an integer, got '" + text + "'";
      },
      "N");
  return kCheck;
}

const CLI::Validator& size_value() {
  static const CLI::Validator kCheck(
      [](std::string& text) {
        auto size = protocol::parse_size(text);
        return size ? std::string() : size.error();
      },
      "SIZE");
  return kCheck;
}

std::optional<int> parse_command_line(int argc, char** argv, Cli& cli,
                                      client::ClientOptions& options, Command& command) {
  CLI::App app("kcache: inspect and manage a kcache daemon", "kcache");
  app.fallthrough(); // global options after the command too: `kcache ls --json`
  app.require_subcommand(1);
  app.footer(kFooter);
  app.set_version_flag("--version", protocol::version_line("kcache"),
                       "print kcache's version, git revision, key schema and C ABI");
  std::string trusted_keys;
  std::string timeout_ms;
  add_global_options(app, options, trusted_keys, timeout_ms, cli);
  CommandTable table(app);
  add_commands(table);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << deepest(&app)->help();
    return kOk;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return kOk;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return kOk;
  } catch (const CLI::ParseError& e) {
    return report(app, e);
  }
  CLI::App* sub = deepest(&app);
  const std::optional<Command> found = table.find(sub);
  if (!found) { // `kcache token` alone
    std::fputs(sub->help().c_str(), stderr);
    return kUsage;
  }
  command = *found;
  for (CLI::App* s = sub; s != &app; s = s->get_parent()) {
    collect(*s, cli);
  }
  // Trusted keys turn verification on: `get` then hands out only verified artifacts.
  for (std::string_view rest = trusted_keys; !rest.empty();) {
    const auto colon = rest.find(':');
    if (colon != 0) {
      options.trusted_keys.emplace_back(rest.substr(0, colon));
    }
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  }
  options.verify_signatures = !options.trusted_keys.empty();
  if (std::int64_t ms = 0; parse_whole(timeout_ms, ms)) {
    options.timeout = std::chrono::milliseconds(ms);
  }
  return std::nullopt;
}

} // namespace kcache::cli
