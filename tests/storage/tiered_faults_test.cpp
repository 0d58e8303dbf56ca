// TieredStore against injected faults (FaultyStore): read-through population,
// a write failing in one tier, outages answered as misses. No redis-server.

#include "faulty_store.h"

#include <kcache/storage/counting_store.h>
#include <kcache/storage/tiered_store.h>

#include <gtest/gtest.h>

namespace kcache::storage {
namespace {

using kcache::testing::FaultyStore;

class TieredFaults : public ::testing::Test {
protected:
  void SetUp() override {
    auto fast = std::make_unique<FaultyStore>("fast");
    auto slow = std::make_unique<FaultyStore>("slow");
    fast_ = fast.get();
    slow_ = slow.get();
    std::vector<std::unique_ptr<Store>> tiers;
    tiers.push_back(std::move(fast));
    tiers.push_back(std::move(slow));
    auto tiered = std::make_unique<TieredStore>(std::move(tiers));
    tiered_ = tiered.get();
    store_ = std::make_unique<CountingStore>(std::move(tiered));
  }

  bool holds(FaultyStore& tier, std::string_view key) {
    return *tier.inner().contains(Area::kCas, key);
  }

  FaultyStore* fast_ = nullptr;
  FaultyStore* slow_ = nullptr;
  TieredStore* tiered_ = nullptr;
  std::unique_ptr<CountingStore> store_;
};

TEST_F(TieredFaults, AHitInASlowerTierIsCopiedIntoTheFasterOnes) {
  ASSERT_TRUE(slow_->inner().put(Area::kCas, "k", "v").has_value());
  auto got = store_->get(Area::kCas, "k");
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ(**got, "v");
  EXPECT_TRUE(holds(*fast_, "k"));
  EXPECT_EQ(store_->counters().backfills, 1U);
  EXPECT_EQ(store_->counters().hits, 1U);
  // The next read is answered by the fast tier alone.
  const int slow_gets = slow_->gets();
  ASSERT_TRUE(store_->get(Area::kCas, "k")->has_value());
  EXPECT_EQ(slow_->gets(), slow_gets);
}

TEST_F(TieredFaults, BatchReadsFillFromTheSlowerTierToo) {
  ASSERT_TRUE(slow_->inner().put(Area::kCas, "b", "from slow").has_value());
  ASSERT_TRUE(fast_->inner().put(Area::kCas, "a", "from fast").has_value());
  const std::vector<std::string> keys = {"a", "b", "c"};
  auto got = store_->get_many(Area::kCas, keys);
  ASSERT_EQ(got.size(), 3U);
  EXPECT_EQ(*got[0], "from fast");
  EXPECT_EQ(*got[1], "from slow");
  EXPECT_FALSE(got[2]->has_value());
  EXPECT_TRUE(holds(*fast_, "b"));
  EXPECT_EQ(store_->counters().hits, 2U);
  EXPECT_EQ(store_->counters().misses, 1U);
}

TEST_F(TieredFaults, AWriteFailingInAFasterTierStillStoresAndCountsTheError) {
  fast_->fail_next_puts(1);
  ASSERT_TRUE(store_->put(Area::kCas, "k", "v").has_value());
  EXPECT_TRUE(holds(*slow_, "k"));
  EXPECT_FALSE(holds(*fast_, "k"));
  EXPECT_EQ(store_->counters().errors, 1U);
  EXPECT_EQ(store_->counters().puts, 1U);
  // The next write reaches both.
  ASSERT_TRUE(store_->put(Area::kCas, "k2", "v").has_value());
  EXPECT_TRUE(holds(*fast_, "k2"));
}

// Issue 13: a put acknowledged by the memory tier alone was lost at restart.
TEST_F(TieredFaults, AWriteTheDurableTierRefusesIsAnErrorAndWritesNothingElse) {
  EXPECT_EQ(tiered_->durable_tier(), 1U); // the last tier when none is named
  slow_->fail_next_puts(1, StoreError::Code::kNoSpace);
  auto put = store_->put(Area::kCas, "k", "v");
  ASSERT_FALSE(put.has_value());
  EXPECT_EQ(put.error().code, StoreError::Code::kNoSpace);
  EXPECT_FALSE(holds(*fast_, "k")) << "readable now, gone after a restart";
  EXPECT_FALSE(holds(*slow_, "k"));
  EXPECT_EQ(store_->counters().puts, 0U);
  EXPECT_EQ(store_->counters().no_space, 1U);
  ASSERT_TRUE(store_->put(Area::kCas, "k", "v").has_value());
  EXPECT_TRUE(holds(*fast_, "k") && holds(*slow_, "k"));
}

TEST_F(TieredFaults, TheDurableTierCanBeAFasterOne) {
  std::vector<std::unique_ptr<Store>> tiers;
  auto durable = std::make_unique<FaultyStore>("disk");
  auto shared = std::make_unique<FaultyStore>("shared");
  FaultyStore& disk = *durable;
  FaultyStore& remote = *shared;
  tiers.push_back(std::move(durable));
  tiers.push_back(std::move(shared));
  TieredStore store(std::move(tiers), 0);
  remote.set_outage(true);
  ASSERT_TRUE(store.put(Area::kCas, "k", "v").has_value()) << "a shared tier's outage is absorbed";
  EXPECT_TRUE(holds(disk, "k"));
  EXPECT_EQ(store.counters().errors, 1U);
  remote.set_outage(false);
  disk.fail_next_puts(1, StoreError::Code::kIo);
  EXPECT_FALSE(store.put(Area::kCas, "k2", "v").has_value());
  EXPECT_FALSE(holds(remote, "k2"));
}

TEST_F(TieredFaults, AWriteEveryTierRefusesIsAnError) {
  fast_->set_outage(true);
  slow_->fail_next_puts(1, StoreError::Code::kIo);
  auto put = store_->put(Area::kCas, "k", "v");
  ASSERT_FALSE(put.has_value());
  EXPECT_EQ(put.error().code, StoreError::Code::kIo);
}

TEST_F(TieredFaults, ATierTooSmallForAValueIsNoError) {
  fast_->fail_next_puts(1, StoreError::Code::kTooLarge);
  ASSERT_TRUE(store_->put(Area::kCas, "big", "v").has_value());
  EXPECT_EQ(store_->counters().errors, 0U);
}

TEST_F(TieredFaults, AnOutageIsAMissForTheCaller) {
  slow_->set_outage(true);
  auto got = store_->get(Area::kCas, "absent");
  ASSERT_TRUE(got.has_value()) << "an outage must not surface while another tier answers";
  EXPECT_FALSE(got->has_value());
  auto contained = store_->contains(Area::kCas, "absent");
  ASSERT_TRUE(contained.has_value());
  EXPECT_FALSE(*contained);
  ASSERT_TRUE(store_->list({}).has_value());
  const CounterSnapshot c = store_->counters();
  EXPECT_EQ(c.misses, 1U);
  EXPECT_EQ(c.errors, 3U); // get, contains and list each met the outage once
}

TEST_F(TieredFaults, TheSlowTierAnswersWhileTheFastOneIsDown) {
  ASSERT_TRUE(slow_->inner().put(Area::kCas, "k", "v").has_value());
  fast_->set_outage(true);
  auto got = store_->get(Area::kCas, "k");
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ(**got, "v");
  // The failed get and the failed backfill are both the fast tier's errors.
  EXPECT_EQ(store_->counters().errors, 2U);
  EXPECT_EQ(store_->counters().backfills, 0U);
  // Once back, the fast tier is filled by the next read.
  fast_->set_outage(false);
  ASSERT_TRUE(store_->get(Area::kCas, "k")->has_value());
  EXPECT_TRUE(holds(*fast_, "k"));
}

TEST_F(TieredFaults, FailedBatchReadsFallThroughToTheNextTier) {
  ASSERT_TRUE(slow_->inner().put(Area::kCas, "a", "1").has_value());
  ASSERT_TRUE(fast_->inner().put(Area::kCas, "b", "2").has_value());
  fast_->fail_next_gets(1); // the base get_many asks per key: "a" fails
  const std::vector<std::string> keys = {"a", "b"};
  auto got = store_->get_many(Area::kCas, keys);
  EXPECT_EQ(*got[0], "1");
  EXPECT_EQ(*got[1], "2");
  EXPECT_EQ(store_->counters().errors, 1U);
}

TEST_F(TieredFaults, RemoveReportsATierThatCouldNotRemove) {
  ASSERT_TRUE(store_->put(Area::kCas, "k", "v").has_value());
  slow_->set_outage(true);
  auto removed = store_->remove(Area::kCas, "k");
  ASSERT_FALSE(removed.has_value()) << "a copy may remain: the caller must know";
  EXPECT_FALSE(holds(*fast_, "k"));
  EXPECT_TRUE(holds(*slow_, "k"));
}

TEST_F(TieredFaults, ARefusingTierIsAnErrorOfTheTieredStore) {
  // A tier's open breaker is its own `rejected`, but for the tiered store it is
  // a tier that did not answer.
  slow_->set_rejecting(true);
  ASSERT_TRUE(store_->get(Area::kCas, "absent")->has_value() == false);
  EXPECT_EQ(store_->counters().errors, 1U);
  EXPECT_EQ(store_->counters().rejected, 0U);
}

TEST_F(TieredFaults, ALatencyIsPaidOnlyWhenTheSlowTierIsAsked) {
  ASSERT_TRUE(store_->put(Area::kCas, "k", "v").has_value());
  slow_->set_latency(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(store_->get(Area::kCas, "k")->has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
}

} // namespace
} // namespace kcache::storage
