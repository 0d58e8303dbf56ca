#pragma once
// The shared cluster tier on Redis, through hiredis. Every call has a connect
// deadline and an operation deadline; consecutive failures open a circuit
// breaker so a dead Redis costs callers nothing. Keys are namespaced
// "<ns>:<ac|cas>:<key>". Values expire by TTL if one is set, and otherwise by
// Redis' own maxmemory policy (allkeys-lru is the intended setting).

#include <kcache/protocol/circuit_breaker.h>
#include <kcache/protocol/connection_pool.h>
#include <kcache/storage/redis_options.h>
#include <kcache/storage/store.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace kcache::storage {

class RedisStore final : public Store {
public:
  // Does not connect: a Redis that is down at start-up is a runtime miss.
  explicit RedisStore(RedisOptions options);
  ~RedisStore() override;

  std::string name() const override { return "redis"; }
  GetResult get(Area area, std::string_view key) override;
  Result<void> put(Area area, std::string_view key, std::string_view value) override;
  Result<bool> contains(Area area, std::string_view key) override;
  Result<void> remove(Area area, std::string_view key) override;
  Result<std::vector<ObjectInfo>> list(const ListOptions& options) override;
  std::vector<GetResult> get_many(Area area, std::span<const std::string> keys) override;

  protocol::CircuitBreaker::State breaker_state() const { return breaker_.state(); }
  std::string redis_key(Area area, std::string_view key) const;

  struct Connection; // a hiredis context, defined in the .cpp
  struct Reply;      // a hiredis reply, defined in the .cpp
  using Command = std::vector<std::string>;

private:
  Result<std::vector<std::unique_ptr<Reply>>> run(const std::vector<Command>& pipeline);
  Result<std::unique_ptr<Reply>> run_one(Command command);
  Result<std::unique_ptr<Connection>> checkout();
  // Logs a refused AUTH or a missing one once per outage (not per request).
  void note_auth(bool failed, std::string_view why);

  const RedisOptions options_;
  std::atomic<bool> auth_failing_{false};
  protocol::CircuitBreaker breaker_;
  protocol::ConnectionPool<Connection> pool_;
};

} // namespace kcache::storage
