#pragma once
// kcached assembled from its configuration: the storage tiers (memory, the
// embedded RocksDB store, Redis if configured), the request handler, metrics
// the compile job manager with its kcache-worker pool, and the HTTP server on
// TCP (TLS when [tls] is set) and/or a Unix socket. run() serves until SIGTERM
// or SIGINT (SIGHUP reloads the TLS files), then answers
// job long-polls, drains in-flight requests and closes the stores cleanly.

#include <kcache/service/config.h>
#include <kcache/service/http_server.h>
#include <kcache/service/job_manager.h>
#include <kcache/service/lease_table.h>
#include <kcache/service/metrics.h>
#include <kcache/service/node_registry.h>
#include <kcache/service/request_handler.h>
#include <kcache/service/run_reports.h>
#include <kcache/service/signing.h>
#include <kcache/storage/redis_client.h>
#include <kcache/storage/store.h>

#include <boost/asio/io_context.hpp>
#include <tl/expected.hpp>

#include <memory>

namespace kcache::service {

class AgeEvictor;   // evict_older_than (age_evictor.h)
class IoPool;       // the I/O threads, an io_context each (io_pool.h)
class RespCommands; // the RESP listener (resp_server.h), when [resp] listen is set
class RespServer;

class Service {
public:
  static tl::expected<std::unique_ptr<Service>, std::string> create(const ServiceConfig& config);
  ~Service();

  // Serves until a termination signal or stop(); returns the exit status.
  int run();
  // Drains and stops run(); safe from any thread.
  void stop();
  std::uint16_t tcp_port() const { return server_->tcp_port(); }

  struct PrivateTag {
    explicit PrivateTag() = default;
  };
  Service(PrivateTag, ServiceConfig config);

private:
  // [resp] listen: the RESP listener (resp_server.h); nothing when unset.
  tl::expected<void, std::string> start_resp(const ServiceConfig& config, const Limits& limits);
  // SIGHUP: a new TLS context from the configured files; on failure the old one stays.
  void reload_tls();
  // This node as `kcache nodes` shows it (cluster mode).
  NodeInfo node_snapshot(const std::string& id) const;

  ServiceConfig config_;
  boost::asio::io_context io_;
  std::unique_ptr<IoPool> pool_;     // io_ and one more io_context per further I/O thread
  std::unique_ptr<Signing> signing_; // outlives the store, jobs and handler that use it
  std::unique_ptr<storage::Store> store_;
  MetricsRegistry metrics_;
  // Cluster mode: the Redis behind leases, the job queue and the node
  // registry (null otherwise); declared before what uses it.
  std::unique_ptr<storage::RedisClient> cluster_redis_;
  std::unique_ptr<LeaseTable> leases_;  // jobs_ tell it their results: goes after them
  std::unique_ptr<JobManager> jobs_;    // null when this kcached compiles nothing
  std::unique_ptr<NodeRegistry> nodes_; // cluster mode; reads jobs_, so goes first
  std::unique_ptr<RunReports> runs_;    // kcache.torch's compile reports
  std::unique_ptr<RequestHandler> handler_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<RespCommands> resp_commands_;
  std::unique_ptr<RespServer> resp_;    // uses resp_commands_: goes first
  std::unique_ptr<AgeEvictor> evictor_; // evict_older_than; walks store_: goes first
};

} // namespace kcache::service
