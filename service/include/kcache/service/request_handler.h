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
//   POST /v1/jobs                          {"key", "spec": CompileSpec, "priority"}
//                                          -> 202 queued/joined, 200 cached or
//                                          failed-recently, 503 busy (Retry-After)
//   GET  /v1/jobs?state=&limit=            newest first, with queue counts
//   GET  /v1/jobs/{id}?wait_ms=N           the job; long-polls up to N ms (at most
//                                          kMaxWaitMs) until it finishes
//   DELETE /v1/jobs/{id}                   cancel
//   POST /v1/leases/{key}?ttl_ms=&holder=  single-flight for outside producers:
//                                          {"granted", "token"} or who holds it, or
//                                          {"cached": true}
//   PUT  /v1/leases/{key}?token=&ttl_ms=   renew (409 unless the holder's token)
//   DELETE /v1/leases/{key}?token=         release
//   GET  /v1/artifacts/{key}?wait_ms=N     a miss under a held lease waits (up to
//                                          kMaxWaitMs) for the holder's put
//
// Roles: GET/HEAD need read; POST and DELETE on jobs need submit; PUT, the
// other POSTs and lease DELETEs need write; other DELETEs need admin.

#include <kcache/service/config.h>
#include <kcache/service/job.h>
#include <kcache/service/metrics.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/store.h>

#include <boost/beast/http.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace kcache::service {

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// Completes one request: callable from any thread; the first call wins.
class Responder {
public:
  using Send = std::function<void(Response)>;
  explicit Responder(Send send) : state_(std::make_shared<State>(std::move(send))) {}
  void operator()(Response response) const {
    if (!state_->done.exchange(true)) {
      state_->send(std::move(response));
    }
  }

private:
  struct State {
    explicit State(Send s) : send(std::move(s)) {}
    std::atomic<bool> done{false};
    Send send;
  };
  std::shared_ptr<State> state_;
};

class JobManager;
class LeaseTable;

// A tier as /v1/stats and /metrics report it.
struct TierView {
  std::string name;
  const storage::Store* store;
};

class RequestHandler {
public:
  // `jobs` may be null: this kcached compiles nothing and the job routes say so.
  // `leases` may be null: no lease routes, and gets do not wait.
  RequestHandler(storage::Store& store, std::vector<TierView> tiers, MetricsRegistry& metrics,
                 std::vector<Token> tokens, JobManager* jobs = nullptr,
                 LeaseTable* leases = nullptr);

  // Answers at once; a job long-poll answers with the job's current state.
  Response handle(const Request& request);
  // As handle(), but a job long-poll answers when the job finishes or its wait ends.
  void handle_async(const Request& request, const Responder& respond);

  static constexpr std::int64_t kMaxWaitMs = 120'000;

  // Largest number of keys one batch request may ask for.
  static constexpr std::size_t kMaxBatchKeys = 10000;

private:
  struct Query;
  struct Prepared;
  Prepared prepare(const Request& request) const;
  Response respond_now(const Request& request, const Prepared& prepared);
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
  // The job routes (job_routes.cpp).
  Response jobs(const Request& request, std::string_view path, const Query& query);
  Response submit_job(const Request& request);
  Response job_response(const Request& request, const std::optional<Job>& job, std::string_view id);
  // The lease routes (lease_routes.cpp).
  Response lease(const Request& request, std::string_view key, const Query& query);

  // Instruments are looked up once and cached: the hot path builds no label
  // strings and takes no exclusive lock.
  static constexpr std::array<std::string_view, 15> kRoutes = {
      "unknown", "healthz",      "metrics",  "stats", "ac",   "cas", "artifacts", "batch_get",
      "entries", "admin_verify", "admin_gc", "entry", "jobs", "job", "leases"};
  void record_metrics(std::string_view route, http::verb method, unsigned status, double seconds);

  storage::Store& store_;
  storage::ArtifactStore artifacts_;
  std::array<Histogram*, kRoutes.size()> durations_{};
  std::shared_mutex counters_mu_;
  std::unordered_map<std::uint64_t, Counter*> request_counters_;
  std::vector<TierView> tiers_;
  MetricsRegistry& metrics_;
  std::vector<Token> tokens_;
  JobManager* jobs_;
  LeaseTable* leases_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

} // namespace kcache::service
