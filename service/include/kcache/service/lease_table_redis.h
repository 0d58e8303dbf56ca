#pragma once
// Cluster-wide leases (cluster mode): a lease is a Redis key
// "<ns>:lease:{<key>}" set with SET NX PX semantics by a Lua script that also
// hands out a fencing token, a per-key counter that only grows
// ("<ns>:lease-seq:{<key>}", same hash slot), so ranks asking different
// kcached nodes single-flight, and a stalled holder whose lease expired
// cannot renew or release its successor's. Renew and release are scripts that
// compare the token.
//
// Waiters (a get waiting for the holder's put) wait on the node they asked:
// a put on any node publishes "put ac <key>" on "<ns>:events", and the
// housekeeper also polls the leases being waited on (every poll_interval), so a
// lost message costs latency, never a hang past the lease's end.
//
// Fails open: while Redis cannot be asked, leases are granted by the local
// table (single-flight within this node only) and their tokens stay local.

#include <kcache/service/deadline_waiters.h>
#include <kcache/service/lease_table.h>
#include <kcache/service/lease_table_local.h>
#include <kcache/storage/redis_client.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace kcache::service {

struct RedisLeaseOptions {
  std::chrono::milliseconds poll_interval{250};
};

class RedisLeaseTable final : public LeaseTable {
public:
  // `redis` must outlive this table; `subscription_options` reach the same
  // Redis for the put events (empty host: no subscription, polling only).
  RedisLeaseTable(storage::RedisClient& redis, const storage::RedisOptions& subscription_options,
                  RedisLeaseOptions options = {});
  ~RedisLeaseTable() override;
  RedisLeaseTable(const RedisLeaseTable&) = delete;
  RedisLeaseTable& operator=(const RedisLeaseTable&) = delete;

  LeaseGrant acquire(const std::string& key, const std::string& holder,
                     std::chrono::milliseconds ttl) override;
  bool renew(const std::string& key, const std::string& token,
             std::chrono::milliseconds ttl) override;
  bool release(const std::string& key, const std::string& token) override;
  bool held(const std::string& key) override;
  void wait_for_put(const std::string& key, Clock::time_point deadline,
                    std::function<void()> done) override;
  void notify_put(const std::string& key) override;
  void release_all_waiters() override;

  // Tokens granted by Redis start with this; others are the local table's.
  static constexpr std::string_view kTokenPrefix = "r";

private:
  using Callbacks = std::vector<std::function<void()>>;
  std::string lease_key(const std::string& key) const;
  // Nullopt: Redis could not be asked.
  std::optional<bool> redis_held(const std::string& key);
  void wake(const std::string& key);
  void on_event(std::string_view message);
  void housekeeping_loop(const std::stop_token& stop);
  void end_leases(const std::vector<std::string>& keys);
  void note_outage(std::string_view what, const storage::StoreError& error);

  storage::RedisClient& redis_;
  const RedisLeaseOptions options_;
  LocalLeaseTable local_; // fail-open leases, and the waits on them
  std::atomic<bool> outage_logged_{false};

  std::mutex mu_;
  std::condition_variable_any cv_;
  std::uint64_t generation_ = 0;
  DeadlineWaiters<std::function<void()>> waiters_; // waits on Redis leases
  std::set<std::string> waited_keys_;
  // Puts whose Redis lease the housekeeper ends (and announces to the other
  // nodes): not inline, where a stalled Redis would hold the put's answer.
  std::vector<std::string> ends_;

  std::jthread housekeeper_;                           // joins before the waiters go
  std::unique_ptr<storage::RedisSubscription> events_; // first to go: no callback after
};

} // namespace kcache::service
