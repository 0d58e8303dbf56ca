#include "../support/temp_dir.h"
#include "test_bytes.h"

#include <kcache/storage/framed_store.h>
#include <kcache/storage/rocksdb_store.h>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <thread>

namespace kcache::storage {
namespace {

using kcache::testing::random_bytes;
using kcache::testing::TempDir;

std::unique_ptr<RocksDbStore> open_store(const TempDir& dir, std::uint64_t capacity = 1ULL << 30) {
  RocksDbOptions options;
  options.path = dir.str();
  options.capacity_bytes = capacity;
  auto store = RocksDbStore::open(options);
  EXPECT_TRUE(store.has_value()) << (store ? "" : store.error().message);
  return store ? std::move(*store) : nullptr;
}

class RocksDbSizes : public ::testing::TestWithParam<std::size_t> {};

TEST_P(RocksDbSizes, RoundTripThroughFrames) {
  TempDir dir;
  FramedStore store(open_store(dir));
  const std::string value = random_bytes(GetParam(), GetParam());
  ASSERT_TRUE(store.put(Area::kCas, "blob", value).has_value());
  auto got = store.get(Area::kCas, "blob");
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ(**got, value);
}

INSTANTIATE_TEST_SUITE_P(Payloads, RocksDbSizes, ::testing::Values(1U << 10, 64U << 10, 16U << 20));

TEST(RocksDbStore, SurvivesReopenWithSizeAndRecency) {
  TempDir dir;
  std::int64_t touched_at = 0;
  std::uint64_t size_before = 0;
  {
    auto store = open_store(dir);
    ASSERT_TRUE(store->put(Area::kAction, "kc1-one", "manifest").has_value());
    ASSERT_TRUE(store->put(Area::kCas, "blob", random_bytes(100000)).has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(store->get(Area::kAction, "kc1-one")->has_value());
    touched_at = unix_now_ms();
    size_before = store->size_bytes();
    EXPECT_EQ(size_before, 100000U + 8U);
  } // closing flushes pending access times
  auto store = open_store(dir);
  EXPECT_EQ(store->size_bytes(), size_before);
  EXPECT_EQ(store->get(Area::kAction, "kc1-one")->value(), "manifest");
  EXPECT_EQ(store->get(Area::kCas, "blob")->value().size(), 100000U);
  ListOptions options;
  options.area = Area::kAction;
  auto listed = store->list(options);
  ASSERT_TRUE(listed.has_value());
  ASSERT_EQ(listed->size(), 1U);
  EXPECT_GE((*listed)[0].last_access_ms, touched_at - 5);
  EXPECT_GT((*listed)[0].last_access_ms, (*listed)[0].created_ms);
  // One read before the reopen (flushed on close), one after (still pending).
  EXPECT_EQ((*listed)[0].hits, 2U);
}

TEST(RocksDbStore, OverwriteAndRemoveKeepTheSizeAccountRight) {
  TempDir dir;
  auto store = open_store(dir);
  ASSERT_TRUE(store->put(Area::kCas, "k", std::string(1000, 'a')).has_value());
  ASSERT_TRUE(store->put(Area::kCas, "k", std::string(300, 'b')).has_value());
  EXPECT_EQ(store->size_bytes(), 300U);
  ASSERT_TRUE(store->remove(Area::kCas, "k").has_value());
  ASSERT_TRUE(store->remove(Area::kCas, "never-there").has_value());
  EXPECT_EQ(store->size_bytes(), 0U);
  EXPECT_FALSE(*store->contains(Area::kCas, "k"));
}

TEST(RocksDbStore, EvictionHoldsTheBoundAndKeepsRecentlyRead) {
  TempDir dir;
  constexpr std::uint64_t kCapacity = 1 << 20;
  auto store = open_store(dir, kCapacity);
  const std::string value = random_bytes(64 << 10);
  ASSERT_TRUE(store->put(Area::kCas, "hot", value).has_value());
  for (int i = 0; i < 48; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_TRUE(store->put(Area::kCas, "cold-" + std::to_string(i), value).has_value());
    ASSERT_TRUE(store->get(Area::kCas, "hot")->has_value()) << "hot entry evicted at " << i;
    EXPECT_LE(store->size_bytes(), kCapacity);
  }
  EXPECT_GT(store->counters().evictions, 0U);
  EXPECT_FALSE(*store->contains(Area::kCas, "cold-0"));
  EXPECT_TRUE(*store->contains(Area::kCas, "cold-47"));
  auto listed = store->list({});
  ASSERT_TRUE(listed.has_value());
  std::uint64_t listed_bytes = 0;
  for (const ObjectInfo& info : *listed) {
    listed_bytes += info.size;
  }
  EXPECT_EQ(listed_bytes, store->size_bytes());
}

void flip_byte_in_middle(const std::filesystem::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const auto size = static_cast<std::streamoff>(f.tellg());
  f.seekg(size / 2);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5A);
  f.seekp(size / 2);
  f.write(&c, 1);
}

TEST(RocksDbStore, BytesCorruptedOnDiskAreAMissDeletedAndCounted) {
  TempDir dir;
  const std::string value = random_bytes(256 << 10);
  {
    auto store = open_store(dir);
    ASSERT_TRUE(store->put(Area::kCas, "victim", value).has_value());
    ASSERT_TRUE(store->flush().has_value()); // the value now lives in a blob file
  }
  std::vector<std::filesystem::path> blobs;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    if (entry.path().extension() == ".blob") {
      blobs.push_back(entry.path());
    }
  }
  ASSERT_EQ(blobs.size(), 1U) << "expected the large value in one BlobDB file";
  flip_byte_in_middle(blobs[0]);

  auto store = open_store(dir);
  auto got = store->get(Area::kCas, "victim");
  ASSERT_TRUE(got.has_value()) << "corruption must be a miss, not an error";
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(store->counters().corrupt, 1U);
  EXPECT_FALSE(*store->contains(Area::kCas, "victim"));
  // The store keeps working.
  ASSERT_TRUE(store->put(Area::kCas, "after", "ok").has_value());
  EXPECT_EQ(store->get(Area::kCas, "after")->value(), "ok");
}

TEST(RocksDbStore, TamperedFrameIsCaughtByVerification) {
  TempDir dir;
  FramedStore store(open_store(dir));
  ASSERT_TRUE(store.put(Area::kAction, "kc1-x", "the real manifest").has_value());
  // RocksDB's own checksums pass: the bytes were written this way.
  Bytes frame = encode_frame("the real manifest");
  frame.back() = 'X';
  ASSERT_TRUE(store.inner().put(Area::kAction, "kc1-x", frame).has_value());
  auto got = store.get(Area::kAction, "kc1-x");
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(store.counters().corrupt, 1U);
  EXPECT_FALSE(*store.contains(Area::kAction, "kc1-x"));
}

TEST(RocksDbStore, BatchGetMixesHitsAndMisses) {
  TempDir dir;
  FramedStore store(open_store(dir));
  ASSERT_TRUE(store.put(Area::kCas, "a", "1").has_value());
  ASSERT_TRUE(store.put(Area::kCas, "c", random_bytes(10000)).has_value());
  const std::vector<std::string> keys = {"a", "b", "c"};
  auto results = store.get_many(Area::kCas, keys);
  ASSERT_EQ(results.size(), 3U);
  EXPECT_EQ(results[0]->value(), "1");
  EXPECT_FALSE(results[1]->has_value());
  EXPECT_EQ(results[2]->value().size(), 10000U);
}

TEST(RocksDbStore, ConcurrentReadersAndWriters) {
  TempDir dir;
  auto store = open_store(dir, 4 << 20);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const std::string value = random_bytes(16 << 10, static_cast<std::uint64_t>(t));
      for (int i = 0; i < 200; ++i) {
        const std::string key = "k" + std::to_string((t * 7 + i) % 64);
        if (!store->put(Area::kCas, key, value) || !store->get(Area::kCas, key)) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(store->size_bytes(), 4U << 20);
}

// The entries of `store` by `order` through list_top, as keys.
std::vector<std::string> top_keys(RocksDbStore& store, ListOrder order, std::size_t limit) {
  auto top = store.list_top({order, limit, false, std::nullopt});
  EXPECT_TRUE(top.has_value()) << top.error().message;
  std::vector<std::string> out;
  for (const ObjectInfo& info : top.value_or(TopList{}).rows) {
    out.push_back(info.key);
  }
  return out;
}

// Opens the store's database without kcache, as another version of it would
// have left it, and lets `change` alter it.
void alter_database(const TempDir& dir,
                    const std::function<void(rocksdb::DB&, rocksdb::ColumnFamilyHandle*)>& change) {
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const char* name : {"default", "ac", "cas", "access", "order"}) {
    families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), dir.str(), families, &handles, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  change(*db, handles[4]);
  for (auto* h : handles) {
    ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  }
  ASSERT_TRUE(db->Close().ok());
}

// Sizes 1..40, key i read i % 4 times: an order for each of the four.
void fill_for_orders(RocksDbStore& store) {
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(store.put(Area::kAction, "k" + std::to_string(i), std::string(i + 1, 'x')));
  }
  for (int i = 0; i < 40; ++i) {
    for (int r = 0; r < i % 4; ++r) {
      ASSERT_TRUE(store.get(Area::kAction, "k" + std::to_string(i)));
    }
  }
}

TEST(RocksDbStore, AStoreFromBeforeTheOrderIndexGetsItAtOpen) {
  TempDir dir;
  std::vector<std::string> by_size, by_hits;
  {
    auto store = open_store(dir);
    fill_for_orders(*store);
    by_size = top_keys(*store, ListOrder::kSize, 10);
    by_hits = top_keys(*store, ListOrder::kHits, 40);
    EXPECT_EQ(by_size.front(), "k39");
  }
  // An older kcache had no "order" family at all.
  alter_database(dir, [](rocksdb::DB& db, rocksdb::ColumnFamilyHandle* order) {
    ASSERT_TRUE(db.DropColumnFamily(order).ok());
  });
  auto store = open_store(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(top_keys(*store, ListOrder::kSize, 10), by_size);
  EXPECT_EQ(top_keys(*store, ListOrder::kHits, 40), by_hits);
  EXPECT_EQ(store->usage().entries, 40U);
}

TEST(RocksDbStore, AnIndexBuildCutShortIsBuiltAgain) {
  TempDir dir;
  std::vector<std::string> by_size;
  {
    auto store = open_store(dir);
    fill_for_orders(*store);
    by_size = top_keys(*store, ListOrder::kSize, 40);
  }
  // No mark, and a key of an entry that is not there (as a build stopped
  // half-way, or an index from other data, would leave).
  alter_database(dir, [](rocksdb::DB& db, rocksdb::ColumnFamilyHandle* order) {
    ASSERT_TRUE(db.Delete(rocksdb::WriteOptions(), order, rocksdb::Slice("\0index-v1", 9)).ok());
    ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), order,
                       rocksdb::Slice("s\0\0\0\0\0\0\0\0\0ghost", 15), rocksdb::Slice())
                    .ok());
  });
  auto store = open_store(dir);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(top_keys(*store, ListOrder::kSize, 100), by_size);
}

TEST(RocksDbStore, EvictionTakesTheLeastRecentlyReadFromTheIndex) {
  TempDir dir;
  auto store = open_store(dir);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(store->put(Area::kAction, "k" + std::to_string(i), std::string(1000, 'x')));
    std::this_thread::sleep_for(std::chrono::milliseconds(2)); // distinct access times
  }
  // Reading the five oldest makes them the most recent.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store->get(Area::kAction, "k" + std::to_string(i)));
  }
  ASSERT_TRUE(store->flush_access_times());
  auto evicted = store->evict_to(10 * 1000);
  ASSERT_TRUE(evicted.has_value()) << evicted.error().message;
  EXPECT_EQ(*evicted, 10U);
  std::vector<std::string> left = top_keys(*store, ListOrder::kLastAccess, 100);
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"k0", "k1", "k15", "k16", "k17", "k18", "k19", "k2",
                                            "k3", "k4"}));
  EXPECT_EQ(store->usage().entries, 10U);
}

TEST(RocksDbStore, UnopenablePathIsAClearError) {
  RocksDbOptions options;
  options.path = "/proc/kcache-cannot-be-here";
  auto store = RocksDbStore::open(options);
  ASSERT_FALSE(store.has_value());
  EXPECT_NE(store.error().message.find("/proc/kcache-cannot-be-here"), std::string::npos);
}

} // namespace
} // namespace kcache::storage
