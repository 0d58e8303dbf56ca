// Redis AUTH from the redis:// URL against a real redis-server: a password
// (requirepass) and an ACL user, AUTH again after a reconnect, and a wrong or
// missing password answered as an error value, logged without the secret.
#include "../support/redis_server.h"

#include <kcache/storage/redis_store.h>
#include <kcache/storage/store_factory.h>
#include <kcache/storage/store_url.h>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace kcache::storage {
namespace {

using kcache::testing::RedisServer;

// A plaintext secret with the characters a URL must escape.
constexpr std::string_view kPassword = "pa:s/s@w+rd%";
constexpr std::string_view kEncoded = "pa%3As%2Fs%40w+rd%25";

// Runs commands on the server as its administrator (before or after
// requirepass is set: the password to AUTH with, if any).
using Admin = kcache::testing::RedisAdmin;

// Captures what spdlog's default logger writes during the test.
class LogCapture {
public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::string text() const { return out_.str(); }

private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream out_;
};

RedisOptions parse(const std::string& text) {
  auto url = StoreUrl::parse(text);
  EXPECT_TRUE(url.has_value());
  auto options = parse_redis_url(*url);
  EXPECT_TRUE(options.has_value()) << options.error().message;
  options->connect_timeout = std::chrono::milliseconds(200);
  options->op_timeout = std::chrono::milliseconds(500);
  options->breaker = {100, std::chrono::milliseconds(10)};
  return *options;
}

class RedisAuth : public ::testing::Test {
protected:
  std::string url(std::string_view credentials, std::string_view path = "") const {
    return "redis://" + std::string(credentials) + "127.0.0.1:" + std::to_string(server_.port()) +
           std::string(path) + "?namespace=auth";
  }
  RedisServer server_;
};

TEST_F(RedisAuth, TheRightPasswordWorksAndSelectFollowsAuth) {
  Admin(server_.port()).run({"CONFIG", "SET", "requirepass", std::string(kPassword)});
  // db 2: SELECT is refused before AUTH, so this also checks their order.
  RedisStore store(parse(url(":" + std::string(kEncoded) + "@", "/2")));
  ASSERT_TRUE(store.put(Area::kAction, "k", "v").has_value());
  auto got = store.get(Area::kAction, "k");
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_EQ(got->value(), "v");
  Admin admin(server_.port(), std::string(kPassword));
  admin.run({"SELECT", "2"});
  EXPECT_EQ(admin.run({"GET", "auth:ac:k"}), "v");
}

TEST_F(RedisAuth, AWrongPasswordIsAnErrorValueLoggedWithoutTheSecret) {
  Admin(server_.port()).run({"CONFIG", "SET", "requirepass", "the-real-one"});
  LogCapture log;
  RedisStore store(parse(url(":" + std::string(kEncoded) + "@")));
  for (int i = 0; i < 3; ++i) {
    auto got = store.get(Area::kAction, "k");
    ASSERT_FALSE(got.has_value());
    EXPECT_EQ(got.error().code, StoreError::Code::kUnavailable);
    EXPECT_NE(got.error().message.find("AUTH"), std::string::npos) << got.error().message;
    EXPECT_EQ(got.error().message.find(kPassword), std::string::npos);
    EXPECT_FALSE(store.put(Area::kAction, "k", "v").has_value());
  }
  const std::string text = log.text();
  EXPECT_NE(text.find("redis://:***@127.0.0.1"), std::string::npos) << text;
  EXPECT_EQ(text.find(kPassword), std::string::npos) << text;
  EXPECT_EQ(text.find(kEncoded), std::string::npos) << text;
  // Once per outage, not once per request.
  EXPECT_EQ(text.find("not authenticated"), text.rfind("not authenticated")) << text;
}

TEST_F(RedisAuth, NoPasswordIsAnErrorValueAndLogged) {
  Admin(server_.port()).run({"CONFIG", "SET", "requirepass", std::string(kPassword)});
  LogCapture log;
  RedisStore store(parse(url("")));
  auto got = store.get(Area::kAction, "k");
  ASSERT_FALSE(got.has_value());
  EXPECT_NE(got.error().message.find("NOAUTH"), std::string::npos) << got.error().message;
  EXPECT_FALSE(store.contains(Area::kAction, "k").has_value());
  EXPECT_NE(log.text().find("not authenticated"), std::string::npos) << log.text();
}

TEST_F(RedisAuth, AnAclUserAuthenticatesWithUserAndPassword) {
  Admin admin(server_.port());
  admin.run({"ACL", "SETUSER", "kcache", "on", ">" + std::string(kPassword), "~auth:*", "+@all"});
  admin.run({"ACL", "SETUSER", "default", "off"}); // nobody else gets in
  RedisStore store(parse(url("kcache:" + std::string(kEncoded) + "@")));
  ASSERT_TRUE(store.put(Area::kCas, "blob", "bytes").has_value());
  EXPECT_EQ(store.get(Area::kCas, "blob")->value(), "bytes");

  LogCapture log;
  RedisStore wrong(parse(url("kcache:nope@")));
  auto got = wrong.get(Area::kCas, "blob");
  ASSERT_FALSE(got.has_value());
  EXPECT_NE(got.error().message.find("WRONGPASS"), std::string::npos) << got.error().message;
  EXPECT_NE(log.text().find("redis://kcache:***@127.0.0.1"), std::string::npos) << log.text();
  EXPECT_EQ(log.text().find("nope"), std::string::npos) << log.text();
}

TEST_F(RedisAuth, EveryReconnectAuthenticatesAgain) {
  Admin(server_.port()).run({"CONFIG", "SET", "requirepass", std::string(kPassword)});
  RedisStore store(parse(url(":" + std::string(kEncoded) + "@")));
  ASSERT_TRUE(store.put(Area::kAction, "k", "v").has_value());
  // Drops the store's pooled connection: its next request reconnects.
  Admin(server_.port(), std::string(kPassword)).run({"CLIENT", "KILL", "TYPE", "normal"});
  GetResult got = store.get(Area::kAction, "k"); // may fail once on the dead connection
  if (!got) {
    got = store.get(Area::kAction, "k");
  }
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_EQ(got->value(), "v");
}

TEST_F(RedisAuth, TheStoreFactoryTakesCredentialsFromTheUrl) {
  Admin(server_.port()).run({"CONFIG", "SET", "requirepass", std::string(kPassword)});
  auto store = make_store(url(":" + std::string(kEncoded) + "@"));
  ASSERT_TRUE(store.has_value()) << store.error().message;
  ASSERT_TRUE((*store)->put(Area::kAction, "k", "framed").has_value());
  EXPECT_EQ((*store)->get(Area::kAction, "k")->value(), "framed");
}

} // namespace
} // namespace kcache::storage
