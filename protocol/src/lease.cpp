#include <kcache/protocol/json_text.h>
#include <kcache/protocol/lease.h>

#include <nlohmann/json.hpp>

namespace kcache::protocol {

using nlohmann::json;

json to_json(const Lease& lease) {
  if (lease.cached) {
    return json{{"granted", false}, {"cached", true}};
  }
  json body{{"granted", lease.granted},
            {"cached", false},
            {"holder", lease.holder},
            {"expires_in_ms", lease.expires_in.count()}};
  if (lease.granted) {
    body["token"] = lease.token;
  }
  return body;
}

tl::expected<Lease, std::string> lease_from_json(const json& doc) {
  if (!doc.is_object()) {
    return tl::unexpected(std::string("lease answer is not a JSON object"));
  }
  try {
    Lease lease;
    lease.granted = doc.value("granted", false);
    lease.cached = doc.value("cached", false);
    lease.token = doc.value("token", std::string());
    lease.holder = doc.value("holder", std::string());
    lease.expires_in =
        std::chrono::milliseconds(json_integer(doc, "expires_in_ms", std::int64_t{0}));
    return lease;
  } catch (const json::exception& e) {
    return tl::unexpected(std::string("lease answer: ") + e.what());
  }
}

} // namespace kcache::protocol
