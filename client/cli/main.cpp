// kcache: inspect and manage a kcached from the command line.
// `kcache --help` lists the commands and the exit codes; `kcache COMMAND
// --help` a command's options (command_line.cpp, commands.cpp).

#include "cli.h"
#include "command_line.h"

#include <kcache/client/client.h>

#include <nlohmann/json.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  using namespace kcache::cli;
  Cli cli;
  kcache::client::ClientOptions options;
  Command command;
  if (const std::optional<int> done = parse_command_line(argc, argv, cli, options, command)) {
    return *done;
  }
  if (command.needs_daemon) {
    auto client = kcache::client::Client::create(options);
    if (!client) {
      return fail(client.error());
    }
    cli.client = std::move(*client);
  }
  try {
    return command.run(cli);
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "kcache: unexpected answer from kcached: %s\n", e.what());
    return kFailed;
  }
}
