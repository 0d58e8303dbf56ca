// The table of kcached's settings (settings.h). A new setting is one row here,
// one line in deploy/kcached.toml (config_settings_test checks it) and its
// field in config.h; the file, the flags, the environment and --help follow.

#include <kcache/service/settings.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <limits>

namespace kcache::service {
namespace {

using T = SettingType;
using V = SettingValue;

const std::string& text(const V& v) {
  return std::get<std::string>(v);
}

// Clamped into the field's type and to the setting's floor (a zero
// connection limit or timeout would stop kcached from serving at all).
template <typename Int> Int count(const V& v, std::uint64_t floor = 0) {
  const std::uint64_t n = std::max(std::get<std::uint64_t>(v), floor);
  return static_cast<Int>(std::min<std::uint64_t>(n, std::numeric_limits<Int>::max()));
}

std::uint64_t bytes(const V& v) {
  return std::get<std::uint64_t>(v);
}

std::size_t number(const V& v, std::uint64_t floor = 0) {
  return count<std::size_t>(v, floor);
}

// Durations are bounded far below chrono's overflow (about 34 years).
constexpr std::uint64_t kMaxDuration = 1ULL << 30;

std::chrono::seconds seconds(const V& v, std::uint64_t floor) {
  return std::chrono::seconds(std::min(std::max(std::get<std::uint64_t>(v), floor), kMaxDuration));
}

std::chrono::milliseconds millis(const V& v, std::uint64_t floor) {
  return std::chrono::milliseconds(
      std::min(std::max(std::get<std::uint64_t>(v), floor), kMaxDuration));
}

// clang-format off
// Columns: TOML key, flag, environment variable, type, value name, default, help, store.
const std::array kSettings = {
  Setting{"", "config", "KCACHED_CONFIG", T::kString, "FILE", "",
          "TOML configuration file (flags and KCACHED_* variables override it)",
          [](ServiceConfig&, const V&) {}}, // read first, by the command line
  Setting{"listen", "listen", "KCACHED_LISTEN", T::kString, "HOST:PORT", "127.0.0.1:7070",
          "TCP address; port 0 picks one; \"\" disables it",
          [](ServiceConfig& c, const V& v) { c.listen = text(v); }},
  Setting{"unix_socket", "unix-socket", "KCACHED_UNIX_SOCKET", T::kString, "PATH", "",
          "also serve on this Unix socket; \"\": none",
          [](ServiceConfig& c, const V& v) { c.unix_socket = text(v); }},
  Setting{"unix_socket_mode", "unix-socket-mode", "KCACHED_UNIX_SOCKET_MODE", T::kOctalMode,
          "MODE", "",
          "the socket's permission bits, octal (\"0660\"); \"\": as the umask leaves them",
          [](ServiceConfig& c, const V& v) { c.unix_socket_mode = count<unsigned>(v); }},
  Setting{"unix_socket_group", "unix-socket-group", "KCACHED_UNIX_SOCKET_GROUP", T::kString,
          "NAME", "", "the socket's group; \"\": kcached's own",
          [](ServiceConfig& c, const V& v) { c.unix_socket_group = text(v); }},
  Setting{"data_dir", "data-dir", "KCACHED_DATA_DIR", T::kString, "DIR", "/var/lib/kcache",
          "the embedded RocksDB store, the job journal and the upload spool",
          [](ServiceConfig& c, const V& v) { c.data_dir = text(v); }},
  Setting{"disk_capacity", "disk-capacity", "KCACHED_DISK_CAPACITY", T::kSize, "SIZE", "10GiB",
          "bound of the RocksDB store",
          [](ServiceConfig& c, const V& v) { c.disk_capacity = bytes(v); }},
  Setting{"memory_capacity", "memory-capacity", "KCACHED_MEMORY_CAPACITY", T::kSize, "SIZE",
          "256MiB", "bound of the in-memory tier",
          [](ServiceConfig& c, const V& v) { c.memory_capacity = bytes(v); }},
  Setting{"redis_url", "redis-url", "KCACHED_REDIS_URL", T::kString, "URL", "",
          "the shared Redis tier, e.g. redis://host:6379?namespace=kcache; \"\": none",
          [](ServiceConfig& c, const V& v) { c.redis_url = text(v); }},
  Setting{"stores", "store", "KCACHED_STORES", T::kList, "URL", "",
          "the storage tiers as store URLs, fastest first (repeat the flag); replaces "
          "memory_capacity, disk_capacity and redis_url",
          [](ServiceConfig& c, const V& v) { c.stores = std::get<std::vector<std::string>>(v); }},
  Setting{"threads", "threads", "KCACHED_THREADS", T::kCount, "N", "0",
          "I/O threads; 0: one per core",
          [](ServiceConfig& c, const V& v) { c.threads = count<unsigned>(v); }},
  Setting{"log_level", "log-level", "KCACHED_LOG_LEVEL", T::kLogLevel, "LEVEL", "info",
          "trace, debug, info, warn, error, critical or off",
          [](ServiceConfig& c, const V& v) { c.log_level = text(v); }},
  Setting{"access_log", "access-log", "KCACHED_ACCESS_LOG", T::kString, "MODE", "off",
          "one line per request at info level: text, json (an object a line) or off",
          [](ServiceConfig& c, const V& v) { c.access_log = text(v); }},
  Setting{"evict_older_than", "evict-older-than", "KCACHED_EVICT_OLDER_THAN", T::kString, "AGE",
          "", "remove entries nobody read for AGE (\"7d\", \"12h\"); \"\": never",
          [](ServiceConfig& c, const V& v) { c.evict_older_than = text(v); }},
  Setting{"", "port-file", "KCACHED_PORT_FILE", T::kString, "PATH", "",
          "write the bound TCP port here once listening",
          [](ServiceConfig& c, const V& v) { c.port_file = text(v); }},
  Setting{"allow_plain_http", "allow-plain-http", "KCACHED_ALLOW_PLAIN_HTTP", T::kBool, "",
          "false", "serve plain HTTP beyond loopback although tokens are configured (behind a "
          "TLS proxy)",
          [](ServiceConfig& c, const V& v) { c.allow_plain_http = std::get<bool>(v); }},
  Setting{"token_file", "", "", T::kString, "PATH", "",
          "more [[tokens]] from this file, which only kcached's user may read",
          nullptr}, // loaded with the file's own [[tokens]] (config_file.cpp)

  Setting{"limits.max_header_bytes", "max-header-bytes", "KCACHED_MAX_HEADER_BYTES", T::kCount,
          "N", "16384", "largest request head (at least 1024)",
          [](ServiceConfig& c, const V& v) {
            c.limits.max_header_bytes = count<std::uint32_t>(v, 1024);
          }},
  Setting{"limits.max_body_bytes", "max-body-bytes", "KCACHED_MAX_BODY_BYTES", T::kSize, "SIZE",
          "1GiB", "largest request body",
          [](ServiceConfig& c, const V& v) { c.limits.max_body_bytes = bytes(v); }},
  Setting{"limits.max_connections", "max-connections", "KCACHED_MAX_CONNECTIONS", T::kCount, "N",
          "1024", "concurrent connections (at least 1)",
          [](ServiceConfig& c, const V& v) { c.limits.max_connections = number(v, 1); }},
  Setting{"limits.max_connections_per_peer", "max-connections-per-peer",
          "KCACHED_MAX_CONNECTIONS_PER_PEER", T::kCount, "N", "128",
          "concurrent connections from one remote address; 0: no cap",
          [](ServiceConfig& c, const V& v) { c.limits.max_connections_per_peer = number(v); }},
  Setting{"limits.header_timeout_s", "header-timeout-s", "KCACHED_HEADER_TIMEOUT_S", T::kCount,
          "N", "10", "seconds a new connection has to send its request head",
          [](ServiceConfig& c, const V& v) { c.limits.header_timeout = seconds(v, 1); }},
  Setting{"limits.idle_timeout_s", "idle-timeout-s", "KCACHED_IDLE_TIMEOUT_S", T::kCount, "N",
          "60", "seconds a keep-alive connection may wait between requests",
          [](ServiceConfig& c, const V& v) { c.limits.idle_timeout = seconds(v, 1); }},
  Setting{"limits.stall_timeout_s", "stall-timeout-s", "KCACHED_STALL_TIMEOUT_S", T::kCount, "N",
          "30", "seconds a body read or response write may make no progress",
          [](ServiceConfig& c, const V& v) { c.limits.stall_timeout = seconds(v, 1); }},
  Setting{"limits.drain_timeout_s", "drain-timeout-s", "KCACHED_DRAIN_TIMEOUT_S", T::kCount, "N",
          "10", "seconds requests in flight may take to finish on SIGTERM",
          [](ServiceConfig& c, const V& v) { c.limits.drain_timeout = seconds(v, 0); }},
  Setting{"limits.body_memory", "body-memory", "KCACHED_BODY_MEMORY", T::kSize, "SIZE", "1GiB",
          "request bodies held in memory, all connections (503 beyond)",
          [](ServiceConfig& c, const V& v) { c.limits.body_memory_bytes = bytes(v); }},
  Setting{"limits.send_memory", "send-memory", "KCACHED_SEND_MEMORY", T::kSize, "SIZE", "1GiB",
          "responses being written, all connections (503 beyond)",
          [](ServiceConfig& c, const V& v) { c.limits.send_memory_bytes = bytes(v); }},
  Setting{"limits.send_memory_per_peer", "send-memory-per-peer", "KCACHED_SEND_MEMORY_PER_PEER",
          T::kSize, "SIZE", "0", "of send_memory, what one remote address may hold; 0: a quarter",
          [](ServiceConfig& c, const V& v) { c.limits.send_memory_per_peer_bytes = bytes(v); }},
  Setting{"limits.spool_threshold", "spool-threshold", "KCACHED_SPOOL_THRESHOLD", T::kSize,
          "SIZE", "4MiB", "uploads over this go to a file in data_dir/spool, not to memory",
          [](ServiceConfig& c, const V& v) { c.limits.spool_threshold_bytes = bytes(v); }},
  Setting{"limits.spool_disk", "spool-disk", "KCACHED_SPOOL_DISK", T::kSize, "SIZE", "4GiB",
          "spooled upload bytes on disk, all connections (503 beyond)",
          [](ServiceConfig& c, const V& v) { c.limits.spool_disk_bytes = bytes(v); }},

  Setting{"jobs.worker_binary", "worker-binary", "KCACHED_WORKER_BINARY", T::kString, "PATH", "",
          "the kcache-worker that compiles jobs; \"\": found next to kcached",
          [](ServiceConfig& c, const V& v) { c.jobs.worker_binary = text(v); }},
  Setting{"jobs.workers", "workers", "KCACHED_WORKERS", T::kCount, "N", "2",
          "concurrent compile workers; 0: no compiling",
          [](ServiceConfig& c, const V& v) { c.jobs.workers = count<unsigned>(v); }},
  Setting{"jobs.queue_capacity", "queue-capacity", "KCACHED_QUEUE_CAPACITY", T::kCount, "N",
          "1024", "queued jobs before submissions are answered \"busy\"",
          [](ServiceConfig& c, const V& v) { c.jobs.queue_capacity = number(v); }},
  Setting{"jobs.negative_ttl_s", "negative-ttl-s", "KCACHED_NEGATIVE_TTL_S", T::kCount, "N", "60",
          "seconds a failed compile is answered from memory",
          [](ServiceConfig& c, const V& v) { c.jobs.negative_ttl = seconds(v, 0); }},
  Setting{"jobs.history", "job-history", "KCACHED_JOB_HISTORY", T::kCount, "N", "1000",
          "finished jobs kept for `kcache jobs`",
          [](ServiceConfig& c, const V& v) { c.jobs.history = number(v); }},
  Setting{"jobs.max_attempts", "max-attempts", "KCACHED_MAX_ATTEMPTS", T::kCount, "N", "3",
          "starts of one job (restarts included) before it fails",
          [](ServiceConfig& c, const V& v) { c.jobs.max_attempts = count<std::uint32_t>(v); }},
  Setting{"jobs.wall_clock_s", "compile-timeout-s", "KCACHED_COMPILE_TIMEOUT_S", T::kCount, "N",
          "300", "wall-clock seconds of one compile",
          [](ServiceConfig& c, const V& v) { c.jobs.wall_clock = seconds(v, 1); }},
  Setting{"jobs.cpu_time_s", "compile-cpu-time-s", "KCACHED_COMPILE_CPU_TIME_S", T::kCount, "N",
          "300", "CPU seconds of one compile",
          [](ServiceConfig& c, const V& v) { c.jobs.cpu_time = seconds(v, 0); }},
  Setting{"jobs.memory", "worker-memory", "KCACHED_WORKER_MEMORY", T::kSize, "SIZE", "8GiB",
          "address space of one worker; 0: none (unset: lowered to the host's memory / workers)",
          [](ServiceConfig& c, const V& v) {
            c.jobs.memory_bytes = bytes(v);
            c.jobs.memory_configured = true; // check_worker_memory judges it as it is
          }},
  Setting{"jobs.tuning_class", "tuning-class", "KCACHED_TUNING_CLASS", T::kString, "NAME", "",
          "the hardware autotune variants are benchmarked on; \"\": detected",
          [](ServiceConfig& c, const V& v) { c.jobs.tuning_class = text(v); }},
  Setting{"jobs.bench_gpus", "bench-gpus", "KCACHED_BENCH_GPUS", T::kString, "LIST", "",
          "GPU ordinals (e.g. 0,1) that time autotune variants in parallel, a bench worker each; "
          "\"\": every GPU of GPU 0's tuning class",
          [](ServiceConfig& c, const V& v) { c.jobs.bench_gpus = text(v); }},
  Setting{"jobs.max_spec_bytes", "max-spec-bytes", "KCACHED_MAX_SPEC_BYTES", T::kSize, "SIZE",
          "16MiB", "largest spec (source + headers) a submission may carry (413 beyond)",
          [](ServiceConfig& c, const V& v) { c.jobs.max_spec_bytes = bytes(v); }},
  Setting{"jobs.max_jobs_per_submitter", "max-jobs-per-submitter",
          "KCACHED_MAX_JOBS_PER_SUBMITTER", T::kCount, "N", "256",
          "queued or running jobs per token (per client without tokens); 0: no cap",
          [](ServiceConfig& c, const V& v) { c.jobs.max_jobs_per_submitter = number(v); }},
  Setting{"jobs.retry_backoff_ms", "retry-backoff-ms", "KCACHED_RETRY_BACKOFF_MS", T::kCount, "N",
          "1000", "first retry of a compile whose worker died, in ms; doubles per attempt",
          [](ServiceConfig& c, const V& v) { c.jobs.retry_backoff = millis(v, 0); }},
  Setting{"jobs.force_worker_memory", "force-worker-memory", "KCACHED_FORCE_WORKER_MEMORY",
          T::kBool, "", "false",
          "start even when workers x worker memory exceeds the host's memory",
          [](ServiceConfig& c, const V& v) { c.jobs.force_worker_memory = std::get<bool>(v); }},

  Setting{"tls.cert_file", "tls-cert", "KCACHED_TLS_CERT", T::kString, "PATH", "",
          "serve TLS on the TCP listener with this certificate chain (PEM); SIGHUP reloads it",
          [](ServiceConfig& c, const V& v) { c.tls.cert_file = text(v); }},
  Setting{"tls.key_file", "tls-key", "KCACHED_TLS_KEY", T::kString, "PATH", "",
          "the certificate's private key (PEM)",
          [](ServiceConfig& c, const V& v) { c.tls.key_file = text(v); }},
  Setting{"tls.client_ca_file", "tls-client-ca", "KCACHED_TLS_CLIENT_CA", T::kString, "PATH", "",
          "require client certificates signed by this CA (mTLS); \"\": none asked for",
          [](ServiceConfig& c, const V& v) { c.tls.client_ca_file = text(v); }},
  Setting{"tls.min_version", "tls-min-version", "KCACHED_TLS_MIN_VERSION", T::kString, "VERSION",
          "1.2", "the oldest TLS version accepted: 1.2 or 1.3",
          [](ServiceConfig& c, const V& v) { c.tls.min_version = text(v); }},

  Setting{"signing.key_file", "signing-key", "KCACHED_SIGNING_KEY", T::kString, "PATH", "",
          "Ed25519 key that signs stored records; \"\": data_dir/signing.pem, made on first start",
          [](ServiceConfig& c, const V& v) { c.signing.key_file = text(v); }},
  Setting{"signing.trusted_keys", "trusted-keys", "KCACHED_TRUSTED_KEYS", T::kList, "PATH", "",
          "public keys (PEM files or directories) whose records a shared tier may serve "
          "(repeat the flag)",
          [](ServiceConfig& c, const V& v) {
            c.signing.trusted_keys = std::get<std::vector<std::string>>(v);
          }},
  Setting{"", "print-public-key", "", T::kBool, "", "false",
          "print this node's public key (PEM) for other nodes' trusted_keys, and exit",
          [](ServiceConfig& c, const V& v) { c.signing.print_public_key = std::get<bool>(v); }},

  Setting{"cluster.enabled", "cluster", "KCACHED_CLUSTER", T::kBool, "", "false",
          "cluster mode: compile jobs queue on the Redis of redis_url, shared by every node",
          [](ServiceConfig& c, const V& v) { c.cluster.enabled = std::get<bool>(v); }},
  Setting{"cluster.node_id", "node-id", "KCACHED_NODE_ID", T::kString, "ID", "",
          "this node's name in the cluster; \"\": HOSTNAME:PORT",
          [](ServiceConfig& c, const V& v) { c.cluster.node_id = text(v); }},
  Setting{"cluster.heartbeat_ms", "cluster-heartbeat-ms", "KCACHED_CLUSTER_HEARTBEAT_MS",
          T::kCount, "N", "2000", "a running job's claim is renewed this often (ms)",
          [](ServiceConfig& c, const V& v) { c.cluster.heartbeat = millis(v, 1); }},
  Setting{"cluster.visibility_timeout_ms", "cluster-visibility-timeout-ms",
          "KCACHED_CLUSTER_VISIBILITY_TIMEOUT_MS", T::kCount, "N", "30000",
          "a claim not renewed this long (ms) is reclaimed by another node",
          [](ServiceConfig& c, const V& v) { c.cluster.visibility_timeout = millis(v, 1); }},

  Setting{"resp.listen", "resp-listen", "KCACHED_RESP_LISTEN", T::kString, "HOST:PORT", "",
          "a Redis-protocol (RESP2) listener, plain TCP; \"\": off",
          [](ServiceConfig& c, const V& v) { c.resp.listen = text(v); }},
  Setting{"resp.namespace", "resp-namespace", "KCACHED_RESP_NAMESPACE", T::kString, "NS", "resp",
          "the namespace of keys set over RESP (resp:<namespace>:<key>)",
          [](ServiceConfig& c, const V& v) { c.resp.ns = text(v); }},
};
// clang-format on

constexpr std::array<std::string_view, 5> kTokenKeys = {"name", "sha256", "token", "role", "roles"};

} // namespace

std::span<const Setting> settings() {
  return kSettings;
}

std::span<const std::string_view> token_keys() {
  return kTokenKeys;
}

} // namespace kcache::service
