// CountingStore: what each call's outcome adds to which counter, and that the
// inner store's own events come through.

#include "faulty_store.h"

#include <kcache/storage/counting_store.h>
#include <kcache/storage/framed_store.h>
#include <kcache/storage/memory_store.h>

#include <gtest/gtest.h>

namespace kcache::storage {
namespace {

using kcache::testing::FaultyStore;

class CountingStoreTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto faulty = std::make_unique<FaultyStore>("tier", std::make_unique<MemoryStore>(1000));
    faulty_ = faulty.get();
    store_ = std::make_unique<CountingStore>(std::move(faulty));
  }
  FaultyStore* faulty_ = nullptr;
  std::unique_ptr<CountingStore> store_;
};

TEST_F(CountingStoreTest, HitsMissesAndBytes) {
  ASSERT_TRUE(store_->put(Area::kCas, "k", "12345").has_value());
  ASSERT_TRUE(store_->get(Area::kCas, "k")->has_value());
  ASSERT_FALSE(store_->get(Area::kCas, "absent")->has_value());
  const CounterSnapshot c = store_->counters();
  EXPECT_EQ(c.puts, 1U);
  EXPECT_EQ(c.bytes_written, 5U);
  EXPECT_EQ(c.hits, 1U);
  EXPECT_EQ(c.bytes_read, 5U);
  EXPECT_EQ(c.misses, 1U);
  EXPECT_EQ(c.errors, 0U);
  EXPECT_EQ(store_->name(), "tier");
}

TEST_F(CountingStoreTest, BatchReadsCountPerKey) {
  ASSERT_TRUE(store_->put(Area::kCas, "a", "1").has_value());
  faulty_->fail_next_gets(1);
  const std::vector<std::string> keys = {"x", "a", "b"};
  auto got = store_->get_many(Area::kCas, keys);
  ASSERT_EQ(got.size(), 3U);
  const CounterSnapshot c = store_->counters();
  EXPECT_EQ(c.errors, 1U);
  EXPECT_EQ(c.hits, 1U);
  EXPECT_EQ(c.misses, 1U);
}

TEST_F(CountingStoreTest, ErrorsRefusalsAndSizePolicyAreApart) {
  faulty_->set_outage(true);
  EXPECT_FALSE(store_->get(Area::kCas, "k").has_value());
  EXPECT_FALSE(store_->contains(Area::kCas, "k").has_value());
  EXPECT_FALSE(store_->remove(Area::kCas, "k").has_value());
  EXPECT_FALSE(store_->list({}).has_value());
  faulty_->set_outage(false);
  faulty_->set_rejecting(true);
  EXPECT_FALSE(store_->put(Area::kCas, "k", "v").has_value());
  faulty_->set_rejecting(false);
  // Larger than the memory tier: its size policy, not a failure.
  EXPECT_EQ(store_->put(Area::kCas, "big", std::string(2000, 'x')).error().code,
            StoreError::Code::kTooLarge);
  const CounterSnapshot c = store_->counters();
  EXPECT_EQ(c.errors, 4U);
  EXPECT_EQ(c.rejected, 1U);
  EXPECT_EQ(c.puts, 0U);
  EXPECT_EQ(c.misses, 0U) << "a tier that is down must never look like a cold cache";
}

TEST_F(CountingStoreTest, TheInnerStoresEventsComeThrough) {
  const std::string v(400, 'v');
  ASSERT_TRUE(store_->put(Area::kCas, "a", v).has_value());
  ASSERT_TRUE(store_->put(Area::kCas, "b", v).has_value());
  ASSERT_TRUE(store_->put(Area::kCas, "c", v).has_value()); // evicts a
  EXPECT_EQ(store_->counters().evictions, 1U);
  EXPECT_EQ(store_->counters().puts, 3U);
}

TEST(CountingStoreUnderFrames, ACorruptValueIsAMissNotAHit) {
  // As the factory composes a persisted tier: frames over the count, so the
  // byte counters are bytes as stored.
  auto memory = std::make_unique<MemoryStore>(1 << 20);
  MemoryStore* raw = memory.get();
  auto counting = std::make_unique<CountingStore>(std::move(memory));
  FramedStore framed(std::move(counting));
  ASSERT_TRUE(framed.put(Area::kCas, "ok", "value").has_value());
  ASSERT_TRUE(raw->put(Area::kAction, "bad", "not a frame").has_value());
  EXPECT_TRUE(framed.get(Area::kCas, "ok")->has_value());
  EXPECT_FALSE(framed.get(Area::kAction, "bad")->has_value());
  const CounterSnapshot c = framed.counters();
  EXPECT_EQ(c.hits, 1U);
  EXPECT_EQ(c.misses, 1U);
  EXPECT_EQ(c.corrupt, 1U);
  EXPECT_GT(c.bytes_written, 5U); // the frame's header and digest included
}

} // namespace
} // namespace kcache::storage
