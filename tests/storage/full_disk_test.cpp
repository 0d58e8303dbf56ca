// Issue 13, the storage rows, on a real small tmpfs: a full disk never brings
// the RocksDB tier down, reads go on, writes answer kNoSpace, a start on a
// full disk serves reads, and no acknowledged write is lost across a restart.
// Label `reliability`; skips (with the reason) where a tmpfs cannot be mounted.

#include "test_bytes.h"
#include "tmpfs_mount.h"

#include <kcache/storage/counting_store.h>
#include <kcache/storage/framed_store.h>
#include <kcache/storage/rocksdb_store.h>
#include <kcache/storage/store_factory.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

namespace kcache::storage {
namespace {

using kcache::testing::random_bytes;
using kcache::testing::TmpfsMount;

#define SKIP_WITHOUT_TMPFS(disk)                                                                   \
  if (!(disk).mounted()) {                                                                         \
    GTEST_SKIP() << (disk).error();                                                                \
  }

std::vector<std::string> tiers_on(const std::filesystem::path& dir,
                                  const std::string& capacity = "10GiB") {
  return {"memory://?capacity=256MiB", "rocksdb://" + dir.string() + "?capacity=" + capacity};
}

RocksDbStore& rocksdb_of(TieredStack& stack) {
  auto& framed = dynamic_cast<FramedStore&>(*stack.tiers.at(1));
  return dynamic_cast<RocksDbStore&>(dynamic_cast<CountingStore&>(framed.inner()).inner());
}

std::string value_for(const std::string& key, std::size_t size) {
  return random_bytes(size, std::hash<std::string>{}(key));
}

// Puts keys prefix0.. until `count`; returns those acknowledged. Every refusal
// must be kNoSpace.
std::vector<std::string> put_values(Store& store, const std::string& prefix, int count,
                                    std::size_t size, int* refused = nullptr) {
  std::vector<std::string> acknowledged;
  for (int i = 0; i < count; ++i) {
    const std::string key = prefix + std::to_string(i);
    if (auto ok = store.put(Area::kCas, key, value_for(key, size)); ok) {
      acknowledged.push_back(key);
    } else {
      EXPECT_EQ(ok.error().code, StoreError::Code::kNoSpace) << ok.error().message;
      if (refused != nullptr) {
        ++*refused;
      }
    }
  }
  return acknowledged;
}

void expect_readable(Store& store, const std::vector<std::string>& keys, std::size_t size) {
  int missing = 0;
  for (const std::string& key : keys) {
    auto got = store.get(Area::kCas, key);
    ASSERT_TRUE(got.has_value()) << key << ": " << got.error().message;
    if (!got->has_value()) {
      ++missing;
      continue;
    }
    EXPECT_EQ(**got, value_for(key, size)) << key;
  }
  EXPECT_EQ(missing, 0) << "of " << keys.size() << " acknowledged values";
}

constexpr std::size_t kMiB = 1 << 20;

// Row 2: ~60 puts of 1 MiB into a 64 MiB tmpfs aborted kcached.
TEST(FullDisk, WritesAnswerNoSpaceReadsGoOnAndNothingAcknowledgedIsLost) {
  TmpfsMount disk(64 * kMiB);
  SKIP_WITHOUT_TMPFS(disk);
  const auto dir = disk.path() / "db";
  std::vector<std::string> acknowledged;
  {
    auto stack = make_tiered_store(tiers_on(dir));
    ASSERT_TRUE(stack.has_value()) << stack.error().message;
    int refused = 0;
    acknowledged = put_values(*stack->store, "k", 80, kMiB, &refused);
    EXPECT_GE(acknowledged.size(), 30U);
    EXPECT_GT(refused, 0) << "80 MiB cannot fit a 64 MiB disk";
    EXPECT_GT(stack->tiers[1]->counters().no_space, 0U);
    EXPECT_EQ(stack->store->counters().puts, acknowledged.size());
    expect_readable(*stack->store, acknowledged, kMiB);
  }
  auto reopened = make_tiered_store(tiers_on(dir));
  ASSERT_TRUE(reopened.has_value()) << reopened.error().message;
  expect_readable(*reopened->store, acknowledged, kMiB); // memory is empty: from RocksDB
}

// Row 2: a start on a full disk aborted again at every start until space was freed.
TEST(FullDisk, AStartOnAFullDiskServesReadsThenWritesOnceSpaceIsBack) {
  TmpfsMount disk(64 * kMiB);
  SKIP_WITHOUT_TMPFS(disk);
  const auto dir = disk.path() / "db";
  std::vector<std::string> acknowledged;
  {
    auto stack = make_tiered_store(tiers_on(dir));
    ASSERT_TRUE(stack.has_value()) << stack.error().message;
    acknowledged = put_values(*stack->store, "k", 20, kMiB);
    ASSERT_EQ(acknowledged.size(), 20U);
  }
  disk.fill();
  ASSERT_LT(disk.free_bytes(), 64U << 10);
  {
    auto stack = make_tiered_store(tiers_on(dir));
    ASSERT_TRUE(stack.has_value())
        << "a full disk must not stop the start: " << stack.error().message;
    expect_readable(*stack->store, acknowledged, kMiB);
    auto put = stack->store->put(Area::kCas, "more", "value");
    ASSERT_FALSE(put.has_value());
    EXPECT_EQ(put.error().code, StoreError::Code::kNoSpace) << put.error().message;
  }
  disk.release();
  auto stack = make_tiered_store(tiers_on(dir));
  ASSERT_TRUE(stack.has_value()) << stack.error().message;
  EXPECT_FALSE(rocksdb_of(*stack).read_only());
  ASSERT_TRUE(stack->store->put(Area::kCas, "more", "value").has_value());
  expect_readable(*stack->store, acknowledged, kMiB);
}

// Another process fills the disk while the store runs: puts are refused
// before RocksDB sees them, and RocksDB's own flush (here forced, and at
// close) gets the reserve's room. Writes resume once space is back.
TEST(FullDisk, TheDiskFillingFromOutsideNeverReachesRocksDb) {
  TmpfsMount disk(64 * kMiB);
  SKIP_WITHOUT_TMPFS(disk);
  RocksDbOptions options;
  options.path = (disk.path() / "db").string();
  std::vector<std::string> acknowledged;
  {
    auto opened = RocksDbStore::open(options);
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    RocksDbStore& rocks = **opened;
    FramedStore store(std::move(*opened));
    acknowledged = put_values(store, "k", 5, kMiB / 2); // unflushed: in the WAL and memtables
    ASSERT_EQ(acknowledged.size(), 5U);
    disk.fill();
    int refused = 0;
    EXPECT_TRUE(put_values(store, "full", 3, kMiB / 2, &refused).empty());
    EXPECT_EQ(refused, 3);
    expect_readable(store, acknowledged, kMiB / 2);
    auto flushed = rocks.flush();
    EXPECT_TRUE(flushed.has_value()) << flushed.error().message;
    disk.release();
    const auto more = put_values(store, "after", 4, kMiB / 2);
    EXPECT_EQ(more.size(), 4U) << "writes must resume once space is back";
    acknowledged.insert(acknowledged.end(), more.begin(), more.end());
    disk.fill(); // and close on a full disk
  }
  disk.release();
  auto reopened = RocksDbStore::open(options);
  ASSERT_TRUE(reopened.has_value()) << reopened.error().message;
  FramedStore store(std::move(*reopened));
  expect_readable(store, acknowledged, kMiB / 2);
}

// Row 3: 128 MiB tmpfs, capacity 20 MiB: 150 puts were acknowledged, 3 of the
// last 20 readable, 0 of 10 later puts survived a restart; the WAL (76 MB at
// 18 MB of values) was not counted.
TEST(DiskCapacity, TheWalIsBoundedAndCountedAndAcknowledgedPutsSurviveARestart) {
  TmpfsMount disk(128 * kMiB);
  SKIP_WITHOUT_TMPFS(disk);
  const auto dir = disk.path() / "db";
  constexpr std::uint64_t kCapacity = 20 * kMiB;
  constexpr std::size_t kSize = 128 << 10;
  std::vector<std::string> recent;
  std::uint64_t peak_dir = 0;
  std::uint64_t peak_accounted = 0;
  {
    auto stack = make_tiered_store(tiers_on(dir, "20MiB"));
    ASSERT_TRUE(stack.has_value()) << stack.error().message;
    RocksDbStore& rocks = rocksdb_of(*stack);
    for (int i = 0; i < 150; ++i) {
      const std::string key = "k" + std::to_string(i);
      ASSERT_TRUE(stack->store->put(Area::kCas, key, value_for(key, kSize)).has_value()) << i;
      peak_accounted = std::max(peak_accounted, rocks.accounted_bytes());
      std::uint64_t dir_bytes = 0;
      for (const auto& f : std::filesystem::directory_iterator(dir)) {
        const bool reserve = f.path().filename() == "KCACHE_RESERVE"; // room held for RocksDB
        std::error_code ec; // RocksDB deletes files meanwhile
        const std::uintmax_t size = f.file_size(ec);
        dir_bytes += ec || reserve ? 0 : size;
      }
      peak_dir = std::max(peak_dir, dir_bytes);
      if (i >= 130) {
        recent.push_back(key);
      }
    }
    const auto later = put_values(*stack->store, "later", 10, kSize);
    ASSERT_EQ(later.size(), 10U);
    recent.insert(recent.end(), later.begin(), later.end());
    EXPECT_LE(rocks.accounted_bytes(), kCapacity);
    EXPECT_GT(stack->tiers[1]->counters().evictions, 0U);
  }
  std::cout << "peak accounted " << peak_accounted << " bytes, peak directory " << peak_dir
            << " bytes, capacity " << kCapacity << "\n";
  // Values plus WAL within the capacity (one put may overshoot before eviction).
  EXPECT_LE(peak_accounted, kCapacity + 2 * kSize);
  // On disk also blob garbage not yet compacted away and RocksDB's own files.
  EXPECT_LE(peak_dir, 2 * kCapacity);
  auto reopened = make_tiered_store(tiers_on(dir, "20MiB"));
  ASSERT_TRUE(reopened.has_value()) << reopened.error().message;
  expect_readable(*reopened->store, recent, kSize);
}

} // namespace
} // namespace kcache::storage
