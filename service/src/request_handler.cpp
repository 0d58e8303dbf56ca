#include "responses.h"

#include <kcache/cachekey/json_text.h>
#include <kcache/cachekey/key_manifest.h>
#include <kcache/cachekey/sha256.h>
#include <kcache/cachekey/wire.h>
#include <kcache/service/job_manager.h>
#include <kcache/service/lease_table.h>
#include <kcache/service/request_handler.h>
#include <kcache/service/routes.h>
#include <kcache/storage/maintenance.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

namespace kcache::service {

namespace wire = cachekey::wire;
using nlohmann::json;
using storage::Area;

namespace {

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      unsigned value = 0;
      const auto [ptr, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, value, 16);
      if (ec == std::errc() && ptr == s.data() + i + 3) {
        out += static_cast<char>(value);
        i += 2;
        continue;
      }
    }
    out += s[i] == '+' ? ' ' : s[i];
  }
  return out;
}

Response store_error(const Request& req, const storage::StoreError& e) {
  // The store could not answer: a server-side condition, never the client's fault.
  return error(req, http::status::service_unavailable,
               std::string(storage::error_code_name(e.code)) + ": " + e.message);
}

Response head_response(const Request& req, bool found) {
  Response res{found ? http::status::ok : http::status::not_found, req.version()};
  res.set(http::field::server, "kcached");
  res.keep_alive(req.keep_alive());
  res.content_length(0);
  return res;
}

std::vector<wire::Part> artifact_parts(const storage::Artifact& artifact) {
  std::vector<wire::Part> parts;
  parts.reserve(artifact.files.size() + 1);
  parts.push_back({"record", artifact.record_json});
  for (const storage::ArtifactFile& f : artifact.files) {
    parts.push_back({f.name, f.data});
  }
  return parts;
}

json info_json(const storage::ObjectInfo& info) {
  return json{{"area", storage::area_name(info.area)},
              {"key", info.key},
              {"size", info.size},
              {"created_ms", info.created_ms},
              {"last_access_ms", info.last_access_ms},
              {"hits", info.hits}};
}

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
                               JobManager* jobs, LeaseTable* leases)
    : store_(store), artifacts_(store), tiers_(std::move(tiers)), metrics_(metrics),
      tokens_(std::move(tokens)), jobs_(jobs), leases_(leases) {
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
};

RequestHandler::Prepared RequestHandler::prepare(const Request& request) const {
  Prepared p;
  const std::string_view target(request.target().data(), request.target().size());
  const auto qmark = target.find('?');
  p.path = target.substr(0, qmark);
  if (qmark != std::string_view::npos) {
    std::string_view rest = target.substr(qmark + 1);
    while (!rest.empty()) {
      const auto amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      const auto eq = pair.find('=');
      p.query.params[percent_decode(pair.substr(0, eq))] =
          eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1));
      rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
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
  Role role = Role::kAdmin;
  const Route* row = p.route != nullptr ? p.route : path_route;
  const bool open = row != nullptr && !row->role;
  if (!tokens_.empty() && !open) {
    const auto auth = request[http::field::authorization];
    const std::string_view bearer = "Bearer ";
    const auto it = std::find_if(tokens_.begin(), tokens_.end(), [&](const Token& t) {
      return auth.size() == bearer.size() + t.token.size() && auth.starts_with(bearer) &&
             auth.substr(bearer.size()) == t.token;
    });
    if (it == tokens_.end()) {
      p.rejected = error(request, http::status::unauthorized, "missing or unknown bearer token");
      p.rejected->set(http::field::www_authenticate, "Bearer");
      return p;
    }
    role = it->role;
  }
  if (path_route == nullptr) {
    p.rejected = error(request, http::status::not_found, "no route for " + std::string(p.path));
  } else if (p.route == nullptr) {
    p.label = path_route->label;
    p.rejected = error(request, http::status::method_not_allowed,
                       std::string(request.method_string()) + " is not allowed here");
    p.rejected->set(http::field::allow, allowed_methods(p.path));
  } else if (p.route->role && role < *p.route->role) {
    // Counted under "unknown", as refusals always were.
    p.rejected = error(request, http::status::forbidden,
                       "this token's role may not " + std::string(request.method_string()) + " " +
                           std::string(p.path) + " (it needs the " +
                           std::string(role_name(*p.route->role)) + " role)");
  } else {
    p.label = p.route->label;
  }
  return p;
}

Response RequestHandler::respond_now(const Request& request, const Prepared& prepared) {
  const auto start = std::chrono::steady_clock::now();
  Response response = prepared.rejected
                          ? *prepared.rejected
                          : (this->*prepared.route->handler)(
                                request, RouteArgs{prepared.param, prepared.query, prepared.label});
  record_metrics(prepared.label, request.method(), response.result_int(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
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
  (this->*prepared.route->waiter)(request,
                                  RouteArgs{prepared.param, prepared.query, prepared.label},
                                  std::chrono::milliseconds(wait_ms), respond);
}

Response RequestHandler::healthz(const Request& req, const RouteArgs& /*args*/) {
  return make(req, http::status::ok, "ok\n", "text/plain");
}

Response RequestHandler::metrics_text(const Request& req, const RouteArgs& /*args*/) {
  return make(req, http::status::ok, metrics_.render(), "text/plain; version=0.0.4");
}

Response RequestHandler::action(const Request& req, const RouteArgs& args) {
  const std::string_view key = args.param;
  if (!wire::is_valid_action_key(key)) {
    return error(req, http::status::bad_request,
                 "invalid action key (1-512 characters of [A-Za-z0-9._:+=-])");
  }
  switch (req.method()) {
  case http::verb::head: {
    auto found = store_.contains(Area::kAction, key);
    return found ? head_response(req, *found) : store_error(req, found.error());
  }
  case http::verb::get: {
    auto record = artifacts_.get_record(key);
    if (!record) {
      return store_error(req, record.error());
    }
    if (!record->has_value()) {
      return error(req, http::status::not_found, "no action record for " + std::string(key));
    }
    return make(req, http::status::ok, storage::record_to_json(**record), wire::kJsonContentType);
  }
  case http::verb::put: {
    auto record = storage::record_from_json(req.body());
    if (!record) {
      return error(req, http::status::bad_request, record.error().message);
    }
    if (record->key != key) {
      return error(req, http::status::bad_request, "the record's key differs from the URL's");
    }
    json missing = json::array();
    for (const storage::OutputRef& out : record->outputs) {
      auto present = store_.contains(Area::kCas, out.digest);
      if (!present) {
        return store_error(req, present.error());
      }
      if (!*present) {
        missing.push_back(out.digest);
      }
    }
    if (!missing.empty()) {
      // As in Bazel's REAPI: an action result may only name blobs that exist.
      return json_response(req, http::status::conflict,
                           json{{"error", "the record names blobs missing from the CAS"},
                                {"missing", std::move(missing)}});
    }
    if (record->created_ms == 0) {
      record->created_ms = storage::unix_now_ms();
    }
    if (auto ok = store_.put(Area::kAction, key, storage::record_to_json(*record)); !ok) {
      return store_error(req, ok.error());
    }
    return json_response(req, http::status::created, json{{"key", key}});
  }
  default: { // DELETE
    if (auto ok = store_.remove(Area::kAction, key); !ok) {
      return store_error(req, ok.error());
    }
    return json_response(req, http::status::ok, json{{"deleted", key}});
  }
  }
}

Response RequestHandler::cas(const Request& req, const RouteArgs& args) {
  const std::string_view digest = args.param;
  if (!wire::is_valid_cas_key(digest)) {
    return error(req, http::status::bad_request, "a CAS key is 64 lowercase hex digits (sha256)");
  }
  switch (req.method()) {
  case http::verb::head: {
    auto found = store_.contains(Area::kCas, digest);
    return found ? head_response(req, *found) : store_error(req, found.error());
  }
  case http::verb::get: {
    auto blob = store_.get(Area::kCas, digest);
    if (!blob) {
      return store_error(req, blob.error());
    }
    if (!blob->has_value()) {
      return error(req, http::status::not_found, "no blob " + std::string(digest));
    }
    return make(req, http::status::ok, std::move(**blob), wire::kBytesContentType);
  }
  case http::verb::put: {
    const std::string actual = cachekey::to_hex(cachekey::Sha256::of(req.body()));
    if (actual != digest) {
      return error(req, http::status::bad_request,
                   "body hashes to " + actual + ", not to the URL's digest");
    }
    if (auto ok = store_.put(Area::kCas, digest, req.body()); !ok) {
      return store_error(req, ok.error());
    }
    return json_response(req, http::status::created, json{{"digest", digest}});
  }
  default: {
    if (auto ok = store_.remove(Area::kCas, digest); !ok) {
      return store_error(req, ok.error());
    }
    return json_response(req, http::status::ok, json{{"deleted", digest}});
  }
  }
}

Response RequestHandler::artifact(const Request& req, const RouteArgs& args) {
  const std::string_view key = args.param;
  if (!wire::is_valid_action_key(key)) {
    return error(req, http::status::bad_request,
                 "invalid action key (1-512 characters of [A-Za-z0-9._:+=-])");
  }
  if (req.method() == http::verb::get) {
    auto found = artifacts_.get(key);
    if (!found) {
      return store_error(req, found.error());
    }
    if (!found->has_value()) {
      return error(req, http::status::not_found, "no artifact for " + std::string(key));
    }
    return make(req, http::status::ok, wire::encode_parts(artifact_parts(**found)),
                wire::kPartsContentType);
  }
  auto parts = wire::decode_parts(req.body());
  if (!parts) {
    return error(req, http::status::bad_request, parts.error());
  }
  if (parts->empty() || parts->front().name != "record") {
    return error(req, http::status::bad_request, "the first part must be the \"record\"");
  }
  const json head = json::parse(parts->front().data, nullptr, /*allow_exceptions=*/false);
  if (head.is_discarded() || !head.is_object()) {
    return error(req, http::status::bad_request, "the record part is not a JSON object");
  }
  storage::ActionRecord record;
  record.key = std::string(key);
  if (head.contains("producer") && head["producer"].is_string()) {
    record.producer = head["producer"].get<std::string>();
  }
  if (head.contains("metadata") && head["metadata"].is_object()) {
    for (const auto& [k, v] : head["metadata"].items()) {
      record.metadata[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  if (head.contains("manifest") && !head["manifest"].is_null()) {
    auto manifest = cachekey::manifest_from_json(head["manifest"].dump());
    if (!manifest) {
      return error(req, http::status::bad_request, manifest.error().message);
    }
    record.manifest = std::move(*manifest);
  }
  std::vector<storage::ArtifactFile> files;
  for (std::size_t i = 1; i < parts->size(); ++i) {
    files.push_back({std::move((*parts)[i].name), std::move((*parts)[i].data)});
  }
  auto stored = artifacts_.put(std::move(record), std::move(files));
  if (!stored) {
    return stored.error().code == storage::StoreError::Code::kInvalidArgument
               ? error(req, http::status::bad_request, stored.error().message)
               : store_error(req, stored.error());
  }
  return make(req, http::status::created, storage::record_to_json(*stored), wire::kJsonContentType);
}

Response RequestHandler::batch_get(const Request& req, const RouteArgs& /*args*/) {
  const json doc = json::parse(req.body(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("keys") || !doc["keys"].is_array()) {
    return error(req, http::status::bad_request, "expected {\"keys\": [...]}");
  }
  if (doc["keys"].size() > kMaxBatchKeys) {
    return error(req, http::status::payload_too_large,
                 "at most " + std::to_string(kMaxBatchKeys) + " keys per batch");
  }
  std::vector<wire::Part> out;
  for (const json& k : doc["keys"]) {
    if (!k.is_string() || !wire::is_valid_action_key(k.get_ref<const std::string&>())) {
      return error(req, http::status::bad_request,
                   "invalid key in batch: " + cachekey::json_text(k));
    }
    const auto& key = k.get_ref<const std::string&>();
    auto found = artifacts_.get(key);
    // A tier that cannot answer is a miss here: one bad key must not fail the batch.
    out.push_back({key, found && found->has_value() ? wire::encode_parts(artifact_parts(**found))
                                                    : std::string()});
  }
  return make(req, http::status::ok, wire::encode_parts(out), wire::kPartsContentType);
}

Response RequestHandler::entries(const Request& req, const RouteArgs& args) {
  const Query& query = args.query;
  storage::ListOptions options;
  const std::string area = query.get("area");
  if (area == "ac") {
    options.area = Area::kAction;
  } else if (area == "cas") {
    options.area = Area::kCas;
  } else if (!area.empty()) {
    return error(req, http::status::bad_request, "area must be ac or cas");
  }
  options.prefix = query.get("prefix");
  std::size_t limit = 1000;
  if (const std::string l = query.get("limit"); !l.empty()) {
    const auto [ptr, ec] = std::from_chars(l.data(), l.data() + l.size(), limit);
    if (ec != std::errc() || ptr != l.data() + l.size()) {
      return error(req, http::status::bad_request, "limit must be a non-negative integer");
    }
  }
  const std::string sort = query.get("sort", "last_access");
  if (sort != "size" && sort != "last_access" && sort != "created" && sort != "key" &&
      sort != "hits") {
    return error(req, http::status::bad_request,
                 "sort must be size, last_access, hits, created or key");
  }
  auto listed = store_.list(options);
  if (!listed) {
    return store_error(req, listed.error());
  }
  auto& items = *listed;
  std::sort(items.begin(), items.end(),
            [&](const storage::ObjectInfo& a, const storage::ObjectInfo& b) {
              if (sort == "size") {
                return a.size > b.size;
              }
              if (sort == "created") {
                return a.created_ms > b.created_ms;
              }
              if (sort == "key") {
                return a.key < b.key;
              }
              if (sort == "hits") {
                return a.hits > b.hits;
              }
              return a.last_access_ms > b.last_access_ms;
            });
  json out = json::array();
  for (std::size_t i = 0; i < items.size() && i < limit; ++i) {
    out.push_back(info_json(items[i]));
  }
  return json_response(req, http::status::ok,
                       json{{"entries", std::move(out)}, {"total", items.size()}});
}

Response RequestHandler::entry(const Request& req, const RouteArgs& args) {
  const std::string_view key = args.param;
  if (!wire::is_valid_action_key(key)) {
    return error(req, http::status::bad_request, "invalid action key");
  }
  auto record = artifacts_.get_record(key);
  if (!record) {
    return store_error(req, record.error());
  }
  if (!record->has_value()) {
    return error(req, http::status::not_found, "no action record for " + std::string(key));
  }
  json doc = json::parse(storage::record_to_json(**record));
  storage::ListOptions options;
  options.area = Area::kAction;
  options.prefix = std::string(key);
  if (auto listed = store_.list(options)) {
    for (const storage::ObjectInfo& info : *listed) {
      if (info.key == key) {
        doc["storage"] = info_json(info);
      }
    }
  }
  return json_response(req, http::status::ok, doc);
}

Response RequestHandler::stats(const Request& req, const RouteArgs& /*args*/) {
  json tiers = json::array();
  for (const TierView& tier : tiers_) {
    const storage::CounterSnapshot c = tier.store->counters();
    tiers.push_back({{"name", tier.name},
                     {"hits", c.hits},
                     {"misses", c.misses},
                     {"errors", c.errors},
                     {"corrupt", c.corrupt},
                     {"evictions", c.evictions},
                     {"puts", c.puts},
                     {"bytes_read", c.bytes_read},
                     {"bytes_written", c.bytes_written},
                     {"backfills", c.backfills},
                     {"rejected", c.rejected}});
  }
  const storage::CounterSnapshot total = store_.counters();
  return json_response(
      req, http::status::ok,
      json{{"uptime_s",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count()},
           {"hits", total.hits},
           {"misses", total.misses},
           {"errors", total.errors},
           {"tiers", std::move(tiers)}});
}

Response RequestHandler::verify(const Request& req, const RouteArgs& args) {
  const std::string area = args.query.get("area");
  if (area != "ac" && area != "cas") {
    return error(req, http::status::bad_request, "area must be ac or cas");
  }
  storage::VerifyOptions options;
  options.area = area == "ac" ? Area::kAction : Area::kCas;
  options.prefix = args.query.get("prefix");
  options.repair = args.query.get("repair") == "1" || args.query.get("repair") == "true";
  auto report = storage::verify_entries(store_, options);
  if (!report) {
    return store_error(req, report.error());
  }
  json problems = json::array();
  for (const storage::VerifyProblem& p : report->problems) {
    problems.push_back({{"key", p.key}, {"problem", p.problem}});
  }
  return json_response(req, http::status::ok,
                       json{{"area", area},
                            {"checked", report->checked},
                            {"problems", std::move(problems)},
                            {"repaired", report->repaired}});
}

Response RequestHandler::gc(const Request& req, const RouteArgs& args) {
  const std::string max = args.query.get("max_size");
  std::uint64_t max_size = 0;
  const auto [ptr, ec] = std::from_chars(max.data(), max.data() + max.size(), max_size);
  if (max.empty() || ec != std::errc() || ptr != max.data() + max.size()) {
    return error(req, http::status::bad_request, "max_size must be a number of bytes");
  }
  auto report = storage::collect_garbage(store_, max_size);
  if (!report) {
    return store_error(req, report.error());
  }
  return json_response(req, http::status::ok,
                       json{{"before_bytes", report->before_bytes},
                            {"after_bytes", report->after_bytes},
                            {"removed_entries", report->removed_entries},
                            {"removed_bytes", report->removed_bytes}});
}

} // namespace kcache::service
