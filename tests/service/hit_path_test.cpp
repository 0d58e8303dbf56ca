// The hit path against a real kcached (issue 21 part 1): HTTP/1.1 requests
// pipelined in one write are answered in order; a hit after an overwrite or a
// delete serves the new state, never the bytes decoded before; a namespace a
// token may not read stays a miss after another token read the same entry.

#include "kcached_process.h"
#include "raw_http.h"
#include "strong_token.h"

#include <kcache/cachekey/sha256.h>
#include <kcache/client/client.h>
#include <kcache/protocol/wire.h>

#include <gtest/gtest.h>

#include <fstream>

namespace kcache {
namespace {

using testing::KcachedProcess;
using testing::strong_token;

std::unique_ptr<client::Client> connect(const KcachedProcess& kcached,
                                        const std::string& token = "") {
  client::ClientOptions o;
  o.url = kcached.url();
  o.token = token;
  o.timeout = std::chrono::seconds(10);
  return std::move(*client::Client::create(o));
}

std::string get_request(const std::string& key) {
  return "GET /v1/artifacts/" + key + " HTTP/1.1\r\nHost: x\r\n\r\n";
}

// Reads `count` responses (heads with a Content-Length) from one connection.
std::vector<std::string> read_responses(int fd, std::size_t count) {
  std::vector<std::string> out;
  std::string buffer;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  char chunk[65536];
  while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
    const auto head_end = buffer.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const auto cl = buffer.find("Content-Length: ");
      if (cl != std::string::npos && cl < head_end) {
        const std::size_t length = std::stoul(buffer.substr(cl + 16));
        if (buffer.size() >= head_end + 4 + length) {
          out.push_back(buffer.substr(0, head_end + 4 + length));
          buffer.erase(0, head_end + 4 + length);
          continue;
        }
      }
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) {
      continue;
    }
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) {
      break;
    }
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
  return out;
}

TEST(HitPath, PipelinedGetsAreAnsweredInOrder) {
  KcachedProcess kcached({"--workers", "0"});
  auto c = connect(kcached);
  const std::string big(70000, 'b'); // more than one socket write
  ASSERT_TRUE(c->put("pipe-a", {{"value", "alpha-bytes"}}));
  ASSERT_TRUE(c->put("pipe-b", {{"value", big}}));
  ASSERT_TRUE(c->put("pipe-c", {{"value", "gamma-bytes"}}));
  const int fd = testing::connect_from(kcached.port());
  ASSERT_GE(fd, 0);
  // Three requests and a miss in one write: Beast keeps what follows a
  // request in its buffer and the session answers one request at a time.
  ASSERT_TRUE(testing::send_all(fd, get_request("pipe-a") + get_request("pipe-b") +
                                        get_request("pipe-missing") + get_request("pipe-c")));
  const auto responses = read_responses(fd, 4);
  close(fd);
  ASSERT_EQ(responses.size(), 4U);
  EXPECT_NE(responses[0].find("200 OK"), std::string::npos);
  EXPECT_NE(responses[0].find("alpha-bytes"), std::string::npos);
  EXPECT_NE(responses[1].find("200 OK"), std::string::npos);
  EXPECT_NE(responses[1].find(big), std::string::npos);
  EXPECT_NE(responses[2].find("404 Not Found"), std::string::npos);
  EXPECT_NE(responses[3].find("gamma-bytes"), std::string::npos);
}

// On one keep-alive connection: a GET of a large artifact (its head and the
// store's values in one gathered write), a HEAD, a GET of a small one (one
// encoded body) and the large one again. Every answer's head and body arrive
// whole and in order, and the connection stays open between them.
TEST(HitPath, GatheredAndEncodedAnswersShareAKeepAliveConnection) {
  KcachedProcess kcached({"--workers", "0"});
  auto c = connect(kcached);
  std::string big(200000, '\0'); // past GatheredBody::kGatherBytes, over several socket writes
  for (std::size_t i = 0; i < big.size(); ++i) {
    big[i] = static_cast<char>('a' + (i * 7) % 26);
  }
  ASSERT_TRUE(c->put("ka-big", {{"value", big}, {"log", "ok"}}));
  ASSERT_TRUE(c->put("ka-small", {{"value", "small-bytes"}}));
  const std::string digest = cachekey::to_hex(cachekey::Sha256::of(big));
  const int fd = testing::connect_from(kcached.port());
  ASSERT_GE(fd, 0);
  auto exchange = [fd](const std::string& request) {
    EXPECT_TRUE(testing::send_all(fd, request));
    auto got = read_responses(fd, 1);
    return got.empty() ? std::string() : got.front();
  };
  auto body_of = [](const std::string& response) {
    return response.substr(response.find("\r\n\r\n") + 4);
  };
  auto check_head = [](const std::string& response, std::size_t body_bytes) {
    EXPECT_EQ(response.rfind("HTTP/1.1 200 OK\r\n", 0), 0U);
    EXPECT_NE(response.find("Content-Length: " + std::to_string(body_bytes) + "\r\n"),
              std::string::npos);
    EXPECT_EQ(response.find("Connection: close"), std::string::npos);
  };
  const std::string first = exchange(get_request("ka-big"));
  auto parts = protocol::wire::decode_parts(body_of(first));
  ASSERT_TRUE(parts.has_value());
  ASSERT_EQ(parts->size(), 3U);
  EXPECT_EQ((*parts)[0].name, "record");
  EXPECT_TRUE((*parts)[1] == (protocol::wire::Part{"value", big}));
  EXPECT_EQ((*parts)[2], (protocol::wire::Part{"log", "ok"}));
  check_head(first, body_of(first).size());
  EXPECT_NE(first.find("Content-Type: " + std::string(protocol::wire::kPartsContentType)),
            std::string::npos);

  const std::string head = exchange("HEAD /v1/cas/" + digest + " HTTP/1.1\r\nHost: x\r\n\r\n");
  check_head(head, 0);
  EXPECT_TRUE(head.ends_with("\r\n\r\n"));

  const std::string small = exchange(get_request("ka-small"));
  check_head(small, body_of(small).size());
  parts = protocol::wire::decode_parts(body_of(small));
  ASSERT_TRUE(parts.has_value());
  ASSERT_EQ(parts->size(), 2U);
  EXPECT_EQ((*parts)[1], (protocol::wire::Part{"value", "small-bytes"}));

  // The same answer again, byte for byte: the record and the framing too.
  EXPECT_TRUE(exchange(get_request("ka-big")) == first);
  close(fd);
}

TEST(HitPath, AHitAfterAnOverwriteOrADeleteServesTheNewState) {
  KcachedProcess kcached({"--workers", "0"});
  auto c = connect(kcached);
  ASSERT_TRUE(c->put("over-1", {{"value", "old-bytes"}}));
  for (int i = 0; i < 3; ++i) { // hot: decoded and kept
    auto got = c->get("over-1");
    ASSERT_TRUE(got && got->has_value());
    EXPECT_EQ((*got)->files.at(0).data, "old-bytes");
  }
  ASSERT_TRUE(c->put("over-1", {{"value", "new-bytes"}}));
  auto got = c->get("over-1");
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->files.at(0).data, "new-bytes");
  ASSERT_TRUE(c->remove("over-1"));
  got = c->get("over-1");
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->has_value());
}

TEST(HitPath, AHotEntryStaysAMissForATokenThatMayNotReadItsNamespace) {
  testing::TempDir dir;
  const std::string config = (dir.path() / "kcached.toml").string();
  auto line = [](const std::string& who) {
    return "sha256 = \"" + cachekey::to_hex(cachekey::Sha256::of(strong_token(who))) + "\"\n";
  };
  std::ofstream(config) << "[[tokens]]\nname = \"team-a\"\n"
                        << line("team-a") << "roles = { \"team-a\" = \"admin\" }\n"
                        << "[[tokens]]\nname = \"team-b\"\n"
                        << line("team-b") << "roles = { \"team-b\" = \"admin\" }\n";
  KcachedProcess kcached({"--workers", "0", "--config", config});
  auto a = connect(kcached, strong_token("team-a"));
  auto b = connect(kcached, strong_token("team-b"));
  ASSERT_TRUE(a->put("torch:team-a:hot", {{"value", "secret"}}));
  for (int i = 0; i < 3; ++i) {
    auto got = a->get("torch:team-a:hot");
    ASSERT_TRUE(got && got->has_value());
  }
  auto got = b->get("torch:team-a:hot");
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->has_value());
}

} // namespace
} // namespace kcache
