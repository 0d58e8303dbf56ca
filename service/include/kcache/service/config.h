#pragma once
// kcached's configuration: a TOML file, then command-line flags on top.
//
//   listen          = "127.0.0.1:7070"      # TCP; "" disables
//   unix_socket     = "/run/kcache.sock"    # "" disables
//   unix_socket_mode  = "0660"              # octal; "": as the umask leaves it
//   unix_socket_group = "kcache"            # the socket's group; "": kcached's own
//   data_dir        = "/var/lib/kcache"     # the embedded RocksDB store
//   disk_capacity   = "10GiB"
//   memory_capacity = "256MiB"
//   redis_url       = "redis://10.0.0.5:6379?namespace=kcache"   # optional shared tier
//   # or the tiers as store URLs, fastest first (storage/store_factory.h); this
//   # replaces the three options above (data_dir still holds the job journal):
//   # stores = ["memory://?capacity=256MiB", "rocksdb:///var/lib/kcache/db?capacity=10GiB"]
//   threads         = 0                     # I/O threads; 0: one per core
//   log_level       = "info"
//   [limits]
//   max_header_bytes = 16384
//   max_body_bytes   = "1GiB"
//   max_connections  = 1024
//   max_connections_per_peer = 128          # per remote address; 0: no cap
//   header_timeout_s = 10                   # a new connection's request head
//   idle_timeout_s   = 60
//   stall_timeout_s  = 30                   # a body read or response write without progress
//   drain_timeout_s  = 10
//   body_memory      = "1GiB"               # request bodies in memory, all connections
//   send_memory      = "1GiB"               # responses being written, all connections
//   send_memory_per_peer = "256MiB"         # of that, one remote address; 0: a quarter
//   spool_threshold  = "4MiB"               # uploads over it go to a file in data_dir/spool
//   spool_disk       = "4GiB"               # spooled upload bytes on disk, all connections
//   [jobs]
//   worker_binary   = ""                    # kcache-worker; "" finds it next to kcached
//   workers         = 2                     # concurrent compiles; 0 disables compiling
//   queue_capacity  = 1024                  # queued jobs before "busy"
//   negative_ttl_s  = 60                    # failed compiles are answered from memory this long
//   history         = 1000                  # finished jobs kept for `kcache jobs`
//   wall_clock_s    = 300                   # per compile
//   cpu_time_s      = 300
//   memory          = "8GiB"                # address space per worker; 0: unlimited
//   tuning_class    = ""                    # autotune hardware; "" detects it
//   max_spec_bytes  = "16MiB"               # a spec's source + headers (413 beyond)
//   max_jobs_per_submitter = 256            # queued or running, per token (or per client)
//   retry_backoff_ms = 1000                 # first retry of a worker killed mid-compile
//   force_worker_memory = false             # allow workers x memory above the host's memory
//   token_file = "/etc/kcache/tokens.toml"  # more [[tokens]]; must not be group/world readable
//   [[tokens]]                              # none: no authentication (local use)
//   name   = "team-a-ci"                    # the identity handlers, jobs and logs see
//   sha256 = "<64 hex>"                     # of the token (`kcache token new` prints it)
//   # token = "..."                         # or the plaintext, only in a file chmod 600
//   role   = "admin"                        # read | submit | write | admin, in every namespace
//   # roles = { "team-a*" = "write", "*" = "read" }   # or per namespace pattern (tokens.h)
//   allow_plain_http = false                # a non-loopback plain listener with tokens
//   [tls]                                   # TLS on the TCP listener (the Unix socket stays plain)
//   cert_file      = "/etc/kcache/server.pem" # certificate chain, PEM
//   key_file       = "/etc/kcache/server.key"
//   client_ca_file = ""                     # set: clients must show a certificate it signed (mTLS)
//   min_version    = "1.2"                  # "1.2" or "1.3"; SIGHUP reloads the three files
//   [signing]                               # signed action records (signing.h)
//   key_file     = ""                       # Ed25519 PEM; "": data_dir/signing.pem, made once
//   (0600) trusted_keys = ["/etc/kcache/trusted"]  # public keys (files or dirs) whose shared-tier
//   records
//                                           # are served; this node's own key always is
//   [cluster]                               # the job queue shared on Redis (job_queue_cluster.h)
//   enabled = false                         # needs redis_url (the same Redis, AUTH, namespace)
//   node_id = ""                            # "": <hostname>:<port>
//   heartbeat_ms = 2000                     # a running job's claim is renewed this often
//   visibility_timeout_ms = 30000           # a claim not renewed this long is reclaimed
//   [resp]                                  # a Redis-protocol listener (README's RESP section)
//   listen    = ""                          # "127.0.0.1:6380"; "": off (--resp-listen)
//   namespace = "resp"                      # RESP keys are kcache keys resp:<namespace>:<key>

#include <tl/expected.hpp>

#include <array>
#include <chrono>
#include <cstdint>
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
};

tl::expected<ServiceConfig, std::string> load_config_file(const std::string& path,
                                                          ServiceConfig base = {});
// --config FILE is read first; every other flag overrides it. --help gives usage.
tl::expected<ServiceConfig, std::string> parse_command_line(int argc, const char* const* argv);
std::string usage();

// One name table (config.cpp): "read", "submit", "write", "admin", as
// kcached.toml spells them and 403s name them.
tl::expected<Role, std::string> parse_role(std::string_view name);
std::string_view role_name(Role role);

// Refuses a plain (non-TLS) TCP listener on a non-loopback address while
// tokens are configured (they would cross the network in clear), unless
// allow_plain_http; also a [tls] table with only one of its files.
tl::expected<void, std::string> check_transport_security(const ServiceConfig& config);

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
