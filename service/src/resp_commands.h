#pragma once
// The Redis commands kcached answers on its RESP listener (resp_server.h),
// over the same ArtifactStore, tokens and namespace scopes as the HTTP API.
//
// A RESP key K is the kcache key "resp:<namespace>:<K>" (key_namespace.h's
// named form, so token scopes apply to <namespace>, the configured one), with
// every byte outside the action-key alphabet, and '=' itself, written "=XX"
// (hex): distinct RESP keys never share a kcache key. A value is an artifact
// with one file, "value": framed, hashed, signed and stored in every tier like
// a PUT /v1/artifacts; GET answers that file's bytes. An artifact stored over
// HTTP under such a key with exactly one file reads back the same way.

#include <kcache/service/config.h>
#include <kcache/service/metrics.h>
#include <kcache/service/tokens.h>
#include <kcache/storage/artifact_store.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::service {

class LeaseTable;

// What one connection has said about itself (AUTH).
struct RespSession {
  const Principal* who = nullptr; // null: not authenticated (tokens configured)
  bool quit = false;              // QUIT: close once the reply is written
  bool resp3 = false;             // HELLO 3: nulls are "_" (no other RESP3 type is sent)
};

class RespCommands {
public:
  RespCommands(storage::Store& store, const storage::RecordSigner* signer,
               std::vector<Token> tokens, std::string ns, std::uint64_t max_value_bytes,
               MetricsRegistry& metrics, LeaseTable* leases = nullptr);

  // A new connection's state: anonymous (admin) without tokens, else none.
  RespSession open() const;
  // Runs one command (args[0] the name) and appends its reply to `out`.
  void execute(const std::vector<std::string>& args, RespSession& session, std::string& out);
  // A protocol error's reply (the connection closes after it), counted.
  void protocol_error(const std::string& message, std::string& out);

  // The kcache key of RESP key `key` in `ns`; nullopt when too long.
  static std::optional<std::string> kcache_key(std::string_view ns, std::string_view key);
  // Whether `ns` can be a RESP namespace (it sits between ':' in keys).
  static bool valid_namespace(std::string_view ns);

private:
  void count(std::string_view command, bool ok);
  void get(std::string_view key, const RespSession& session, std::string& out);
  void set(const std::vector<std::string>& args, const RespSession& session, std::string& out);
  void del(const std::vector<std::string>& args, const Principal& who, std::string& out);
  void auth(std::string_view user, std::string_view password, RespSession& session,
            std::string& out);
  void hello(const std::vector<std::string>& args, RespSession& session, std::string& out);
  // -1 present, -2 missing, nullopt after an error reply was appended.
  std::optional<bool> exists(std::string_view key, const Principal& who, std::string& out);

  storage::Store& store_;
  storage::ArtifactStore artifacts_;
  std::vector<Token> tokens_;
  std::vector<Principal> principals_;
  const Principal anonymous_ = Principal::anonymous();
  std::string ns_;
  std::uint64_t max_value_bytes_;
  MetricsRegistry& metrics_;
  LeaseTable* leases_;
  Counter& protocol_errors_;
};

} // namespace kcache::service
