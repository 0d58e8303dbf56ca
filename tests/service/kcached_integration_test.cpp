// kcached as a process, talked to through libkcache, raw sockets and the CLI.

#include "kcached_process.h"
#include "redis_server.h"

#include <kcache/cachekey/key_manifest.h>
#include <kcache/client/client.h>
#include <kcache/protocol/record_signature.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <thread>

namespace kcache {
namespace {

using client::Client;
using client::File;
using testing::KcachedProcess;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::unique_ptr<Client> connect(const std::string& url, int timeout_ms = 3000) {
  client::ClientOptions o;
  o.url = url;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  o.connect_timeout = std::chrono::milliseconds(std::min(timeout_ms, 500));
  o.down_backoff = std::chrono::milliseconds(100);
  auto c = Client::create(o);
  EXPECT_TRUE(c.has_value());
  return std::move(*c);
}

TEST(Kcached, ArtifactRoundTripOverTcpAndUnixSocket) {
  KcachedProcess kcached;
  auto tcp = connect(kcached.url());
  auto unix_client = connect("unix://" + kcached.unix_socket());
  const std::vector<File> files = {{"k.cubin", std::string(70000, '\x7f')},
                                   {"k.ptx", ".version 8.0"}};
  client::PutOptions options;
  options.producer = "test";
  options.metadata = {{"compile_ms", "31"}};
  ASSERT_TRUE(tcp->put("kc-a", files, options).has_value());
  auto got = unix_client->get("kc-a");
  ASSERT_TRUE(got.has_value()) << got.error().message;
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->files, files);
  EXPECT_EQ(json::parse((*got)->record_json)["metadata"]["compile_ms"], "31");
  EXPECT_TRUE(*tcp->exists("kc-a"));
  EXPECT_FALSE(*tcp->exists("kc-b"));
  EXPECT_FALSE(tcp->get("kc-b")->has_value());

  const std::vector<std::string> keys = {"kc-a", "kc-b"};
  auto batch = tcp->batch_get(keys);
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(batch->size(), 2U);
  EXPECT_TRUE((*batch)[0].has_value());
  EXPECT_FALSE((*batch)[1].has_value());

  ASSERT_TRUE(tcp->remove("kc-a").has_value());
  EXPECT_FALSE(*tcp->exists("kc-a"));
  EXPECT_EQ(tcp->get("bad key").error().code, client::ErrorCode::kInvalid);
}

TEST(Kcached, EveryRouteAnswers) {
  KcachedProcess kcached;
  auto c = connect(kcached.url());
  ASSERT_TRUE(c->put("r1", {{"value", "v"}}).has_value());
  struct Expect {
    client::HttpMethod method;
    std::string target;
    int status;
  };
  const std::vector<Expect> expectations = {
      {client::HttpMethod::kGet, "/healthz", 200},
      {client::HttpMethod::kGet, "/metrics", 200},
      {client::HttpMethod::kGet, "/v1/stats", 200},
      {client::HttpMethod::kGet, "/v1/ac/r1", 200},
      {client::HttpMethod::kHead, "/v1/ac/r1", 200},
      {client::HttpMethod::kGet, "/v1/artifacts/r1", 200},
      {client::HttpMethod::kGet, "/v1/entries", 200},
      {client::HttpMethod::kGet, "/v1/entries/r1", 200},
      {client::HttpMethod::kPost, "/v1/admin/verify?area=cas", 200},
      {client::HttpMethod::kGet, "/v1/cas/" + std::string(64, '0'), 404},
      {client::HttpMethod::kGet, "/nowhere", 404},
      {client::HttpMethod::kDelete, "/v1/ac/r1", 200},
  };
  for (const Expect& e : expectations) {
    auto res = c->request(e.method, e.target);
    ASSERT_TRUE(res.has_value()) << e.target << ": " << res.error().message;
    EXPECT_EQ(res->status, e.status) << e.target << ": " << res->body;
  }
}

TEST(Kcached, SixteenThreadsOfMixedTraffic) {
  KcachedProcess kcached;
  auto c = connect(kcached.url(), 10000);
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 60; ++i) {
        const std::string key = "mix-" + std::to_string(rng() % 40);
        const std::string value = key + std::string(rng() % 70000, 'x');
        switch (rng() % 4) {
        case 0:
          if (!c->put(key, {{"value", value}})) {
            ++errors;
          }
          break;
        case 1: {
          auto got = c->get(key);
          if (!got) {
            ++errors;
          } else if (got->has_value() && !(*got)->files.at(0).data.starts_with(key)) {
            ++wrong;
          }
          break;
        }
        case 2:
          if (!c->exists(key)) {
            ++errors;
          }
          break;
        default: {
          const std::vector<std::string> keys = {key, "mix-0", "mix-1"};
          if (!c->batch_get(keys)) {
            ++errors;
          }
        }
        }
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

TEST(Kcached, KilledDaemonIsAMissWithinTheDeadline) {
  KcachedProcess kcached;
  auto c = connect(kcached.url(), 500);
  ASSERT_TRUE(c->put("k", {{"value", "v"}}).has_value());
  kcached.kill();
  for (int i = 0; i < 10; ++i) {
    const auto start = Clock::now();
    auto got = c->get("k");
    EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1500));
    ASSERT_FALSE(got.has_value());
    EXPECT_EQ(got.error().code, client::ErrorCode::kUnavailable) << got.error().message;
  }
}

TEST(Kcached, RestartKeepsEntriesAndClientsReconnect) {
  KcachedProcess kcached;
  auto c = connect(kcached.url());
  ASSERT_TRUE(c->put("durable", {{"value", "on disk"}}).has_value());
  EXPECT_EQ(kcached.terminate(), 0) << kcached.log(); // SIGTERM drains and exits cleanly
  kcached.start();
  auto fresh = connect(kcached.url());
  auto got = fresh->get("durable");
  ASSERT_TRUE(got.has_value() && got->has_value()) << kcached.log();
  EXPECT_EQ((*got)->files.at(0).data, "on disk");
  EXPECT_NE(kcached.log().find("drained"), std::string::npos);
}

TEST(Kcached, MalformedAndOversizedRequestsGet4xxAndTheDaemonGoesOn) {
  KcachedProcess kcached({"--max-body-bytes", "1MiB"});
  const int port = kcached.port();
  auto status_of = [](const std::string& response) {
    return response.size() > 12 ? std::stoi(response.substr(9, 3)) : 0;
  };
  EXPECT_EQ(status_of(testing::raw_exchange(port, "NOT HTTP AT ALL\r\n\r\n")), 400);
  EXPECT_EQ(status_of(testing::raw_exchange(
                port, "PUT /v1/cas/" + std::string(64, 'a') +
                          " HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n")),
            413);
  EXPECT_EQ(status_of(testing::raw_exchange(port, "GET /v1/ac/x HTTP/1.1\r\nHost: x\r\nX-Big: " +
                                                      std::string(40000, 'a') + "\r\n\r\n")),
            431);
  EXPECT_EQ(
      status_of(testing::raw_exchange(port, "GET /v1/ac/bad%20key HTTP/1.1\r\nHost: x\r\n\r\n")),
      400);
  EXPECT_EQ(
      status_of(testing::raw_exchange(port, "PUT /v1/artifacts/k HTTP/1.1\r\nHost: "
                                            "x\r\nContent-Length: 10\r\n\r\nKCP1\xff\xff\xff\x7f")),
      0); // truncated body: the daemon waits for the rest, then the client gives up
  // A truncated request followed by a close must not hurt anyone else.
  (void)testing::raw_exchange(port, "PUT /v1/cas/abc HTTP/1.1\r\nContent-Length: 100\r\n\r\nshort",
                              200);
  EXPECT_EQ(
      status_of(testing::raw_exchange(
          port, "POST /v1/batch/get HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n{\"keys\"")),
      400);
  auto c = connect(kcached.url());
  auto health = c->request(client::HttpMethod::kGet, "/healthz");
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->status, 200);
  EXPECT_TRUE(kcached.running());
}

// Issue 13: '{"spec":' and 100,000 nested '[' (a 200 KB body) overflowed the
// stack where the document was used; every JSON body is now parsed with a depth
// bound (protocol::parse_json) and this is a 400.
TEST(Kcached, DeeplyNestedJsonIsA400AndTheDaemonGoesOn) {
  KcachedProcess kcached;
  auto c = connect(kcached.url(), 10'000);
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  for (const auto& [target, body] :
       {std::pair<std::string, std::string>{"/v1/jobs", R"({"spec":)" + deep + "}"},
        {"/v1/jobs", R"({"spec":)" + std::string(100'000, '[')},
        {"/v1/batch/get", R"({"keys":)" + deep + "}"}}) {
    auto res = c->request(client::HttpMethod::kPost, target, body, "application/json");
    ASSERT_TRUE(res.has_value()) << target << ": " << res.error().message << "\n" << kcached.log();
    // kcached runs no workers without KCACHE_WORKER_BINARY: /v1/jobs says so first.
    if (target == "/v1/jobs" && res->status == 503) {
      continue;
    }
    EXPECT_EQ(res->status, 400) << target << ": " << res->body;
  }
  auto health = c->request(client::HttpMethod::kGet, "/healthz");
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->status, 200);
  EXPECT_TRUE(kcached.running());
}

TEST(Kcached, RedisTierSharedAndItsLossIsSurvived) {
  testing::RedisServer redis;
  const std::string redis_url = redis.url("namespace=it&timeout_ms=200&connect_timeout_ms=100");
  // One signing key for both nodes: each serves the other's (signed) records.
  testing::TempDir keys;
  const std::string key_file = (keys.path() / "cluster.pem").string();
  ASSERT_TRUE(protocol::SigningKey::generate()->save(key_file).has_value());
  KcachedProcess node_a({"--redis-url", redis_url, "--signing-key", key_file});
  KcachedProcess node_b({"--redis-url", redis_url, "--signing-key", key_file});
  auto a = connect(node_a.url());
  auto b = connect(node_b.url());
  ASSERT_TRUE(a->put("shared", {{"value", "from node a"}}).has_value());
  auto got = b->get("shared"); // node b has never seen it: it comes through Redis
  ASSERT_TRUE(got.has_value() && got->has_value()) << node_b.log();
  EXPECT_EQ((*got)->files.at(0).data, "from node a");

  redis.kill();
  ASSERT_TRUE(a->put("after", {{"value", "local only"}}).has_value());
  const auto start = Clock::now();
  auto local = a->get("after");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  ASSERT_TRUE(local.has_value() && local->has_value());
  EXPECT_FALSE(b->get("after")->has_value()); // a miss, not an error
  auto stats = a->request(client::HttpMethod::kGet, "/v1/stats");
  ASSERT_TRUE(stats.has_value());
  EXPECT_GT(json::parse(stats->body)["tiers"][2]["errors"].get<int>() +
                json::parse(stats->body)["tiers"][2]["rejected"].get<int>(),
            0);
}

class Cli : public ::testing::Test {
protected:
  int kcache(std::vector<std::string> args, std::string& out) {
    args.insert(args.begin(), {testing::built_binary("kcache"), "--url", kcached_.url()});
    return testing::run_command(args, out);
  }
  KcachedProcess kcached_;
};

TEST_F(Cli, EveryCommand) {
  std::string out;
  const std::string file = (kcached_.dir().path() / "kernel.cubin").string();
  std::ofstream(file) << std::string(5000, 'c');
  EXPECT_EQ(kcache({"put", "cli-1", file, "--meta", "ms=7"}, out), 0) << out;
  EXPECT_EQ(kcache({"ls"}, out), 0);
  EXPECT_NE(out.find("cli-1"), std::string::npos) << out;
  EXPECT_NE(out.find("LAST ACCESS"), std::string::npos);
  EXPECT_NE(out.find("STORED"), std::string::npos);
  EXPECT_EQ(kcache({"ls", "--json", "--sort", "size"}, out), 0);
  EXPECT_EQ(json::parse(out)["entries"][0]["key"], "cli-1");
  // The artifact's size (the file), not its record's; and listing is not a hit.
  EXPECT_EQ(json::parse(out)["entries"][0]["artifact_size"], 5000) << out;
  EXPECT_LT(json::parse(out)["entries"][0]["size"].get<int>(), 5000) << "a record, its file in CAS";
  EXPECT_EQ(json::parse(out)["entries"][0]["hits"], 0) << out;
  EXPECT_EQ(kcache({"show", "cli-1"}, out), 0);
  EXPECT_NE(out.find("kernel.cubin"), std::string::npos) << out;
  EXPECT_NE(out.find("ms = 7"), std::string::npos) << out;
  EXPECT_EQ(kcache({"get", "cli-1"}, out), 0);
  EXPECT_EQ(out, std::string(5000, 'c'));
  EXPECT_EQ(kcache({"stats", "--json"}, out), 0);
  EXPECT_GE(json::parse(out)["hits"].get<int>(), 1);
  EXPECT_EQ(kcache({"stats"}, out), 0);
  EXPECT_NE(out.find("rocksdb"), std::string::npos);
  EXPECT_EQ(kcache({"verify"}, out), 0) << out;
  EXPECT_NE(out.find("0 problem(s)"), std::string::npos);
  EXPECT_EQ(kcache({"get", "absent"}, out), 1);
  EXPECT_EQ(kcache({"frobnicate"}, out), 2);
  EXPECT_EQ(kcache({"gc", "--max-size", "1KiB", "--json"}, out), 0);
  EXPECT_GT(json::parse(out)["removed_entries"].get<int>(), 0);
  EXPECT_EQ(kcache({"rm", "cli-1"}, out), 0);
  EXPECT_EQ(kcache({"show", "cli-1"}, out), 1);
}

TEST_F(Cli, ExplainComparesStoredManifests) {
  auto c = connect(kcached_.url());
  auto make = [](const std::string& nvrtc, const std::string& guard) {
    return *cachekey::KeyBuilder()
                .ns("cli")
                .graph_digest(std::string(64, 'd'))
                .guards({guard})
                .hardware("cuda:sm_90a")
                .toolchain(cachekey::ToolchainFingerprint().add("nvrtc", nvrtc))
                .build();
  };
  const auto a = make("13.0", "s0 % 16 == 0");
  const auto b = make("13.1", "s0 % 8 == 0");
  for (const auto& m : {a, b}) {
    client::PutOptions options;
    options.manifest_json = cachekey::manifest_to_json(m);
    ASSERT_TRUE(c->put(m.key(), {{"value", "x"}}, options).has_value());
  }
  std::string out;
  EXPECT_EQ(kcache({"explain", a.key(), b.key()}, out), 0) << out;
  EXPECT_NE(out.find("guards differs"), std::string::npos) << out;
  EXPECT_NE(out.find("nvrtc: 13.0 -> 13.1"), std::string::npos) << out;
  EXPECT_EQ(kcache({"explain", a.key(), b.key(), "--json"}, out), 0);
  EXPECT_EQ(json::parse(out)["diffs"].size(), 2U);
}

TEST(CliWithoutDaemon, ExitsThreeQuickly) {
  std::string out;
  const auto start = Clock::now();
  const int rc = testing::run_command({testing::built_binary("kcache"), "--url",
                                       "http://127.0.0.1:1", "--timeout-ms", "500", "stats"},
                                      out);
  EXPECT_EQ(rc, 3);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

} // namespace
} // namespace kcache
