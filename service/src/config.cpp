#include "token_config.h"

#include <kcache/protocol/enum_names.h>
#include <kcache/service/config.h>
#include <kcache/service/tokens.h>
#include <kcache/storage/store_factory.h>

#include <boost/asio/ip/address.hpp>
#include <toml++/toml.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <type_traits>

namespace kcache::service {
namespace {

tl::unexpected<std::string> fail(std::string message) {
  return tl::unexpected(std::move(message));
}

// Sizes may be integers or strings with units ("10GiB").
tl::expected<std::uint64_t, std::string> size_value(const toml::node& node, std::string_view what) {
  if (auto v = node.value<std::int64_t>()) {
    if (*v < 0) {
      return fail(std::string(what) + " must not be negative");
    }
    return static_cast<std::uint64_t>(*v);
  }
  if (auto s = node.value<std::string>()) {
    auto size = storage::parse_size(*s);
    if (!size) {
      return fail(std::string(what) + ": " + size.error().message);
    }
    return *size;
  }
  return fail(std::string(what) + " must be a size (integer or \"10GiB\")");
}

tl::expected<std::uint64_t, std::string> parse_uint(std::string_view text, std::string_view what) {
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    return fail(std::string(what) + ": '" + std::string(text) + "' is not a non-negative integer");
  }
  return v;
}

// "0660" or "660"; "" is 0: the socket keeps what the umask gives.
tl::expected<unsigned, std::string> parse_socket_mode(std::string_view text) {
  unsigned mode = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), mode, 8);
  if (!text.empty() && (ec != std::errc() || ptr != text.data() + text.size() || mode > 0777)) {
    return fail("'" + std::string(text) + "' is not an octal mode");
  }
  return mode;
}

} // namespace

namespace {

constexpr protocol::EnumNames<Role, 4> kRoles({{{Role::kRead, "read"},
                                                {Role::kSubmit, "submit"},
                                                {Role::kWrite, "write"},
                                                {Role::kAdmin, "admin"}}});

} // namespace

tl::expected<Role, std::string> parse_role(std::string_view name) {
  return kRoles.parse_or_error("role", name);
}

std::string_view role_name(Role role) {
  return kRoles.name(role);
}

tl::expected<ServiceConfig, std::string> load_config_file(const std::string& path,
                                                          ServiceConfig c) {
  toml::table doc;
  try {
    doc = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    // toml++ reports syntax errors by exception; they end here, as a value.
    return fail(path + ": " + std::string(e.description()));
  }
  auto str = [&](std::string_view key, std::string& out) -> tl::expected<void, std::string> {
    if (const toml::node* n = doc.get(key)) {
      if (!n->is_string()) {
        return fail(path + ": " + std::string(key) + " must be a string");
      }
      out = *n->value<std::string>();
    }
    return {};
  };
  for (auto [key, out] : {std::pair<std::string_view, std::string*>{"listen", &c.listen},
                          {"unix_socket", &c.unix_socket},
                          {"unix_socket_group", &c.unix_socket_group},
                          {"data_dir", &c.data_dir},
                          {"redis_url", &c.redis_url},
                          {"log_level", &c.log_level}}) {
    if (auto ok = str(key, *out); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  for (auto [key, out] :
       {std::pair<std::string_view, std::uint64_t*>{"disk_capacity", &c.disk_capacity},
        {"memory_capacity", &c.memory_capacity}}) {
    if (const toml::node* n = doc.get(key)) {
      auto v = size_value(*n, path + ": " + std::string(key));
      if (!v) {
        return tl::unexpected(v.error());
      }
      *out = *v;
    }
  }
  if (const toml::node* n = doc.get("stores")) {
    const toml::array* stores = n->as_array();
    if (stores == nullptr) {
      return fail(path + ": stores must be an array of store URLs");
    }
    c.stores.clear();
    for (const toml::node& url : *stores) {
      if (!url.is_string()) {
        return fail(path + ": stores must be an array of store URLs");
      }
      c.stores.push_back(*url.value<std::string>());
    }
    for (const char* tier_key : {"memory_capacity", "disk_capacity", "redis_url"}) {
      if (doc.contains(tier_key)) {
        return fail(path + ": stores replaces " + tier_key + "; give one or the other");
      }
    }
  }
  if (const toml::node* n = doc.get("unix_socket_mode")) {
    auto mode = n->is_string() ? parse_socket_mode(*n->value<std::string>())
                               : tl::unexpected(std::string("not a string"));
    if (!mode) {
      return fail(path + ": unix_socket_mode must be an octal string such as \"0660\"");
    }
    c.unix_socket_mode = *mode;
  }
  if (auto t = doc["threads"].value<std::int64_t>()) {
    c.threads = static_cast<unsigned>(std::max<std::int64_t>(0, *t));
  }
  if (const toml::table* limits = doc["limits"].as_table()) {
    if (auto v = (*limits)["max_header_bytes"].value<std::int64_t>()) {
      c.limits.max_header_bytes = static_cast<std::uint32_t>(std::max<std::int64_t>(1024, *v));
    }
    if (const toml::node* n = limits->get("max_body_bytes")) {
      auto v = size_value(*n, path + ": limits.max_body_bytes");
      if (!v) {
        return tl::unexpected(v.error());
      }
      c.limits.max_body_bytes = *v;
    }
    if (auto v = (*limits)["max_connections"].value<std::int64_t>()) {
      c.limits.max_connections = static_cast<std::size_t>(std::max<std::int64_t>(1, *v));
    }
    if (auto v = (*limits)["max_connections_per_peer"].value<std::int64_t>()) {
      c.limits.max_connections_per_peer = static_cast<std::size_t>(std::max<std::int64_t>(0, *v));
    }
    for (auto [key, out] : {std::pair<std::string_view, std::chrono::seconds*>{
                                "header_timeout_s", &c.limits.header_timeout},
                            {"idle_timeout_s", &c.limits.idle_timeout},
                            {"stall_timeout_s", &c.limits.stall_timeout}}) {
      if (auto v = (*limits)[key].value<std::int64_t>()) {
        *out = std::chrono::seconds(std::max<std::int64_t>(1, *v));
      }
    }
    if (auto v = (*limits)["drain_timeout_s"].value<std::int64_t>()) {
      c.limits.drain_timeout = std::chrono::seconds(std::max<std::int64_t>(0, *v));
    }
    for (auto [key, out] :
         {std::pair<std::string_view, std::uint64_t*>{"body_memory", &c.limits.body_memory_bytes},
          {"send_memory", &c.limits.send_memory_bytes},
          {"send_memory_per_peer", &c.limits.send_memory_per_peer_bytes},
          {"spool_threshold", &c.limits.spool_threshold_bytes},
          {"spool_disk", &c.limits.spool_disk_bytes}}) {
      if (const toml::node* n = limits->get(key)) {
        auto v = size_value(*n, path + ": limits." + std::string(key));
        if (!v) {
          return tl::unexpected(v.error());
        }
        *out = *v;
      }
    }
  }
  if (const toml::table* jobs = doc["jobs"].as_table()) {
    if (auto v = (*jobs)["worker_binary"].value<std::string>()) {
      c.jobs.worker_binary = *v;
    }
    if (auto v = (*jobs)["tuning_class"].value<std::string>()) {
      c.jobs.tuning_class = *v;
    }
    auto count = [&](std::string_view key, auto& out) {
      if (auto v = (*jobs)[key].value<std::int64_t>()) {
        out = static_cast<std::remove_reference_t<decltype(out)>>(std::max<std::int64_t>(0, *v));
      }
    };
    count("workers", c.jobs.workers);
    count("queue_capacity", c.jobs.queue_capacity);
    count("history", c.jobs.history);
    count("max_attempts", c.jobs.max_attempts);
    for (auto [key, out] : {std::pair<std::string_view, std::chrono::seconds*>{
                                "negative_ttl_s", &c.jobs.negative_ttl},
                            {"wall_clock_s", &c.jobs.wall_clock},
                            {"cpu_time_s", &c.jobs.cpu_time}}) {
      if (auto v = (*jobs)[key].value<std::int64_t>()) {
        *out = std::chrono::seconds(std::max<std::int64_t>(0, *v));
      }
    }
    if (const toml::node* n = jobs->get("memory")) {
      auto v = size_value(*n, path + ": jobs.memory");
      if (!v) {
        return tl::unexpected(v.error());
      }
      c.jobs.memory_bytes = *v;
      c.jobs.memory_configured = true;
    }
    // Submission bounds (issue 13).
    if (const toml::node* n = jobs->get("max_spec_bytes")) {
      auto v = size_value(*n, path + ": jobs.max_spec_bytes");
      if (!v) {
        return tl::unexpected(v.error());
      }
      c.jobs.max_spec_bytes = *v;
    }
    count("max_jobs_per_submitter", c.jobs.max_jobs_per_submitter);
    if (auto v = (*jobs)["retry_backoff_ms"].value<std::int64_t>()) {
      c.jobs.retry_backoff = std::chrono::milliseconds(std::max<std::int64_t>(0, *v));
    }
    if (auto v = (*jobs)["force_worker_memory"].value<bool>()) {
      c.jobs.force_worker_memory = *v;
    }
  }
  // TLS on the TCP listener (issue 14).
  if (auto v = doc["allow_plain_http"].value<bool>()) {
    c.allow_plain_http = *v;
  }
  if (const toml::node* n = doc.get("tls")) {
    const toml::table* tls = n->as_table();
    if (tls == nullptr) {
      return fail(path + ": tls must be a table ([tls])");
    }
    for (auto [key, out] :
         {std::pair<std::string_view, std::string*>{"cert_file", &c.tls.cert_file},
          {"key_file", &c.tls.key_file},
          {"client_ca_file", &c.tls.client_ca_file},
          {"min_version", &c.tls.min_version}}) {
      if (const toml::node* v = tls->get(key)) {
        if (!v->is_string()) {
          return fail(path + ": tls." + std::string(key) + " must be a string");
        }
        *out = *v->value<std::string>();
      }
    }
  }
  // Signed action records (issue 14).
  if (const toml::node* n = doc.get("signing")) {
    const toml::table* signing = n->as_table();
    if (signing == nullptr) {
      return fail(path + ": signing must be a table ([signing])");
    }
    if (const toml::node* v = signing->get("key_file")) {
      if (!v->is_string()) {
        return fail(path + ": signing.key_file must be a string");
      }
      c.signing.key_file = *v->value<std::string>();
    }
    if (const toml::node* v = signing->get("trusted_keys")) {
      const toml::array* paths = v->as_array();
      if (paths == nullptr ||
          (!paths->empty() && !paths->is_homogeneous(toml::node_type::string))) {
        return fail(path + ": signing.trusted_keys must be a list of paths (strings)");
      }
      for (const toml::node& key_path : *paths) {
        c.signing.trusted_keys.push_back(*key_path.value<std::string>());
      }
    }
  }
  // Cluster mode (issue 15).
  if (const toml::node* n = doc.get("cluster")) {
    const toml::table* cluster = n->as_table();
    if (cluster == nullptr) {
      return fail(path + ": cluster must be a table ([cluster])");
    }
    if (auto v = (*cluster)["enabled"].value<bool>()) {
      c.cluster.enabled = *v;
    }
    if (const toml::node* v = cluster->get("node_id")) {
      if (!v->is_string()) {
        return fail(path + ": cluster.node_id must be a string");
      }
      c.cluster.node_id = *v->value<std::string>();
    }
    for (auto [key, out] : {std::pair<std::string_view, std::chrono::milliseconds*>{
                                "heartbeat_ms", &c.cluster.heartbeat},
                            {"visibility_timeout_ms", &c.cluster.visibility_timeout}}) {
      if (auto v = (*cluster)[key].value<std::int64_t>()) {
        *out = std::chrono::milliseconds(std::max<std::int64_t>(1, *v));
      }
    }
  }
  // The RESP listener (issue 21; resp_server.h).
  if (const toml::node* n = doc.get("resp")) {
    const toml::table* resp = n->as_table();
    if (resp == nullptr) {
      return fail(path + ": resp must be a table ([resp])");
    }
    for (auto [key, out] : {std::pair<std::string_view, std::string*>{"listen", &c.resp.listen},
                            {"namespace", &c.resp.ns}}) {
      if (const toml::node* v = resp->get(key)) {
        if (!v->is_string()) {
          return fail(path + ": resp." + std::string(key) + " must be a string");
        }
        *out = *v->value<std::string>();
      }
    }
  }
  // Tokens (tokens.h): this file's [[tokens]] (plaintext only when the file
  // is private), then token_file's; every one checked at start-up.
  {
    auto is_private = file_is_private(path);
    auto tokens = tokens_from_toml(doc, path, is_private.value_or(false), c.tokens.size());
    if (!tokens) {
      return tl::unexpected(tokens.error());
    }
    c.tokens.insert(c.tokens.end(), tokens->begin(), tokens->end());
    if (const toml::node* n = doc.get("token_file")) {
      if (!n->is_string()) {
        return fail(path + ": token_file must be a string");
      }
      auto more = load_token_file(*n->value<std::string>(), c.tokens.size());
      if (!more) {
        return tl::unexpected(more.error());
      }
      c.tokens.insert(c.tokens.end(), more->begin(), more->end());
    }
    if (auto unique = check_unique_tokens(c.tokens); !unique) {
      return fail(path + ": " + unique.error());
    }
  }
  return c;
}

std::string usage() {
  return R"(kcached: the kcache daemon (HTTP/1.1 over TCP and a Unix socket)

usage: kcached [--config FILE] [options]
  --config FILE          TOML configuration (options below override it)
  --listen HOST:PORT     TCP address (default 127.0.0.1:7070; port 0 picks one; "" disables)
  --unix-socket PATH     also serve on a Unix socket
  --unix-socket-mode MODE   its permission bits, octal, e.g. 0660 (default: the umask's)
  --unix-socket-group NAME  its group (default: kcached's own)
  --data-dir DIR         embedded RocksDB store (default /var/lib/kcache)
  --disk-capacity SIZE   bound of the RocksDB store (default 10GiB)
  --memory-capacity SIZE in-memory tier (default 256MiB)
  --redis-url URL        shared Redis tier, e.g. redis://host:6379?namespace=kcache
  --store URL            a storage tier, fastest first (repeat it); replaces the three
                         options above, e.g. --store memory://?capacity=1GiB
                         --store rocksdb:///var/lib/kcache/db --store redis://host:6379
  --threads N            I/O threads (default: one per core)
  --max-body-bytes SIZE  largest request body (default 1GiB)
  --max-connections N    concurrent connections (default 1024)
  --max-connections-per-peer N  concurrent connections from one address (default 128; 0: no cap)
  --header-timeout-s N   a new connection must send its request head within this (default 10)
  --idle-timeout-s N     a keep-alive connection may wait this long between requests (default 60)
  --stall-timeout-s N    a body read or response write without progress this long ends the
                         connection (default 30)
  --body-memory SIZE     request bodies held in memory across connections (default 1GiB;
                         over it: 503 with Retry-After)
  --send-memory SIZE     responses being written across connections (default 1GiB; over it: 503)
  --send-memory-per-peer SIZE  of that, what one remote address may hold (default: a quarter)
  --spool-threshold SIZE uploads (/v1/cas, /v1/artifacts) over this go to a file in data_dir/spool,
                         not held in memory (default 4MiB)
  --spool-disk SIZE      spooled upload bytes on disk across connections (default 4GiB; over it:
                         503 with Retry-After)
  --log-level LEVEL      trace, debug, info, warn, error
  --port-file PATH       write the bound TCP port here once listening
  --worker-binary PATH   the kcache-worker that compiles jobs (default: found next to kcached)
  --workers N            concurrent compile workers (default 2; 0: no compiling)
  --queue-capacity N     queued jobs before submissions are answered "busy" (default 1024)
  --negative-ttl-s N     how long a failed compile is remembered (default 60)
  --compile-timeout-s N  wall-clock limit of one compile (default 300)
  --worker-memory SIZE   address-space limit of one worker (default 8GiB, or the host's memory
                         / workers where that is less; 0: none)
  --tuning-class NAME    the hardware this node benchmarks autotune variants on (default: detected)
  --max-spec-bytes SIZE  largest spec (source + headers) a submission may carry (default 16MiB)
  --max-jobs-per-submitter N  queued or running jobs per token, or per client without tokens
                         (default 256; 0: no cap)
  --force-worker-memory  start even when workers x --worker-memory exceeds the host's memory
  --tls-cert PATH        serve TLS on the TCP listener with this certificate chain (PEM)
  --tls-key PATH         its private key (PEM); SIGHUP reloads both
  --tls-client-ca PATH   require client certificates signed by this CA (mTLS)
  --allow-plain-http     allow a plain TCP listener on a non-loopback address with tokens
  --signing-key PATH     Ed25519 key that signs stored records (default DATA_DIR/signing.pem,
                         generated on first start)
  --trusted-keys PATH    public keys (a PEM file or a directory of them) whose records a shared
                         tier may serve; repeat it; replaces [signing] trusted_keys
  --print-public-key     print this node's public key (PEM) for other nodes' trusted_keys, and exit
  --cluster              cluster mode: compile jobs queue on the Redis of --redis-url, shared by
                         every node ([cluster] enabled)
  --node-id ID           this node's name in the cluster (default HOSTNAME:PORT)
  --resp-listen HOST:PORT  a Redis-protocol (RESP2) listener, plain TCP ([resp] listen; off)
  --resp-namespace NS    the namespace of keys set over RESP (default resp)
  --cluster-heartbeat-ms N           a running job's claim is renewed this often (default 2000)
  --cluster-visibility-timeout-ms N  a claim not renewed this long is reclaimed (default 30000)
)";
}

tl::expected<ServiceConfig, std::string> parse_command_line(int argc, const char* const* argv) {
  ServiceConfig c;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string_view(argv[i]) == "--config") {
      auto loaded = load_config_file(argv[i + 1], c);
      if (!loaded) {
        return loaded;
      }
      c = std::move(*loaded);
    }
  }
  bool store_flags = false;
  bool trusted_flags = false;
  std::string_view tier_flag; // the last of --memory-capacity, --disk-capacity, --redis-url
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      return fail(usage());
    }
    if (flag == "--force-worker-memory") { // the flags without a value
      c.jobs.force_worker_memory = true;
      continue;
    }
    if (flag == "--allow-plain-http") {
      c.allow_plain_http = true;
      continue;
    }
    if (flag == "--print-public-key") {
      c.signing.print_public_key = true;
      continue;
    }
    if (flag == "--cluster") {
      c.cluster.enabled = true;
      continue;
    }
    if (i + 1 >= argc) {
      return fail("option " + std::string(flag) + " needs a value\n" + usage());
    }
    const std::string value = argv[++i];
    if (flag == "--config") {
      continue;
    } else if (flag == "--listen") {
      c.listen = value;
    } else if (flag == "--unix-socket") {
      c.unix_socket = value;
    } else if (flag == "--unix-socket-mode") {
      auto mode = parse_socket_mode(value);
      if (!mode) {
        return fail("--unix-socket-mode must be octal, such as 0660");
      }
      c.unix_socket_mode = *mode;
    } else if (flag == "--unix-socket-group") {
      c.unix_socket_group = value;
    } else if (flag == "--data-dir") {
      c.data_dir = value;
    } else if (flag == "--redis-url") {
      c.redis_url = value;
      tier_flag = flag;
    } else if (flag == "--store") {
      if (!store_flags) {
        c.stores.clear(); // the command line's list replaces the file's
        store_flags = true;
      }
      c.stores.push_back(value);
    } else if (flag == "--log-level") {
      c.log_level = value;
    } else if (flag == "--port-file") {
      c.port_file = value;
    } else if (flag == "--disk-capacity" || flag == "--memory-capacity" ||
               flag == "--max-body-bytes" || flag == "--worker-memory" || flag == "--body-memory" ||
               flag == "--send-memory" || flag == "--send-memory-per-peer" ||
               flag == "--max-spec-bytes" || flag == "--spool-threshold" ||
               flag == "--spool-disk") {
      auto size = storage::parse_size(value);
      if (!size) {
        return fail(std::string(flag) + ": " + size.error().message);
      }
      if (flag == "--disk-capacity" || flag == "--memory-capacity") {
        tier_flag = flag;
      }
      if (flag == "--worker-memory") {
        c.jobs.memory_configured = true;
      }
      (flag == "--disk-capacity"          ? c.disk_capacity
       : flag == "--memory-capacity"      ? c.memory_capacity
       : flag == "--worker-memory"        ? c.jobs.memory_bytes
       : flag == "--body-memory"          ? c.limits.body_memory_bytes
       : flag == "--send-memory"          ? c.limits.send_memory_bytes
       : flag == "--send-memory-per-peer" ? c.limits.send_memory_per_peer_bytes
       : flag == "--max-spec-bytes"       ? c.jobs.max_spec_bytes
       : flag == "--spool-threshold"      ? c.limits.spool_threshold_bytes
       : flag == "--spool-disk"           ? c.limits.spool_disk_bytes
                                          : c.limits.max_body_bytes) = *size;
    } else if (flag == "--signing-key") {
      c.signing.key_file = value;
    } else if (flag == "--trusted-keys") {
      if (!trusted_flags) {
        c.signing.trusted_keys.clear(); // flags replace the file's list
        trusted_flags = true;
      }
      c.signing.trusted_keys.push_back(value);
    } else if (flag == "--tls-cert") {
      c.tls.cert_file = value;
    } else if (flag == "--tls-key") {
      c.tls.key_file = value;
    } else if (flag == "--tls-client-ca") {
      c.tls.client_ca_file = value;
    } else if (flag == "--worker-binary") {
      c.jobs.worker_binary = value;
    } else if (flag == "--tuning-class") {
      c.jobs.tuning_class = value;
    } else if (flag == "--workers" || flag == "--queue-capacity" || flag == "--negative-ttl-s" ||
               flag == "--compile-timeout-s" || flag == "--max-jobs-per-submitter") {
      auto n = parse_uint(value, flag);
      if (!n) {
        return tl::unexpected(n.error());
      }
      if (flag == "--workers") {
        c.jobs.workers = static_cast<unsigned>(*n);
      } else if (flag == "--queue-capacity") {
        c.jobs.queue_capacity = static_cast<std::size_t>(*n);
      } else if (flag == "--negative-ttl-s") {
        c.jobs.negative_ttl = std::chrono::seconds(*n);
      } else if (flag == "--max-jobs-per-submitter") {
        c.jobs.max_jobs_per_submitter = static_cast<std::size_t>(*n);
      } else {
        c.jobs.wall_clock = std::chrono::seconds(std::max<std::uint64_t>(1, *n));
      }
    } else if (flag == "--threads" || flag == "--max-connections" ||
               flag == "--max-connections-per-peer") {
      auto n = parse_uint(value, flag);
      if (!n) {
        return tl::unexpected(n.error());
      }
      if (flag == "--threads") {
        c.threads = static_cast<unsigned>(*n);
      } else if (flag == "--max-connections") {
        c.limits.max_connections = std::max<std::size_t>(1, *n);
      } else {
        c.limits.max_connections_per_peer = static_cast<std::size_t>(*n);
      }
    } else if (flag == "--resp-listen") {
      c.resp.listen = value;
    } else if (flag == "--resp-namespace") {
      c.resp.ns = value;
    } else if (flag == "--node-id") {
      c.cluster.node_id = value;
    } else if (flag == "--cluster-heartbeat-ms" || flag == "--cluster-visibility-timeout-ms") {
      auto n = parse_uint(value, flag);
      if (!n) {
        return tl::unexpected(n.error());
      }
      (flag == "--cluster-heartbeat-ms" ? c.cluster.heartbeat : c.cluster.visibility_timeout) =
          std::chrono::milliseconds(std::max<std::uint64_t>(1, *n));
    } else if (flag == "--header-timeout-s" || flag == "--idle-timeout-s" ||
               flag == "--stall-timeout-s") {
      auto n = parse_uint(value, flag);
      if (!n) {
        return tl::unexpected(n.error());
      }
      (flag == "--header-timeout-s" ? c.limits.header_timeout
       : flag == "--idle-timeout-s" ? c.limits.idle_timeout
                                    : c.limits.stall_timeout) =
          std::chrono::seconds(std::max<std::uint64_t>(1, *n));
    } else {
      return fail("unknown option " + std::string(flag) + "\n" + usage());
    }
  }
  if (store_flags && !tier_flag.empty()) {
    return fail("--store replaces " + std::string(tier_flag) + "; give one or the other");
  }
  if (c.cluster.enabled && c.redis_url.empty()) {
    return fail("cluster mode (--cluster, [cluster] enabled) needs redis_url (--redis-url): the "
                "job queue lives on that Redis");
  }
  const std::uint64_t host_memory = host_memory_bytes();
  fit_default_worker_memory(c.jobs, host_memory);
  if (auto ok = check_worker_memory(c.jobs, host_memory); !ok) {
    return tl::unexpected(ok.error());
  }
  if (auto ok = check_transport_security(c); !ok) {
    return tl::unexpected(ok.error());
  }
  return c;
}

tl::expected<void, std::string> check_transport_security(const ServiceConfig& config) {
  if (config.tls.enabled() && (config.tls.cert_file.empty() || config.tls.key_file.empty())) {
    return fail("[tls] needs both cert_file and key_file (--tls-cert, --tls-key)");
  }
  if (config.tls.min_version != "1.2" && config.tls.min_version != "1.3") {
    return fail("tls.min_version must be \"1.2\" or \"1.3\", got \"" + config.tls.min_version +
                "\"");
  }
  if (config.listen.empty() || config.tls.enabled() || config.tokens.empty() ||
      config.allow_plain_http) {
    return {};
  }
  std::string host = config.listen.substr(0, config.listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host, ec);
  if (!ec && address.is_loopback()) {
    return {};
  }
  return fail("listen = \"" + config.listen +
              "\" serves plain HTTP beyond this host while tokens are configured: bearer "
              "tokens and artifacts would cross the network in clear text. Configure [tls] "
              "cert_file and key_file (--tls-cert, --tls-key), listen on 127.0.0.1, or set "
              "allow_plain_http = true (--allow-plain-http) behind a TLS proxy");
}

std::uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  std::uint64_t bytes = pages > 0 && page_size > 0 ? static_cast<std::uint64_t>(pages) *
                                                         static_cast<std::uint64_t>(page_size)
                                                   : 0;
  // In a container the cgroup's limit is what the OOM killer enforces.
  if (std::ifstream in("/sys/fs/cgroup/memory.max"); in) {
    std::string text;
    in >> text;
    std::uint64_t limit = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
    if (ec == std::errc() && ptr == text.data() + text.size() && limit > 0 &&
        (bytes == 0 || limit < bytes)) {
      bytes = limit; // "max" means no limit and does not parse
    }
  }
  return bytes;
}

void fit_default_worker_memory(JobsConfig& jobs, std::uint64_t host_memory) {
  if (!jobs.memory_configured && jobs.workers > 0 && host_memory > 0 &&
      jobs.memory_bytes > host_memory / jobs.workers) {
    jobs.memory_bytes = host_memory / jobs.workers;
  }
}

tl::expected<void, std::string> check_worker_memory(const JobsConfig& jobs,
                                                    std::uint64_t host_memory) {
  // 0 workers compile nothing; a memory limit of 0 is unlimited (sanitizer
  // builds), which no sum can bound; an unknown host memory cannot be compared.
  if (jobs.force_worker_memory || jobs.workers == 0 || jobs.memory_bytes == 0 || host_memory == 0) {
    return {};
  }
  const auto gib = [](std::uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1ULL << 30));
    return std::string(text);
  };
  const std::uint64_t sum = jobs.memory_bytes * jobs.workers;
  if (sum / jobs.workers != jobs.memory_bytes || sum > host_memory) {
    return fail(std::to_string(jobs.workers) + " workers x " + gib(jobs.memory_bytes) +
                " worker memory = " + gib(sum) + " exceeds this host's memory of " +
                gib(host_memory) +
                ": lower jobs.workers or jobs.memory (--workers, --worker-memory), or start "
                "anyway with --force-worker-memory (force_worker_memory = true)");
  }
  return {};
}

std::vector<std::string> store_urls(const ServiceConfig& config) {
  if (!config.stores.empty()) {
    return config.stores;
  }
  std::vector<std::string> urls = {"memory://?capacity=" + std::to_string(config.memory_capacity),
                                   "rocksdb://" +
                                       std::filesystem::absolute(config.data_dir).string() +
                                       "?capacity=" + std::to_string(config.disk_capacity)};
  if (!config.redis_url.empty()) {
    urls.push_back(config.redis_url);
  }
  return urls;
}

std::string find_worker_binary() {
  if (const char* env = std::getenv("KCACHE_WORKER_BINARY"); env != nullptr && *env != '\0') {
    return env;
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    return {};
  }
  for (const std::filesystem::path& candidate :
       {self.parent_path() / "kcache-worker",
        self.parent_path().parent_path() / "compiler" / "kcache-worker"}) {
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate.string();
    }
  }
  return {};
}

} // namespace kcache::service
