#pragma once
// kcache's command line on CLI11: global options, one subcommand per command
// with its own options, and what a bad command line exits with.

#include "cli.h"

#include <CLI/CLI.hpp>

#include <map>
#include <optional>
#include <string>

namespace kcache::cli {

using Handler = int (*)(Cli&);

struct Command {
  Handler run = nullptr;
  bool needs_daemon = true; // false: runs without a client (token new)
};

// The subcommands and the handler each runs.
class CommandTable {
public:
  explicit CommandTable(CLI::App& app) : app_(app) {}
  CLI::App& app() { return app_; }
  CLI::App* add(CLI::App& parent, const std::string& name, const std::string& description,
                Handler run, bool needs_daemon = true);
  // The command of the deepest subcommand parsed, if it has one.
  std::optional<Command> find(const CLI::App* sub) const;

private:
  CLI::App& app_;
  std::map<const CLI::App*, Command> commands_;
};

// Declares every subcommand and its options (commands.cpp).
void add_commands(CommandTable& table);

// Validators for option values: a non-negative integer, any integer, and a
// size such as 5GiB. A bad value is a usage error naming the flag.
const CLI::Validator& count_value();
const CLI::Validator& integer_value();
const CLI::Validator& size_value();

// Parses argv into `cli`, `options` (flags over KCACHE_* variables) and the
// command to run. Returns the exit code when the command line ends here: 0
// after --help or --version (on stdout), kUsage after an error (on stderr,
// with the nearest flag or command when one is close).
std::optional<int> parse_command_line(int argc, char** argv, Cli& cli,
                                      client::ClientOptions& options, Command& command);

} // namespace kcache::cli
