// RequestHandler's dispatch over the route table: query parsing, bearer
// tokens, 404/405/403, metrics per route, and the long-poll hand-off.

#include "responses.h"
#include "scopes.h"

#include <kcache/protocol/url.h>
#include <kcache/service/key_namespace.h>
#include <kcache/service/lease_table.h>
#include <kcache/service/request_handler.h>
#include <kcache/service/routes.h>
#include <kcache/service/tokens.h>
#include <kcache/storage/redis_client.h>

#include <algorithm>
#include <charconv>
#include <condition_variable>

namespace kcache::service {

namespace {

// "GET, HEAD": the methods the table serves on `path`, for a 405's Allow.
std::string allowed_methods(std::string_view path) {
  std::string allow;
  for (const Route& route : route_table()) {
    if (match_route(route.pattern, path)) {
      allow += (allow.empty() ? "" : ", ") + std::string(http::to_string(route.method));
    }
  }
  return allow;
}

} // namespace

RequestHandler::RequestHandler(storage::Store& store, std::vector<TierView> tiers,
                               MetricsRegistry& metrics, std::vector<Token> tokens,
                               JobManager* jobs, LeaseTable* leases,
                               const storage::RecordSigner* signer)
    : store_(store), artifacts_(store, signer), tiers_(std::move(tiers)), metrics_(metrics),
      tokens_(std::move(tokens)), jobs_(jobs), leases_(leases) {
  for (const Token& token : tokens_) {
    principals_.push_back(Principal::of(token));
  }
  labels_.emplace_back("unknown");
  for (const Route& route : route_table()) {
    if (std::find(labels_.begin(), labels_.end(), route.label) == labels_.end()) {
      labels_.push_back(route.label);
    }
  }
  for (const std::string_view label : labels_) {
    durations_.push_back(&metrics_.histogram("kcache_http_request_duration_seconds",
                                             "Time to handle a request",
                                             {{"route", std::string(label)}}));
  }
  history_clock_ = std::jthread([this](const std::stop_token& stop) {
    std::mutex mu;
    std::condition_variable_any wake; // only the stop wakes it early
    std::unique_lock lock(mu);
    while (!wake.wait_for(lock, stop, std::chrono::seconds(5),
                          [&] { return stop.stop_requested(); })) {
      if (const std::int64_t now_ms = storage::unix_now_ms(); history_.due(now_ms)) {
        history_.record(now_ms, store_.counters());
      }
    }
  });
}

void RequestHandler::record_metrics(std::string_view label, http::verb method, unsigned status,
                                    double seconds) {
  const auto it = std::find(labels_.begin(), labels_.end(), label);
  const auto index = static_cast<std::size_t>(it == labels_.end() ? 0 : it - labels_.begin());
  durations_[index]->observe(seconds);
  const std::uint64_t id = (static_cast<std::uint64_t>(index) << 40) |
                           (static_cast<std::uint64_t>(method) << 20) | status;
  {
    std::shared_lock lock(counters_mu_);
    if (const auto c = request_counters_.find(id); c != request_counters_.end()) {
      c->second->inc();
      return;
    }
  }
  Counter& counter =
      metrics_.counter("kcache_http_requests_total", "Requests by route, method and status",
                       {{"route", std::string(labels_[index])},
                        {"method", std::string(http::to_string(method))},
                        {"code", std::to_string(status)}});
  counter.inc();
  std::unique_lock lock(counters_mu_);
  request_counters_.emplace(id, &counter);
}

struct RequestHandler::Prepared {
  std::string_view path;
  Query query;
  const Route* route = nullptr; // the row for this method and path
  std::string_view param;       // what the route's pattern captured
  std::string_view label = "unknown";
  std::optional<Response> rejected; // set when the request may not go on
  const Principal* who = nullptr;   // set once authenticated (anonymous_ without tokens)
};

RequestHandler::Prepared RequestHandler::prepare(const Request& request) const {
  Prepared p;
  p.who = tokens_.empty() ? &anonymous_ : &unauthenticated_;
  const std::string_view target(request.target().data(), request.target().size());
  const auto qmark = target.find('?');
  p.path = target.substr(0, qmark);
  if (qmark != std::string_view::npos) {
    for (const protocol::QueryParam& param : protocol::split_query(target.substr(qmark + 1))) {
      p.query.params[protocol::percent_decode(param.name)] = protocol::percent_decode(param.value);
    }
  }
  // The method's row, and the path's first (for a 405's label).
  const Route* path_route = nullptr;
  for (const Route& route : route_table()) {
    const auto param = match_route(route.pattern, p.path);
    if (param && path_route == nullptr) {
      path_route = &route;
    }
    if (param && route.method == request.method()) {
      p.route = &route;
      p.param = *param;
      break;
    }
  }
  // No tokens configured: open (single-user or trusted network).
  const Route* row = p.route != nullptr ? p.route : path_route;
  const bool open = row != nullptr && !row->role;
  if (!tokens_.empty() && !open) {
    const auto bearer = bearer_token(request[http::field::authorization]);
    const Token* token = bearer ? find_token(tokens_, *bearer) : nullptr;
    if (token == nullptr) {
      p.rejected = error(request, http::status::unauthorized, "missing or unknown bearer token");
      p.rejected->set(http::field::www_authenticate, "Bearer");
      return p;
    }
    p.who = &principals_[static_cast<std::size_t>(token - tokens_.data())];
  }
  if (path_route == nullptr) {
    p.rejected = error(request, http::status::not_found, "no route for " + std::string(p.path));
  } else if (p.route == nullptr) {
    p.label = path_route->label;
    p.rejected = error(request, http::status::method_not_allowed,
                       std::string(request.method_string()) + " is not allowed here");
    p.rejected->set(http::field::allow, allowed_methods(p.path));
  } else if (p.route->role && !p.who->may_somewhere(*p.route->role)) {
    // Counted under "unknown", as refusals always were.
    p.rejected = error(request, http::status::forbidden,
                       "this token's role may not " + std::string(request.method_string()) + " " +
                           std::string(p.path) + " (it needs the " +
                           std::string(role_name(*p.route->role)) + " role)");
  } else {
    p.label = p.route->label;
    // An upload under a key whose namespace the key itself names (or a kcc-
    // key) is refused on its head, before its body is read; a kc1- key's
    // namespace is in the body's manifest, checked by the handler.
    if (request.method() == http::verb::put && (p.label == "artifacts" || p.label == "ac") &&
        key_scope(p.param).kind != KeyScope::Kind::kManifest) {
      if (auto refused = write_refusal(*p.who, p.param, nullptr)) {
        p.rejected = error(request, http::status::forbidden, std::move(*refused));
      }
    }
  }
  return p;
}

Response RequestHandler::respond_now(const Request& request, const Prepared& prepared) {
  // A hung Redis node costs this request one op timeout, not one per command
  // (the request runs on an I/O thread whose other connections wait).
  const storage::RedisCallScope redis_calls;
  const auto start = std::chrono::steady_clock::now();
  // Before this request counts: what the store counted since the last one
  // lands in that one's minute (stats_history.h).
  if (const std::int64_t now_ms = storage::unix_now_ms(); history_.due(now_ms)) {
    history_.record(now_ms, store_.counters());
  }
  Response response =
      prepared.rejected
          ? *prepared.rejected
          : (this->*prepared.route->handler)(
                request, RouteArgs{prepared.param, prepared.query, prepared.label, *prepared.who});
  const auto took = std::chrono::steady_clock::now() - start;
  record_metrics(prepared.label, request.method(), response.result_int(),
                 std::chrono::duration<double>(took).count());
  log_request(request, response, prepared.route, prepared.path, prepared.param, *prepared.who,
              took);
  // A stored artifact ends the single-flight lease on its key: waiters wake and hit.
  if (leases_ != nullptr && request.method() == http::verb::put &&
      response.result() == http::status::created &&
      (prepared.label == "artifacts" || prepared.label == "ac")) {
    leases_->notify_put(std::string(prepared.param));
  }
  return response;
}

Response RequestHandler::handle(const Request& request) {
  return respond_now(request, prepare(request));
}

std::optional<Response> RequestHandler::admit(const Request& head, bool sends_spent) {
  Prepared prepared = prepare(head);
  if (!prepared.rejected && sends_spent &&
      (head.method() == http::verb::get || head.method() == http::verb::post) &&
      (prepared.label == "artifacts" || prepared.label == "cas" || prepared.label == "batch_get")) {
    prepared.rejected = error(head, http::status::service_unavailable,
                              "the server's response memory is spent; retry later");
    prepared.rejected->set(http::field::retry_after, "1");
  }
  if (!prepared.rejected && prepared.route != nullptr &&
      prepared.route->handler == &RequestHandler::submit_job) {
    prepared.rejected = refuse_submission_head(head);
  }
  if (prepared.rejected) {
    record_metrics(prepared.label, head.method(), prepared.rejected->result_int(), 0.0);
    log_request(head, *prepared.rejected, prepared.route, prepared.path, prepared.param,
                *prepared.who, {});
  }
  return std::move(prepared.rejected);
}

void RequestHandler::handle_async(const Request& request, const Responder& respond) {
  const Prepared prepared = prepare(request);
  if (prepared.rejected || !prepared.route->long_poll()) {
    respond(respond_now(request, prepared));
    return;
  }
  std::int64_t wait_ms = 0;
  const std::string wait = prepared.query.get("wait_ms", "0");
  std::from_chars(wait.data(), wait.data() + wait.size(), wait_ms);
  wait_ms = std::min(wait_ms, kMaxWaitMs);
  if (wait_ms <= 0) {
    respond(respond_now(request, prepared));
    return;
  }
  (this->*prepared.route->waiter)(
      request, RouteArgs{prepared.param, prepared.query, prepared.label, *prepared.who},
      std::chrono::milliseconds(wait_ms), respond);
}

Response RequestHandler::healthz(const Request& req, const RouteArgs& /*args*/) {
  return make(req, http::status::ok, "ok\n", "text/plain");
}

Response RequestHandler::metrics_text(const Request& req, const RouteArgs& /*args*/) {
  return make(req, http::status::ok, metrics_.render(), "text/plain; version=0.0.4");
}

} // namespace kcache::service
