// Run reports in cluster mode (issue 20, run_reports_redis.h): RedisRunReports
// directly (two clients = two nodes), on a standalone redis-server and on a
// real 3-master Redis Cluster (one hash tag: every script on one slot); then
// two real kcached nodes on one Redis, a report put through node A (the route
// kcache.torch's client uses) listed and read through node B, by the client
// and by the CLI; Redis gone: /v1/runs answers 503, the node the rest.

#include "kcached_process.h"
#include "redis_suite.h"

#include <kcache/client/client.h>
#include <kcache/service/run_reports_redis.h>
#include <kcache/storage/redis_client.h>
#include <kcache/storage/store_url.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>

namespace kcache {
namespace {

using nlohmann::json;
using service::RedisRunReports;
using service::RunReportLimits;
using testing::KcachedProcess;
using namespace std::chrono_literals;

const auto kAll = [](std::string_view) { return true; };

class RedisRunReportsTest : public testing::RedisSuite {
protected:
  std::unique_ptr<storage::RedisClient> client() {
    auto url = storage::StoreUrl::parse(redis().url("namespace=" + ns() + "&timeout_ms=300"));
    return storage::RedisClient::create(*storage::parse_redis_url(*url));
  }
};

INSTANTIATE_TEST_SUITE_P(, RedisRunReportsTest, testing::RedisKinds(), testing::RedisKindName);

TEST_P(RedisRunReportsTest, TwoNodesShareReportsUnderTheLocalLimits) {
  auto client_a = client();
  auto client_b = client();
  RunReportLimits limits;
  limits.max_reports = 3;
  limits.max_age_ms = 10'000;
  RedisRunReports node_a(*client_a, limits), node_b(*client_b, limits);
  for (int i = 0; i < 5; ++i) {
    const json report{{"host", "h" + std::to_string(i)},
                      {"totals", {{"hits", i}, {"misses", 1}, {"compile_seconds", 0.5}}}};
    ASSERT_TRUE(node_a.put("ns", "run-" + std::to_string(i), "0", report, 1000 + i));
  }
  // A second rank of the newest run, through the other node.
  ASSERT_TRUE(node_b.put("ns", "run-4", "1", json{{"totals", {{"hits", 2}}}}, 1006));
  const auto listed = node_b.list(kAll, std::nullopt, 100, 2000);
  ASSERT_TRUE(listed.has_value()) << listed.error();
  ASSERT_EQ(listed->size(), 2U) << "3 reports kept: run-3 and run-4's two ranks";
  EXPECT_EQ(listed->front().run, "run-4"); // newest first
  EXPECT_EQ(listed->front().ranks, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(listed->front().hits, 6);
  EXPECT_EQ(listed->front().host, "h4");
  EXPECT_TRUE(node_a.get("ns", "run-0", 2000)->empty()) << "the oldest went first";
  const auto shown = node_a.get("ns", "run-4", 2000);
  ASSERT_TRUE(shown.has_value()) << shown.error();
  ASSERT_EQ(shown->size(), 2U);
  EXPECT_EQ(json::parse(shown->at("1"))["totals"]["hits"], 2);
  EXPECT_TRUE(node_a.list(kAll, std::string("other"), 100, 2000)->empty());
  EXPECT_EQ(node_a.list(kAll, std::nullopt, 1, 2000)->size(), 1U);
  EXPECT_TRUE(
      node_a.list([](std::string_view ns) { return ns != "ns"; }, std::nullopt, 100, 2000)->empty())
      << "a namespace the caller may not read is not listed";

  // Past the age limit: no longer listed or read, and dropped at the next put.
  EXPECT_TRUE(node_b.list(kAll, std::nullopt, 100, 1006 + 20'000)->empty());
  EXPECT_TRUE(node_b.get("ns", "run-4", 1006 + 20'000)->empty());
  ASSERT_TRUE(node_a.put("ns", "new", "0", json::object(), 1006 + 20'000));
  EXPECT_EQ(node_b.list(kAll, std::nullopt, 100, 1006 + 20'000)->size(), 1U);
  // Every key carries the age limit as its TTL.
  const std::string order = ns() + ":runs:{runs}:order";
  const auto ttl = client_a->run(order, {"PTTL", order});
  ASSERT_TRUE(ttl.has_value());
  EXPECT_GT(ttl->integer, 5'000);
  EXPECT_LE(ttl->integer, 10'000);
}

TEST_P(RedisRunReportsTest, BytesAreBoundedAndAReplacedReportCountsOnce) {
  auto redis_client = client();
  RunReportLimits limits;
  limits.max_report_bytes = 100;
  limits.max_total_bytes = 250;
  RedisRunReports reports(*redis_client, limits);
  const json report{{"pad", std::string(70, 'x')}}; // 80 bytes of JSON
  ASSERT_EQ(report.dump().size(), 80U);
  const json big{{"pad", std::string(100, 'x')}};
  const auto refused = reports.put("ns", "big", "0", big, 1000);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("at most 100 bytes"), std::string::npos) << refused.error();

  // The same rank replaced many times counts its bytes once.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(reports.put("ns", "run-a", "0", report, 1000 + i));
  }
  ASSERT_TRUE(reports.put("ns", "run-b", "0", report, 1100));
  ASSERT_TRUE(reports.put("ns", "run-c", "0", report, 1200));
  EXPECT_EQ(reports.list(kAll, std::nullopt, 100, 2000)->size(), 3U) << "240 bytes fit";
  ASSERT_TRUE(reports.put("ns", "run-d", "0", report, 1300));
  const auto listed = reports.list(kAll, std::nullopt, 100, 2000);
  ASSERT_EQ(listed->size(), 3U) << "320 bytes do not: the oldest goes";
  EXPECT_EQ(listed->back().run, "run-b");
  const std::string bytes = ns() + ":runs:{runs}:bytes";
  EXPECT_EQ(redis_client->run(bytes, {"GET", bytes})->str, "240");
}

// Redis down: an error that says so, never a hang. Standalone only: on a
// cluster this is the same (one slot, one master) and healing costs 8 s.
class RedisRunReportsDown : public RedisRunReportsTest {};
INSTANTIATE_TEST_SUITE_P(, RedisRunReportsDown, ::testing::Values(testing::RedisKind::kStandalone),
                         testing::RedisKindName);

TEST_P(RedisRunReportsDown, IsAnErrorNotAHang) {
  auto redis_client = client();
  RedisRunReports reports(*redis_client);
  ASSERT_TRUE(reports.put("ns", "run", "0", json::object(), 1000));
  redis().kill();
  const auto started = std::chrono::steady_clock::now();
  const auto put = reports.put("ns", "run", "1", json::object(), 1001);
  ASSERT_FALSE(put.has_value());
  EXPECT_NE(put.error().find("Redis is unavailable"), std::string::npos) << put.error();
  EXPECT_FALSE(reports.list(kAll, std::nullopt, 10, 1001).has_value());
  EXPECT_FALSE(reports.get("ns", "run", 1001).has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

// Real nodes: a standalone redis-server is enough to show what a node does.
class ClusterRunReports : public testing::RedisSuite {};
INSTANTIATE_TEST_SUITE_P(, ClusterRunReports, ::testing::Values(testing::RedisKind::kStandalone),
                         testing::RedisKindName);

int kcache_cli(const std::vector<std::string>& args, std::string& out) {
  std::vector<std::string> argv{testing::built_binary("kcache")};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::run_command(argv, out);
}

TEST_P(ClusterRunReports, AReportPutThroughOneNodeIsReadThroughAnother) {
  const std::string redis_url = redis().url("namespace=" + ns() + "&timeout_ms=300");
  KcachedProcess node_a({"--redis-url", redis_url, "--cluster", "--node-id", "node-a"});
  KcachedProcess node_b({"--redis-url", redis_url, "--cluster", "--node-id", "node-b"});
  const auto client_of = [](const KcachedProcess& node) {
    client::ClientOptions o;
    o.url = node.url();
    o.timeout = 5s;
    return std::move(*client::Client::create(o));
  };
  auto on_a = client_of(node_a);
  auto on_b = client_of(node_b);
  const json report{{"host", "trainer-7"},
                    {"started_ms", 1000},
                    {"totals", {{"compile_seconds", 4.5}, {"hits", 3}, {"misses", 2}}},
                    {"misses", json::array({{{"graph", "g0"}, {"explain", "x's shape differs"}}})}};
  // kcache.torch puts through the C API, which is this call.
  ASSERT_TRUE(on_a->put_run_report("team", "job-42", "rank0", report.dump()).has_value());
  ASSERT_TRUE(on_b->put_run_report("team", "job-42", "rank1", report.dump()).has_value());

  const auto listed = on_b->runs("team");
  ASSERT_TRUE(listed.has_value()) << listed.error().message;
  const json runs = json::parse(*listed)["runs"];
  ASSERT_EQ(runs.size(), 1U) << *listed;
  EXPECT_EQ(runs[0]["ranks"], json::array({"rank0", "rank1"}));
  EXPECT_EQ(runs[0]["misses"], 4);

  std::string out;
  ASSERT_EQ(kcache_cli({"--url", node_b.url(), "runs"}, out), 0) << out;
  EXPECT_NE(out.find("team/job-42"), std::string::npos) << out;
  EXPECT_NE(out.find("trainer-7"), std::string::npos) << out;
  EXPECT_NE(out.find("1 run"), std::string::npos) << out;
  ASSERT_EQ(kcache_cli({"--url", node_a.url(), "--json", "run", "team/job-42"}, out), 0) << out;
  const json shown = json::parse(out);
  EXPECT_EQ(shown["reports"]["rank0"]["misses"][0]["explain"], "x's shape differs") << out;
  EXPECT_EQ(shown["reports"]["rank1"]["host"], "trainer-7") << out;

  // Redis gone: the runs routes say why with a 503; the node serves the rest.
  redis().kill();
  const auto down = on_b->runs("team");
  ASSERT_FALSE(down.has_value());
  EXPECT_EQ(down.error().http_status, 503);
  EXPECT_NE(down.error().message.find("Redis is unavailable"), std::string::npos)
      << down.error().message;
  const auto put = on_a->put_run_report("team", "job-43", "rank0", report.dump());
  ASSERT_FALSE(put.has_value());
  EXPECT_EQ(put.error().http_status, 503);
  EXPECT_NE(kcache_cli({"--url", node_b.url(), "run", "team/job-42"}, out), 0) << out;
  const auto stats = on_b->stats();
  EXPECT_TRUE(stats.has_value()) << stats.error().message;
  EXPECT_TRUE(node_a.running());
  EXPECT_TRUE(node_b.running());
}

} // namespace
} // namespace kcache
