// verify_entries and collect_garbage, against the memory tier and against
// RocksDB behind frames (as kcached stacks it).

#include "../support/temp_dir.h"

#include <kcache/cachekey/sha256.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/framed_store.h>
#include <kcache/storage/maintenance.h>
#include <kcache/storage/memory_store.h>
#include <kcache/storage/rocksdb_store.h>

#include <gtest/gtest.h>

#include <thread>

namespace kcache::storage {
namespace {

std::string digest_of(const std::string& s) {
  return cachekey::to_hex(cachekey::Sha256::of(s));
}

bool has(Store& store, Area area, const std::string& key) {
  auto found = store.contains(area, key);
  return found && *found;
}

class MaintenanceTest : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      store_ = std::make_unique<MemoryStore>(64 << 20);
      return;
    }
    RocksDbOptions options;
    options.path = dir_.str();
    auto opened = RocksDbStore::open(options);
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    rocksdb_ = opened->get();
    store_ = std::make_unique<FramedStore>(std::move(*opened));
  }

  // Access times as gc sees them: RocksDB writes them in batches.
  void settle() {
    if (rocksdb_ != nullptr) {
      ASSERT_TRUE(rocksdb_->flush_access_times().has_value());
    }
  }

  void put_blob(const std::string& blob) {
    ASSERT_TRUE(store_->put(Area::kCas, digest_of(blob), blob).has_value());
  }

  kcache::testing::TempDir dir_;
  RocksDbStore* rocksdb_ = nullptr; // owned by store_ when the tier is RocksDB
  std::unique_ptr<Store> store_;
};

TEST_P(MaintenanceTest, VerifyFindsBlobsThatDoNotHashToTheirKey) {
  put_blob("good");
  const std::string forged = digest_of("forged");
  ASSERT_TRUE(store_->put(Area::kCas, forged, "evil").has_value());

  auto report = verify_entries(*store_, {Area::kCas, "", /*repair=*/false});
  ASSERT_TRUE(report.has_value()) << report.error().message;
  EXPECT_EQ(report->area, Area::kCas);
  EXPECT_EQ(report->checked, 2U);
  ASSERT_EQ(report->problems.size(), 1U);
  EXPECT_EQ(report->problems[0].key, forged);
  if (rocksdb_ != nullptr) {
    // The frame binds a CAS value to its key: the read itself finds and drops it.
    EXPECT_EQ(report->problems[0].problem, "unreadable (corrupt frame, deleted)");
    EXPECT_EQ(report->repaired, 1U);
    EXPECT_FALSE(has(*store_, Area::kCas, forged));
  } else {
    EXPECT_EQ(report->problems[0].problem, "content does not hash to its key");
    EXPECT_EQ(report->repaired, 0U);
    EXPECT_TRUE(has(*store_, Area::kCas, forged)); // reported, not touched

    report = verify_entries(*store_, {Area::kCas, "", /*repair=*/true});
    ASSERT_TRUE(report.has_value());
    EXPECT_EQ(report->repaired, 1U);
    EXPECT_FALSE(has(*store_, Area::kCas, forged));
  }
  EXPECT_TRUE(has(*store_, Area::kCas, digest_of("good")));

  report = verify_entries(*store_, {Area::kCas, "", /*repair=*/false});
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->checked, 1U);
  EXPECT_TRUE(report->problems.empty());
}

TEST_P(MaintenanceTest, VerifyFindsRecordsWhoseBlobsAreGone) {
  ArtifactStore artifacts(*store_);
  ASSERT_TRUE(artifacts.put("kept", {{"a.o", "kept bytes"}}, "test").has_value());
  ASSERT_TRUE(artifacts.put("broken", {{"b.o", "lost bytes"}}, "test").has_value());
  ASSERT_TRUE(store_->remove(Area::kCas, digest_of("lost bytes")).has_value());

  auto report = verify_entries(*store_, {Area::kAction, "", /*repair=*/false});
  ASSERT_TRUE(report.has_value()) << report.error().message;
  EXPECT_EQ(report->checked, 2U);
  ASSERT_EQ(report->problems.size(), 1U);
  EXPECT_EQ(report->problems[0].key, "broken");
  EXPECT_EQ(report->problems[0].problem,
            "output 'b.o' blob " + digest_of("lost bytes") + " is missing");
  EXPECT_TRUE(has(*store_, Area::kAction, "broken"));

  report = verify_entries(*store_, {Area::kAction, "", /*repair=*/true});
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->repaired, 1U);
  EXPECT_FALSE(has(*store_, Area::kAction, "broken"));
  EXPECT_TRUE(has(*store_, Area::kAction, "kept"));
}

TEST_P(MaintenanceTest, VerifyDropsUnreadableRecordsAndHonoursThePrefix) {
  ASSERT_TRUE(store_->put(Area::kAction, "x-garbled", "{not json").has_value());
  ASSERT_TRUE(store_->put(Area::kAction, "y-garbled", "{not json").has_value());

  auto report = verify_entries(*store_, {Area::kAction, "x-", /*repair=*/false});
  ASSERT_TRUE(report.has_value()) << report.error().message;
  EXPECT_EQ(report->checked, 1U);
  ASSERT_EQ(report->problems.size(), 1U);
  EXPECT_EQ(report->problems[0].key, "x-garbled");
  EXPECT_EQ(report->problems[0].problem, "unreadable record (deleted)");
  EXPECT_EQ(report->repaired, 1U); // the read deletes it, repair or not
  EXPECT_FALSE(has(*store_, Area::kAction, "x-garbled"));
  EXPECT_TRUE(has(*store_, Area::kAction, "y-garbled")); // outside the prefix
}

TEST_P(MaintenanceTest, VerifyReportsFramesThatFailTheirChecksum) {
  if (rocksdb_ == nullptr) {
    GTEST_SKIP() << "only persisted tiers are framed";
  }
  const std::string key = digest_of("framed");
  ASSERT_TRUE(rocksdb_->put(Area::kCas, key, "not a frame").has_value());

  auto report = verify_entries(*store_, {Area::kCas, "", /*repair=*/false});
  ASSERT_TRUE(report.has_value()) << report.error().message;
  ASSERT_EQ(report->problems.size(), 1U);
  EXPECT_EQ(report->problems[0].problem, "unreadable (corrupt frame, deleted)");
  EXPECT_EQ(report->repaired, 1U);
  EXPECT_FALSE(has(*rocksdb_, Area::kCas, key));
}

TEST_P(MaintenanceTest, GcDropsLeastRecentlyUsedFirst) {
  std::vector<std::string> blobs;
  for (int i = 0; i < 5; ++i) {
    blobs.emplace_back(1000, static_cast<char>('a' + i));
    put_blob(blobs.back());
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  // The oldest write is the most recent read: it must survive.
  ASSERT_TRUE(store_->get(Area::kCas, digest_of(blobs[0]))->has_value());
  settle();
  auto listed = store_->list({});
  ASSERT_TRUE(listed.has_value());
  const std::uint64_t entry_size = listed->front().size; // equal blobs, equal stored sizes

  auto report = collect_garbage(*store_, (2 * entry_size) + (entry_size / 2));
  ASSERT_TRUE(report.has_value()) << report.error().message;
  EXPECT_EQ(report->before_bytes, 5 * entry_size);
  EXPECT_EQ(report->removed_entries, 3U);
  EXPECT_EQ(report->removed_bytes, 3 * entry_size);
  EXPECT_EQ(report->after_bytes, 2 * entry_size);
  EXPECT_TRUE(has(*store_, Area::kCas, digest_of(blobs[0])));
  EXPECT_TRUE(has(*store_, Area::kCas, digest_of(blobs[4])));
  for (int i = 1; i <= 3; ++i) {
    EXPECT_FALSE(has(*store_, Area::kCas, digest_of(blobs[i]))) << i;
  }
}

TEST_P(MaintenanceTest, GcUnderTheLimitRemovesNothing) {
  put_blob("small");
  auto report = collect_garbage(*store_, 1 << 20);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->removed_entries, 0U);
  EXPECT_EQ(report->before_bytes, report->after_bytes);
  EXPECT_TRUE(has(*store_, Area::kCas, digest_of("small")));
}

INSTANTIATE_TEST_SUITE_P(Tiers, MaintenanceTest, ::testing::Values("memory", "rocksdb"),
                         [](const ::testing::TestParamInfo<std::string>& tier) {
                           return tier.param;
                         });

// A tier that cannot list: both walks say so as a value.
class UnlistableStore final : public Store {
public:
  std::string name() const override { return "unlistable"; }
  GetResult get(Area /*area*/, std::string_view /*key*/) override { return std::nullopt; }
  Result<void> put(Area /*area*/, std::string_view /*key*/, std::string_view /*value*/) override {
    return {};
  }
  Result<bool> contains(Area /*area*/, std::string_view /*key*/) override { return false; }
  Result<void> remove(Area /*area*/, std::string_view /*key*/) override { return {}; }
  Result<std::vector<ObjectInfo>> list(const ListOptions& /*options*/) override {
    return tl::unexpected(StoreError{StoreError::Code::kUnavailable, "down"});
  }
};

TEST(Maintenance, ATierThatCannotListIsAnError) {
  UnlistableStore store;
  auto verified = verify_entries(store, {});
  ASSERT_FALSE(verified.has_value());
  EXPECT_EQ(verified.error().code, StoreError::Code::kUnavailable);
  auto collected = collect_garbage(store, 0);
  ASSERT_FALSE(collected.has_value());
  EXPECT_EQ(collected.error().message, "down");
}

} // namespace
} // namespace kcache::storage
