#include <kcache/storage/counting_store.h>
#include <kcache/storage/memory_store.h>
#include <kcache/storage/store_factory.h>

#include <gtest/gtest.h>

#include <thread>

namespace kcache::storage {
namespace {

TEST(MemoryStore, RoundTripAndAreasAreSeparate) {
  CountingStore store(std::make_unique<MemoryStore>(1 << 20));
  ASSERT_TRUE(store.put(Area::kAction, "k", "action").has_value());
  ASSERT_TRUE(store.put(Area::kCas, "k", "blob").has_value());
  EXPECT_EQ(store.get(Area::kAction, "k")->value(), "action");
  EXPECT_EQ(store.get(Area::kCas, "k")->value(), "blob");
  EXPECT_FALSE(store.get(Area::kAction, "missing")->has_value());
  EXPECT_TRUE(*store.contains(Area::kCas, "k"));
  ASSERT_TRUE(store.remove(Area::kCas, "k").has_value());
  EXPECT_FALSE(*store.contains(Area::kCas, "k"));
  EXPECT_EQ(store.counters().hits, 2U);
  EXPECT_EQ(store.counters().misses, 1U);
}

TEST(MemoryStore, LruBoundEvictsLeastRecentlyUsed) {
  MemoryStore store(1000);
  const std::string v(300, 'v');
  ASSERT_TRUE(store.put(Area::kCas, "a", v).has_value());
  ASSERT_TRUE(store.put(Area::kCas, "b", v).has_value());
  ASSERT_TRUE(store.put(Area::kCas, "c", v).has_value());
  ASSERT_TRUE(store.get(Area::kCas, "a")->has_value());   // a is now most recent
  ASSERT_TRUE(store.put(Area::kCas, "d", v).has_value()); // evicts b
  EXPECT_LE(store.size_bytes(), 1000U);
  EXPECT_TRUE(*store.contains(Area::kCas, "a"));
  EXPECT_FALSE(*store.contains(Area::kCas, "b"));
  EXPECT_EQ(store.counters().evictions, 1U);
  EXPECT_EQ(store.put(Area::kCas, "huge", std::string(2000, 'x')).error().code,
            StoreError::Code::kTooLarge);
}

TEST(MemoryStore, ListFilters) {
  MemoryStore store(1 << 20);
  (void)store.put(Area::kAction, "kc1-aa", "1");
  (void)store.put(Area::kAction, "kc1-ab", "22");
  (void)store.put(Area::kCas, "kc1-ac", "333");
  ListOptions options;
  options.area = Area::kAction;
  options.prefix = "kc1-a";
  auto listed = store.list(options);
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->size(), 2U);
  options.limit = 1;
  EXPECT_EQ(store.list(options)->size(), 1U);
}

TEST(StoreFactory, Sizes) {
  EXPECT_EQ(*parse_size("64KiB"), 64U << 10);
  EXPECT_EQ(*parse_size("10GiB"), 10ULL << 30);
  EXPECT_EQ(*parse_size("1000"), 1000U);
  EXPECT_EQ(*parse_size("5MB"), 5'000'000U);
  EXPECT_FALSE(parse_size("lots").has_value());
  EXPECT_FALSE(parse_size("5 parsecs").has_value());
}

TEST(StoreFactory, UrlsAndClearErrors) {
  auto memory = make_store("memory://?capacity=1MiB");
  ASSERT_TRUE(memory.has_value());
  EXPECT_EQ((*memory)->name(), "memory");
  auto redis = make_store("redis://127.0.0.1:1/?namespace=x&timeout_ms=50");
  ASSERT_TRUE(redis.has_value()) << redis.error().message;
  EXPECT_EQ((*redis)->name(), "redis");
  const char* bad[] = {"nope",
                       "ftp://x",
                       "memory://?capacity=big",
                       "rocksdb://",
                       "redis://host:99999",
                       "redis://host/notanumber",
                       "redis://host?timeout_ms=-4",
                       "redis://host?timeout_ms"};
  for (const char* url : bad) {
    auto store = make_store(url);
    ASSERT_FALSE(store.has_value()) << url;
    EXPECT_EQ(store.error().code, StoreError::Code::kInvalidArgument) << url;
    EXPECT_FALSE(store.error().message.empty());
  }
}

// Issue 21: a memory-tier hit hands out the buffer the tier holds, so serving
// it copies nothing; get() still returns a copy of its own.
TEST(MemoryStore, GetSharedHandsOutTheHeldBufferAndGetCopiesIt) {
  CountingStore store(std::make_unique<MemoryStore>(1 << 20));
  const std::string value(100000, 'v');
  ASSERT_TRUE(store.put(Area::kCas, "k", value).has_value());
  auto a = store.get_shared(Area::kCas, "k");
  auto b = store.get_shared(Area::kCas, "k");
  ASSERT_TRUE(a && a->has_value() && b && b->has_value());
  EXPECT_TRUE((*a)->shares(**b)); // one buffer, not two copies
  EXPECT_EQ(**a, value);
  auto copied = store.get(Area::kCas, "k");
  ASSERT_TRUE(copied && copied->has_value());
  EXPECT_EQ(**copied, value);
  EXPECT_NE(static_cast<const void*>((*copied)->data()), static_cast<const void*>((*a)->data()));
  EXPECT_EQ(store.counters().hits, 3U);
  EXPECT_EQ(store.counters().bytes_read, 3 * value.size());

  // A value put shared is kept as that buffer.
  const SharedBytes mine(std::string(5000, 'm'));
  ASSERT_TRUE(store.put_shared(Area::kCas, "m", mine).has_value());
  auto many = store.get_many_shared(Area::kCas, std::vector<std::string>{"m", "missing", "k"});
  ASSERT_EQ(many.size(), 3U);
  ASSERT_TRUE(many[0] && many[0]->has_value());
  EXPECT_TRUE((*many[0])->shares(mine));
  ASSERT_TRUE(many[1]);
  EXPECT_FALSE(many[1]->has_value());
  ASSERT_TRUE(many[2] && many[2]->has_value());
  EXPECT_TRUE((*many[2])->shares(**a));

  // Removed (or evicted), the tier forgets it; a reader's buffer lives on.
  ASSERT_TRUE(store.remove(Area::kCas, "k").has_value());
  EXPECT_FALSE(store.get_shared(Area::kCas, "k")->has_value());
  EXPECT_EQ(**a, value);
  // Too large for the tier: refused before anything is kept.
  EXPECT_EQ(
      store.put_shared(Area::kCas, "huge", SharedBytes(std::string(2 << 20, 'x'))).error().code,
      StoreError::Code::kTooLarge);
  EXPECT_FALSE(store.get_shared(Area::kCas, "huge")->has_value());
}

} // namespace
} // namespace kcache::storage
