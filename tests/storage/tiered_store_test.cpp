#include "../support/redis_server.h"
#include "../support/temp_dir.h"
#include "test_bytes.h"

#include <kcache/storage/artifact_store.h>
#include <kcache/storage/store_factory.h>
#include <kcache/storage/tiered_store.h>

#include <gtest/gtest.h>

#include <chrono>

namespace kcache::storage {
namespace {

using kcache::testing::random_bytes;
using kcache::testing::RedisServer;
using kcache::testing::TempDir;
using Clock = std::chrono::steady_clock;

class TieredStoreTest : public ::testing::Test {
protected:
  std::unique_ptr<TieredStore> make(const std::string& rocks_dir) {
    const std::vector<std::string> urls = {
        "memory://?capacity=8MiB", "rocksdb://" + rocks_dir + "?capacity=256MiB",
        redis_.url("namespace=tiered&connect_timeout_ms=100&timeout_ms=200&breaker_open_ms=500")};
    std::vector<std::unique_ptr<Store>> tiers;
    for (const std::string& url : urls) {
      auto tier = make_store(url);
      EXPECT_TRUE(tier.has_value()) << (tier ? "" : tier.error().message);
      tiers.push_back(std::move(*tier));
    }
    // As make_tiered_store decides: RocksDB is the durable tier.
    return std::make_unique<TieredStore>(std::move(tiers), 1);
  }

  RedisServer redis_;
  TempDir dir_;
};

TEST_F(TieredStoreTest, WriteThroughAndBackfill) {
  auto store = make(dir_.str());
  const std::string value = random_bytes(64 << 10);
  ASSERT_TRUE(store->put(Area::kCas, "blob", value).has_value());
  for (std::size_t i = 0; i < store->tier_count(); ++i) {
    EXPECT_EQ(store->tier(i).counters().puts, 1U) << store->tier(i).name();
  }
  // A fresh node: empty memory and RocksDB tiers, same Redis.
  TempDir other;
  auto fresh = make(other.str());
  auto got = fresh->get(Area::kCas, "blob");
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ(**got, value);
  EXPECT_EQ(fresh->counters().backfills, 2U); // into memory and RocksDB
  ASSERT_TRUE(fresh->get(Area::kCas, "blob")->has_value());
  EXPECT_EQ(fresh->tier(0).counters().hits, 1U); // the second read came from memory
  EXPECT_EQ(fresh->tier(2).counters().hits, 1U);
}

TEST_F(TieredStoreTest, PeekReadsTheSlowTierWithoutBackfill) {
  auto store = make(dir_.str());
  const std::string value = random_bytes(4096);
  ASSERT_TRUE(store->put(Area::kAction, "record", value).has_value());
  TempDir other;
  auto fresh = make(other.str()); // empty memory and RocksDB, same Redis
  auto got = fresh->peek(Area::kAction, "record");
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ(**got, value);
  EXPECT_EQ(fresh->counters().backfills, 0U);
  EXPECT_FALSE(*fresh->tier(0).contains(Area::kAction, "record"));
  EXPECT_FALSE(*fresh->tier(1).contains(Area::kAction, "record"));
}

TEST_F(TieredStoreTest, RedisKilledMidTestKeepsServingFromRocksDb) {
  auto store = make(dir_.str());
  std::vector<std::string> keys;
  for (int i = 0; i < 20; ++i) {
    keys.push_back("k" + std::to_string(i));
    ASSERT_TRUE(store->put(Area::kCas, keys.back(), random_bytes(32 << 10, i)).has_value());
  }
  redis_.kill();
  // Reopen, dropping the memory tier's copies: reads must reach RocksDB.
  store.reset();
  auto reopened = make(dir_.str());

  auto worst = Clock::duration::zero();
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const auto start = Clock::now();
      auto got = reopened->get(Area::kCas, keys[i]);
      worst = std::max(worst, Clock::now() - start);
      ASSERT_TRUE(got.has_value()) << "the tiered store must not surface a tier's error";
      ASSERT_TRUE(got->has_value());
      EXPECT_EQ(**got, random_bytes(32 << 10, static_cast<std::uint64_t>(i)));
    }
    const auto start = Clock::now();
    ASSERT_TRUE(reopened->put(Area::kCas, "new" + std::to_string(round), "v").has_value());
    auto miss = reopened->get(Area::kCas, "absent" + std::to_string(round));
    worst = std::max(worst, Clock::now() - start);
    ASSERT_TRUE(miss.has_value());
    EXPECT_FALSE(miss->has_value());
  }
  // Bounded by the connect deadline (100 ms), not by any retry loop.
  EXPECT_LT(worst, std::chrono::milliseconds(1000));
  EXPECT_GT(reopened->counters().errors, 0U);
  EXPECT_GT(reopened->tier(2).counters().rejected, 0U); // the breaker took over
}

TEST_F(TieredStoreTest, HungRedisCostsOneTimeoutThenNothing) {
  auto store = make(dir_.str());
  ASSERT_TRUE(store->put(Area::kCas, "k", "v").has_value());
  redis_.pause();
  auto worst = Clock::duration::zero();
  for (int i = 0; i < 10; ++i) {
    const auto start = Clock::now();
    auto miss = store->get(Area::kCas, "absent-" + std::to_string(i));
    worst = std::max(worst, Clock::now() - start);
    ASSERT_TRUE(miss.has_value());
    EXPECT_FALSE(miss->has_value());
  }
  redis_.resume();
  EXPECT_LT(worst, std::chrono::milliseconds(1000));
  EXPECT_GT(store->tier(2).counters().rejected, 0U);
}

TEST_F(TieredStoreTest, BatchGetFillsFromSlowerTiers) {
  auto store = make(dir_.str());
  ASSERT_TRUE(store->put(Area::kCas, "a", "1").has_value());
  TempDir other;
  auto fresh = make(other.str());
  ASSERT_TRUE(fresh->put(Area::kCas, "b", "2").has_value());
  const std::vector<std::string> keys = {"a", "b", "c"};
  auto results = fresh->get_many(Area::kCas, keys);
  ASSERT_EQ(results.size(), 3U);
  EXPECT_EQ(results[0]->value(), "1"); // from Redis
  EXPECT_EQ(results[1]->value(), "2"); // from memory
  EXPECT_FALSE(results[2]->has_value());
  EXPECT_TRUE(*fresh->tier(1).contains(Area::kCas, "a")) << "a was backfilled into RocksDB";
}

TEST_F(TieredStoreTest, ListIsTheUnion) {
  TempDir other;
  auto store = make(dir_.str());
  auto fresh = make(other.str());
  ASSERT_TRUE(store->put(Area::kAction, "kc1-a", "1").has_value());
  ASSERT_TRUE(fresh->put(Area::kAction, "kc1-b", "2").has_value());
  auto listed = fresh->list({});
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->size(), 2U);
}

// Issue 21, on kcached's own stack (memory over RocksDB): an artifact hit
// from the memory tier hands out the tier's buffers (the files and the
// record), never a copy; a hit from RocksDB is backfilled with the very
// buffer its read made, so the next memory hit hands out that one.
TEST(TieredStoreShared, AnArtifactHitSharesTheMemoryTiersBuffers) {
  TempDir dir;
  const std::vector<std::string> urls = {"memory://?capacity=8MiB",
                                         "rocksdb://" + dir.path().string() + "?capacity=64MiB"};
  auto stack = make_tiered_store(urls);
  ASSERT_TRUE(stack.has_value()) << stack.error().message;
  ArtifactStore artifacts(*stack->store);
  const std::string big = random_bytes(64 << 10);
  auto put = artifacts.put("shared-hit", {{"value", big}, {"log", "ok"}}, "test");
  ASSERT_TRUE(put.has_value()) << put.error().message;

  auto first = artifacts.get("shared-hit");
  auto second = artifacts.get("shared-hit");
  ASSERT_TRUE(first && first->has_value() && second && second->has_value());
  ASSERT_EQ((*first)->files.size(), 2U);
  EXPECT_EQ((*first)->files[0].data, big);
  EXPECT_TRUE((*first)->files[0].data.shares((*second)->files[0].data));
  EXPECT_TRUE((*first)->files[1].data.shares((*second)->files[1].data));
  EXPECT_TRUE((*first)->record_json.shares((*second)->record_json));

  // Out of the memory tier: read from RocksDB, backfilled as that buffer.
  Store& memory = *stack->tiers.at(0);
  ASSERT_TRUE(memory.remove(Area::kCas, put->outputs[0].digest).has_value());
  auto from_disk = artifacts.get("shared-hit");
  ASSERT_TRUE(from_disk && from_disk->has_value());
  EXPECT_EQ((*from_disk)->files[0].data, big);
  EXPECT_FALSE((*from_disk)->files[0].data.shares((*first)->files[0].data));
  auto again = artifacts.get("shared-hit");
  ASSERT_TRUE(again && again->has_value());
  EXPECT_TRUE((*again)->files[0].data.shares((*from_disk)->files[0].data));
  auto held = memory.get_shared(Area::kCas, put->outputs[0].digest);
  ASSERT_TRUE(held && held->has_value());
  EXPECT_TRUE((*held)->shares((*from_disk)->files[0].data));
}

} // namespace
} // namespace kcache::storage
