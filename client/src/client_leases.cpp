// Client's lease calls (the waiting get is Client::get in client.cpp).

#include "responses.h"

#include <kcache/client/client.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/url.h>

#include <nlohmann/json.hpp>

namespace kcache::client {

using protocol::url_encode;

Result<Lease> Client::acquire_lease(std::string_view key, std::chrono::milliseconds ttl,
                                    std::string_view holder) {
  if (auto ok = check_key(key); !ok) {
    return tl::unexpected(ok.error());
  }
  auto res = request(HttpMethod::kPost, "/v1/leases/" + std::string(key) +
                                            "?ttl_ms=" + std::to_string(ttl.count()) +
                                            "&holder=" + url_encode(holder));
  if (!res) {
    return tl::unexpected(res.error());
  }
  const nlohmann::json doc = protocol::parse_json_or_discarded(res->body);
  if (res->status != 200 || !doc.is_object()) {
    return tl::unexpected(from_status(*res));
  }
  auto lease = protocol::lease_from_json(doc);
  if (!lease) {
    return tl::unexpected(ClientError{ErrorCode::kProtocol, res->status, lease.error()});
  }
  return *lease;
}

Result<bool> Client::renew_lease(std::string_view key, std::string_view token,
                                 std::chrono::milliseconds ttl) {
  auto res =
      request(HttpMethod::kPut, "/v1/leases/" + std::string(key) + "?token=" + url_encode(token) +
                                    "&ttl_ms=" + std::to_string(ttl.count()));
  if (!res) {
    return tl::unexpected(res.error());
  }
  if (res->status == 409) {
    return false;
  }
  if (res->status != 200) {
    return tl::unexpected(from_status(*res));
  }
  return true;
}

Result<void> Client::release_lease(std::string_view key, std::string_view token) {
  auto res = request(HttpMethod::kDelete,
                     "/v1/leases/" + std::string(key) + "?token=" + url_encode(token));
  if (!res) {
    return tl::unexpected(res.error());
  }
  if (res->status != 200) {
    return tl::unexpected(from_status(*res));
  }
  return {};
}

} // namespace kcache::client
