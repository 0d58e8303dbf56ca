#pragma once
// Response builders shared by the request handler's route files.

#include <kcache/protocol/json_text.h>
#include <kcache/protocol/wire.h>
#include <kcache/service/request_handler.h>
#include <kcache/service/routes.h>

#include <nlohmann/json.hpp>

#include <string>

namespace kcache::service {

inline Response make(const Request& req, http::status status, std::string body,
                     std::string_view content_type) {
  Response res{status, req.version()};
  res.set(http::field::server, "kcached");
  res.set(http::field::content_type, content_type);
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

inline Response json_response(const Request& req, http::status status, const nlohmann::json& body) {
  return make(req, status, protocol::json_text(body), protocol::wire::kJsonContentType);
}

inline Response error(const Request& req, http::status status, std::string message) {
  return json_response(req, status, nlohmann::json{{"error", std::move(message)}});
}

// The store could not answer: a server-side condition, never the client's fault.
// A full disk is told apart (507): retrying elsewhere helps, retrying here not.
inline Response store_error(const Request& req, const storage::StoreError& e) {
  const http::status status = e.code == storage::StoreError::Code::kNoSpace
                                  ? http::status::insufficient_storage
                                  : http::status::service_unavailable;
  return error(req, status, std::string(storage::error_code_name(e.code)) + ": " + e.message);
}

} // namespace kcache::service
