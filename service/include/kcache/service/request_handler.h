#pragma once
// The daemon's HTTP API as a pure function, request -> response, over a Store.
// No sockets here: the HTTP server calls it, and so do tests and the fuzzer.
//
//   GET  /healthz                          liveness, no auth
//   GET  /metrics                          Prometheus text
//   GET  /v1/stats                         JSON: tiers, counters, uptime
//   GET|HEAD|PUT|DELETE /v1/ac/{key}       action records (JSON); PUT needs the
//                                          record's blobs present in the CAS (409)
//   GET|HEAD|PUT|DELETE /v1/cas/{sha256}   blobs; PUT checks the digest
//   GET|PUT /v1/artifacts/{key}            record + files in one parts body
//   POST /v1/batch/get                     {"keys": [...]} -> one part per key
//                                          (the artifact's parts, or empty: miss)
//   GET  /v1/entries?area=&prefix=&sort=size|last_access|hits|created|key&limit=
//   GET  /v1/entries/{key}                 one record with its storage metadata
//   POST /v1/admin/verify?area=ac|cas&prefix=&repair=1
//                                          re-hash blobs, check records' blobs;
//                                          repair deletes what is broken
//   POST /v1/admin/gc?max_size=BYTES       drop least recently used entries
//
// Roles: GET/HEAD need read, PUT needs write, DELETE needs admin.

#include <kcache/service/config.h>
#include <kcache/service/metrics.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/store.h>

#include <boost/beast/http.hpp>

#include <array>
#include <chrono>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace kcache::service {

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// A tier as /v1/stats and /metrics report it.
struct TierView {
  std::string name;
  const storage::Store* store;
};

class RequestHandler {
public:
  RequestHandler(storage::Store& store, std::vector<TierView> tiers, MetricsRegistry& metrics,
                 std::vector<Token> tokens);

  Response handle(const Request& request);

  // Largest number of keys one batch request may ask for.
  static constexpr std::size_t kMaxBatchKeys = 10000;

private:
  struct Query;
  Response dispatch(const Request& request, std::string_view path, const Query& query, Role role,
                    std::string_view& route);
  Response action(const Request& request, std::string_view key, Role role);
  Response cas(const Request& request, std::string_view digest, Role role);
  Response artifact(const Request& request, std::string_view key, Role role);
  Response batch_get(const Request& request);
  Response entries(const Request& request, const Query& query);
  Response entry(const Request& request, std::string_view key);
  Response stats(const Request& request);
  Response verify(const Request& request, const Query& query);
  Response gc(const Request& request, const Query& query);

  // Instruments are looked up once and cached: the hot path builds no label
  // strings and takes no exclusive lock.
  static constexpr std::array<std::string_view, 12> kRoutes = {
      "unknown",   "healthz",   "metrics", "stats", "ac",           "cas",
      "artifacts", "batch_get", "entries", "entry", "admin_verify", "admin_gc"};
  void record_metrics(std::string_view route, http::verb method, unsigned status, double seconds);

  storage::Store& store_;
  storage::ArtifactStore artifacts_;
  std::array<Histogram*, kRoutes.size()> durations_{};
  std::shared_mutex counters_mu_;
  std::unordered_map<std::uint64_t, Counter*> request_counters_;
  std::vector<TierView> tiers_;
  MetricsRegistry& metrics_;
  std::vector<Token> tokens_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

} // namespace kcache::service
