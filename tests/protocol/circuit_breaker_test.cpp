#include <kcache/protocol/circuit_breaker.h>

#include <gtest/gtest.h>

#include <thread>

namespace kcache::protocol {
namespace {

TEST(CircuitBreaker, OpensAfterThresholdAndProbesAfterCooldown) {
  CircuitBreaker breaker({3, std::chrono::milliseconds(50)});
  EXPECT_TRUE(breaker.allow());
  breaker.record_failure();
  breaker.record_failure();
  EXPECT_EQ(breaker.state(), CircuitBreaker::State::kClosed);
  breaker.record_failure();
  EXPECT_EQ(breaker.state(), CircuitBreaker::State::kOpen);
  EXPECT_FALSE(breaker.allow());
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_TRUE(breaker.allow());  // the probe
  EXPECT_FALSE(breaker.allow()); // only one probe at a time
  breaker.record_failure();      // probe failed: open again
  EXPECT_EQ(breaker.state(), CircuitBreaker::State::kOpen);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_TRUE(breaker.allow());
  breaker.record_success();
  EXPECT_EQ(breaker.state(), CircuitBreaker::State::kClosed);
  EXPECT_TRUE(breaker.allow());
}

TEST(CircuitBreaker, OneFailureOpensWithAThresholdOfOne) {
  // The client's setting: one unreachable round trip backs every call off.
  CircuitBreaker breaker({1, std::chrono::milliseconds(30)});
  breaker.record_failure();
  EXPECT_FALSE(breaker.allow());
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  EXPECT_TRUE(breaker.allow());
  breaker.record_success();
  EXPECT_TRUE(breaker.allow());
  EXPECT_TRUE(breaker.allow());
}

} // namespace
} // namespace kcache::protocol
