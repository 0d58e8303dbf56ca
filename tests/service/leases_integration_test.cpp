// Single-flight leases for outside producers, against a real kcached: one
// producer compiles, the others wait in get for its put; a dead holder's
// lease expires and ends their wait.

#include "kcached_process.h"

#include <kcache/client/client.h>

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace kcache {
namespace {

using client::Client;
using testing::KcachedProcess;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::unique_ptr<Client> lease_client(const std::string& url) {
  client::ClientOptions o;
  o.url = url;
  o.timeout = 3s;
  return std::move(*Client::create(o));
}

TEST(Leases, TheFirstProducesAndTheOthersWaitForItsPut) {
  KcachedProcess kcached;
  auto rank0 = lease_client(kcached.url());
  auto rank1 = lease_client(kcached.url());
  auto lease = rank0->acquire_lease("fx-graph-1", 10s, "rank0");
  ASSERT_TRUE(lease.has_value()) << lease.error().message;
  ASSERT_TRUE(lease->granted);
  auto other = rank1->acquire_lease("fx-graph-1", 10s, "rank1");
  ASSERT_TRUE(other.has_value());
  EXPECT_FALSE(other->granted);
  EXPECT_EQ(other->holder, "rank0");
  EXPECT_GT(other->expires_in.count(), 0);

  // rank1 waits in get; rank0 puts after 300 ms; rank1 hits then, not at its deadline.
  const auto start = Clock::now();
  auto waiting = std::async(std::launch::async, [&] { return rank1->get("fx-graph-1", 20s); });
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(rank0->put("fx-graph-1", {{"value", "compiled"}}).has_value());
  auto got = waiting.get();
  const auto waited = Clock::now() - start;
  ASSERT_TRUE(got.has_value()) << got.error().message;
  ASSERT_TRUE(got->has_value()) << "the waiter hits once the holder puts";
  EXPECT_EQ((*got)->files.front().data, "compiled");
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 5s);

  // Stored now: nobody needs a lease for it.
  auto after = rank1->acquire_lease("fx-graph-1", 10s, "rank1");
  ASSERT_TRUE(after.has_value());
  EXPECT_TRUE(after->cached);
  EXPECT_FALSE(after->granted);
}

TEST(Leases, ADeadHoldersLeaseExpiresAndEndsTheWait) {
  KcachedProcess kcached;
  auto dead = lease_client(kcached.url());
  auto alive = lease_client(kcached.url());
  ASSERT_TRUE(dead->acquire_lease("fx-graph-2", 400ms, "dead-rank")->granted);
  const auto start = Clock::now();
  auto got = alive->get("fx-graph-2", 20s);
  const auto waited = Clock::now() - start;
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->has_value()) << "a miss: the holder never put";
  EXPECT_LT(waited, 3s) << "the wait ended with the lease, not at its 20 s deadline";
  auto mine = alive->acquire_lease("fx-graph-2", 10s, "alive-rank");
  ASSERT_TRUE(mine.has_value());
  EXPECT_TRUE(mine->granted) << "the expired lease is free";
}

TEST(Leases, RenewReleaseAndWrongTokens) {
  KcachedProcess kcached;
  auto c = lease_client(kcached.url());
  auto lease = c->acquire_lease("fx-graph-3", 500ms, "rank0");
  ASSERT_TRUE(lease && lease->granted);
  for (int i = 0; i < 3; ++i) { // heartbeats keep it past its first TTL
    std::this_thread::sleep_for(250ms);
    EXPECT_TRUE(c->renew_lease("fx-graph-3", lease->token, 500ms).value_or(false));
  }
  EXPECT_FALSE(c->acquire_lease("fx-graph-3", 1s, "rank1")->granted);
  EXPECT_FALSE(c->renew_lease("fx-graph-3", "wrong-token", 1s).value_or(true));
  EXPECT_EQ(c->release_lease("fx-graph-3", "wrong-token").error().http_status, 409);
  ASSERT_TRUE(c->release_lease("fx-graph-3", lease->token).has_value());
  EXPECT_TRUE(c->acquire_lease("fx-graph-3", 1s, "rank1")->granted) << "released: free again";
  // Without a lease, a waiting get is a plain get: a miss at once.
  const auto start = Clock::now();
  auto miss = c->get("fx-graph-none", 10s);
  ASSERT_TRUE(miss.has_value());
  EXPECT_FALSE(miss->has_value());
  EXPECT_LT(Clock::now() - start, 1s);
}

} // namespace
} // namespace kcache
