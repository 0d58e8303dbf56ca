#include "responses.h"

#include <kcache/cachekey/json_text.h>
#include <kcache/cachekey/key_manifest.h>
#include <kcache/cachekey/sha256.h>
#include <kcache/cachekey/wire.h>
#include <kcache/service/job_manager.h>
#include <kcache/service/lease_table.h>
#include <kcache/service/request_handler.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <map>

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

Role required_role(http::verb method, std::string_view path) {
  const bool jobs = path == "/v1/jobs" || path.starts_with("/v1/jobs/");
  switch (method) {
  case http::verb::put:
    return Role::kWrite;
  case http::verb::post:
    return jobs ? Role::kSubmit : Role::kWrite;
  case http::verb::delete_:
    return jobs ? Role::kSubmit : path.starts_with("/v1/leases/") ? Role::kWrite : Role::kAdmin;
  default:
    return Role::kRead; // GET, HEAD; anything else gets 405 from its route
  }
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

} // namespace

RequestHandler::RequestHandler(storage::Store& store, std::vector<TierView> tiers,
                               MetricsRegistry& metrics, std::vector<Token> tokens,
                               JobManager* jobs, LeaseTable* leases)
    : store_(store), artifacts_(store), tiers_(std::move(tiers)), metrics_(metrics),
      tokens_(std::move(tokens)), jobs_(jobs), leases_(leases) {
  for (std::size_t i = 0; i < kRoutes.size(); ++i) {
    durations_[i] =
        &metrics_.histogram("kcache_http_request_duration_seconds", "Time to handle a request",
                            {{"route", std::string(kRoutes[i])}});
  }
}

void RequestHandler::record_metrics(std::string_view route, http::verb method, unsigned status,
                                    double seconds) {
  const auto it = std::find(kRoutes.begin(), kRoutes.end(), route);
  const auto index = static_cast<std::size_t>(it == kRoutes.end() ? 0 : it - kRoutes.begin());
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
                       {{"route", std::string(kRoutes[index])},
                        {"method", std::string(http::to_string(method))},
                        {"code", std::to_string(status)}});
  counter.inc();
  std::unique_lock lock(counters_mu_);
  request_counters_.emplace(id, &counter);
}

struct RequestHandler::Prepared {
  std::string_view path;
  Query query;
  Role role = Role::kAdmin;
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
  // No tokens configured: open (single-user or trusted network).
  bool authorized = true;
  if (!tokens_.empty() && p.path != "/healthz") {
    const auto auth = request[http::field::authorization];
    const std::string_view bearer = "Bearer ";
    const auto it = std::find_if(tokens_.begin(), tokens_.end(), [&](const Token& t) {
      return auth.size() == bearer.size() + t.token.size() && auth.starts_with(bearer) &&
             auth.substr(bearer.size()) == t.token;
    });
    authorized = it != tokens_.end();
    p.role = authorized ? it->role : Role::kRead;
  }
  if (!authorized) {
    p.rejected = error(request, http::status::unauthorized, "missing or unknown bearer token");
    p.rejected->set(http::field::www_authenticate, "Bearer");
  } else if (p.role < required_role(request.method(), p.path)) {
    p.rejected = error(request, http::status::forbidden,
                       "this token's role may not " + std::string(request.method_string()) + " " +
                           std::string(p.path));
  }
  return p;
}

Response RequestHandler::respond_now(const Request& request, const Prepared& prepared) {
  const auto start = std::chrono::steady_clock::now();
  std::string_view route = "unknown";
  Response response = prepared.rejected
                          ? *prepared.rejected
                          : dispatch(request, prepared.path, prepared.query, prepared.role, route);
  record_metrics(route, request.method(), response.result_int(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  // A stored artifact ends the single-flight lease on its key: waiters wake and hit.
  if (leases_ != nullptr && request.method() == http::verb::put &&
      response.result() == http::status::created && (route == "artifacts" || route == "ac")) {
    const std::string_view path = prepared.path;
    leases_->notify_put(std::string(path.substr(path.find('/', 4) + 1)));
  }
  return response;
}

Response RequestHandler::handle(const Request& request) {
  return respond_now(request, prepare(request));
}

void RequestHandler::handle_async(const Request& request, const Responder& respond) {
  Prepared prepared = prepare(request);
  std::int64_t wait_ms = 0;
  if (!prepared.rejected && request.method() == http::verb::get) {
    const std::string wait = prepared.query.get("wait_ms", "0");
    std::from_chars(wait.data(), wait.data() + wait.size(), wait_ms);
    wait_ms = std::min(wait_ms, kMaxWaitMs);
  }
  const bool job_wait = wait_ms > 0 && jobs_ != nullptr && prepared.path.starts_with("/v1/jobs/");
  const bool put_wait =
      wait_ms > 0 && leases_ != nullptr && prepared.path.starts_with("/v1/artifacts/");
  if (put_wait) {
    Response now = respond_now(request, prepared);
    const std::string key(prepared.path.substr(std::string_view("/v1/artifacts/").size()));
    if (now.result() != http::status::not_found || !leases_->held(key)) {
      respond(std::move(now));
      return;
    }
    // A miss while another producer holds the lease: wait for its put.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    leases_->wait_for_put(key, deadline, [this, respond, request] { respond(handle(request)); });
    return;
  }
  if (!job_wait) {
    respond(respond_now(request, prepared));
    return;
  }
  // A long-poll: the answer comes from the job manager, on its thread.
  const auto start = std::chrono::steady_clock::now();
  const std::string id(prepared.path.substr(std::string_view("/v1/jobs/").size()));
  const auto deadline = start + std::chrono::milliseconds(wait_ms);
  jobs_->wait(
      id, deadline,
      [this, respond, id, start, version = request.version(),
       keep_alive = request.keep_alive()](const std::optional<Job>& job) {
        Request shape{http::verb::get, "/", version};
        shape.keep_alive(keep_alive);
        Response response = job_response(shape, job, id);
        record_metrics(
            "job", http::verb::get, response.result_int(),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        respond(std::move(response));
      });
}

Response RequestHandler::dispatch(const Request& req, std::string_view path, const Query& query,
                                  Role role, std::string_view& route) {
  const http::verb method = req.method();
  auto only = [&](std::initializer_list<http::verb> verbs) {
    return std::find(verbs.begin(), verbs.end(), method) != verbs.end();
  };
  auto method_not_allowed = [&](const char* allow) {
    Response res = error(req, http::status::method_not_allowed,
                         std::string(req.method_string()) + " is not allowed here");
    res.set(http::field::allow, allow);
    return res;
  };
  auto tail = [&](std::string_view prefix) -> std::optional<std::string_view> {
    if (path.starts_with(prefix) && path.size() > prefix.size()) {
      return path.substr(prefix.size());
    }
    return std::nullopt;
  };

  if (path == "/healthz") {
    route = "healthz";
    return only({http::verb::get, http::verb::head})
               ? make(req, http::status::ok, "ok\n", "text/plain")
               : method_not_allowed("GET, HEAD");
  }
  if (path == "/metrics") {
    route = "metrics";
    return only({http::verb::get})
               ? make(req, http::status::ok, metrics_.render(), "text/plain; version=0.0.4")
               : method_not_allowed("GET");
  }
  if (path == "/v1/stats") {
    route = "stats";
    return only({http::verb::get}) ? stats(req) : method_not_allowed("GET");
  }
  if (auto key = tail("/v1/ac/")) {
    route = "ac";
    return only({http::verb::get, http::verb::head, http::verb::put, http::verb::delete_})
               ? action(req, *key, role)
               : method_not_allowed("GET, HEAD, PUT, DELETE");
  }
  if (auto digest = tail("/v1/cas/")) {
    route = "cas";
    return only({http::verb::get, http::verb::head, http::verb::put, http::verb::delete_})
               ? cas(req, *digest, role)
               : method_not_allowed("GET, HEAD, PUT, DELETE");
  }
  if (auto key = tail("/v1/artifacts/")) {
    route = "artifacts";
    return only({http::verb::get, http::verb::put}) ? artifact(req, *key, role)
                                                    : method_not_allowed("GET, PUT");
  }
  if (path == "/v1/batch/get") {
    route = "batch_get";
    return only({http::verb::post}) ? batch_get(req) : method_not_allowed("POST");
  }
  if (path == "/v1/entries") {
    route = "entries";
    return only({http::verb::get}) ? entries(req, query) : method_not_allowed("GET");
  }
  if (path == "/v1/admin/verify" || path == "/v1/admin/gc") {
    const bool is_gc = path == "/v1/admin/gc";
    route = is_gc ? "admin_gc" : "admin_verify";
    if (method != http::verb::post) {
      return method_not_allowed("POST");
    }
    if (role < Role::kAdmin) {
      return error(req, http::status::forbidden, "admin routes need the admin role");
    }
    return is_gc ? gc(req, query) : verify(req, query);
  }
  if (auto key = tail("/v1/leases/")) {
    route = "leases";
    return only({http::verb::post, http::verb::put, http::verb::delete_})
               ? lease(req, *key, query)
               : method_not_allowed("POST, PUT, DELETE");
  }
  if (path == "/v1/jobs" || path.starts_with("/v1/jobs/")) {
    route = path == "/v1/jobs" ? "jobs" : "job";
    return jobs(req, path, query);
  }
  if (auto key = tail("/v1/entries/")) {
    route = "entry";
    return only({http::verb::get}) ? entry(req, *key) : method_not_allowed("GET");
  }
  return error(req, http::status::not_found, "no route for " + std::string(path));
}

Response RequestHandler::action(const Request& req, std::string_view key, Role /*role*/) {
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

Response RequestHandler::cas(const Request& req, std::string_view digest, Role /*role*/) {
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

Response RequestHandler::artifact(const Request& req, std::string_view key, Role /*role*/) {
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

Response RequestHandler::batch_get(const Request& req) {
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

Response RequestHandler::entries(const Request& req, const Query& query) {
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
              return a.last_access_ms > b.last_access_ms;
            });
  json out = json::array();
  for (std::size_t i = 0; i < items.size() && i < limit; ++i) {
    out.push_back(info_json(items[i]));
  }
  return json_response(req, http::status::ok,
                       json{{"entries", std::move(out)}, {"total", items.size()}});
}

Response RequestHandler::entry(const Request& req, std::string_view key) {
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

Response RequestHandler::stats(const Request& req) {
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

Response RequestHandler::verify(const Request& req, const Query& query) {
  const std::string area = query.get("area");
  if (area != "ac" && area != "cas") {
    return error(req, http::status::bad_request, "area must be ac or cas");
  }
  const bool repair = query.get("repair") == "1" || query.get("repair") == "true";
  storage::ListOptions options;
  options.area = area == "ac" ? Area::kAction : Area::kCas;
  options.prefix = query.get("prefix");
  auto listed = store_.list(options);
  if (!listed) {
    return store_error(req, listed.error());
  }
  json problems = json::array();
  std::size_t repaired = 0;
  auto report = [&](const std::string& key, std::string what) {
    problems.push_back({{"key", key}, {"problem", std::move(what)}});
  };
  for (const storage::ObjectInfo& info : *listed) {
    if (options.area == Area::kCas) {
      // A frame that fails verification is deleted by the read itself.
      auto blob = store_.get(Area::kCas, info.key);
      if (!blob) {
        return store_error(req, blob.error());
      }
      if (!blob->has_value()) {
        report(info.key, "unreadable (corrupt frame, deleted)");
        ++repaired;
      } else if (cachekey::to_hex(cachekey::Sha256::of(**blob)) != info.key) {
        report(info.key, "content does not hash to its key");
        if (repair && store_.remove(Area::kCas, info.key)) {
          ++repaired;
        }
      }
      continue;
    }
    auto record = artifacts_.get_record(info.key); // deletes unparseable records
    if (!record) {
      return store_error(req, record.error());
    }
    if (!record->has_value()) {
      report(info.key, "unreadable record (deleted)");
      ++repaired;
      continue;
    }
    for (const storage::OutputRef& out : (*record)->outputs) {
      auto present = store_.contains(Area::kCas, out.digest);
      if (present && !*present) {
        report(info.key, "output '" + out.name + "' blob " + out.digest + " is missing");
        if (repair && store_.remove(Area::kAction, info.key)) {
          ++repaired;
        }
        break;
      }
    }
  }
  return json_response(req, http::status::ok,
                       json{{"area", area},
                            {"checked", listed->size()},
                            {"problems", std::move(problems)},
                            {"repaired", repaired}});
}

Response RequestHandler::gc(const Request& req, const Query& query) {
  const std::string max = query.get("max_size");
  std::uint64_t max_size = 0;
  const auto [ptr, ec] = std::from_chars(max.data(), max.data() + max.size(), max_size);
  if (max.empty() || ec != std::errc() || ptr != max.data() + max.size()) {
    return error(req, http::status::bad_request, "max_size must be a number of bytes");
  }
  auto listed = store_.list({});
  if (!listed) {
    return store_error(req, listed.error());
  }
  std::uint64_t total = 0;
  for (const storage::ObjectInfo& info : *listed) {
    total += info.size;
  }
  const std::uint64_t before = total;
  std::sort(listed->begin(), listed->end(),
            [](const auto& a, const auto& b) { return a.last_access_ms < b.last_access_ms; });
  std::size_t removed = 0;
  for (const storage::ObjectInfo& info : *listed) {
    if (total <= max_size) {
      break;
    }
    if (auto ok = store_.remove(info.area, info.key); !ok) {
      return store_error(req, ok.error());
    }
    total -= info.size;
    ++removed;
  }
  return json_response(req, http::status::ok,
                       json{{"before_bytes", before},
                            {"after_bytes", total},
                            {"removed_entries", removed},
                            {"removed_bytes", before - total}});
}

} // namespace kcache::service
