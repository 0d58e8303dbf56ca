// kcached's RESP listener against a real kcached, hiredis as the client:
// every command, the key mapping (binary keys and values, HTTP interop),
// limits (a huge bulk length or argument count refused on its header, inline
// commands, a value over max_body_bytes), pipelining, and tokens (NOAUTH,
// WRONGPASS, roles and namespace scopes as over HTTP).

#include "kcached_process.h"
#include "random_bytes.h"
#include "raw_http.h"
#include "resp_test_support.h"
#include "scrape_metric.h"
#include "strong_token.h"

#include <kcache/cachekey/sha256.h>
#include <kcache/client/client.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>

namespace kcache {
namespace {

using testing::command;
using testing::KcachedProcess;
using testing::Reply;
using testing::strong_token;
using testing::text;

class RespOpen : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    kcached_ = std::make_unique<KcachedProcess>(std::vector<std::string>{
        "--resp-listen", "127.0.0.1:0", "--max-body-bytes", "1MiB", "--workers", "0"});
    port_ = testing::resp_port(*kcached_);
  }
  static void TearDownTestSuite() { kcached_.reset(); }
  static std::unique_ptr<KcachedProcess> kcached_; // suite-wide
  static int port_;
};
std::unique_ptr<KcachedProcess> RespOpen::kcached_;
int RespOpen::port_ = 0;

TEST_F(RespOpen, EveryCommand) {
  auto c = testing::redis_connect(port_);
  EXPECT_EQ(text(command(c.get(), {"PING"})), "PONG");
  EXPECT_EQ(text(command(c.get(), {"ping", "hi"})), "hi");
  EXPECT_EQ(text(command(c.get(), {"ECHO", "x"})), "x");
  EXPECT_EQ(text(command(c.get(), {"SELECT", "0"})), "OK");
  EXPECT_EQ(text(command(c.get(), {"CLIENT", "SETINFO", "LIB-NAME", "t"})), "OK");
  const Reply hello = command(c.get(), {"HELLO", "2"});
  ASSERT_EQ(hello->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(hello->elements, 14U);
  EXPECT_EQ(text(command(c.get(), {"HELLO", "4"})).rfind("NOPROTO", 0), 0U);
  EXPECT_EQ(text(command(c.get(), {"AUTH", "x"})).rfind("ERR AUTH", 0), 0U); // none configured

  EXPECT_EQ(text(command(c.get(), {"GET", "a"})), "(nil)");
  EXPECT_EQ(text(command(c.get(), {"SET", "a", "alpha"})), "OK");
  EXPECT_EQ(text(command(c.get(), {"GET", "a"})), "alpha");
  EXPECT_EQ(text(command(c.get(), {"SET", "b", "beta", "EX", "60"})), "OK");
  EXPECT_EQ(text(command(c.get(), {"SET", "c", "gamma", "px", "1500"})), "OK");
  EXPECT_EQ(text(command(c.get(), {"SET", "c", "x", "EX", "0"})),
            "ERR invalid expire time in 'set' command");
  EXPECT_EQ(text(command(c.get(), {"SET", "c", "x", "BOGUS"})), "ERR syntax error");
  EXPECT_EQ(text(command(c.get(), {"SET", "c", "x", "NX"})), "(nil)");
  EXPECT_EQ(text(command(c.get(), {"SET", "d", "delta", "NX"})), "OK");
  EXPECT_EQ(text(command(c.get(), {"SET", "e", "x", "XX"})), "(nil)");
  EXPECT_EQ(text(command(c.get(), {"GET", "e"})), "(nil)");

  const Reply many = command(c.get(), {"MGET", "a", "nope", "b"});
  ASSERT_EQ(many->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(many->elements, 3U);
  EXPECT_EQ(std::string(many->element[0]->str, many->element[0]->len), "alpha");
  EXPECT_EQ(many->element[1]->type, REDIS_REPLY_NIL);
  EXPECT_EQ(std::string(many->element[2]->str, many->element[2]->len), "beta");

  EXPECT_EQ(text(command(c.get(), {"EXISTS", "a", "b", "nope", "a"})), ":3");
  EXPECT_EQ(text(command(c.get(), {"TTL", "a"})), ":-1"); // no expiry of its own
  EXPECT_EQ(text(command(c.get(), {"PTTL", "nope"})), ":-2");
  EXPECT_EQ(text(command(c.get(), {"DEL", "a", "nope", "b"})), ":2");
  EXPECT_EQ(text(command(c.get(), {"GET", "a"})), "(nil)");
  EXPECT_EQ(text(command(c.get(), {"EXISTS", "a"})), ":0");

  EXPECT_EQ(text(command(c.get(), {"GET"})), "ERR wrong number of arguments for 'GET' command");
  EXPECT_EQ(text(command(c.get(), {"FLUSHALL"})).rfind("ERR unknown command 'FLUSHALL'", 0), 0U);
  EXPECT_EQ(text(command(c.get(), {"QUIT"})), "OK");
}

TEST_F(RespOpen, BinaryKeysAndValuesRoundTrip) {
  auto c = testing::redis_connect(port_);
  std::string value(70000, '\0');
  for (std::size_t i = 0; i < value.size(); ++i) {
    value[i] = static_cast<char>(i * 7 + 3);
  }
  const std::string key = std::string("sp ace/\xff\0=3D", 11);
  EXPECT_EQ(text(command(c.get(), {"SET", key, value})), "OK");
  EXPECT_EQ(text(command(c.get(), {"GET", key})), value);
  // The escape is injective: the key "=3D" written out is another key.
  EXPECT_EQ(text(command(c.get(), {"GET", "sp ace/\xff"})), "(nil)");
  EXPECT_EQ(text(command(c.get(), {"SET", "", "empty key"})), "OK");
  EXPECT_EQ(text(command(c.get(), {"GET", ""})), "empty key");
  EXPECT_EQ(text(command(c.get(), {"SET", "k", ""})), "OK");
  EXPECT_EQ(text(command(c.get(), {"GET", "k"})), "");
  EXPECT_EQ(text(command(c.get(), {"SET", std::string(600, 'k'), "v"})).rfind("ERR key too", 0),
            0U);
}

TEST_F(RespOpen, ReadableOverHttpAndBack) {
  auto c = testing::redis_connect(port_);
  EXPECT_EQ(text(command(c.get(), {"SET", "fx:1", "graph bytes"})), "OK");
  client::ClientOptions o;
  o.url = kcached_->url();
  auto http = client::Client::create(o);
  ASSERT_TRUE(http);
  auto got = (*http)->get("resp:resp:fx:1");
  ASSERT_TRUE(got && got->has_value());
  ASSERT_EQ((*got)->files.size(), 1U);
  EXPECT_EQ((*got)->files[0].name, "value");
  EXPECT_EQ((*got)->files[0].data, "graph bytes");
  ASSERT_TRUE((*http)->put("resp:resp:from-http", {{"value", "put over HTTP"}}));
  EXPECT_EQ(text(command(c.get(), {"GET", "from-http"})), "put over HTTP");
  ASSERT_TRUE((*http)->put("resp:resp:two", {{"a", "1"}, {"b", "2"}}));
  EXPECT_EQ(text(command(c.get(), {"GET", "two"})).rfind("WRONGTYPE", 0), 0U);
}

TEST_F(RespOpen, PipelinedRepliesComeInOrder) {
  auto c = testing::redis_connect(port_);
  constexpr int kN = 500;
  for (int i = 0; i < kN; ++i) {
    const std::string k = "p" + std::to_string(i);
    redisAppendCommand(c.get(), "SET %s %s", k.c_str(), k.c_str());
    redisAppendCommand(c.get(), "GET %s", k.c_str());
  }
  for (int i = 0; i < kN; ++i) {
    void* raw = nullptr;
    ASSERT_EQ(redisGetReply(c.get(), &raw), REDIS_OK);
    EXPECT_EQ(text(Reply(static_cast<redisReply*>(raw))), "OK");
    ASSERT_EQ(redisGetReply(c.get(), &raw), REDIS_OK);
    EXPECT_EQ(text(Reply(static_cast<redisReply*>(raw))), "p" + std::to_string(i));
  }
}

// Several commands in one write, values on both sides of RespOut::kPieceBytes
// (the large ones sent from the store's buffers): the replies arrive in
// order and complete, byte for byte.
TEST_F(RespOpen, PipelinedRepliesInOneWriteArriveByteForByte) {
  std::string big(70000, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) {
    big[i] = static_cast<char>('a' + (i * 7) % 26);
  }
  const std::string edge(4096, 'e');
  auto c = testing::redis_connect(port_);
  ASSERT_EQ(text(command(c.get(), {"SET", "pipe-big", big})), "OK");
  ASSERT_EQ(text(command(c.get(), {"SET", "pipe-edge", edge})), "OK");
  ASSERT_EQ(text(command(c.get(), {"SET", "pipe-small", "tiny"})), "OK");
  auto request = [](const std::vector<std::string>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const std::string& a : args) {
      out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    }
    return out;
  };
  auto bulk = [](const std::string& v) {
    return "$" + std::to_string(v.size()) + "\r\n" + v + "\r\n";
  };
  const std::string requests =
      request({"GET", "pipe-big"}) + request({"GET", "pipe-small"}) +
      request({"GET", "pipe-none"}) + request({"MGET", "pipe-edge", "pipe-none", "pipe-big"}) +
      request({"PING"}) + request({"GET", "pipe-big"}) + request({"EXISTS", "pipe-edge"});
  const std::string expected = bulk(big) + bulk("tiny") + "$-1\r\n" + "*3\r\n" + bulk(edge) +
                               "$-1\r\n" + bulk(big) + "+PONG\r\n" + bulk(big) + ":1\r\n";
  const int fd = testing::connect_from(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(testing::send_all(fd, requests));
  const std::string got = testing::read_bytes(fd, expected.size());
  close(fd);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "the replies differ at byte "
                               << std::mismatch(got.begin(), got.end(), expected.begin()).first -
                                      got.begin();
}

// Issue 21: bytes copied per hit, as kcached counts them in /metrics. A
// value from the memory tier is written to the socket from the tier's own
// buffer when it is large (RESP >= 4 KiB, an HTTP artifact's files >= 16
// KiB): no copy; a small one is copied once, into the reply. A batch get
// copies each artifact once, into the batch's body.
TEST_F(RespOpen, HitsCopyAtMostTheirPayloadOnce) {
  const std::string big = testing::random_bytes(64 << 10, 21);
  const std::string small = testing::random_bytes(1 << 10, 22);
  auto r = testing::redis_connect(port_);
  ASSERT_EQ(text(command(r.get(), {"SET", "copy-big", big})), "OK");
  ASSERT_EQ(text(command(r.get(), {"SET", "copy-small", small})), "OK");
  client::ClientOptions o;
  o.url = kcached_->url();
  auto h = std::move(*client::Client::create(o));
  ASSERT_TRUE(h->put("http-big", {{"value", big}}));
  ASSERT_TRUE(h->put("http-small", {{"value", small}}));
  auto series = [&](const std::string& name, const std::string& protocol) {
    return testing::scrape_metric(*h, name + "{protocol=\"" + protocol + "\"}");
  };
  auto copied = [&](const std::string& protocol) {
    return series("kcache_hit_bytes_copied_total", protocol);
  };
  auto payload = [&](const std::string& protocol) {
    return series("kcache_hit_payload_bytes_total", protocol);
  };
  constexpr int kReads = 5;
  auto resp_reads = [&](const std::string& key, const std::string& value) {
    const double copied_before = copied("resp");
    const double payload_before = payload("resp");
    for (int i = 0; i < kReads; ++i) {
      const Reply got = command(r.get(), {"GET", key});
      EXPECT_TRUE(got && got->type == REDIS_REPLY_STRING &&
                  std::string(got->str, got->len) == value);
    }
    return std::pair{copied("resp") - copied_before, payload("resp") - payload_before};
  };
  const auto [resp_big_copied, resp_big_payload] = resp_reads("copy-big", big);
  EXPECT_EQ(resp_big_payload, kReads * static_cast<double>(big.size()));
  EXPECT_EQ(resp_big_copied, 0);
  const auto [resp_small_copied, resp_small_payload] = resp_reads("copy-small", small);
  EXPECT_EQ(resp_small_payload, kReads * static_cast<double>(small.size()));
  EXPECT_EQ(resp_small_copied, resp_small_payload);

  auto http_reads = [&](const std::string& key, const std::string& value) {
    const double copied_before = copied("http");
    const double payload_before = payload("http");
    for (int i = 0; i < kReads; ++i) {
      auto got = h->get(key);
      EXPECT_TRUE(got && got->has_value() && (*got)->files.at(0).data == value);
    }
    return std::pair{copied("http") - copied_before, payload("http") - payload_before};
  };
  const auto [http_big_copied, http_big_payload] = http_reads("http-big", big);
  EXPECT_EQ(http_big_payload, kReads * static_cast<double>(big.size()));
  EXPECT_EQ(http_big_copied, 0);
  const auto [http_small_copied, http_small_payload] = http_reads("http-small", small);
  EXPECT_EQ(http_small_payload, kReads * static_cast<double>(small.size()));
  EXPECT_EQ(http_small_copied, http_small_payload);

  const double batch_copied_before = copied("http");
  const double batch_payload_before = payload("http");
  const std::vector<std::string> keys = {"http-big", "http-none", "http-small"};
  auto batch = h->batch_get(keys);
  ASSERT_TRUE(batch && batch->size() == 3U);
  ASSERT_TRUE((*batch)[0] && (*batch)[2]);
  EXPECT_EQ((*batch)[0]->files.at(0).data, big);
  EXPECT_FALSE((*batch)[1].has_value());
  EXPECT_EQ((*batch)[2]->files.at(0).data, small);
  EXPECT_EQ(payload("http") - batch_payload_before, static_cast<double>(big.size() + small.size()));
  EXPECT_EQ(copied("http") - batch_copied_before, static_cast<double>(big.size() + small.size()));
}

TEST_F(RespOpen, LimitsAreEnforcedOnHeaders) {
  auto c = testing::redis_connect(port_);
  // A value over max_body_bytes (1 MiB here): refused on its header, nothing stored.
  EXPECT_EQ(testing::raw_exchange(port_, "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$1048577\r\n"),
            "-ERR Protocol error: invalid bulk length\r\n");
  EXPECT_EQ(text(command(c.get(), {"EXISTS", "big"})), ":0");
  EXPECT_EQ(text(command(c.get(), {"SET", "max", std::string(1 << 20, 'x')})), "OK");
  // A declared length far past the limit: refused on the header alone (the
  // bytes never come), the connection closed.
  EXPECT_EQ(testing::raw_exchange(port_, "*2\r\n$3\r\nGET\r\n$99999999999999\r\n"),
            "-ERR Protocol error: invalid bulk length\r\n");
  EXPECT_EQ(testing::raw_exchange(port_, "*99999999\r\n"),
            "-ERR Protocol error: invalid multibulk length\r\n");
  EXPECT_EQ(testing::raw_exchange(port_, "*1\r\n$-1\r\n"),
            "-ERR Protocol error: expected '$' and a bulk length\r\n");
  EXPECT_EQ(testing::raw_exchange(port_, "PING\r\n"),
            "-ERR Protocol error: expected '*' (inline commands are not supported)\r\n");
  EXPECT_EQ(testing::raw_exchange(port_, "*1\r\n$4\r\nPINGxx"),
            "-ERR Protocol error: a bulk string does not end in CRLF\r\n");
  // A complete command before the garbage is answered first.
  EXPECT_EQ(testing::raw_exchange(port_, "*1\r\n$4\r\nPING\r\n*x\r\n"),
            "+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n");
  EXPECT_EQ(text(command(c.get(), {"PING"})), "PONG"); // the server goes on
}

// redis-benchmark's GET and SET against the RESP port: every request answered
// without an error (it exits non-zero at the first error reply);
// its CSV lists each test's throughput, so both tests must show up).
TEST_F(RespOpen, RedisBenchmarkCompletesWithoutErrors) {
  if (::access("/usr/bin/redis-benchmark", X_OK) != 0) {
    GTEST_SKIP() << "redis-benchmark is not installed (Debian redis-tools)";
  }
  std::string out;
  const int status = testing::run_command({"/usr/bin/redis-benchmark", "-p", std::to_string(port_),
                                           "-t", "get,set", "-n", "1000", "-c", "8", "--csv"},
                                          out);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("\"SET\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"GET\""), std::string::npos) << out;
  EXPECT_EQ(out.find("ERR"), std::string::npos) << out;
  EXPECT_EQ(out.find("rror"), std::string::npos) << out;
}

std::string sha256_line(const std::string& token) {
  return "sha256 = \"" + cachekey::to_hex(cachekey::Sha256::of(token)) + "\"\n";
}

class RespTokens : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir(); // NOLINT(cppcoreguidelines-owning-memory)
    const std::string path = (dir_->path() / "kcached.toml").string();
    std::ofstream(path) << "[resp]\nlisten = \"127.0.0.1:0\"\nnamespace = \"team-a\"\n"
                        << "[[tokens]]\nname = \"team-a\"\n"
                        << sha256_line(strong_token("team-a"))
                        << "roles = { \"team-a*\" = \"admin\" }\n"
                        << "[[tokens]]\nname = \"team-b\"\n"
                        << sha256_line(strong_token("team-b"))
                        << "roles = { \"team-b*\" = \"admin\" }\n"
                        << "[[tokens]]\nname = \"reader\"\n"
                        << sha256_line(strong_token("reader")) << "role = \"read\"\n"
                        << "[[tokens]]\nname = \"writer\"\n"
                        << sha256_line(strong_token("writer")) << "role = \"write\"\n";
    kcached_ = std::make_unique<KcachedProcess>(
        std::vector<std::string>{"--config", path, "--workers", "0"});
    port_ = testing::resp_port(*kcached_);
  }
  static void TearDownTestSuite() {
    kcached_.reset();
    delete dir_; // NOLINT(cppcoreguidelines-owning-memory)
  }
  static testing::RedisConn as(const std::string& who) {
    auto c = testing::redis_connect(port_);
    EXPECT_EQ(text(command(c.get(), {"AUTH", strong_token(who)})), "OK");
    return c;
  }
  static testing::TempDir* dir_;
  static std::unique_ptr<KcachedProcess> kcached_; // suite-wide
  static int port_;
};
testing::TempDir* RespTokens::dir_ = nullptr;
std::unique_ptr<KcachedProcess> RespTokens::kcached_;
int RespTokens::port_ = 0;

TEST_F(RespTokens, NoAuthBeforeAuth) {
  auto c = testing::redis_connect(port_);
  EXPECT_EQ(text(command(c.get(), {"PING"})), "PONG");
  for (const auto& cmd : std::vector<std::vector<std::string>>{{"GET", "k"},
                                                               {"SET", "k", "v"},
                                                               {"MGET", "k"},
                                                               {"DEL", "k"},
                                                               {"EXISTS", "k"},
                                                               {"TTL", "k"},
                                                               {"ECHO", "x"}}) {
    EXPECT_EQ(text(command(c.get(), cmd)), "NOAUTH Authentication required.") << cmd[0];
  }
  EXPECT_EQ(text(command(c.get(), {"HELLO", "2"})), "NOAUTH Authentication required.");
  const std::string wrongpass = "WRONGPASS invalid username-password pair or user is disabled.";
  EXPECT_EQ(text(command(c.get(), {"AUTH", strong_token("nobody")})), wrongpass);
  EXPECT_EQ(text(command(c.get(), {"AUTH", "team-b", strong_token("team-a")})), wrongpass);
  EXPECT_EQ(text(command(c.get(), {"GET", "k"})), "NOAUTH Authentication required.");
  EXPECT_EQ(text(command(c.get(), {"AUTH", "team-a", strong_token("team-a")})), "OK");
  EXPECT_EQ(text(command(c.get(), {"GET", "k"})), "(nil)");
  auto d = testing::redis_connect(port_);
  const Reply hello =
      command(d.get(), {"HELLO", "2", "AUTH", "default", strong_token("reader"), "SETNAME", "t"});
  ASSERT_EQ(hello->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(text(command(d.get(), {"GET", "k"})), "(nil)");
}

TEST_F(RespTokens, RolesAndScopesAsOverHttp) {
  auto team_a = as("team-a");
  auto team_b = as("team-b");
  auto reader = as("reader");
  auto writer = as("writer");
  EXPECT_EQ(text(command(team_a.get(), {"SET", "k", "a's"})), "OK");
  EXPECT_EQ(text(command(writer.get(), {"SET", "w", "writer's"})), "OK");
  EXPECT_EQ(text(command(reader.get(), {"GET", "k"})), "a's");
  EXPECT_EQ(text(command(reader.get(), {"SET", "k", "x"})).rfind("NOPERM", 0), 0U);
  // Another namespace's token: neither reads nor writes, nor learns what exists.
  EXPECT_EQ(text(command(team_b.get(), {"GET", "k"})).rfind("NOPERM", 0), 0U);
  EXPECT_EQ(text(command(team_b.get(), {"EXISTS", "k"})).rfind("NOPERM", 0), 0U);
  EXPECT_EQ(text(command(team_b.get(), {"SET", "k", "b's"})).rfind("NOPERM", 0), 0U);
  const Reply many = command(team_b.get(), {"MGET", "k"});
  ASSERT_EQ(many->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(many->element[0]->type, REDIS_REPLY_NIL);
  // DEL needs admin in the namespace, as DELETE /v1/ac does.
  EXPECT_EQ(text(command(writer.get(), {"DEL", "k"})).rfind("NOPERM", 0), 0U);
  EXPECT_EQ(text(command(reader.get(), {"DEL", "k"})).rfind("NOPERM", 0), 0U);
  EXPECT_EQ(text(command(team_a.get(), {"GET", "k"})), "a's");
  EXPECT_EQ(text(command(team_a.get(), {"DEL", "k", "w"})), ":2");
}

TEST(RespConfig, PlainNonLoopbackWithTokensIsRefused) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "kcached.toml").string();
  std::ofstream(path) << "[resp]\nlisten = \"0.0.0.0:0\"\n[[tokens]]\nname = \"a\"\n"
                      << sha256_line(strong_token("a")) << "role = \"admin\"\n";
  EXPECT_THROW(KcachedProcess({"--config", path, "--workers", "0"}), std::runtime_error);
}

} // namespace
} // namespace kcache
