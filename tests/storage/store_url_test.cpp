// Store URLs: each scheme's parser, and the factory that composes the tiers.

#include "../support/temp_dir.h"

#include <kcache/storage/memory_store.h>
#include <kcache/storage/redis_store.h>
#include <kcache/storage/rocksdb_store.h>
#include <kcache/storage/store_factory.h>

#include <gtest/gtest.h>

namespace kcache::storage {
namespace {

using kcache::testing::TempDir;

StoreUrl url(std::string_view text) {
  auto parsed = StoreUrl::parse(text);
  EXPECT_TRUE(parsed.has_value()) << parsed.error().message;
  return *parsed;
}

TEST(StoreUrl, SplitsSchemeAuthorityPathAndParameters) {
  const StoreUrl u = url("redis://:pw@host:6380/2?namespace=ns&timeout_ms=5");
  EXPECT_EQ(u.scheme(), "redis");
  EXPECT_EQ(u.authority(), ":pw@host:6380");
  EXPECT_EQ(u.path(), "/2");
  EXPECT_EQ(u.param("namespace"), "ns");
  EXPECT_EQ(*u.int_param("timeout_ms", 0), 5);
  EXPECT_EQ(*u.int_param("absent", 7), 7);
  EXPECT_FALSE(u.param("absent").has_value());
}

TEST(StoreUrl, RefusesAParameterGivenTwiceOrWithoutAValue) {
  auto twice = StoreUrl::parse("memory://?capacity=1&capacity=2");
  ASSERT_FALSE(twice.has_value());
  EXPECT_NE(twice.error().message.find("'capacity' is given twice"), std::string::npos);
  auto bare = StoreUrl::parse("memory://?capacity");
  ASSERT_FALSE(bare.has_value());
  EXPECT_NE(bare.error().message.find("has no value"), std::string::npos);
}

TEST(StoreUrl, EachSchemeRefusesParametersItDoesNotKnowByName) {
  const struct {
    const char* url;
    const char* named;
  } cases[] = {
      {"memory://?capcity=1MiB", "'capcity'"},
      {"rocksdb:///tmp/x?capacity=1GiB&min_blob=1&zz=2", "'min_blob', 'zz'"},
      {"redis://host?timeout=5", "'timeout'"},
  };
  for (const auto& c : cases) {
    auto store = make_store(c.url);
    ASSERT_FALSE(store.has_value()) << c.url;
    EXPECT_EQ(store.error().code, StoreError::Code::kInvalidArgument);
    const std::string& message = store.error().message;
    EXPECT_NE(message.find("unknown parameter " + std::string(c.named)), std::string::npos)
        << message;
    EXPECT_NE(message.find("takes"), std::string::npos) << message; // and what it does take
  }
}

TEST(StoreUrl, ErrorsNeverEchoAPassword) {
  auto store = make_store("redis://:secret@host?nope=1");
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().message.find("secret"), std::string::npos) << store.error().message;
}

TEST(StoreUrl, MemoryParser) {
  EXPECT_EQ(parse_memory_url(url("memory://"))->capacity_bytes, 256ULL << 20);
  EXPECT_EQ(parse_memory_url(url("memory://?capacity=1MiB"))->capacity_bytes, 1ULL << 20);
  EXPECT_FALSE(parse_memory_url(url("memory://host")).has_value());
  EXPECT_FALSE(parse_memory_url(url("memory://?capacity=big")).has_value());
}

TEST(StoreUrl, RocksDbParser) {
  auto o = parse_rocksdb_url(url("rocksdb:///var/kc?capacity=2GiB&min_blob_size=64KiB"));
  ASSERT_TRUE(o.has_value()) << o.error().message;
  EXPECT_EQ(o->path, "/var/kc");
  EXPECT_EQ(o->capacity_bytes, 2ULL << 30);
  EXPECT_EQ(o->min_blob_size, 64U << 10);
  EXPECT_FALSE(parse_rocksdb_url(url("rocksdb://")).has_value());
}

TEST(StoreUrl, RedisParser) {
  auto o = parse_redis_url(url("redis://user:pw@10.0.0.5:6380/3?namespace=team&timeout_ms=50"
                               "&connect_timeout_ms=20&ttl_s=60&breaker_failures=0"
                               "&breaker_open_ms=100"));
  ASSERT_TRUE(o.has_value()) << o.error().message;
  EXPECT_EQ(o->host, "10.0.0.5");
  EXPECT_EQ(o->port, 6380);
  EXPECT_EQ(o->password, "pw");
  EXPECT_EQ(o->db, 3);
  EXPECT_EQ(o->ns, "team");
  EXPECT_EQ(o->op_timeout, std::chrono::milliseconds(50));
  EXPECT_EQ(o->connect_timeout, std::chrono::milliseconds(20));
  EXPECT_EQ(o->ttl, std::chrono::seconds(60));
  EXPECT_EQ(o->breaker.failure_threshold, 1); // at least one failure opens it
  EXPECT_EQ(o->breaker.open_for, std::chrono::milliseconds(100));
  auto defaults = parse_redis_url(url("redis://"));
  ASSERT_TRUE(defaults.has_value());
  EXPECT_EQ(defaults->host, "127.0.0.1");
  EXPECT_EQ(defaults->port, 6379);
  EXPECT_FALSE(defaults->ttl.has_value());
  // Braces would become the hash tag of every cluster key under the namespace.
  for (const char* bad : {"namespace=a{b", "namespace=a}b", "namespace=tag{x}", "namespace="}) {
    EXPECT_FALSE(parse_redis_url(url(std::string("redis://?") + bad)).has_value()) << bad;
  }
}

TEST(StoreUrl, RedisCredentialsArePercentDecodedAndNeverShown) {
  auto acl = parse_redis_url(url("redis://ci%2Dbot:p%40ss%3Aw+rd%25@redis.internal:6380/1"));
  ASSERT_TRUE(acl.has_value()) << acl.error().message;
  EXPECT_EQ(acl->user, "ci-bot");
  EXPECT_EQ(acl->password, "p@ss:w+rd%"); // '+' is itself in userinfo
  EXPECT_EQ(redacted_url(*acl), "redis://ci-bot:***@redis.internal:6380/1");
  auto password_only = parse_redis_url(url("redis://:s3cret@10.0.0.5"));
  ASSERT_TRUE(password_only.has_value());
  EXPECT_EQ(password_only->user, "");
  EXPECT_EQ(password_only->password, "s3cret");
  EXPECT_EQ(redacted_url(*password_only), "redis://:***@10.0.0.5:6379/0");
  EXPECT_EQ(parse_redis_url(url("redis://s3cret@10.0.0.5"))->password, "s3cret");
  EXPECT_EQ(redacted_url(*parse_redis_url(url("redis://10.0.0.5"))), "redis://10.0.0.5:6379/0");
  // A bare '@' in the password: the last '@' ends the credentials.
  EXPECT_EQ(parse_redis_url(url("redis://:a@b@host"))->password, "a@b");
  for (const char* bad : {"redis://:s3cr%zzet@host", "redis://:s3cret%2@host",
                          "redis://:s3c/ret@host", "s3cret@host:6379", "redis://:s3?cret@host"}) {
    auto parsed = StoreUrl::parse(bad);
    const std::string message =
        parsed ? parse_redis_url(*parsed).error().message : parsed.error().message;
    EXPECT_EQ(message.find("s3c"), std::string::npos) << message;
    EXPECT_EQ(message.find("ret"), std::string::npos) << message;
  }
}

TEST(StoreFactory, TheTieredStackCountsEveryTierAndTheWhole) {
  TempDir dir;
  const std::vector<std::string> urls = {"memory://?capacity=1MiB",
                                         "rocksdb://" + dir.str() + "?capacity=64MiB"};
  auto stack = make_tiered_store(urls);
  ASSERT_TRUE(stack.has_value()) << stack.error().message;
  ASSERT_EQ(stack->tiers.size(), 2U);
  EXPECT_EQ(stack->tiers[0]->name(), "memory");
  EXPECT_EQ(stack->tiers[1]->name(), "rocksdb");
  EXPECT_EQ(stack->store->name(), "tiered");
  ASSERT_TRUE(stack->store->put(Area::kCas, "k", "value").has_value());
  ASSERT_TRUE(stack->store->get(Area::kCas, "k")->has_value());
  ASSERT_FALSE(stack->store->get(Area::kCas, "absent")->has_value());
  EXPECT_EQ(stack->store->counters().hits, 1U);
  EXPECT_EQ(stack->store->counters().misses, 1U);
  EXPECT_EQ(stack->store->counters().puts, 1U);
  for (Store* tier : stack->tiers) {
    EXPECT_EQ(tier->counters().puts, 1U) << tier->name();
  }
  EXPECT_EQ(stack->tiers[0]->counters().hits, 1U);
  EXPECT_EQ(stack->tiers[1]->counters().misses, 1U);
  // RocksDB counts bytes as stored: the frame, not the raw value.
  EXPECT_GT(stack->tiers[1]->counters().bytes_written, 5U);
}

TEST(StoreFactory, ATieredStackNeedsTiersThatParse) {
  EXPECT_FALSE(make_tiered_store(std::vector<std::string>{}).has_value());
  const std::vector<std::string> bad = {"memory://", "memory://?size=1"};
  auto stack = make_tiered_store(bad);
  ASSERT_FALSE(stack.has_value());
  EXPECT_NE(stack.error().message.find("'size'"), std::string::npos);
}

} // namespace
} // namespace kcache::storage
