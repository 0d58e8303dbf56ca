#include <kcache/protocol/circuit_breaker.h>

namespace kcache::protocol {

bool CircuitBreaker::allow() {
  std::lock_guard lock(mu_);
  switch (state_) {
  case State::kClosed:
    return true;
  case State::kHalfOpen:
    return false; // the probe is in flight
  case State::kOpen:
    if (Clock::now() - opened_at_ >= options_.open_for) {
      state_ = State::kHalfOpen;
      return true;
    }
    return false;
  }
  return false;
}

void CircuitBreaker::record_success() {
  std::lock_guard lock(mu_);
  state_ = State::kClosed;
  consecutive_failures_ = 0;
}

void CircuitBreaker::record_failure() {
  std::lock_guard lock(mu_);
  ++consecutive_failures_;
  if (state_ == State::kHalfOpen || consecutive_failures_ >= options_.failure_threshold) {
    state_ = State::kOpen;
    opened_at_ = Clock::now();
  }
}

CircuitBreaker::State CircuitBreaker::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

} // namespace kcache::protocol
