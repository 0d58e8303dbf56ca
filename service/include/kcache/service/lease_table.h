#pragma once
// Single-flight for producers outside the service (a PyTorch rank that
// compiles locally): the first to ask for a key gets a lease and compiles; the
// others wait in get for its put. A lease expires unless its holder renews it,
// so a dead holder blocks nobody for longer than its TTL. Node-local: the
// cluster-wide form (Redis SET NX PX) belongs to DESIGN's cluster mode.

#include <kcache/service/deadline_waiters.h>

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

struct LeaseGrant {
  bool granted = false;
  std::string token;  // for renew and release; set when granted
  std::string holder; // who holds it (when not granted: someone else)
  std::chrono::milliseconds expires_in{0};
};

class LeaseTable {
public:
  using Clock = std::chrono::steady_clock;
  LeaseTable();
  ~LeaseTable();
  LeaseTable(const LeaseTable&) = delete;
  LeaseTable& operator=(const LeaseTable&) = delete;

  LeaseGrant acquire(const std::string& key, const std::string& holder,
                     std::chrono::milliseconds ttl);
  bool renew(const std::string& key, const std::string& token, std::chrono::milliseconds ttl);
  bool release(const std::string& key, const std::string& token);
  bool held(const std::string& key);

  // `done` runs once, on some thread: when the key is put, its lease ends
  // (released or expired), or the deadline passes. Runs at once if no lease
  // is held on the key.
  void wait_for_put(const std::string& key, Clock::time_point deadline, std::function<void()> done);
  // A put of `key` happened: its waiters wake and its lease ends.
  void notify_put(const std::string& key);
  // Wakes every waiter (shutdown).
  void release_all_waiters();

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
