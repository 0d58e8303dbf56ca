#pragma once
// The daemon's HTTP API as a pure function, request -> response, over a Store.
// No sockets here: the HTTP server calls it, and so do tests and the fuzzer.
// The routes, the roles they need and which of them long-poll are declared
// once, in route_table() (routes.h); README.md's table lists them.

#include <kcache/service/access_log.h>
#include <kcache/service/config.h>
#include <kcache/service/hit_copies.h>
#include <kcache/service/job.h>
#include <kcache/service/lookup_metrics.h>
#include <kcache/service/metrics.h>
#include <kcache/service/piece_body.h>
#include <kcache/service/sorted_windows.h>
#include <kcache/service/stats_history.h>
#include <kcache/service/tokens.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/record_signer.h>
#include <kcache/storage/store.h>

#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

namespace kcache::service {

namespace http = boost::beast::http;
// A string body, or (an upload spooled to disk, upload_spool.h) a source to
// read the body from piece by piece, its string empty.
using Request = http::request<PieceBody>;
// A string body, or one streamed piece by piece (piece_body.h).
using Response = http::response<PieceBody>;

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
class NodeRegistry;
class RunReports;
struct Route;
struct RouteArgs;
std::span<const Route> route_table();

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
                 LeaseTable* leases = nullptr, const storage::RecordSigner* signer = nullptr);

  // Answers at once; a job long-poll answers with the job's current state.
  Response handle(const Request& request);
  // As handle(), but a long-poll (a route with a waiter) answers when what it
  // waits for happens or its wait ends.
  void handle_async(const Request& request, const Responder& respond);
  // On a request's head alone, before its body is read: the refusal (401,
  // 403, 404, 405) handle() would answer, or nullopt when it may go on. While
  // `sends_spent` (the server's response memory is nearly all in flight),
  // reads of stored values (artifacts, blobs, batches) get 503 before they
  // are loaded from the store.
  std::optional<Response> admit(const Request& head, bool sends_spent = false);

  // Cluster mode: GET /v1/nodes lists the cluster's nodes (404 without).
  void set_nodes(NodeRegistry* nodes) { nodes_ = nodes; }
  // The run reports' store (run_reports.h); without one, /v1/runs answers 404.
  void set_runs(RunReports* runs) { runs_ = runs; }
  // One line per request (access_log.h); off until set. Before serving only.
  void set_access_log(AccessLogMode mode) { access_log_ = std::make_unique<AccessLog>(mode); }

  static constexpr std::int64_t kMaxWaitMs = 120'000;

  // Largest number of keys one batch request may ask for.
  static constexpr std::size_t kMaxBatchKeys = 10000;
  // GET /v1/entries: most rows a page returns (a larger limit is cut to
  // it), and the most entries a sorted listing holds (offset + limit).
  static constexpr std::size_t kMaxEntriesPage = 10000;
  // The window a sorted first page keeps when an order index serves it:
  // twenty pages of 50; a page past it reads the index again.
  static constexpr std::size_t kIndexedWindow = 1000;
  // Most entries a page in key order reads for filters that drop them
  // (namespace=, a token's namespaces); next_after then goes on from there.
  static constexpr std::size_t kMaxEntriesExamined = 100000;

private:
  // The table names the handlers below.
  friend std::span<const Route> route_table();

  struct Prepared;
  Prepared prepare(const Request& request) const;
  Response respond_now(const Request& request, const Prepared& prepared);

  // Handlers (route_table() says which serves what).
  Response healthz(const Request& request, const RouteArgs& args);
  Response metrics_text(const Request& request, const RouteArgs& args);
  Response stats(const Request& request, const RouteArgs& args);
  Response zero_stats(const Request& request, const RouteArgs& args);
  Response action(const Request& request, const RouteArgs& args);
  Response cas(const Request& request, const RouteArgs& args);
  Response artifact(const Request& request, const RouteArgs& args);
  Response batch_get(const Request& request, const RouteArgs& args);
  Response entries(const Request& request, const RouteArgs& args);
  Response entry(const Request& request, const RouteArgs& args);
  std::optional<std::uint64_t> artifact_size(std::string_view key);
  Response verify(const Request& request, const RouteArgs& args);
  Response gc(const Request& request, const RouteArgs& args);
  // The job routes (job_routes.cpp).
  Response list_jobs(const Request& request, const RouteArgs& args);
  Response submit_job(const Request& request, const RouteArgs& args);
  // On a submission's head: 413 when its Content-Length is over what a spec
  // within max_spec_bytes can be, before its body is read.
  std::optional<Response> refuse_submission_head(const Request& head) const;
  Response show_job(const Request& request, const RouteArgs& args);
  Response cancel_job(const Request& request, const RouteArgs& args);
  Response job_response(const Request& request, const JobLookup& found, std::string_view id);
  void wait_for_job(const Request& request, const RouteArgs& args, std::chrono::milliseconds wait,
                    const Responder& respond);
  // GET /v1/jobs?since=N&wait_ms=M: the listing once a job changed after N.
  void wait_for_jobs(const Request& request, const RouteArgs& args, std::chrono::milliseconds wait,
                     const Responder& respond);
  // The lease routes (lease_routes.cpp).
  Response lease(const Request& request, const RouteArgs& args);
  void wait_for_put(const Request& request, const RouteArgs& args, std::chrono::milliseconds wait,
                    const Responder& respond);
  // The cluster's nodes (node_routes.cpp).
  Response nodes(const Request& request, const RouteArgs& args);
  // The dashboard (ui_routes.cpp): its embedded files and per-minute history.
  Response ui_file(const Request& request, const RouteArgs& args);
  Response stats_history(const Request& request, const RouteArgs& args);
  Response whoami(const Request& request, const RouteArgs& args);
  // Two stored keys compared, as `kcache explain` does (explain_routes.cpp).
  Response explain_keys(const Request& request, const RouteArgs& args);
  // kcache.torch's compile reports (run_routes.cpp).
  Response put_run(const Request& request, const RouteArgs& args);
  Response list_runs(const Request& request, const RouteArgs& args);
  Response show_run(const Request& request, const RouteArgs& args);

  // Instruments are looked up once and cached: the hot path builds no label
  // strings and takes no exclusive lock. labels_[0] is "unknown" (no route).
  void record_metrics(std::string_view label, http::verb method, unsigned status, double seconds);
  // After each response: the labelled lookup counters and the access log
  // (request_log.cpp). `route` is null when no route served the request.
  void log_request(const Request& request, const Response& response, const Route* route,
                   std::string_view path, std::string_view param, const Principal& who,
                   std::chrono::steady_clock::duration took);

  storage::Store& store_;
  storage::ArtifactStore artifacts_;
  std::vector<std::string_view> labels_;
  std::vector<Histogram*> durations_;
  std::shared_mutex counters_mu_;
  std::unordered_map<std::uint64_t, Counter*> request_counters_;
  std::vector<TierView> tiers_;
  MetricsRegistry& metrics_;
  std::vector<Token> tokens_;
  std::vector<Principal> principals_;                      // one per token, in order
  const Principal anonymous_ = Principal::anonymous();     // no tokens configured
  const Principal unauthenticated_{"unauthenticated", {}}; // open routes (healthz) with tokens
  JobManager* jobs_;
  LeaseTable* leases_;
  NodeRegistry* nodes_ = nullptr;
  RunReports* runs_ = nullptr;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  LookupMetrics lookups_{metrics_};
  HitCopies hit_copies_{metrics_, "http"}; // an artifact hit's payload and its copies
  // Per-minute differences of store_.counters(), for the dashboard's charts.
  StatsHistory history_;
  // Sorted /v1/entries listings' windows, for the pages after their first.
  SortedWindows sorted_windows_;
  std::unique_ptr<const AccessLog> access_log_ = std::make_unique<AccessLog>();
  // POST /v1/stats/zero: the counters then, which /v1/stats subtracts.
  // /metrics keeps counting from start-up (Prometheus counters only reset
  // with the process).
  struct StatsZero {
    std::int64_t zeroed_ms = 0;
    storage::CounterSnapshot total;
    std::vector<storage::CounterSnapshot> tiers;
  };
  mutable std::mutex zero_mu_;
  StatsZero zero_;
  // Records the history every few seconds too: RESP commands and compile
  // jobs count in the store without an HTTP request. Last: stops first.
  std::jthread history_clock_;
};

} // namespace kcache::service
