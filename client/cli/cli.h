#pragma once
// What every kcache command shares: parsed arguments, the client, exit codes
// and helpers for calls, errors and progress.

#include <kcache/client/client.h>
#include <kcache/protocol/clock.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::cli {

using client::ClientError;
using nlohmann::json;
using protocol::parse_json_or_discarded;
using protocol::unix_now_ms;

enum Exit : int {
  kOk = 0,
  kNotFound = 1,
  kUsage = 2,
  kUnavailable = 3,
  kFailed = 4,
  kProblems = 5,
};

struct Cli {
  std::unique_ptr<client::Client> client;
  bool json_output = false;
  std::vector<std::string> args; // positional, after the command
  std::multimap<std::string, std::string> options;
  std::set<std::string> flags;

  std::string option(const std::string& name, const std::string& fallback = "") const {
    const auto it = options.find(name);
    return it == options.end() ? fallback : it->second;
  }
};

int fail(const ClientError& e);
int usage_error(const std::string& message);
// A typed call's failure: 404 -> kNotFound, else as fail().
int fail_call(const ClientError& e);
// --name N as a count (`fallback` when absent); a usage error if not a number.
int parse_count(const Cli& cli, const std::string& name, std::size_t fallback,
                std::optional<std::size_t>& out);
// A progress bar on stderr when it is a terminal.
void progress(const char* what, std::size_t done, std::size_t total);

// An autotune search's table: every variant, its status, time and error.
void print_tuning_table(const json& table);

// Entry commands (entry_commands.cpp).
int cmd_stats(Cli& cli);
int cmd_ls(Cli& cli);
int cmd_show(Cli& cli);
int cmd_get(Cli& cli);
int cmd_put(Cli& cli);
int cmd_rm(Cli& cli);

// Comparing keys, checking and trimming a store (maintenance_commands.cpp).
int cmd_explain(Cli& cli);
int cmd_verify(Cli& cli);
int cmd_gc(Cli& cli);

// Job commands (jobs_commands.cpp).
int cmd_jobs(Cli& cli);
int cmd_jobs_watch(Cli& cli);
int cmd_job(Cli& cli);
int cmd_cancel(Cli& cli);
int cmd_submit(Cli& cli);

// `kcache nodes` (node_commands.cpp): the cluster's live nodes.
int cmd_nodes(Cli& cli);

// `kcache runs`, `kcache run ID` (run_commands.cpp): kcache.torch's compile reports.
int cmd_runs(Cli& cli);
int cmd_run(Cli& cli);

// Reads SPEC.json (args[0]), packing the headers it includes from disk when
// `pack` (pack_commands.cpp); -I DIR options add include dirs.
int read_spec(const Cli& cli, bool pack, std::string& spec);
int cmd_pack_headers(Cli& cli);

// `kcache token new` (token_commands.cpp): a fresh 256-bit token and the
// sha256 line kcached's config takes. Needs no daemon.
int cmd_token_new(Cli& cli);

// An entry's origin from its stored record (signature_commands.cpp):
// {"writer", "namespace", "producer", "signed_ms", "key_id", "alg",
//  "verification": "verified" | "not checked" | "unsigned" | a failure name,
//  "detail"}; verified against the client's trusted_keys when it has some.
json record_origin(const Cli& cli, std::string_view key, const std::string& record_json);
void print_origin(const json& origin);

} // namespace kcache::cli
