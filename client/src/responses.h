#pragma once
// Turning the daemon's answers into ClientErrors; shared by the client's files.

#include <kcache/cachekey/wire.h>
#include <kcache/client/http_transport.h>

#include <nlohmann/json.hpp>

#include <string>

namespace kcache::client {

inline ClientError from_status(const HttpResponse& res) {
  std::string message = res.body;
  const nlohmann::json doc = nlohmann::json::parse(res.body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object() && doc.contains("error") && doc["error"].is_string()) {
    message = doc["error"].get<std::string>();
  }
  return ClientError{res.status >= 500 ? ErrorCode::kServer : ErrorCode::kRejected, res.status,
                     "kcached answered " + std::to_string(res.status) + ": " + message};
}

inline Result<void> check_key(std::string_view key) {
  if (!cachekey::wire::is_valid_action_key(key)) {
    return tl::unexpected(
        ClientError{ErrorCode::kInvalid, 0, "invalid key (1-512 characters of [A-Za-z0-9._:+=-])"});
  }
  return {};
}

} // namespace kcache::client
