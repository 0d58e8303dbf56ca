#pragma once
// One Redis client for everything kcache keeps in Redis (the store tier, the
// cluster job queue, leases, nodes): a connection pool and a circuit breaker
// per Redis node, AUTH and connect/op deadlines. Against a Redis Cluster it
// routes each command by its routing key's hash slot (CRC16, hash tags),
// follows MOVED (slot map refreshed, retried) and ASK (ASKING, retried once).

#include <kcache/protocol/circuit_breaker.h>
#include <kcache/storage/redis_options.h>
#include <kcache/storage/store.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kcache::storage {

// A reply, owned and detached from hiredis.
struct RedisReply {
  enum class Type : std::uint8_t { kNil, kInteger, kString, kStatus, kError, kArray };
  Type type = Type::kNil;
  long long integer = 0;            // NOLINT(google-runtime-int): hiredis' own type
  std::string str;                  // kString, kStatus, kError
  std::vector<RedisReply> elements; // kArray
  bool is_nil() const { return type == Type::kNil; }
  bool is_error() const { return type == Type::kError; }
};
using RedisCommand = std::vector<std::string>;

class RedisClient {
public:
  // Standalone Redis or Redis Cluster (options.cluster, set by parse_redis_url from `?cluster=1`,
  // or found by the client when a standalone-configured server answers MOVED). Does not connect.
  static std::unique_ptr<RedisClient> create(RedisOptions options);
  virtual ~RedisClient();
  RedisClient() = default;
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Every call names its routing key explicitly (the key whose hash slot picks the node; hash tags
  // `{...}` honoured). In a pipeline every command's key must map to the same slot (callers use
  // hash tags). An error reply from Redis (e.g. WRONGTYPE, NOSCRIPT) is a RedisReply of kError, NOT
  // a StoreError; StoreError is reserved for "could not ask" (down, timeout, breaker open =>
  // rejected=true, AUTH refused).
  virtual Result<RedisReply> run(std::string_view routing_key, RedisCommand command) = 0;
  virtual Result<std::vector<RedisReply>> pipeline(std::string_view routing_key,
                                                   std::vector<RedisCommand> commands) = 0;
  // For blocking commands (XREADGROUP ... BLOCK ms, BLPOP): runs on a connection whose read
  // deadline is `timeout` (+ the op timeout), so a long block is not a failure and does not trip
  // the breaker.
  virtual Result<RedisReply> run_blocking(std::string_view routing_key, RedisCommand command,
                                          std::chrono::milliseconds timeout) = 0;
  // EVALSHA with the script's SHA1, falling back to EVAL once on NOSCRIPT (scripts are cached per
  // node).
  virtual Result<RedisReply> eval(std::string_view script, std::vector<std::string> keys,
                                  std::vector<std::string> args) = 0; // routes by keys[0]
  // "<ns>:" + suffix. All kcache keys live under the namespace.
  virtual std::string key(std::string_view suffix) const = 0;
  // Over the nodes' breakers: closed while every node can be asked, open when none can, half-open
  // in between (a cluster with some master's circuit open or probing).
  virtual protocol::CircuitBreaker::State breaker_state() const = 0;
  // Best-effort PUBLISH (cluster: any node; Redis Cluster broadcasts). Failures are ignored by
  // callers.
  virtual Result<void> publish(std::string_view channel, std::string_view message) = 0;

  // Beyond the contract, for RedisStore's batch reads and listing over a
  // cluster. True once the client routes by hash slot.
  virtual bool is_cluster() const = 0;
  // Each command routed by its own key; the commands for one node share one
  // pipeline (one round trip per node). Replies in the commands' order.
  virtual Result<std::vector<RedisReply>>
  run_many(std::vector<std::pair<std::string, RedisCommand>> routed) = 0;
  // The masters as "host:port" (standalone: the one server), for commands
  // over the whole keyspace (SCAN), and one command on one of them.
  virtual Result<std::vector<std::string>> masters() = 0;
  virtual Result<RedisReply> run_on(std::string_view node, RedisCommand command) = 0;
};

// One unit of work on one thread (in kcached: one request) pays a hung Redis
// node's op timeout once: after a call to a node failed without an answer
// (timeout, refused, reset), the scope's later calls to that node fail at
// once, as `rejected`, while its calls to other nodes go on. A put writes its
// blob, its record and the namespace's index; a request on an I/O thread
// that waited out each in turn held up every connection of that thread for
// up to three timeouts, where the breaker (3 failures) had not opened yet.
// Scopes nest (the inner one starts clean); outside any, calls are not
// affected. Thread-local by design: it follows the request's thread, and no
// interface between the request and the Redis call needs to carry it.
class RedisCallScope {
public:
  RedisCallScope();
  ~RedisCallScope();
  RedisCallScope(const RedisCallScope&) = delete;
  RedisCallScope& operator=(const RedisCallScope&) = delete;
  RedisCallScope(RedisCallScope&&) = delete;
  RedisCallScope& operator=(RedisCallScope&&) = delete;

  // For RedisClient: whether `node` failed earlier in the current scope, and
  // that it failed now (no-ops outside a scope).
  static bool failed_before(std::string_view node);
  static void note_failure(std::string_view node);

private:
  RedisCallScope* outer_;
  std::vector<std::string> failed_nodes_; // a handful at most: a request touches few nodes
};

// A subscription on its own connection and thread; reconnects with back-off while Redis is down
// (then `on_message` is simply not called: subscribers must also poll). Destroying it unsubscribes
// and joins.
class RedisSubscription {
public:
  static std::unique_ptr<RedisSubscription>
  start(RedisOptions options, std::vector<std::string> channels,
        std::function<void(std::string_view channel, std::string_view message)> on_message);
  virtual ~RedisSubscription();
  RedisSubscription() = default;
  RedisSubscription(const RedisSubscription&) = delete;
  RedisSubscription& operator=(const RedisSubscription&) = delete;
};

// The Redis Cluster hash slot (0..16383) of a key: CRC16-XMODEM of the key, or
// of its first non-empty `{...}` hash tag, modulo 16384.
std::uint16_t redis_hash_slot(std::string_view key);
// CRC16-XMODEM, the checksum the hash slot is taken from.
std::uint16_t redis_crc16(std::string_view data);

} // namespace kcache::storage
