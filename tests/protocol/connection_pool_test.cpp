#include <kcache/protocol/connection_pool.h>

#include <gtest/gtest.h>

namespace kcache::protocol {
namespace {

TEST(ConnectionPool, ReusesTheLastReturnedAndKeepsAtMostMaxIdle) {
  ConnectionPool<int> pool(2);
  EXPECT_EQ(pool.take(), nullptr);
  pool.give_back(std::make_unique<int>(1));
  pool.give_back(std::make_unique<int>(2));
  pool.give_back(std::make_unique<int>(3)); // over max_idle: closed
  auto a = pool.take();
  auto b = pool.take();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(*a, 2);
  EXPECT_EQ(*b, 1);
  EXPECT_EQ(pool.take(), nullptr);
}

} // namespace
} // namespace kcache::protocol
