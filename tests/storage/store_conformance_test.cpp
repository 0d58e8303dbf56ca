// The store.h contract, run against every tier and decorator: a store that
// passes here can stand anywhere in a TieredStore. Each instance makes a fresh,
// empty store; the Redis ones use a real redis-server (skipped when there is
// none) with a namespace of their own per test.

#include "../support/redis_server.h"
#include "../support/temp_dir.h"
#include "faulty_store.h"
#include "test_bytes.h"

#include <kcache/storage/counting_store.h>
#include <kcache/storage/framed_store.h>
#include <kcache/storage/memory_store.h>
#include <kcache/storage/redis_store.h>
#include <kcache/storage/rocksdb_store.h>
#include <kcache/storage/store_factory.h>
#include <kcache/storage/tiered_store.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <thread>

namespace kcache::storage {
namespace {

using kcache::testing::FaultyStore;
using kcache::testing::random_bytes;
using kcache::testing::RedisServer;
using kcache::testing::TempDir;

// Shared by every Redis instance: one server for the whole suite.
RedisServer* redis_server() {
  static std::unique_ptr<RedisServer> server = []() -> std::unique_ptr<RedisServer> {
    try {
      return std::make_unique<RedisServer>();
    } catch (const std::exception&) {
      return nullptr; // no redis-server here: the Redis instances skip
    }
  }();
  return server.get();
}

std::string fresh_namespace() {
  static std::atomic<int> next{0};
  return "conformance-" + std::to_string(next++);
}

RedisOptions redis_options() {
  RedisOptions o;
  o.port = redis_server()->port();
  o.ns = fresh_namespace();
  return o;
}

std::unique_ptr<Store> open_rocksdb(const TempDir& dir) {
  RocksDbOptions o;
  o.path = dir.str();
  auto store = RocksDbStore::open(o);
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return std::move(*store);
}

std::unique_ptr<Store> from_factory(const std::string& url) {
  auto store = make_store(url);
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return std::move(*store);
}

struct Tier {
  std::string name;
  bool needs_redis = false;
  // Makes an empty store; `dir` lives as long as the store.
  std::function<std::unique_ptr<Store>(const TempDir& dir)> make;
};

std::vector<Tier> tiers() {
  return {
      {"Memory", false, [](const TempDir&) { return std::make_unique<MemoryStore>(64 << 20); }},
      {"RocksDb", false, open_rocksdb},
      {"Redis", true, [](const TempDir&) { return std::make_unique<RedisStore>(redis_options()); }},
      {"FramedMemory", false,
       [](const TempDir&) {
         return std::make_unique<FramedStore>(std::make_unique<MemoryStore>(64 << 20));
       }},
      {"CountingMemory", false,
       [](const TempDir&) {
         return std::make_unique<CountingStore>(std::make_unique<MemoryStore>(64 << 20));
       }},
      {"FactoryRocksDb", false,
       [](const TempDir& dir) { return from_factory("rocksdb://" + dir.str()); }},
      {"FactoryRedis", true,
       [](const TempDir&) {
         return from_factory("redis://127.0.0.1:" + std::to_string(redis_server()->port()) +
                             "?namespace=" + fresh_namespace());
       }},
      {"Tiered", false,
       [](const TempDir& dir) {
         const std::vector<std::string> urls = {"memory://?capacity=64MiB",
                                                "rocksdb://" + dir.str()};
         auto stack = make_tiered_store(urls);
         EXPECT_TRUE(stack.has_value()) << stack.error().message;
         return std::move(stack->store);
       }},
      // Cluster mode's stack: local tiers over the shared Redis.
      {"TieredOverRedis", true,
       [](const TempDir& dir) {
         const std::vector<std::string> urls = {
             "memory://?capacity=64MiB", "rocksdb://" + dir.str(),
             "redis://127.0.0.1:" + std::to_string(redis_server()->port()) +
                 "?namespace=" + fresh_namespace()};
         auto stack = make_tiered_store(urls);
         EXPECT_TRUE(stack.has_value()) << stack.error().message;
         return std::move(stack->store);
       }},
      // A first tier too small for the large value (kTooLarge), over a test
      // double that answers with the base class's get_many.
      {"TieredOverFaulty", false,
       [](const TempDir&) {
         std::vector<std::unique_ptr<Store>> tiers;
         tiers.push_back(std::make_unique<MemoryStore>(1 << 20));
         tiers.push_back(std::make_unique<FaultyStore>());
         return std::make_unique<TieredStore>(std::move(tiers));
       }},
  };
}

class StoreConformance : public ::testing::TestWithParam<Tier> {
protected:
  void SetUp() override {
    if (GetParam().needs_redis && redis_server() == nullptr) {
      GTEST_SKIP() << "no redis-server: run scripts/setup to test the Redis tier";
    }
    store_ = GetParam().make(dir_);
    ASSERT_NE(store_, nullptr);
  }

  Store& store() { return *store_; }
  std::optional<Bytes> value_of(Area area, std::string_view key) {
    auto got = store_->get(area, key);
    EXPECT_TRUE(got.has_value()) << got.error().message;
    return got ? *got : std::nullopt;
  }
  void put(Area area, std::string_view key, std::string_view value) {
    auto ok = store_->put(area, key, value);
    ASSERT_TRUE(ok.has_value()) << ok.error().message;
  }
  std::set<std::string> listed_keys(const ListOptions& options) {
    auto listed = store_->list(options);
    EXPECT_TRUE(listed.has_value()) << listed.error().message;
    std::set<std::string> keys;
    for (const ObjectInfo& info : listed.value_or(std::vector<ObjectInfo>{})) {
      keys.insert(info.key);
    }
    return keys;
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreConformance, HasAName) {
  EXPECT_FALSE(store().name().empty());
}

TEST_P(StoreConformance, MissingKeyIsAMissNotAnError) {
  auto got = store().get(Area::kCas, "absent");
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_FALSE(got->has_value());
  auto contained = store().contains(Area::kCas, "absent");
  ASSERT_TRUE(contained.has_value()) << contained.error().message;
  EXPECT_FALSE(*contained);
}

TEST_P(StoreConformance, PutThenGetRoundTrips) {
  put(Area::kAction, "kc1-key", "a record");
  EXPECT_EQ(value_of(Area::kAction, "kc1-key"), "a record");
}

TEST_P(StoreConformance, AreasAreSeparate) {
  put(Area::kAction, "same", "action");
  put(Area::kCas, "same", "blob");
  EXPECT_EQ(value_of(Area::kAction, "same"), "action");
  EXPECT_EQ(value_of(Area::kCas, "same"), "blob");
  ASSERT_TRUE(store().remove(Area::kCas, "same").has_value());
  EXPECT_EQ(value_of(Area::kAction, "same"), "action");
}

TEST_P(StoreConformance, OverwriteReplacesTheValue) {
  put(Area::kCas, "k", "first, and longer than the second");
  put(Area::kCas, "k", "second");
  EXPECT_EQ(value_of(Area::kCas, "k"), "second");
  EXPECT_EQ(listed_keys({}).count("k"), 1U);
}

TEST_P(StoreConformance, EmptyValueIsAHitNotAMiss) {
  put(Area::kAction, "empty", "");
  EXPECT_EQ(value_of(Area::kAction, "empty"), "");
  EXPECT_TRUE(*store().contains(Area::kAction, "empty"));
}

TEST_P(StoreConformance, BinaryValuesRoundTripByteForByte) {
  const std::string value("\0\xff\x01KCVF\0\n\r", 11);
  put(Area::kCas, "binary", value);
  EXPECT_EQ(value_of(Area::kCas, "binary"), value);
}

TEST_P(StoreConformance, LargeValueRoundTrips) {
  const std::string value = random_bytes(8 << 20, 7);
  put(Area::kCas, "large", value);
  const auto got = value_of(Area::kCas, "large");
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(*got == value) << "8 MiB value differs (size " << got->size() << ")";
}

TEST_P(StoreConformance, ContainsFollowsPutAndRemove) {
  put(Area::kCas, "k", "v");
  EXPECT_TRUE(*store().contains(Area::kCas, "k"));
  EXPECT_FALSE(*store().contains(Area::kAction, "k"));
  ASSERT_TRUE(store().remove(Area::kCas, "k").has_value());
  EXPECT_FALSE(*store().contains(Area::kCas, "k"));
  EXPECT_FALSE(value_of(Area::kCas, "k").has_value());
}

TEST_P(StoreConformance, RemovingAMissingKeySucceeds) {
  auto removed = store().remove(Area::kAction, "never-stored");
  EXPECT_TRUE(removed.has_value()) << removed.error().message;
}

TEST_P(StoreConformance, ListFiltersByAreaAndPrefix) {
  put(Area::kAction, "kc1-aa", "1");
  put(Area::kAction, "kc1-ab", "22");
  put(Area::kAction, "kc1-b", "333");
  put(Area::kCas, "kc1-ac", "4444");
  ListOptions ac;
  ac.area = Area::kAction;
  ac.prefix = "kc1-a";
  EXPECT_EQ(listed_keys(ac), (std::set<std::string>{"kc1-aa", "kc1-ab"}));
  ListOptions both;
  both.prefix = "kc1-a";
  EXPECT_EQ(listed_keys(both), (std::set<std::string>{"kc1-aa", "kc1-ab", "kc1-ac"}));
  auto listed = store().list(ac);
  ASSERT_TRUE(listed.has_value());
  for (const ObjectInfo& info : *listed) {
    EXPECT_EQ(info.area, Area::kAction);
    EXPECT_GT(info.size, 0U) << info.key;
  }
}

TEST_P(StoreConformance, ListPrefixIsLiteral) {
  put(Area::kAction, "kc1-[glob]*?", "1");
  put(Area::kAction, "kc1-g", "2");
  ListOptions options;
  options.area = Area::kAction;
  options.prefix = "kc1-[glob]*";
  EXPECT_EQ(listed_keys(options), (std::set<std::string>{"kc1-[glob]*?"}));
}

TEST_P(StoreConformance, ListHonoursTheLimit) {
  for (int i = 0; i < 5; ++i) {
    put(Area::kCas, "blob-" + std::to_string(i), "v");
  }
  ListOptions options;
  options.limit = 3;
  auto listed = store().list(options);
  ASSERT_TRUE(listed.has_value()) << listed.error().message;
  EXPECT_EQ(listed->size(), 3U);
}

// list() is in (area, key) order, and a cursor pages through it: the
// dashboard's pages of a large store (service/src/entry_pages.h).
TEST_P(StoreConformance, ListPagesInKeyOrderAfterACursor) {
  std::vector<std::string> keys;
  for (int i = 0; i < 12; ++i) {
    keys.push_back("kc1-p" + std::to_string(100 + (i * 7) % 12)); // put out of order
    put(Area::kAction, keys.back(), "v");
  }
  put(Area::kAction, "kc1-other", "v");
  put(Area::kCas, "kc1-p999", "blob");
  std::sort(keys.begin(), keys.end());
  ListOptions options;
  options.prefix = "kc1-p";
  options.limit = 5;
  std::vector<std::string> seen;
  for (int page = 0; page < 10; ++page) {
    auto listed = store().list(options);
    ASSERT_TRUE(listed.has_value()) << listed.error().message;
    for (const ObjectInfo& info : *listed) {
      seen.push_back(std::string(area_name(info.area)) + ":" + info.key);
    }
    if (listed->size() < options.limit) {
      break;
    }
    options.after = ListCursor{listed->back().area, listed->back().key};
  }
  std::vector<std::string> expected;
  for (const std::string& k : keys) {
    expected.push_back("ac:" + k);
  }
  expected.emplace_back("cas:kc1-p999"); // action records first, then blobs
  EXPECT_EQ(seen, expected);
  // A cursor before the prefix starts at the prefix; one past it, nothing.
  options.after = ListCursor{Area::kAction, "kc1-a"};
  options.area = Area::kAction;
  options.limit = 2;
  auto first = store().list(options);
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->size(), 2U);
  EXPECT_EQ((*first)[0].key, keys[0]);
  EXPECT_EQ((*first)[1].key, keys[1]);
  options.after = ListCursor{Area::kCas, ""};
  EXPECT_TRUE(listed_keys(options).empty()) << "past the action records, in the action area";
}

TEST_P(StoreConformance, ListOfAnEmptyStoreIsEmpty) {
  EXPECT_TRUE(listed_keys({}).empty());
}

TEST_P(StoreConformance, GetManyAnswersEachKeyInOrder) {
  put(Area::kCas, "a", "alpha");
  put(Area::kCas, "c", "gamma");
  put(Area::kAction, "b", "in the other area");
  const std::vector<std::string> keys = {"a", "b", "c", "a"};
  auto results = store().get_many(Area::kCas, keys);
  ASSERT_EQ(results.size(), keys.size());
  const std::vector<std::optional<Bytes>> expected = {"alpha", std::nullopt, "gamma", "alpha"};
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(results[i].has_value()) << i << ": " << results[i].error().message;
    EXPECT_EQ(*results[i], expected[i]) << i;
  }
  EXPECT_TRUE(store().get_many(Area::kCas, {}).empty());
}

TEST_P(StoreConformance, PeekReadsWhatGetReadsAndLeavesNoTrace) {
  const std::string value = random_bytes(4096);
  put(Area::kAction, "peeked", value);
  const CounterSnapshot before = store().counters();
  for (int i = 0; i < 3; ++i) {
    auto got = store().peek(Area::kAction, "peeked");
    ASSERT_TRUE(got.has_value()) << got.error().message;
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ(**got, value);
  }
  auto missing = store().peek(Area::kAction, "never-put");
  ASSERT_TRUE(missing.has_value()) << missing.error().message;
  EXPECT_FALSE(missing->has_value());
  // No hit, miss, read bytes or backfill counted; no hit recorded on the entry.
  const CounterSnapshot after = store().counters();
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.bytes_read, before.bytes_read);
  EXPECT_EQ(after.backfills, before.backfills);
  auto listed = store().list(ListOptions{});
  ASSERT_TRUE(listed.has_value()) << listed.error().message;
  ASSERT_EQ(listed->size(), 1U);
  EXPECT_EQ(listed->front().hits, 0U);
}

TEST_P(StoreConformance, ConcurrentCallersSeeTheirOwnValues) {
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
        const std::string value = random_bytes(1000 + i, t * 100 + i);
        if (!store().put(Area::kCas, key, value)) {
          ++wrong;
        }
        auto got = store().get(Area::kCas, key);
        if (!got || *got != value) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(listed_keys({}).size(), 100U);
}

constexpr ListOrder kOrders[] = {ListOrder::kSize, ListOrder::kCreated, ListOrder::kLastAccess,
                                 ListOrder::kHits};

// What list_top(order, limit) must answer: the whole listing, sorted.
std::vector<ObjectInfo> sorted_listing(Store& store, ListOrder order, std::optional<Area> area) {
  ListOptions options;
  options.area = area;
  auto all = store.list(options);
  EXPECT_TRUE(all.has_value()) << all.error().message;
  std::vector<ObjectInfo> rows = all.value_or(std::vector<ObjectInfo>{});
  std::sort(rows.begin(), rows.end(), [order](const ObjectInfo& a, const ObjectInfo& b) {
    return comes_before(a, b, order);
  });
  return rows;
}

// list_top's rows against the sorted listing, of both areas and of each:
// the same entries in the same order, with the same values. A store that
// keeps no order (a test double) answers kUnsupported and is skipped.
void expect_top_is_the_sorted_listing(Store& store, const std::string& when, bool keeps_order) {
  const std::optional<Area> areas[] = {std::nullopt, Area::kAction, Area::kCas};
  for (const auto& [area, order] : [&] {
         std::vector<std::pair<std::optional<Area>, ListOrder>> all;
         for (const auto& a : areas) {
           for (const ListOrder o : kOrders) {
             all.emplace_back(a, o);
           }
         }
         return all;
       }()) {
    const std::vector<ObjectInfo> expected = sorted_listing(store, order, area);
    for (const std::size_t limit :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, expected.size(), expected.size() + 50}) {
      auto top = store.list_top({order, limit, false, area});
      if (!top && top.error().code == StoreError::Code::kUnsupported && !keeps_order) {
        return; // a tier that keeps no order, or a stack over one
      }
      ASSERT_TRUE(top.has_value()) << top.error().message;
      const std::size_t n = std::min(limit, expected.size());
      ASSERT_EQ(top->rows.size(), n)
          << when << ", order " << static_cast<int>(order) << ", limit " << limit;
      for (std::size_t i = 0; i < n; ++i) {
        const ObjectInfo& got = top->rows[i];
        const ObjectInfo& want = expected[i];
        EXPECT_EQ(
            std::tie(got.area, got.key, got.size, got.created_ms, got.last_access_ms, got.hits),
            std::tie(want.area, want.key, want.size, want.created_ms, want.last_access_ms,
                     want.hits))
            << when << ", order " << static_cast<int>(order) << ", row " << i << ": " << got.key
            << " where the listing has " << want.key;
      }
      if (top->entries_exact) {
        EXPECT_EQ(top->entries, expected.size()) << when;
      }
    }
  }
}

TEST_P(StoreConformance, ListTopIsTheSortedListingThroughPutsReadsAndRemoves) {
  // Sizes, times and hits that tie and differ, in both areas.
  for (int i = 0; i < 60; ++i) {
    put(i % 3 == 0 ? Area::kCas : Area::kAction, "key-" + std::to_string(i),
        std::string(static_cast<std::size_t>((i * 7) % 23 + 1), 'v'));
  }
  // FaultyStore, a test double, keeps no order.
  const bool keeps_order =
      store().lists_by_seek() && GetParam().name.find("Faulty") == std::string::npos;
  expect_top_is_the_sorted_listing(store(), "after puts", keeps_order);
  for (int i = 0; i < 60; i += 4) {
    for (int r = 0; r <= i % 5; ++r) {
      (void)value_of(i % 3 == 0 ? Area::kCas : Area::kAction, "key-" + std::to_string(i));
    }
  }
  expect_top_is_the_sorted_listing(store(), "after reads", keeps_order);
  for (int i = 1; i < 60; i += 7) {
    ASSERT_TRUE(
        store().remove(i % 3 == 0 ? Area::kCas : Area::kAction, "key-" + std::to_string(i)));
  }
  put(Area::kAction, "key-2", std::string(500, 'w')); // a new size for an entry held
  expect_top_is_the_sorted_listing(store(), "after removes and a re-put", keeps_order);
}

TEST_P(StoreConformance, DescribeAnswersEachEntryAsListDoes) {
  put(Area::kAction, "a", "alpha");
  put(Area::kCas, "b", "beta!");
  (void)value_of(Area::kAction, "a");
  const std::vector<ListCursor> asked = {
      {Area::kAction, "a"}, {Area::kAction, "b"}, {Area::kCas, "b"}, {Area::kCas, "zz"}};
  auto described = store().describe(asked);
  ASSERT_TRUE(described.has_value()) << described.error().message;
  ASSERT_EQ(described->size(), asked.size());
  auto listed = store().list(ListOptions{});
  ASSERT_TRUE(listed.has_value());
  ASSERT_EQ(listed->size(), 2U);
  ASSERT_TRUE((*described)[0].has_value());
  EXPECT_EQ((*described)[0]->hits, listed->at(0).hits);
  EXPECT_EQ((*described)[0]->size, listed->at(0).size);
  EXPECT_FALSE((*described)[1].has_value()) << "another area";
  ASSERT_TRUE((*described)[2].has_value());
  EXPECT_EQ((*described)[2]->key, "b");
  EXPECT_FALSE((*described)[3].has_value());
}

INSTANTIATE_TEST_SUITE_P(Tiers, StoreConformance, ::testing::ValuesIn(tiers()),
                         [](const ::testing::TestParamInfo<Tier>& tier) {
                           return tier.param.name;
                         });

} // namespace
} // namespace kcache::storage
