// kcached with a password-protected Redis tier (issue 14, part 5): the URL's
// credentials authenticate every connection, and with wrong ones kcached keeps
// serving from its own tiers and logs the failure without the secret.

#include "kcached_process.h"
#include "redis_server.h"

#include <kcache/client/client.h>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace kcache {
namespace {

using testing::KcachedProcess;
using testing::RedisServer;

constexpr const char* kSecret = "s3cret-Redis-pw";

std::unique_ptr<client::Client> client_for(const KcachedProcess& kcached) {
  client::ClientOptions options;
  options.url = kcached.url();
  auto c = client::Client::create(options);
  EXPECT_TRUE(c.has_value());
  return std::move(*c);
}

TEST(KcachedRedisAuth, TheUrlsPasswordAuthenticatesAndAWrongOneIsLoggedWithoutIt) {
  RedisServer redis;
  // Before requirepass, no AUTH is needed to set it.
  testing::RedisAdmin(redis.port()).run({"CONFIG", "SET", "requirepass", kSecret});
  const std::string base = "127.0.0.1:" + std::to_string(redis.port()) + "?namespace=auth";

  KcachedProcess good({"--redis-url", "redis://:" + std::string(kSecret) + "@" + base});
  ASSERT_TRUE(client_for(good)->put("kc1-auth", {{"value", "shared"}}));
  EXPECT_EQ(testing::RedisAdmin(redis.port(), kSecret).run({"EXISTS", "auth:ac:kc1-auth"}), "1");

  KcachedProcess wrong({"--redis-url", "redis://:wrong-" + std::string(kSecret) + "@" + base});
  auto c = client_for(wrong);
  ASSERT_TRUE(c->put("kc1-local", {{"value", "local"}})); // the durable tier is its disk
  auto got = c->get("kc1-auth"); // only Redis has it: a miss, not a failure
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_FALSE(got->has_value());
  EXPECT_TRUE(c->get("kc1-local")->has_value());
  const std::string log = wrong.log();
  EXPECT_NE(log.find("redis://:***@127.0.0.1"), std::string::npos) << log;
  EXPECT_NE(log.find("not authenticated"), std::string::npos) << log;
  EXPECT_EQ(log.find(kSecret), std::string::npos) << log;
  EXPECT_EQ(good.log().find(kSecret), std::string::npos);
}

} // namespace
} // namespace kcache
