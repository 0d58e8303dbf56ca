// RedisClient and RedisSubscription against a real redis-server: commands,
// pipelines, blocking reads that outlast the op deadline, EVALSHA's NOSCRIPT
// fallback, pub/sub across a Redis restart; and the hash slot function
// against the Redis Cluster spec's own examples.
#include "../support/redis_server.h"

#include <kcache/storage/redis_client.h>
#include <kcache/storage/store_url.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace kcache::storage {
namespace {

using kcache::testing::RedisServer;
using Clock = std::chrono::steady_clock;
using Type = RedisReply::Type;
using namespace std::chrono_literals;

RedisOptions options_for(const RedisServer& server) {
  RedisOptions o;
  o.port = server.port();
  o.ns = "client";
  o.connect_timeout = 100ms;
  o.op_timeout = 300ms;
  o.breaker = {1, 300ms}; // one failure opens it: a tripped breaker shows at once
  return o;
}

// Messages a subscription delivered, waited on by the test.
class Inbox {
public:
  void add(std::string_view channel, std::string_view message) {
    const std::lock_guard lock(mu_);
    got_.push_back(std::string(channel) + " " + std::string(message));
    cv_.notify_all();
  }
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout,
                        [&] { return std::find(got_.begin(), got_.end(), text) != got_.end(); });
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> got_;
};

class RedisClientTest : public ::testing::Test {
protected:
  RedisServer server_;
  std::unique_ptr<RedisClient> client_ = RedisClient::create(options_for(server_));
};

TEST(RedisHashSlot, MatchesTheClusterSpec) {
  EXPECT_EQ(redis_crc16("123456789"), 0x31C3);
  EXPECT_EQ(redis_hash_slot("123456789"), 0x31C3 % 16384);
  // Hash tags: the first '{' and the first '}' after it, if not empty.
  EXPECT_EQ(redis_hash_slot("{user1000}.following"), redis_hash_slot("{user1000}.followers"));
  EXPECT_EQ(redis_hash_slot("{user1000}.following"), redis_hash_slot("user1000"));
  EXPECT_EQ(redis_hash_slot("foo{}{bar}"), redis_crc16("foo{}{bar}") % 16384);
  EXPECT_EQ(redis_hash_slot("foo{{bar}}zap"), redis_hash_slot("{bar"));
  EXPECT_EQ(redis_hash_slot("foo{bar}{zap}"), redis_hash_slot("bar"));
  EXPECT_EQ(redis_hash_slot("foo{bar"), redis_crc16("foo{bar") % 16384);
}

TEST(RedisClusterUrl, ClusterAndSeedsParse) {
  auto url = StoreUrl::parse("redis://10.0.0.1:7000?cluster=1&seeds=10.0.0.2:7000,node3:7001");
  ASSERT_TRUE(url.has_value());
  auto options = parse_redis_url(*url);
  ASSERT_TRUE(options.has_value()) << options.error().message;
  EXPECT_TRUE(options->cluster);
  EXPECT_EQ(options->seeds, (std::vector<std::string>{"10.0.0.2:7000", "node3:7001"}));
  for (const char* bad : {"redis://h?cluster=yes", "redis://h?seeds=nohost", "redis://h?seeds=h:0",
                          "redis://h?seeds=:7000", "redis://h/2?cluster=1"}) {
    auto parsed = StoreUrl::parse(bad);
    ASSERT_TRUE(parsed.has_value()) << bad;
    EXPECT_FALSE(parse_redis_url(*parsed).has_value()) << bad;
  }
  auto plain = parse_redis_url(*StoreUrl::parse("redis://h:7000"));
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->cluster);
}

TEST_F(RedisClientTest, RunAndPipelineAnswerOwnedReplies) {
  const std::string k = client_->key("k");
  EXPECT_EQ(k, "client:k");
  auto set = client_->run(k, {"SET", k, "v"});
  ASSERT_TRUE(set.has_value()) << set.error().message;
  EXPECT_EQ(set->type, Type::kStatus);
  EXPECT_EQ(set->str, "OK");
  EXPECT_EQ(client_->run(k, {"GET", k})->str, "v");
  EXPECT_TRUE(client_->run(k, {"GET", client_->key("none")})->is_nil());
  // An error reply is a reply, not a StoreError, and does not trip the breaker.
  auto wrong = client_->run(k, {"INCR", k});
  ASSERT_TRUE(wrong.has_value());
  EXPECT_TRUE(wrong->is_error());
  EXPECT_NE(wrong->str.find("not an integer"), std::string::npos) << wrong->str;
  EXPECT_EQ(client_->breaker_state(), protocol::CircuitBreaker::State::kClosed);

  const std::string list = client_->key("{job}:list");
  auto replies = client_->pipeline(
      list, {{"RPUSH", list, "a", "b"}, {"LRANGE", list, "0", "-1"}, {"HGET", list, "f"}});
  ASSERT_TRUE(replies.has_value()) << replies.error().message;
  ASSERT_EQ(replies->size(), 3U);
  EXPECT_EQ((*replies)[0].integer, 2);
  ASSERT_EQ((*replies)[1].type, Type::kArray);
  ASSERT_EQ((*replies)[1].elements.size(), 2U);
  EXPECT_EQ((*replies)[1].elements[1].str, "b");
  EXPECT_TRUE((*replies)[2].is_error()); // WRONGTYPE
  EXPECT_FALSE(client_->is_cluster());
  EXPECT_EQ(*client_->masters(),
            (std::vector<std::string>{"127.0.0.1:" + std::to_string(server_.port())}));
}

TEST_F(RedisClientTest, BlockingReadOutlastsTheOpDeadlineWithoutTrippingTheBreaker) {
  const std::string stream = client_->key("q:{cpu}");
  ASSERT_FALSE(
      client_->run(stream, {"XGROUP", "CREATE", stream, "kcache", "$", "MKSTREAM"})->is_error());
  for (int i = 0; i < 2; ++i) {
    const auto start = Clock::now();
    auto got = client_->run_blocking(stream,
                                     {"XREADGROUP", "GROUP", "kcache", "node-a", "COUNT", "1",
                                      "BLOCK", "1000", "STREAMS", stream, ">"},
                                     1000ms);
    const auto took = Clock::now() - start;
    ASSERT_TRUE(got.has_value()) << got.error().message;
    EXPECT_TRUE(got->is_nil());
    EXPECT_GE(took, 900ms);
    EXPECT_EQ(client_->breaker_state(), protocol::CircuitBreaker::State::kClosed);
  }
  // The connection went back to the pool with the op deadline again: a
  // hung server still times out within it.
  server_.pause();
  const auto start = Clock::now();
  auto got = client_->run(stream, {"XLEN", stream});
  const auto took = Clock::now() - start;
  server_.resume();
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, StoreError::Code::kTimeout) << got.error().message;
  EXPECT_LT(took, 800ms);
  EXPECT_EQ(client_->breaker_state(), protocol::CircuitBreaker::State::kOpen);
}

TEST_F(RedisClientTest, EvalFallsBackToEvalOnNoscript) {
  constexpr std::string_view kScript = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
  const std::string counter = client_->key("counter");
  auto first = client_->eval(kScript, {counter}, {"2"});
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_EQ(first->integer, 2);
  EXPECT_EQ(client_->eval(kScript, {counter}, {"3"})->integer, 5);
  kcache::testing::RedisAdmin(server_.port()).run({"SCRIPT", "FLUSH"});
  auto after_flush = client_->eval(kScript, {counter}, {"1"});
  ASSERT_TRUE(after_flush.has_value()) << after_flush.error().message;
  EXPECT_EQ(after_flush->integer, 6);
  // A script's own error is an error reply.
  auto bad = client_->eval("return redis.call('NOPE')", {counter}, {});
  ASSERT_TRUE(bad.has_value());
  EXPECT_TRUE(bad->is_error());
}

TEST_F(RedisClientTest, DeadServerIsAStoreErrorThenRejected) {
  server_.kill();
  auto first = client_->run("k", {"PING"});
  ASSERT_FALSE(first.has_value());
  EXPECT_FALSE(first.error().rejected);
  auto second = client_->run("k", {"PING"});
  ASSERT_FALSE(second.has_value());
  EXPECT_TRUE(second.error().rejected);
  EXPECT_FALSE(client_->publish("ch", "m").has_value());
}

TEST_F(RedisClientTest, SubscriptionDeliversAndSurvivesARestart) {
  RedisOptions options = options_for(server_);
  options.breaker = {3, 100ms};
  auto publisher = RedisClient::create(options);
  const std::string channel = publisher->key("events");
  Inbox inbox;
  auto subscription = RedisSubscription::start(
      options, {channel},
      [&inbox](std::string_view ch, std::string_view message) { inbox.add(ch, message); });
  // Published until delivered: the SUBSCRIBE may not have landed yet.
  auto publish_until = [&](const std::string& message) {
    const auto deadline = Clock::now() + 10s;
    while (Clock::now() < deadline) {
      (void)publisher->publish(channel, message);
      if (inbox.wait_for(channel + " " + message, 100ms)) {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(publish_until("job 1 done"));
  server_.restart(); // same port: the subscription dials again
  const auto start = Clock::now();
  EXPECT_TRUE(publish_until("put ac kc1-x"));
  EXPECT_LT(Clock::now() - start, 5s);
  subscription.reset(); // unsubscribes and joins promptly
}

TEST_F(RedisClientTest, SubscriptionStopsPromptlyWhileRedisIsDown) {
  server_.kill();
  auto subscription = RedisSubscription::start(options_for(server_), {"ch"}, [](auto, auto) {});
  std::this_thread::sleep_for(300ms);
  const auto start = Clock::now();
  subscription.reset();
  EXPECT_LT(Clock::now() - start, 500ms);
}

// A hung server costs one request (one RedisCallScope) its op timeout once:
// the scope's later calls fail at once, though the breaker (10 failures here)
// is still closed; a new scope, or no scope, asks again.
TEST_F(RedisClientTest, AScopePaysAHungServersTimeoutOnce) {
  RedisOptions o = options_for(server_);
  o.breaker = {10, 10s};
  auto client = RedisClient::create(o);
  const std::string k = client->key("scoped");
  ASSERT_TRUE(client->run(k, {"SET", k, "v"}).has_value());
  server_.pause();
  {
    const RedisCallScope request;
    auto first = client->run(k, {"GET", k});
    ASSERT_FALSE(first.has_value());
    EXPECT_EQ(first.error().code, StoreError::Code::kTimeout) << first.error().message;
    const auto start = Clock::now();
    for (int i = 0; i < 3; ++i) {
      auto again = client->run(k, {"SET", k, "w"});
      ASSERT_FALSE(again.has_value());
      EXPECT_TRUE(again.error().rejected) << again.error().message;
    }
    EXPECT_LT(Clock::now() - start, 100ms) << "no second timeout in one scope";
    EXPECT_EQ(client->breaker_state(), protocol::CircuitBreaker::State::kClosed);
  }
  {
    const RedisCallScope next_request;
    auto asked = client->run(k, {"GET", k});
    ASSERT_FALSE(asked.has_value());
    EXPECT_FALSE(asked.error().rejected) << "a new scope asks again";
  }
  auto unscoped = client->run(k, {"GET", k});
  ASSERT_FALSE(unscoped.has_value());
  EXPECT_FALSE(unscoped.error().rejected);
  server_.resume();
  const RedisCallScope after;
  auto back = client->run(k, {"GET", k});
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->str, "v");
}

} // namespace
} // namespace kcache::storage
