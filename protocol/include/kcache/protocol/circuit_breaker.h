#pragma once
// A circuit breaker for a remote tier: after `failure_threshold` consecutive
// failures it opens and callers fail fast (no network, no timeout) for
// `open_for`; then one probe call is let through (half-open) and its outcome
// closes or reopens the circuit. Keeps a dead Redis from adding a timeout to
// every trainer request (storage's Redis tier), and a dead kcached from adding
// one to every cache lookup (the client).

#include <chrono>
#include <mutex>

namespace kcache::protocol {

struct CircuitBreakerOptions {
  int failure_threshold = 3;
  std::chrono::milliseconds open_for{2000};
};

class CircuitBreaker {
public:
  enum class State { kClosed, kOpen, kHalfOpen };

  explicit CircuitBreaker(CircuitBreakerOptions options = {}) : options_(options) {}

  // False while open. In half-open state exactly one caller gets true.
  bool allow();
  void record_success();
  void record_failure();
  State state() const;

private:
  using Clock = std::chrono::steady_clock;
  const CircuitBreakerOptions options_;
  mutable std::mutex mu_;
  State state_ = State::kClosed;
  int consecutive_failures_ = 0;
  Clock::time_point opened_at_{};
};

} // namespace kcache::protocol
