#include <kcache/service/job.h>
#include <kcache/service/lease_table_local.h>

#include <algorithm>

namespace kcache::service {

LocalLeaseTable::LocalLeaseTable()
    : housekeeper_([this](const std::stop_token& stop) { housekeeping_loop(stop); }) {}

LocalLeaseTable::~LocalLeaseTable() {
  housekeeper_.request_stop();
  cv_.notify_all();
  if (housekeeper_.joinable()) {
    housekeeper_.join();
  }
  release_all_waiters();
}

LeaseGrant LocalLeaseTable::acquire(const std::string& key, const std::string& holder,
                                    std::chrono::milliseconds ttl) {
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  if (const auto it = leases_.find(key); it != leases_.end() && it->second.expires > now) {
    return {false, "", it->second.holder,
            std::chrono::duration_cast<std::chrono::milliseconds>(it->second.expires - now)};
  }
  Lease lease{new_job_id(), holder, now + ttl};
  leases_[key] = lease;
  ++generation_;
  cv_.notify_all();
  return {true, lease.token, holder, ttl};
}

bool LocalLeaseTable::renew(const std::string& key, const std::string& token,
                            std::chrono::milliseconds ttl) {
  std::lock_guard lock(mu_);
  const auto it = leases_.find(key);
  if (it == leases_.end() || it->second.token != token || it->second.expires <= Clock::now()) {
    return false;
  }
  it->second.expires = Clock::now() + ttl;
  return true;
}

bool LocalLeaseTable::release(const std::string& key, const std::string& token) {
  Callbacks wake;
  {
    std::lock_guard lock(mu_);
    const auto it = leases_.find(key);
    if (it == leases_.end() || it->second.token != token) {
      return false;
    }
    end_lease_locked(key, wake);
  }
  for (auto& done : wake) {
    done();
  }
  return true;
}

bool LocalLeaseTable::held(const std::string& key) {
  std::lock_guard lock(mu_);
  const auto it = leases_.find(key);
  return it != leases_.end() && it->second.expires > Clock::now();
}

std::optional<std::size_t> LocalLeaseTable::held_count() {
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  return static_cast<std::size_t>(std::count_if(
      leases_.begin(), leases_.end(), [now](const auto& l) { return l.second.expires > now; }));
}

void LocalLeaseTable::wait_for_put(const std::string& key, Clock::time_point deadline,
                                   std::function<void()> done) {
  {
    std::lock_guard lock(mu_);
    const auto it = leases_.find(key);
    if (it != leases_.end() && it->second.expires > Clock::now() && deadline > Clock::now()) {
      waiters_.add(key, deadline, std::move(done));
      ++generation_;
      cv_.notify_all();
      return;
    }
  }
  done();
}

void LocalLeaseTable::notify_put(const std::string& key) {
  Callbacks wake;
  {
    std::lock_guard lock(mu_);
    end_lease_locked(key, wake);
  }
  for (auto& done : wake) {
    done();
  }
}

void LocalLeaseTable::release_all_waiters() {
  Callbacks wake;
  {
    std::lock_guard lock(mu_);
    waiters_.take_all([&](const std::string& /*key*/, std::function<void()>&& done) {
      wake.push_back(std::move(done));
    });
  }
  for (auto& done : wake) {
    done();
  }
}

void LocalLeaseTable::end_lease_locked(const std::string& key, Callbacks& wake) {
  leases_.erase(key);
  waiters_.take(key, [&](const std::string& /*key*/, std::function<void()>&& done) {
    wake.push_back(std::move(done));
  });
}

void LocalLeaseTable::housekeeping_loop(const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    auto next = waiters_.earliest(Clock::now() + std::chrono::seconds(1));
    for (const auto& [key, lease] : leases_) {
      next = std::min(next, lease.expires);
    }
    const std::uint64_t generation = generation_;
    cv_.wait_until(lock, stop, next, [&] { return generation_ != generation; });
    const auto now = Clock::now();
    Callbacks wake;
    // Expired leases end (their holder died or stalled): waiters go on to miss.
    for (auto it = leases_.begin(); it != leases_.end();) {
      const std::string key = it->first;
      ++it;
      if (leases_.at(key).expires <= now) {
        end_lease_locked(key, wake);
      }
    }
    waiters_.take_expired(now, [&](const std::string& /*key*/, std::function<void()>&& done) {
      wake.push_back(std::move(done));
    });
    if (!wake.empty()) {
      lock.unlock();
      for (auto& done : wake) {
        done();
      }
      lock.lock();
    }
  }
}

} // namespace kcache::service
