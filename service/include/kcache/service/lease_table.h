#pragma once
// Single-flight for producers outside the service (a PyTorch rank that
// compiles locally): the first to ask for a key gets a lease and compiles; the
// others wait in get for its put. A lease expires unless its holder renews it,
// so a dead holder blocks nobody for longer than its TTL.
//
// Two implementations: LocalLeaseTable (this process; a single kcached) and
// RedisLeaseTable (cluster mode: leases in Redis, so ranks talking to
// different kcached single-flight too).

#include <chrono>
#include <functional>
#include <optional>
#include <string>

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
  LeaseTable() = default;
  virtual ~LeaseTable() = default;
  LeaseTable(const LeaseTable&) = delete;
  LeaseTable& operator=(const LeaseTable&) = delete;

  virtual LeaseGrant acquire(const std::string& key, const std::string& holder,
                             std::chrono::milliseconds ttl) = 0;
  // False unless `token` holds a live lease on `key`.
  virtual bool renew(const std::string& key, const std::string& token,
                     std::chrono::milliseconds ttl) = 0;
  virtual bool release(const std::string& key, const std::string& token) = 0;
  virtual bool held(const std::string& key) = 0;
  // Live leases, for /metrics; nullopt where counting is not cheap (Redis).
  virtual std::optional<std::size_t> held_count() { return std::nullopt; }

  // `done` runs once, on some thread: when the key is put, its lease ends
  // (released or expired), or the deadline passes. Runs at once if no lease
  // is held on the key.
  virtual void wait_for_put(const std::string& key, Clock::time_point deadline,
                            std::function<void()> done) = 0;
  // A put of `key` happened: its waiters wake and its lease ends.
  virtual void notify_put(const std::string& key) = 0;
  // Wakes every waiter (shutdown).
  virtual void release_all_waiters() = 0;
};

} // namespace kcache::service
