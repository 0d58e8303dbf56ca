#include "../support/redis_server.h"
#include "test_bytes.h"

#include <kcache/storage/counting_store.h>
#include <kcache/storage/framed_store.h>
#include <kcache/storage/redis_store.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace kcache::storage {
namespace {

using kcache::testing::random_bytes;
using kcache::testing::RedisAdmin;
using kcache::testing::RedisServer;
using Clock = std::chrono::steady_clock;

RedisOptions options_for(const RedisServer& server, std::string ns = "test") {
  RedisOptions o;
  o.port = server.port();
  o.ns = std::move(ns);
  o.connect_timeout = std::chrono::milliseconds(100);
  o.op_timeout = std::chrono::milliseconds(300);
  o.breaker = {3, std::chrono::milliseconds(300)};
  return o;
}

class RedisSizes : public ::testing::TestWithParam<std::size_t> {
protected:
  RedisServer server_;
};

TEST_P(RedisSizes, RoundTripThroughFrames) {
  FramedStore store(std::make_unique<RedisStore>(options_for(server_)));
  const std::string value = random_bytes(GetParam(), GetParam());
  ASSERT_TRUE(store.put(Area::kCas, "blob", value).has_value());
  auto got = store.get(Area::kCas, "blob");
  ASSERT_TRUE(got.has_value()) << got.error().message;
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, value);
}

INSTANTIATE_TEST_SUITE_P(Payloads, RedisSizes, ::testing::Values(1U << 10, 64U << 10, 16U << 20));

class RedisStoreTest : public ::testing::Test {
protected:
  RedisServer server_;
};

TEST_F(RedisStoreTest, NamespacesAreIsolatedAndKeysReadable) {
  RedisStore a(options_for(server_, "team-a"));
  RedisStore b(options_for(server_, "team-b"));
  ASSERT_TRUE(a.put(Area::kAction, "kc1-k", "from a").has_value());
  EXPECT_FALSE(b.get(Area::kAction, "kc1-k")->has_value());
  EXPECT_EQ(a.get(Area::kAction, "kc1-k")->value(), "from a");
  EXPECT_EQ(a.redis_key(Area::kAction, "kc1-k"), "team-a:ac:kc1-k");
  EXPECT_TRUE(*a.contains(Area::kAction, "kc1-k"));
  ASSERT_TRUE(a.remove(Area::kAction, "kc1-k").has_value());
  EXPECT_FALSE(*a.contains(Area::kAction, "kc1-k"));
}

TEST_F(RedisStoreTest, BatchGetAndList) {
  RedisStore store(options_for(server_));
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(
        store.put(Area::kCas, "blob-" + std::to_string(i), std::string(i + 1, 'x')).has_value());
  }
  ASSERT_TRUE(store.put(Area::kAction, "kc1-[glob]*", "literal").has_value());
  const std::vector<std::string> keys = {"blob-3", "nope", "blob-29"};
  auto results = store.get_many(Area::kCas, keys);
  ASSERT_EQ(results.size(), 3U);
  EXPECT_EQ(results[0]->value(), "xxxx");
  EXPECT_FALSE(results[1]->has_value());
  EXPECT_EQ(results[2]->value().size(), 30U);

  ListOptions options;
  options.area = Area::kCas;
  auto all = store.list(options);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->size(), 30U);
  options.prefix = "blob-2";
  auto some = store.list(options);
  ASSERT_TRUE(some.has_value());
  EXPECT_EQ(some->size(), 11U); // blob-2, blob-20..29
  for (const ObjectInfo& info : *some) {
    EXPECT_EQ(info.size, std::stoul(info.key.substr(5)) + 1);
  }
  ListOptions glob;
  glob.area = Area::kAction;
  glob.prefix = "kc1-[glob]";
  EXPECT_EQ(store.list(glob)->size(), 1U);
}

// The listing index (storage/src/redis_order_index.h).

std::vector<std::string> keys_of(const std::vector<ObjectInfo>& rows) {
  std::vector<std::string> out;
  for (const ObjectInfo& row : rows) {
    out.push_back(row.key);
  }
  return out;
}

TEST_F(RedisStoreTest, ValuesStoredBeforeTheIndexAreIndexedByTheFirstListing) {
  RedisAdmin admin(server_.port());
  for (int i = 0; i < 25; ++i) { // as a kcached from before the index wrote them
    admin.run({"SET", "old:cas:blob-" + std::to_string(100 + i), std::string(i + 1, 'x')});
  }
  admin.run({"SET", "other:cas:not-ours", "x"});
  RedisStore store(options_for(server_, "old"));
  auto top = store.list_top({ListOrder::kSize, 3, false, Area::kCas});
  ASSERT_TRUE(top.has_value()) << top.error().message;
  EXPECT_EQ(keys_of(top->rows), (std::vector<std::string>{"blob-124", "blob-123", "blob-122"}));
  EXPECT_EQ(top->rows[0].size, 25U);
  EXPECT_EQ(top->entries, 25U);
  ListOptions page;
  page.limit = 2;
  page.after = ListCursor{Area::kCas, "blob-110"};
  EXPECT_EQ(keys_of(*store.list(page)), (std::vector<std::string>{"blob-111", "blob-112"}));
  // Written by an older kcached after the build: served and described, not listed.
  admin.run({"SET", "old:cas:late", "abc"});
  const std::vector<ListCursor> asked = {{Area::kCas, "late"}, {Area::kCas, "blob-100"}};
  auto described = store.describe(asked);
  ASSERT_TRUE(described.has_value()) << described.error().message;
  ASSERT_TRUE((*described)[0].has_value());
  EXPECT_EQ((*described)[0]->size, 3U);
  EXPECT_EQ((*described)[1]->size, 1U);
  EXPECT_EQ(store.get(Area::kCas, "late")->value(), "abc");
}

TEST_F(RedisStoreTest, APageReadsTheIndexNotTheKeyspace) {
  RedisStore store(options_for(server_));
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE(store.put(Area::kCas, "k" + std::to_string(10000 + i), "v").has_value());
  }
  ASSERT_TRUE(store.list_top({ListOrder::kSize, 1, false, std::nullopt}).has_value()); // built
  RedisAdmin admin(server_.port());
  admin.run({"CONFIG", "RESETSTAT"});
  ListOptions page;
  page.limit = 50;
  page.after = ListCursor{Area::kCas, "k11000"};
  auto rows = store.list(page);
  ASSERT_TRUE(rows.has_value());
  ASSERT_EQ(rows->size(), 50U);
  EXPECT_EQ(rows->front().key, "k11001");
  auto top = store.list_top({ListOrder::kLastAccess, 50, false, Area::kCas});
  ASSERT_TRUE(top.has_value());
  EXPECT_EQ(top->rows.size(), 50U);
  const std::string stats = admin.run({"INFO", "commandstats"});
  EXPECT_EQ(stats.find("cmdstat_scan"), std::string::npos) << stats;
  // Two pages of 50 rows: about 100 EXISTS, not 3,000.
  const std::string calls = "cmdstat_exists:calls=";
  const auto at = stats.find(calls);
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(std::stoul(stats.substr(at + calls.size())), 200U) << stats;
}

TEST_F(RedisStoreTest, ValuesGoneBehindTheIndexAreNotListedAndLeaveIt) {
  RedisStore store(options_for(server_));
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(store.put(Area::kAction, "kc1-" + std::to_string(10 + i), std::string(100 - i, 'x'))
                    .has_value());
  }
  // Expired or evicted by Redis, or removed by a writer from before the index.
  RedisAdmin admin(server_.port());
  for (int i = 0; i < 20; i += 2) {
    admin.run({"DEL", store.redis_key(Area::kAction, "kc1-" + std::to_string(10 + i))});
  }
  auto top = store.list_top({ListOrder::kSize, 4, false, Area::kAction});
  ASSERT_TRUE(top.has_value());
  EXPECT_EQ(keys_of(top->rows), (std::vector<std::string>{"kc1-11", "kc1-13", "kc1-15", "kc1-17"}));
  auto all = store.list(ListOptions{});
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->size(), 10U);
  EXPECT_EQ(admin.run({"ZCARD", "test:idx:{test}:ac:key"}), "10");
  EXPECT_EQ(admin.run({"ZCARD", "test:idx:{test}:ac:size"}), "10");
  EXPECT_EQ(admin.run({"ZCARD", "test:idx:{test}:ac:access"}), "10");
}

TEST_F(RedisStoreTest, PutsTrimTheLeastRecentlyReadKeysWhoseValuesAreGone) {
  {
    RedisStore store(options_for(server_));
    for (int i = 0; i < 30; ++i) {
      ASSERT_TRUE(store.put(Area::kCas, "b" + std::to_string(i), "v").has_value());
    }
  }
  RedisAdmin admin(server_.port());
  for (int i = 0; i < 30; ++i) {
    admin.run({"DEL", "test:cas:b" + std::to_string(i)});
  }
  // No listing: another daemon's first put looks at the cold end of the set.
  RedisStore other(options_for(server_));
  ASSERT_TRUE(other.put(Area::kCas, "fresh", "v").has_value());
  EXPECT_EQ(admin.run({"ZCARD", "test:idx:{test}:cas:key"}), "1");
}

TEST_F(RedisStoreTest, AKeyDroppedWhileItIsStoredAgainStaysListed) {
  // A value gone behind the index, stored again while listings drop the
  // gone key: whatever the interleaving, the stored entry stays listed.
  RedisStore store(options_for(server_));
  RedisStore lister(options_for(server_));
  RedisAdmin admin(server_.port());
  ASSERT_TRUE(store.put(Area::kAction, "x", "v").has_value());
  std::atomic<bool> stop{false};
  std::thread listing([&] {
    while (!stop) {
      (void)lister.list(ListOptions{});
    }
  });
  for (int i = 0; i < 2000; ++i) {
    admin.run({"DEL", "test:ac:x"});
    ASSERT_TRUE(store.put(Area::kAction, "x", "v").has_value());
  }
  stop = true;
  listing.join();
  auto all = store.list(ListOptions{});
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(keys_of(*all), std::vector<std::string>{"x"});
}

TEST_F(RedisStoreTest, WhatATtlEndedLeavesTheIndexWithoutAListing) {
  RedisOptions o = options_for(server_);
  o.ttl = std::chrono::seconds(1);
  {
    RedisStore store(o);
    for (int i = 0; i < 300; ++i) {
      ASSERT_TRUE(store.put(Area::kCas, "t" + std::to_string(i), "v").has_value());
      if (i % 3 == 0) {
        (void)store.get(Area::kCas, "t" + std::to_string(i)); // read ones expire too
      }
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  RedisStore other(o);
  ASSERT_TRUE(other.put(Area::kCas, "fresh", "v").has_value()); // its first put trims
  RedisAdmin admin(server_.port());
  EXPECT_EQ(admin.run({"ZCARD", "test:idx:{test}:cas:key"}), "1");
  EXPECT_EQ(admin.run({"ZCARD", "test:idx:{test}:cas:stored"}), "1");
}

TEST_F(RedisStoreTest, AnIndexWriteThatFailedIsSentAgain) {
  RedisStore store(options_for(server_));
  ASSERT_TRUE(store.put(Area::kAction, "a", "v").has_value());
  ASSERT_TRUE(store.list(ListOptions{}).has_value()); // built
  RedisAdmin admin(server_.port());
  admin.run({"SET", "test:idx:{test}:ac:size", "not a sorted set"}); // every ZADD there fails
  ASSERT_TRUE(store.put(Area::kAction, "b", "v").has_value());       // stored all the same
  EXPECT_EQ(store.get(Area::kAction, "b")->value(), "v");
  admin.run({"DEL", "test:idx:{test}:ac:size"}); // Redis takes writes again
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  ASSERT_TRUE(store.put(Area::kAction, "c", "v").has_value()); // a put after 2 s retries
  auto all = store.list(ListOptions{});
  ASSERT_TRUE(all.has_value()) << all.error().message;
  EXPECT_EQ(keys_of(*all), (std::vector<std::string>{"a", "b", "c"}));
  auto biggest = store.list_top({ListOrder::kSize, 3, false, Area::kAction});
  ASSERT_TRUE(biggest.has_value());
  // b is in the size set again (a is not: the test's own SET replaced that set).
  EXPECT_EQ(keys_of(biggest->rows), (std::vector<std::string>{"b", "c"}));
}

TEST_F(RedisStoreTest, OneKcachedBuildsTheIndexTheOthersAreToldToWait) {
  RedisAdmin admin(server_.port());
  admin.run({"SET", "test:ac:old", "v"});
  admin.run({"SET", "test:idx:{test}:built-v1:building", "1", "PX", "60000"}); // another's claim
  RedisStore store(options_for(server_));
  auto refused = store.list(ListOptions{});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, StoreError::Code::kUnavailable);
  admin.run({"DEL", "test:idx:{test}:built-v1:building"}); // it died, or finished
  auto all = store.list(ListOptions{});
  ASSERT_TRUE(all.has_value()) << all.error().message;
  EXPECT_EQ(keys_of(*all), std::vector<std::string>{"old"});
}

TEST_F(RedisStoreTest, ReadsOrderLastAccessAndPeeksDoNot) {
  RedisStore store(options_for(server_));
  for (const char* key : {"a", "b", "c"}) {
    ASSERT_TRUE(store.put(Area::kAction, key, "v").has_value());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(store.get(Area::kAction, "a")->has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::vector<std::string> b = {"b"};
  ASSERT_TRUE(store.get_many(Area::kAction, b)[0]->has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(store.peek(Area::kAction, "c")->has_value());
  auto top = store.list_top({ListOrder::kLastAccess, 3, false, std::nullopt});
  ASSERT_TRUE(top.has_value());
  EXPECT_EQ(keys_of(top->rows), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_GT(top->rows[0].last_access_ms, top->rows[1].last_access_ms);
  // A removed entry leaves the index at once.
  ASSERT_TRUE(store.remove(Area::kAction, "b").has_value());
  RedisAdmin admin(server_.port());
  EXPECT_EQ(admin.run({"ZCARD", "test:idx:{test}:ac:access"}), "2");
}

TEST_F(RedisStoreTest, TamperedValueIsAMissDeletedAndCounted) {
  FramedStore framed(std::make_unique<RedisStore>(options_for(server_)));
  RedisStore raw(options_for(server_));
  ASSERT_TRUE(raw.put(Area::kCas, "bad", "not a frame at all").has_value());
  auto got = framed.get(Area::kCas, "bad");
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(framed.counters().corrupt, 1U);
  EXPECT_FALSE(*raw.contains(Area::kCas, "bad"));
}

// Issue 13: one 76-byte value claiming 4 GiB - 1 took 1.8 s and 4.1 GB of RSS
// on every node that read it.
TEST_F(RedisStoreTest, HostileFrameIsRefusedBeforeAllocating) {
  FramedStore framed(std::make_unique<RedisStore>(options_for(server_)));
  RedisStore raw(options_for(server_));
  const std::string hostile = kcache::testing::hostile_frame(0xFFFFFFFFU, 0xFFFFFFFFU);
  ASSERT_EQ(hostile.size(), 76U);
  ASSERT_TRUE(raw.put(Area::kAction, "hostile", hostile).has_value());
  const auto start = Clock::now();
  auto got = framed.get(Area::kAction, "hostile");
  const auto took = Clock::now() - start;
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->has_value());
  EXPECT_LT(took, std::chrono::milliseconds(100));
  EXPECT_EQ(framed.counters().corrupt, 1U);
  EXPECT_FALSE(*raw.contains(Area::kAction, "hostile"));
}

TEST_F(RedisStoreTest, DeadServerFailsFastThenBreakerRejects) {
  auto redis = std::make_unique<RedisStore>(options_for(server_));
  const RedisStore& raw = *redis;
  CountingStore store(std::move(redis));
  ASSERT_TRUE(store.put(Area::kCas, "k", "v").has_value());
  server_.kill();
  const auto start = Clock::now();
  for (int i = 0; i < 20; ++i) {
    auto got = store.get(Area::kCas, "k");
    ASSERT_FALSE(got.has_value());
    EXPECT_EQ(got.error().code, StoreError::Code::kUnavailable) << got.error().message;
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(raw.breaker_state(), protocol::CircuitBreaker::State::kOpen);
  EXPECT_GE(store.counters().rejected, 15U);
  EXPECT_GE(store.counters().errors, 3U);
}

TEST_F(RedisStoreTest, RecoversAfterRestart) {
  RedisStore store(options_for(server_));
  ASSERT_TRUE(store.put(Area::kCas, "k", "v").has_value());
  server_.restart();                                           // same port, empty data
  std::this_thread::sleep_for(std::chrono::milliseconds(350)); // past the breaker's open time
  bool recovered = false;
  for (int i = 0; i < 10 && !recovered; ++i) {
    recovered = store.put(Area::kCas, "k2", "v2").has_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(recovered);
  EXPECT_EQ(store.get(Area::kCas, "k2")->value(), "v2");
}

TEST_F(RedisStoreTest, HungServerTimesOut) {
  RedisStore store(options_for(server_));
  ASSERT_TRUE(store.put(Area::kCas, "k", "v").has_value());
  server_.pause();
  const auto start = Clock::now();
  auto got = store.get(Area::kCas, "k");
  const auto took = Clock::now() - start;
  server_.resume();
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, StoreError::Code::kTimeout) << got.error().message;
  EXPECT_LT(took, std::chrono::seconds(2));
}

} // namespace
} // namespace kcache::storage
