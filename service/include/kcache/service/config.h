#pragma once
// kcached's configuration. Its settings, their TOML keys, flags, KCACHED_*
// variables, defaults and help are one table (settings.h); deploy/kcached.toml
// shows every file key. Precedence, highest first: flag, variable, the
// --config file, default.

#include <tl/expected.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kcache::service {

// Ordered: each role may do what the ones before it may. `submit` adds compile
// jobs to `read`; only the service and `write` clients write the action cache.
enum class Role { kRead = 0, kSubmit = 1, kWrite = 2, kAdmin = 3 };

// A role in the namespaces a glob pattern matches (key_namespace.h).
struct RoleGrant {
  std::string pattern; // "*", "team-a*", "team-a/*"
  Role role = Role::kRead;
};

// A configured token: its SHA-256 only, never the plaintext (tokens.h
// compares a presented bearer token's digest against it).
struct Token {
  std::string name; // the identity; "token-<index>" when the config names none
  std::array<std::uint8_t, 32> sha256{};
  std::vector<RoleGrant> roles;
};

// The HTTP server's resource bounds (http_server.h says how each is enforced).
struct Limits {
  std::uint32_t max_header_bytes = 16 << 10;
  std::uint64_t max_body_bytes = 1ULL << 30; // one request's body
  std::size_t max_connections = 1024;
  std::size_t max_connections_per_peer = 128; // per remote address; 0: no cap
  std::chrono::seconds header_timeout{10};    // a new connection's request head
  std::chrono::seconds idle_timeout{60};      // a keep-alive connection between requests
  std::chrono::seconds stall_timeout{30};     // a body read or response write without progress
  std::chrono::seconds drain_timeout{10};
  std::uint64_t body_memory_bytes = 1ULL << 30; // request bodies held, all connections
  std::uint64_t send_memory_bytes = 1ULL << 30; // responses being written, all connections
  // Of send_memory, what one remote address may hold (0: a quarter of it), so
  // clients that stop reading from one address cannot starve the others.
  std::uint64_t send_memory_per_peer_bytes = 0;
  std::uint64_t peer_send_cap() const {
    return send_memory_per_peer_bytes != 0 ? send_memory_per_peer_bytes : send_memory_bytes / 4;
  }
  // Uploads (PUT /v1/cas/..., PUT /v1/artifacts/...) over spool_threshold, or of unknown
  // length, are written to an unnamed file in spool_dir as they arrive, not
  // held in memory (upload_spool.h); such files together at most spool_disk.
  std::uint64_t spool_threshold_bytes = 4ULL << 20;
  std::uint64_t spool_disk_bytes = 4ULL << 30;
  std::string spool_dir; // data_dir/spool, set by the service; "": no spooling
};

struct JobsConfig {
  std::string worker_binary; // "": looked up next to kcached (see find_worker_binary)
  unsigned workers = 2;
  std::size_t queue_capacity = 1024;
  std::chrono::seconds negative_ttl{60};
  std::size_t history = 1000;
  std::uint32_t max_attempts = 3; // starts of one job (restarts included) before it fails
  std::chrono::seconds wall_clock{300};
  std::chrono::seconds cpu_time{300};
  std::uint64_t memory_bytes = 8ULL << 30;
  // The hardware this node benchmarks autotune variants on; "" detects it.
  // Set it where detection is too coarse (e.g. a MIG slice).
  std::string tuning_class;
  // GPUs (device ordinals, comma-separated) that time a search's variants in
  // parallel, a worker each; "": every GPU of the first one's tuning class.
  std::string bench_gpus;

  // Submission bounds (issue 13). Every job a submission adds counts against
  // queue_capacity and its submitter's quota, an autotune search's variant
  // compiles included.
  std::uint64_t max_spec_bytes = 16ULL << 20; // a spec's source + headers; over it: 413
  std::size_t max_jobs_per_submitter = 256;   // queued or running; 0: no cap
  // An infrastructure failure (worker killed, spawn failure, garbled reply)
  // is retried after retry_backoff, doubling per attempt, up to max_attempts.
  std::chrono::milliseconds retry_backoff{1000};
  // Start even when workers x memory exceeds the host's memory.
  bool force_worker_memory = false;
  // Whether a file or flag named `memory`: the default yields to a small host.
  bool memory_configured = false;
};

// TLS on the TCP listener (tls_context.h builds the OpenSSL context).
struct TlsConfig {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file; // "": no client certificates asked for
  std::string min_version = "1.2";
  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
};

// Signed action records (signing.h): this node's key, and whose records it
// serves from a shared tier.
struct SigningConfig {
  std::string key_file;                  // "": data_dir/signing.pem, generated on first start
  std::vector<std::string> trusted_keys; // PEM public key files or directories
  bool print_public_key = false;         // --print-public-key: print it and exit
};

// Cluster mode (issue 15): compile jobs queue on Redis Streams shared by
// every node (job_queue_cluster.h).
struct ClusterConfig {
  bool enabled = false;
  std::string node_id; // "": <hostname>:<port>
  std::chrono::milliseconds heartbeat{2000};
  std::chrono::milliseconds visibility_timeout{30000};
};

// The RESP listener (issue 21): plain TCP under the HTTP server's Limits.
struct RespConfig {
  std::string listen; // "": off
  std::string ns = "resp";
};

struct ServiceConfig {
  std::string listen = "127.0.0.1:7070";
  std::string unix_socket;
  // The socket's permission bits (TOML "0660"); 0 keeps what the umask gives.
  unsigned unix_socket_mode = 0;
  std::string unix_socket_group; // "": kcached's own group
  std::string data_dir = "/var/lib/kcache";
  std::uint64_t disk_capacity = 10ULL << 30;
  std::uint64_t memory_capacity = 256ULL << 20;
  std::string redis_url;
  std::vector<std::string> stores; // store URLs; when given, they are the tiers
  unsigned threads = 0;
  std::string log_level = "info";
  std::string port_file; // written with the bound TCP port once listening
  Limits limits;
  JobsConfig jobs;
  std::vector<Token> tokens;
  TlsConfig tls;
  SigningConfig signing;
  ClusterConfig cluster;
  RespConfig resp;
  // Serve plain HTTP on a non-loopback TCP address although tokens are configured.
  bool allow_plain_http = false;
  // One line per request (access_log.h): "text", "json" or "off"; checked by
  // Service::create. Off by default, as sccache and bazel-remote keep theirs
  // (debug level): kcached is a per-node cache answering thousands of hits a
  // second, and at that rate journald's rate limit (10000 lines in 30 s)
  // would drop the daemon's own warnings along with the access lines.
  std::string access_log = "off";
  // Entries nobody read for this long go (age_evictor.h): "7d", "12h"; "": never.
  std::string evict_older_than;
};

// The file's settings over `base`; an unknown key or section, or a value of
// the wrong type, is an error naming the key and the file.
tl::expected<ServiceConfig, std::string> load_config_file(const std::string& path,
                                                          ServiceConfig base = {});

// KCACHED_* variable -> value, for the variables the settings table names.
using Environment = std::map<std::string, std::string, std::less<>>;
// This process's (unknown KCACHED_* names are ignored: Kubernetes sets
// KCACHED_SERVICE_HOST and KCACHED_PORT for a Service named kcached).
Environment kcached_environment();

// Why the command line does not start kcached: --help or --version (code 0,
// text for stdout), or an error (code 2, text for stderr).
struct CommandLineExit {
  int code = 2;
  std::string text;
};

// The --config file (or $KCACHED_CONFIG), then `env`, then the flags (CLI11):
// unknown flags, missing values and bad numbers are errors.
tl::expected<ServiceConfig, CommandLineExit> parse_command_line(int argc, const char* const* argv,
                                                                const Environment& env);
// With this process's environment.
tl::expected<ServiceConfig, CommandLineExit> parse_command_line(int argc, const char* const* argv);
// --help's text, written from the settings table.
std::string usage();

// One name table (config.cpp): "read", "submit", "write", "admin", as
// kcached.toml spells them and 403s name them.
tl::expected<Role, std::string> parse_role(std::string_view name);
std::string_view role_name(Role role);

// Refuses a plain (non-TLS) TCP listener on a non-loopback address while
// tokens are configured (they would cross the network in clear), unless
// allow_plain_http; also a [tls] table with only one of its files.
tl::expected<void, std::string> check_transport_security(const ServiceConfig& config);

// Refuses evict_older_than with a Redis tier: age eviction follows this
// node's reads and removes from every tier, so on a tier all nodes share it
// would delete what other nodes read.
tl::expected<void, std::string> check_eviction_scope(const ServiceConfig& config);

// The storage tiers as store URLs, fastest first: `stores` when given, else
// memory, then RocksDB in data_dir, then Redis when redis_url is set.
std::vector<std::string> store_urls(const ServiceConfig& config);

// The kcache-worker to run: $KCACHE_WORKER_BINARY, else next to the running
// kcached (an install) or in the build tree's compiler/ folder; "" if none.
std::string find_worker_binary();

// The memory the daemon's workers may use at most: physical memory, or the
// cgroup's memory.max when lower; 0 when unknown.
std::uint64_t host_memory_bytes();
// The default worker memory (8 GiB) lowered to host_memory / workers where
// the workers would not fit (a 16 GB CI runner, a laptop); a configured one
// stays as it is, for check_worker_memory to judge.
void fit_default_worker_memory(JobsConfig& jobs, std::uint64_t host_memory);
// Refuses workers x memory limit above `host_memory` (unless forced): the
// message names both numbers and the flag that forces it.
tl::expected<void, std::string> check_worker_memory(const JobsConfig& jobs,
                                                    std::uint64_t host_memory);

} // namespace kcache::service
