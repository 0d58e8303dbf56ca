// The /v1/leases routes of RequestHandler: single-flight for producers outside
// the service (lease_table.h), and the artifact get that waits for a lease
// holder's put.

#include "responses.h"
#include "scopes.h"

#include <kcache/protocol/lease.h>
#include <kcache/protocol/wire.h>
#include <kcache/service/lease_table.h>
#include <kcache/service/request_handler.h>

#include <algorithm>
#include <charconv>

namespace kcache::service {

using nlohmann::json;

namespace {

constexpr std::int64_t kDefaultTtlMs = 30'000;
constexpr std::int64_t kMaxTtlMs = 600'000;

std::chrono::milliseconds ttl_of(const std::string& text) {
  std::int64_t ms = kDefaultTtlMs;
  std::from_chars(text.data(), text.data() + text.size(), ms);
  return std::chrono::milliseconds(std::clamp<std::int64_t>(ms, 1, kMaxTtlMs));
}

} // namespace

Response RequestHandler::lease(const Request& req, const RouteArgs& args) {
  const std::string_view key = args.param;
  const Query& query = args.query;
  if (leases_ == nullptr) {
    return error(req, http::status::not_found, "this kcached has no leases");
  }
  if (!protocol::wire::is_valid_action_key(key)) {
    return error(req, http::status::bad_request, "invalid key");
  }
  if (auto refused = stored_write_refusal(args.who, artifacts_, key, Role::kWrite)) {
    // A namespace this token may not read answers as if nothing were there.
    return may_read_key(args.who, artifacts_, key)
               ? error(req, http::status::forbidden, std::move(*refused))
               : error(req, http::status::not_found, "no lease for " + std::string(key));
  }
  const std::string k(key);
  const std::string token = query.get("token");
  switch (req.method()) {
  case http::verb::post: {
    // Already produced: nobody needs to compile it.
    if (auto record = artifacts_.get_record(k); record && *record) {
      protocol::Lease cached;
      cached.cached = true;
      return json_response(req, http::status::ok, protocol::to_json(cached));
    }
    // An unnamed (or empty) holder is the token's identity ("anonymous"
    // without tokens: handlers do not see the peer's address), so waiters
    // see who holds it.
    std::string holder = query.get("holder");
    if (holder.empty()) {
      holder = args.who.name;
    }
    const LeaseGrant g = leases_->acquire(k, holder, ttl_of(query.get("ttl_ms")));
    return json_response(
        req, http::status::ok,
        protocol::to_json(protocol::Lease{g.granted, false, g.token, g.holder, g.expires_in}));
  }
  case http::verb::put:
    return leases_->renew(k, token, ttl_of(query.get("ttl_ms")))
               ? json_response(req, http::status::ok, json{{"renewed", true}})
               : error(req, http::status::conflict, "not the holder of a live lease on " + k);
  default:
    return leases_->release(k, token)
               ? json_response(req, http::status::ok, json{{"released", true}})
               : error(req, http::status::conflict, "not the holder of the lease on " + k);
  }
}

void RequestHandler::wait_for_put(const Request& request, const RouteArgs& args,
                                  std::chrono::milliseconds wait, const Responder& respond) {
  Response now = handle(request);
  const std::string key(args.param);
  if (leases_ == nullptr || now.result() != http::status::not_found || !leases_->held(key)) {
    respond(std::move(now));
    return;
  }
  // A miss while another producer holds the lease: wait for its put.
  leases_->wait_for_put(key, std::chrono::steady_clock::now() + wait,
                        [this, respond, request] { respond(handle(request)); });
}

} // namespace kcache::service
