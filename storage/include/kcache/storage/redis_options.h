#pragma once
// How to reach Redis (standalone or Redis Cluster): parsed from a redis:// URL,
// shared by RedisStore, RedisClient and RedisSubscription.

#include <kcache/protocol/circuit_breaker.h>
#include <kcache/storage/store.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace kcache::storage {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string ns = "kcache";
  std::string user;     // an ACL user (Redis 6+); empty: the default user
  std::string password; // sent with AUTH after every connect; never logged
  int db = 0;
  std::chrono::milliseconds connect_timeout{200};
  std::chrono::milliseconds op_timeout{500};
  std::optional<std::chrono::seconds> ttl;
  std::size_t max_idle_connections = 16; // per Redis node
  protocol::CircuitBreakerOptions breaker;
  // Redis Cluster: route every command by its key's hash slot. Set by
  // `?cluster=1`; a client configured standalone also switches when the
  // server answers MOVED.
  bool cluster = false;
  // More cluster nodes to learn the slot map from ("host:port", from
  // `&seeds=h1:p1,h2:p2`), tried after host:port.
  std::vector<std::string> seeds;
};

class StoreUrl;
// redis://[[user]:password@]host[:port][/db]?namespace=kcache&connect_timeout_ms=200
//        &timeout_ms=500&ttl_s=604800&breaker_failures=3&breaker_open_ms=2000
//        &cluster=1&seeds=host:port,host:port
// user and password are percent-decoded (%40 for '@', %3A for ':'); a
// password alone is ":password@" (or "password@").
Result<RedisOptions> parse_redis_url(const StoreUrl& url);

// redis://user:***@host:port/db: what logs and errors may show of the URL.
std::string redacted_url(const RedisOptions& options);

} // namespace kcache::storage
