// Client's lease calls (the waiting get is Client::get in client.cpp).

#include "responses.h"

#include <kcache/client/client.h>

#include <nlohmann/json.hpp>

#include <cctype>

namespace kcache::client {

using nlohmann::json;

namespace {

std::string encode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

} // namespace

Result<Lease> Client::acquire_lease(std::string_view key, std::chrono::milliseconds ttl,
                                    std::string_view holder) {
  if (auto ok = check_key(key); !ok) {
    return tl::unexpected(ok.error());
  }
  auto res = request(HttpMethod::kPost, "/v1/leases/" + std::string(key) +
                                            "?ttl_ms=" + std::to_string(ttl.count()) +
                                            "&holder=" + encode(holder));
  if (!res) {
    return tl::unexpected(res.error());
  }
  const json doc = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (res->status != 200 || !doc.is_object()) {
    return tl::unexpected(from_status(*res));
  }
  Lease lease;
  lease.granted = doc.value("granted", false);
  lease.cached = doc.value("cached", false);
  lease.token = doc.value("token", std::string());
  lease.holder = doc.value("holder", std::string());
  lease.expires_in = std::chrono::milliseconds(doc.value("expires_in_ms", std::int64_t{0}));
  return lease;
}

Result<bool> Client::renew_lease(std::string_view key, std::string_view token,
                                 std::chrono::milliseconds ttl) {
  auto res =
      request(HttpMethod::kPut, "/v1/leases/" + std::string(key) + "?token=" + encode(token) +
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
  auto res =
      request(HttpMethod::kDelete, "/v1/leases/" + std::string(key) + "?token=" + encode(token));
  if (!res) {
    return tl::unexpected(res.error());
  }
  if (res->status != 200) {
    return tl::unexpected(from_status(*res));
  }
  return {};
}

} // namespace kcache::client
