#pragma once
// Turning the daemon's answers into ClientErrors; shared by the client's files.

#include <kcache/client/http_transport.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/wire.h>

#include <nlohmann/json.hpp>

#include <string>

namespace kcache::client {

inline ClientError from_status(const HttpResponse& res) {
  std::string message = res.body;
  const nlohmann::json doc = protocol::parse_json_or_discarded(res.body);
  if (doc.is_object() && doc.contains("error") && doc["error"].is_string()) {
    message = doc["error"].get<std::string>();
  }
  return ClientError{res.status >= 500 ? ErrorCode::kServer : ErrorCode::kRejected, res.status,
                     "kcached answered " + std::to_string(res.status) + ": " + message};
}

inline Result<void> check_key(std::string_view key) {
  if (!protocol::wire::is_valid_action_key(key)) {
    return tl::unexpected(
        ClientError{ErrorCode::kInvalid, 0, "invalid key (1-512 characters of [A-Za-z0-9._:+=-])"});
  }
  return {};
}

} // namespace kcache::client
