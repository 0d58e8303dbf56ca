#pragma once
// The node-local lease table: leases and the waits for a holder's put, in
// this process (lease_table.h says what a lease is). RedisLeaseTable keeps
// the cluster's leases in Redis and falls back to this one while Redis is down.

#include <kcache/service/deadline_waiters.h>
#include <kcache/service/lease_table.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kcache::service {

class LocalLeaseTable final : public LeaseTable {
public:
  LocalLeaseTable();
  ~LocalLeaseTable() override;
  LocalLeaseTable(const LocalLeaseTable&) = delete;
  LocalLeaseTable& operator=(const LocalLeaseTable&) = delete;

  LeaseGrant acquire(const std::string& key, const std::string& holder,
                     std::chrono::milliseconds ttl) override;
  bool renew(const std::string& key, const std::string& token,
             std::chrono::milliseconds ttl) override;
  bool release(const std::string& key, const std::string& token) override;
  bool held(const std::string& key) override;
  std::optional<std::size_t> held_count() override;
  void wait_for_put(const std::string& key, Clock::time_point deadline,
                    std::function<void()> done) override;
  void notify_put(const std::string& key) override;
  void release_all_waiters() override;

private:
  struct Lease {
    std::string token, holder;
    Clock::time_point expires;
  };
  using Callbacks = std::vector<std::function<void()>>;
  void end_lease_locked(const std::string& key, Callbacks& wake);
  void housekeeping_loop(const std::stop_token& stop);

  std::mutex mu_;
  std::condition_variable_any cv_;
  std::uint64_t generation_ = 0;
  std::map<std::string, Lease> leases_;
  DeadlineWaiters<std::function<void()>> waiters_; // key -> waits for its put
  std::jthread housekeeper_;                       // last: joins before the maps go
};

} // namespace kcache::service
