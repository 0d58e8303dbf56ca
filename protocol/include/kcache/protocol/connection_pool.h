#pragma once
// Idle keep-alive connections kept for reuse (the client's to kcached, the
// Redis tier's to Redis): callers take one or dial a fresh one, and give it
// back only when it is in a known state.

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace kcache::protocol {

template <typename Connection> class ConnectionPool {
public:
  explicit ConnectionPool(std::size_t max_idle) : max_idle_(max_idle) {}

  // The most recently returned idle connection, or nullptr when none is idle.
  std::unique_ptr<Connection> take() {
    std::lock_guard lock(mu_);
    if (idle_.empty()) {
      return nullptr;
    }
    auto connection = std::move(idle_.back());
    idle_.pop_back();
    return connection;
  }

  // Kept while fewer than max_idle are idle; closed (destroyed) otherwise.
  void give_back(std::unique_ptr<Connection> connection) {
    std::lock_guard lock(mu_);
    if (idle_.size() < max_idle_) {
      idle_.push_back(std::move(connection));
    }
  }

private:
  const std::size_t max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

} // namespace kcache::protocol
