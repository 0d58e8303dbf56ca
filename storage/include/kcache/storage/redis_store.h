#pragma once
// The shared cluster tier on Redis (standalone or Redis Cluster), through
// RedisClient: every call has a connect deadline and an operation deadline;
// consecutive failures open a circuit breaker so a dead Redis costs callers
// nothing. Keys are namespaced "<ns>:<ac|cas>:<key>". Values expire by TTL if
// one is set, and otherwise by Redis' own maxmemory policy (allkeys-lru is the
// intended setting).

#include <kcache/protocol/circuit_breaker.h>
#include <kcache/storage/redis_client.h>
#include <kcache/storage/redis_options.h>
#include <kcache/storage/store.h>

#include <memory>
#include <string>
#include <vector>

namespace kcache::storage {
namespace detail {
class RedisOrderIndex;
}

class RedisStore final : public Store {
public:
  // Does not connect: a Redis that is down at start-up is a runtime miss.
  explicit RedisStore(RedisOptions options);
  ~RedisStore() override;

  std::string name() const override { return "redis"; }
  GetResult get(Area area, std::string_view key) override;
  GetResult peek(Area area, std::string_view key) override; // a get that records no read
  Result<void> put(Area area, std::string_view key, std::string_view value) override;
  Result<bool> contains(Area area, std::string_view key) override;
  Result<void> remove(Area area, std::string_view key) override;
  // Listings read sorted sets kept beside the values (redis_order_index.h):
  // a page costs what it returns, as in the ordered tiers.
  Result<std::vector<ObjectInfo>> list(const ListOptions& options) override;
  Result<TopList> list_top(const TopListOptions& options) override;
  Result<std::vector<std::optional<ObjectInfo>>>
  describe(std::span<const ListCursor> entries) override;
  std::vector<GetResult> get_many(Area area, std::span<const std::string> keys) override;

  protocol::CircuitBreaker::State breaker_state() const { return client_->breaker_state(); }
  std::string redis_key(Area area, std::string_view key) const;

private:
  // One round trip to the key's node; an error reply is a kIo error.
  Result<RedisReply> run(std::string_view key, RedisCommand command);

  const RedisOptions options_;
  std::unique_ptr<RedisClient> client_;
  std::unique_ptr<detail::RedisOrderIndex> index_;
};

} // namespace kcache::storage
