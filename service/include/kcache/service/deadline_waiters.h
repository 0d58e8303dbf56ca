#pragma once
// Callbacks that wait on a key until an event or their deadline: the
// long-polls of jobs (JobManager) and the waits for a lease holder's put
// (LeaseTable). Not thread-safe: its owner guards it with its own mutex, and
// runs the callbacks it takes out only after unlocking.

#include <algorithm>
#include <chrono>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kcache::service {

template <typename Callback> class DeadlineWaiters {
public:
  using Clock = std::chrono::steady_clock;

  void add(const std::string& key, Clock::time_point deadline, Callback done) {
    waiters_[key].push_back(Waiter{deadline, std::move(done)});
  }

  // fn(key, Callback&&) for every waiter of key, which are removed.
  template <typename Fn> void take(const std::string& key, Fn&& fn) {
    const auto it = waiters_.find(key);
    if (it == waiters_.end()) {
      return;
    }
    for (Waiter& w : it->second) {
      fn(it->first, std::move(w.done));
    }
    waiters_.erase(it);
  }

  // fn(key, Callback&&) for every waiter of a key `pred` accepts, which are removed.
  template <typename Pred, typename Fn> void take_if(Pred&& pred, Fn&& fn) {
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (!pred(it->first)) {
        ++it;
        continue;
      }
      for (Waiter& w : it->second) {
        fn(it->first, std::move(w.done));
      }
      it = waiters_.erase(it);
    }
  }

  template <typename Fn> void take_all(Fn&& fn) {
    for (auto& [key, list] : waiters_) {
      for (Waiter& w : list) {
        fn(key, std::move(w.done));
      }
    }
    waiters_.clear();
  }

  // The waiters whose deadline has come, removed.
  template <typename Fn> void take_expired(Clock::time_point now, Fn&& fn) {
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      auto& list = it->second;
      for (auto w = list.begin(); w != list.end();) {
        if (w->deadline <= now) {
          fn(it->first, std::move(w->done));
          w = list.erase(w);
        } else {
          ++w;
        }
      }
      it = list.empty() ? waiters_.erase(it) : std::next(it);
    }
  }

  bool has(const std::string& key) const { return waiters_.contains(key); }
  bool empty() const { return waiters_.empty(); }

  // The earliest deadline, or `latest` if none comes before it: when the
  // owner's housekeeper must wake next.
  Clock::time_point earliest(Clock::time_point latest) const {
    for (const auto& [key, list] : waiters_) {
      for (const Waiter& w : list) {
        latest = std::min(latest, w.deadline);
      }
    }
    return latest;
  }

private:
  struct Waiter {
    Clock::time_point deadline;
    Callback done;
  };
  std::unordered_map<std::string, std::vector<Waiter>> waiters_;
};

} // namespace kcache::service
