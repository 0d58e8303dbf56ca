#include "io_pool.h"
#include "resp_server.h"
#include "upload_spool.h"

#include <kcache/protocol/units.h>
#include <kcache/service/age_evictor.h>
#include <kcache/service/lease_table_local.h>
#include <kcache/service/lease_table_redis.h>
#include <kcache/service/node_registry.h>
#include <kcache/service/run_reports_local.h>
#include <kcache/service/run_reports_redis.h>
#include <kcache/service/service.h>
#include <kcache/service/tls_context.h>
#include <kcache/storage/redis_options.h>
#include <kcache/storage/store_factory.h>
#include <kcache/storage/store_url.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>
#ifdef KCACHE_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include <array>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

namespace kcache::service {

namespace {

// The configured node id, or <hostname>:<port>.
std::string node_id_of(const ClusterConfig& cluster, std::uint16_t port) {
  if (!cluster.node_id.empty()) {
    return cluster.node_id;
  }
  std::array<char, 256> host{};
  ::gethostname(host.data(), host.size() - 1);
  return std::string(host.data()) + ":" + std::to_string(port);
}

// systemd's Type=notify (deploy/systemd/kcached.service); a no-op without
// $NOTIFY_SOCKET or where kcached was built without libsystemd.
void notify_systemd([[maybe_unused]] const char* state) {
#ifdef KCACHE_HAVE_SYSTEMD
  sd_notify(0, state);
#endif
}

} // namespace

Service::Service(PrivateTag, ServiceConfig config) : config_(std::move(config)) {}

Service::~Service() = default;

tl::expected<std::unique_ptr<Service>, std::string> Service::create(const ServiceConfig& config) {
  auto service = std::make_unique<Service>(PrivateTag{}, config);
  std::error_code ec;
  std::filesystem::create_directories(config.data_dir, ec);
  if (ec) {
    return tl::unexpected("cannot create data dir " + config.data_dir + ": " + ec.message());
  }
  // Large uploads are spooled here (upload_spool.h), on the data dir's disk.
  Limits limits = config.limits;
  limits.spool_dir = (std::filesystem::path(config.data_dir) / "spool").string();
  if (auto ok = UploadSpool::prepare_dir(limits.spool_dir); !ok) {
    return tl::unexpected(ok.error());
  }
  // Run reports are a convenience: a database that cannot open must not stop
  // the cache (the handler then keeps reports in memory, under the same
  // bounds). Opened before the store, so the space RocksDB takes for it is
  // gone when the store checks whether the disk is full.
  // RocksDB asserts when it opens on a full disk: below this much free space
  // the reports stay in memory (the store has its own full-disk handling).
  // In cluster mode they live in the cluster's Redis instead (below).
  constexpr std::uintmax_t kRunsMinFreeBytes = 64ULL << 20;
  const std::filesystem::space_info space = std::filesystem::space(config.data_dir, ec);
  if (!config.cluster.enabled) {
    auto runs =
        !ec && space.available >= kRunsMinFreeBytes
            ? LocalRunReports::open((std::filesystem::path(config.data_dir) / "runs").string())
            : tl::unexpected<std::string>("under 64 MiB free on the data dir's disk");
    if (!runs) {
      spdlog::error("run reports kept in memory only: {}", runs.error());
      runs = LocalRunReports::open("");
    }
    if (runs) {
      service->runs_ = std::move(*runs);
    }
  }
  auto signing = Signing::create(config.signing, config.data_dir);
  if (!signing) {
    return tl::unexpected(signing.error());
  }
  service->signing_ = std::move(*signing);
  const storage::SignatureCheck signatures = service->signing_->check();
  auto stack = storage::make_tiered_store(
      store_urls(config), {.max_value_bytes = config.limits.max_body_bytes}, &signatures);
  if (!stack) {
    return tl::unexpected("store: " + stack.error().message);
  }
  std::vector<TierView> views;
  views.reserve(stack->tiers.size());
  for (storage::Store* tier : stack->tiers) {
    views.push_back({tier->name(), tier});
  }
  service->store_ = std::move(stack->store);

  MetricsRegistry& metrics = service->metrics_;
  const std::vector<std::pair<std::string, std::uint64_t storage::CounterSnapshot::*>> counters = {
      {"kcache_store_hits_total", &storage::CounterSnapshot::hits},
      {"kcache_store_misses_total", &storage::CounterSnapshot::misses},
      {"kcache_store_errors_total", &storage::CounterSnapshot::errors},
      {"kcache_store_corrupt_total", &storage::CounterSnapshot::corrupt},
      {"kcache_store_evictions_total", &storage::CounterSnapshot::evictions},
      {"kcache_store_puts_total", &storage::CounterSnapshot::puts},
      {"kcache_store_read_bytes_total", &storage::CounterSnapshot::bytes_read},
      {"kcache_store_written_bytes_total", &storage::CounterSnapshot::bytes_written},
      {"kcache_store_rejected_total", &storage::CounterSnapshot::rejected},
      {"kcache_store_no_space_total", &storage::CounterSnapshot::no_space}};
  for (const auto& [name, field] : counters) {
    metrics.describe(name, "counter", "Per storage tier (errors are counted apart from misses)");
  }
  metrics.describe("kcache_backfills_total", "counter", "Values copied into faster tiers");
  service->signing_->add_metrics(metrics);
  metrics.add_collector([views, counters,
                         store = service->store_.get()](std::vector<MetricsRegistry::Sample>& out) {
    for (const TierView& view : views) {
      const storage::CounterSnapshot c = view.store->counters();
      for (const auto& [name, field] : counters) {
        out.push_back({name, {{"tier", view.name}}, static_cast<double>(c.*field)});
      }
    }
    out.push_back({"kcache_backfills_total", {}, static_cast<double>(store->counters().backfills)});
  });
  // What each tier holds now; a tier that cannot say (Redis) has no sample.
  metrics.describe("kcache_store_bytes", "gauge",
                   "Bytes a tier holds, as counted against its capacity");
  metrics.describe("kcache_store_capacity_bytes", "gauge", "A tier's configured capacity");
  metrics.describe("kcache_store_entries", "gauge", "Entries a tier holds (both areas)");
  metrics.add_collector([views](std::vector<MetricsRegistry::Sample>& out) {
    for (const TierView& view : views) {
      const storage::StoreUsage usage = view.store->usage();
      for (const auto& [name, value] : {std::pair{"kcache_store_bytes", usage.bytes},
                                        std::pair{"kcache_store_capacity_bytes", usage.capacity},
                                        std::pair{"kcache_store_entries", usage.entries}}) {
        if (value) {
          out.push_back({name, {{"tier", view.name}}, static_cast<double>(*value)});
        }
      }
    }
  });
  add_process_metrics(metrics);
  add_build_info(metrics);

  if (config.jobs.workers > 0) {
    JobsConfig jobs = config.jobs;
    if (jobs.worker_binary.empty()) {
      jobs.worker_binary = find_worker_binary();
    }
    if (jobs.worker_binary.empty()) {
      spdlog::warn("no kcache-worker found (give --worker-binary): this kcached compiles nothing");
    } else {
      auto manager =
          JobManager::create(jobs, (std::filesystem::path(config.data_dir) / "jobs").string(),
                             *service->store_, metrics, &service->signing_->signer());
      if (!manager) {
        return tl::unexpected(manager.error());
      }
      service->jobs_ = std::move(*manager);
      std::string backends;
      for (const auto& [backend, toolchain] : service->jobs_->toolchains()) {
        backends += (backends.empty() ? "" : ", ") + std::string(compiler::backend_name(backend));
      }
      spdlog::info("compile service: {} workers running {} ({})", jobs.workers, jobs.worker_binary,
                   backends);
    }
  }

  // Cluster mode: leases (and the job queue, the node registry) live in the
  // shared tier's Redis, so ranks asking different nodes single-flight.
  std::optional<storage::RedisOptions> cluster_redis;
  if (config.cluster.enabled) {
    auto url = storage::StoreUrl::parse(config.redis_url);
    auto redis = url ? storage::parse_redis_url(*url)
                     : storage::Result<storage::RedisOptions>(tl::unexpected(url.error()));
    if (!redis) {
      return tl::unexpected("cluster mode: redis_url: " + redis.error().message);
    }
    cluster_redis = *redis;
    service->cluster_redis_ = storage::RedisClient::create(*redis);
    service->leases_ = std::make_unique<RedisLeaseTable>(*service->cluster_redis_, *redis);
    // Every node lists the runs reported to any node.
    service->runs_ = std::make_unique<RedisRunReports>(*service->cluster_redis_);
  } else {
    service->leases_ = std::make_unique<LocalLeaseTable>();
  }
  metrics.describe("kcache_leases_held", "gauge",
                   "Single-flight leases held (this kcached's own; none counted in cluster mode)");
  metrics.add_collector(
      [leases = service->leases_.get()](std::vector<MetricsRegistry::Sample>& out) {
        if (const auto held = leases->held_count()) {
          out.push_back({"kcache_leases_held", {}, static_cast<double>(*held)});
        }
      });
  if (service->jobs_) {
    // A job's result ends its keys' leases as a client's put does: their
    // waiters, on every node, wake and hit.
    service->jobs_->on_stored(
        [leases = service->leases_.get()](const std::string& key) { leases->notify_put(key); });
  }
  service->handler_ = std::make_unique<RequestHandler>(
      *service->store_, views, metrics, config.tokens, service->jobs_.get(), service->leases_.get(),
      &service->signing_->signer());
  const auto access_log = parse_access_log_mode(config.access_log);
  if (!access_log) {
    return tl::unexpected("access_log = \"" + config.access_log + "\": give off, text or json");
  }
  service->handler_->set_access_log(*access_log);
  if (!config.evict_older_than.empty()) {
    const auto age = protocol::parse_duration_s(config.evict_older_than);
    if (!age) {
      return tl::unexpected("evict_older_than: " + age.error());
    }
    if (*age > 0) {
      service->evictor_ = std::make_unique<AgeEvictor>(
          *service->store_, std::chrono::seconds(static_cast<std::int64_t>(*age)));
      spdlog::info("evict_older_than: entries not read for {} go", config.evict_older_than);
    }
  }
  if (service->runs_) {
    service->handler_->set_runs(service->runs_.get());
  }
  // One io_context per I/O thread; each connection stays on one (io_pool.h).
  const unsigned threads =
      config.threads > 0 ? config.threads : std::max(2U, std::thread::hardware_concurrency());
  service->pool_ = std::make_unique<IoPool>(service->io_, threads);
  service->server_ = std::make_unique<HttpServer>(
      service->io_,
      [handler = service->handler_.get()](Request&& r, const Responder& respond) {
        handler->handle_async(r, respond);
      },
      limits, &metrics,
      [handler = service->handler_.get()](const Request& head, bool sends_spent) {
        return handler->admit(head, sends_spent);
      });
  service->server_->set_connection_contexts([pool = service->pool_.get()]() -> auto& {
    return pool->next();
  });
  if (config.listen.empty() && config.unix_socket.empty()) {
    return tl::unexpected(std::string("nothing to listen on: give --listen or --unix-socket"));
  }
  if (config.tls.enabled()) {
    auto tls = make_server_tls_context(config.tls);
    if (!tls) {
      return tl::unexpected(tls.error());
    }
    service->server_->set_tls_context(std::move(*tls));
  }
  if (!config.listen.empty()) {
    if (auto ok = service->server_->listen_tcp(config.listen); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  if (!config.unix_socket.empty()) {
    if (auto ok = service->server_->listen_unix(
            config.unix_socket, {config.unix_socket_mode, config.unix_socket_group});
        !ok) {
      return tl::unexpected(ok.error());
    }
  }
  if (auto ok = service->start_resp(config, limits); !ok) {
    return tl::unexpected(ok.error());
  }
  if (config.tokens.empty()) {
    spdlog::warn("no tokens configured: every client has the admin role");
  }
  if (config.cluster.enabled) {
    // Once the TCP port is known: the default node id is <hostname>:<port>.
    ClusterConfig cluster = config.cluster;
    cluster.node_id = node_id_of(cluster, service->server_->tcp_port());
    if (!service->jobs_) {
      spdlog::warn("cluster mode: this kcached runs no compile workers: it takes no cluster jobs");
    } else {
      service->jobs_->enable_cluster(cluster, *cluster_redis);
    }
    service->nodes_ = std::make_unique<NodeRegistry>(
        *service->cluster_redis_, cluster.heartbeat,
        [svc = service.get(), id = cluster.node_id] { return svc->node_snapshot(id); },
        service->metrics_);
    service->handler_->set_nodes(service->nodes_.get());
  }
  return service;
}

void Service::stop() {
  if (jobs_) {
    // Long-polls get their answer now, so the drain does not wait them out;
    // running compiles stay journaled and resume after a restart.
    jobs_->shutdown();
  }
  leases_->release_all_waiters(); // gets waiting for a producer answer now
  if (resp_) {
    resp_->stop(); // RESP commands are short: no drain, connections close
  }
  server_->drain([this] { pool_->stop(); });
}

tl::expected<void, std::string> Service::start_resp(const ServiceConfig& config,
                                                    const Limits& limits) {
  if (config.resp.listen.empty()) {
    return {};
  }
  if (!RespCommands::valid_namespace(config.resp.ns)) {
    return tl::unexpected("resp.namespace '" + config.resp.ns +
                          "' must be 1-128 characters of [A-Za-z0-9._+-]");
  }
  // RESP has no TLS here: tokens (AUTH passwords) stay on this host unless
  // allowed, as for plain HTTP.
  const std::string host = config.resp.listen.substr(0, config.resp.listen.rfind(':'));
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(
      host.size() >= 2 && host.front() == '[' ? host.substr(1, host.size() - 2) : host, ec);
  if (!config.tokens.empty() && !config.allow_plain_http && (ec || !address.is_loopback())) {
    return tl::unexpected("resp.listen = \"" + config.resp.listen +
                          "\" is plain TCP beyond this host while tokens are configured: AUTH "
                          "tokens and values would cross the network in clear text. Listen on "
                          "127.0.0.1, or set allow_plain_http = true behind a TLS proxy");
  }
  resp_commands_ =
      std::make_unique<RespCommands>(*store_, &signing_->signer(), config.tokens, config.resp.ns,
                                     limits.max_body_bytes, metrics_, leases_.get());
  resp_ = std::make_unique<RespServer>(io_, *resp_commands_, limits, metrics_);
  resp_->set_connection_contexts([pool = pool_.get()]() -> auto& { return pool->next(); });
  if (auto ok = resp_->listen(config.resp.listen); !ok) {
    return tl::unexpected(ok.error());
  }
  spdlog::info("kcached RESP listening on {} (port {}), namespace '{}'", config.resp.listen,
               resp_->port(), config.resp.ns);
  return {};
}

NodeInfo Service::node_snapshot(const std::string& id) const {
  NodeInfo node;
  node.id = id;
  node.version = KCACHE_VERSION;
  node.address = config_.listen.empty() ? config_.unix_socket
                                        : config_.listen.substr(0, config_.listen.rfind(':') + 1) +
                                              std::to_string(server_->tcp_port());
  if (jobs_) {
    node.capabilities = jobs_->cluster_capabilities(); // the job streams it reads
    const JobCounts counts = jobs_->counts();
    node.workers = counts.workers;
    node.queued = counts.queued;
    node.running = counts.running;
  }
  return node;
}

void Service::reload_tls() {
  if (!config_.tls.enabled()) {
    spdlog::info("SIGHUP: no [tls] configured, nothing to reload");
    return;
  }
  auto tls = make_server_tls_context(config_.tls);
  if (!tls) {
    spdlog::error("SIGHUP: TLS reload failed, new connections keep the previous certificate: {}",
                  tls.error());
    return;
  }
  server_->set_tls_context(std::move(*tls));
  spdlog::info("SIGHUP: reloaded TLS certificate {} for new connections", config_.tls.cert_file);
}

int Service::run() {
  boost::asio::signal_set signals(io_, SIGINT, SIGTERM);
  signals.async_wait([this](const boost::system::error_code& ec, int signal) {
    if (!ec) {
      spdlog::info("signal {}: draining (up to {} s)", signal,
                   config_.limits.drain_timeout.count());
      notify_systemd("STOPPING=1");
      stop();
    }
  });
  // SIGHUP reloads the TLS certificate, key and client CA for new connections.
  boost::asio::signal_set hangups(io_, SIGHUP);
  std::function<void()> await_hangup = [&] {
    hangups.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) {
        return;
      }
      reload_tls();
      await_hangup();
    });
  };
  await_hangup();
  if (!config_.listen.empty()) {
    spdlog::info("kcached listening on {} (port {}{})", config_.listen, server_->tcp_port(),
                 server_->tls() ? ", TLS" : "");
  }
  if (!config_.unix_socket.empty()) {
    spdlog::info("kcached listening on unix socket {}", config_.unix_socket);
  }
  if (!config_.port_file.empty()) {
    // Written to a temporary name and renamed, so a reader never sees half a port.
    const std::string tmp = config_.port_file + ".tmp";
    std::ofstream(tmp) << server_->tcp_port() << "\n";
    std::filesystem::rename(tmp, config_.port_file);
  }
  notify_systemd("READY=1"); // every listener accepts by now
  pool_->run();              // until stop(): every I/O thread, this one running io_
  spdlog::info("kcached drained; closing stores");
  return 0;
}

} // namespace kcache::service
