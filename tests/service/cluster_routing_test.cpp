// Cluster jobs routed by capability (issue 15): real redis-server, real
// kcached nodes (--cluster) of different tuning classes, real compiles and
// benchmarks. A search runs only on a node of its tuning class; one for a
// class no node has waits, says so, and runs when such a node joins.

#include "cluster_node.h"
#include "cpu_search.h"
#include "kcached_process.h"
#include "redis_server.h"
#include "scrape_metric.h"
#include "temp_dir.h"

#include <kcache/client/client.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

namespace kcache {
namespace {

using client::Client;
using nlohmann::json;
using testing::KcachedProcess;
using testing::RedisServer;
using testing::shared_signing_key;
using testing::worker_binary;

std::vector<std::string> node_args(const RedisServer& redis, const std::string& key,
                                   const std::string& id, const std::string& tuning_class) {
  const bool release = std::getenv("KCACHE_WORKER_BINARY") != nullptr;
  return {"--worker-binary",
          worker_binary(),
          "--worker-memory",
          release ? "4GiB" : "0",
          "--redis-url",
          redis.url("namespace=route"),
          "--signing-key",
          key,
          "--cluster",
          "--workers",
          "1",
          "--node-id",
          id,
          "--tuning-class",
          tuning_class};
}

std::unique_ptr<Client> connect(const std::string& url) {
  client::ClientOptions o;
  o.url = url;
  o.timeout = std::chrono::seconds(10);
  auto c = Client::create(o);
  EXPECT_TRUE(c.has_value());
  return std::move(*c);
}

// A small CPU search (three unrolls and the reference): seconds, not minutes.
json submit(Client& c, const std::string& key, const std::string& tuning_class) {
  return testing::submit_search(c, key, testing::sum_search({1, 2, 4}), tuning_class);
}

json finished(Client& c, const std::string& id) {
  auto job = c.job(id, std::chrono::seconds(120));
  EXPECT_TRUE(job.has_value());
  return job ? json::parse(job->json) : json();
}

double compiles(Client& c) {
  return testing::scrape_metric(c, R"(kcache_compiles_total{result="succeeded"})");
}

json record_metadata(Client& c, const std::string& key) {
  auto artifact = c.get(key);
  EXPECT_TRUE(artifact && *artifact);
  return artifact && *artifact ? json::parse((*artifact)->record_json)["metadata"] : json();
}

TEST(ClusterRouting, SearchRunsOnlyOnANodeOfItsTuningClass) {
  RedisServer redis;
  testing::TempDir keys;
  const std::string key = shared_signing_key(keys);
  KcachedProcess a(node_args(redis, key, "node-a", "cpu:class-a"));
  KcachedProcess b(node_args(redis, key, "node-b", "cpu:class-b"));
  auto on_a = connect(a.url());
  auto on_b = connect(b.url());

  // Submitted on A for B's hardware: B compiles the variants and times them.
  const json answer = submit(*on_a, "kc1-route-sum-b", "cpu:class-b");
  ASSERT_EQ(answer["status"], "queued") << answer.dump();
  EXPECT_EQ(answer["message"], "queued in the cluster") << "B serves cpu:class-b";
  const std::string id = answer["job"]["id"];
  const json job = finished(*on_a, id);
  ASSERT_EQ(job["state"], "succeeded") << job.dump(2) << a.log() << b.log();
  EXPECT_EQ(job["tuning_class"], "cpu:class-b");
  testing::RedisAdmin admin(redis.port());
  EXPECT_EQ(admin.run({"HGET", "route:job:{" + id + "}", "node"}), "node-b");
  EXPECT_GT(compiles(*on_b), 0);
  EXPECT_EQ(compiles(*on_a), 0) << "node A ran nothing of a cpu:class-b search";
  // The record names the hardware its timings hold on; either node serves it.
  EXPECT_EQ(record_metadata(*on_a, "kc1-route-sum-b")["tuning_class"], "cpu:class-b");

  // The registry shows what each node serves; `kcache nodes` prints it.
  std::string out;
  ASSERT_EQ(testing::run_command(
                {testing::built_binary("kcache"), "--url", a.url(), "--json", "nodes"}, out),
            0)
      << out;
  EXPECT_NE(out.find("autotune/cpp/cpu:class-a"), std::string::npos) << out;
  EXPECT_NE(out.find("autotune/cpp/cpu:class-b"), std::string::npos) << out;
  EXPECT_NE(out.find("cpp/x86_64"), std::string::npos) << out;
}

TEST(ClusterRouting, SearchForAClassNoNodeHasWaitsUntilOneJoins) {
  RedisServer redis;
  testing::TempDir keys;
  const std::string key = shared_signing_key(keys);
  KcachedProcess a(node_args(redis, key, "node-a", "cpu:class-a"));
  auto on_a = connect(a.url());

  const json answer = submit(*on_a, "kc1-route-sum-c", "cpu:class-c");
  ASSERT_EQ(answer["status"], "queued") << answer.dump();
  EXPECT_NE(
      answer["message"].get<std::string>().find("waiting for a node of tuning class cpu:class-c"),
      std::string::npos)
      << answer.dump();
  const std::string id = answer["job"]["id"];
  auto waited = on_a->job(id, std::chrono::milliseconds(1500));
  ASSERT_TRUE(waited.has_value());
  EXPECT_EQ(json::parse(waited->json)["state"], "queued") << "node A is not of its class";
  std::string out;
  ASSERT_EQ(testing::run_command({testing::built_binary("kcache"), "--url", a.url(), "jobs"}, out),
            0)
      << out;
  EXPECT_NE(out.find(id), std::string::npos) << out;
  EXPECT_NE(out.find("queued"), std::string::npos) << out;

  // A node of that class joins: it takes the waiting search.
  KcachedProcess c(node_args(redis, key, "node-c", "cpu:class-c"));
  const json job = finished(*on_a, id);
  ASSERT_EQ(job["state"], "succeeded") << job.dump(2) << c.log();
  testing::RedisAdmin admin(redis.port());
  EXPECT_EQ(admin.run({"HGET", "route:job:{" + id + "}", "node"}), "node-c");
  EXPECT_EQ(compiles(*on_a), 0);
  EXPECT_EQ(record_metadata(*on_a, "kc1-route-sum-c")["tuning_class"], "cpu:class-c");
}

// Node B's worker builds cpp only (its --toolchains answer filtered): idle as
// it is, it takes none of the cuda jobs node A submits; A runs them all.
TEST(ClusterRouting, CompileJobsGoToANodeWithTheirBackend) {
  RedisServer redis;
  testing::TempDir keys;
  const std::string key = shared_signing_key(keys);
  const std::filesystem::path wrapper = keys.path() / "cpp-only-worker";
  {
    std::ofstream w(wrapper);
    w << "#!/bin/sh\nif [ \"$1\" = --toolchains ]; then\n  \"" << worker_binary()
      << "\" --toolchains | /usr/bin/python3 -c 'import json, sys; "
         "print(json.dumps({\"cpp\": json.load(sys.stdin)[\"cpp\"]}))'\n  exit $?\nfi\nexec \""
      << worker_binary() << "\" \"$@\"\n";
  }
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  KcachedProcess a(node_args(redis, key, "node-a", "cpu:same"));
  std::vector<std::string> b_args = node_args(redis, key, "node-b", "cpu:same");
  b_args[1] = wrapper.string();
  KcachedProcess b(b_args);
  auto on_a = connect(a.url());
  auto on_b = connect(b.url());

  std::string out;
  ASSERT_EQ(testing::run_command(
                {testing::built_binary("kcache"), "--url", a.url(), "--json", "nodes"}, out),
            0)
      << out;
  std::map<std::string, std::vector<std::string>> served;
  const json listed = json::parse(out);
  for (const json& n : listed["nodes"]) {
    served[n["id"]] = n["capabilities"].get<std::vector<std::string>>();
  }
  auto serves = [&](const std::string& node, const std::string& capability) {
    const auto& c = served[node];
    return std::find(c.begin(), c.end(), capability) != c.end();
  };
  ASSERT_TRUE(serves("node-b", "cpp/x86_64")) << out;
  EXPECT_FALSE(serves("node-b", "cuda/cuda")) << out;
  if (!serves("node-a", "cuda/cuda")) {
    GTEST_SKIP() << "this kcache-worker has no cuda backend";
  }

  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    const std::string n = std::to_string(i);
    std::string source = "extern \"C\" __global__ void k";
    source += n + "(float* x) { x[0] = ";
    source += n + "; }\n";
    const json spec{{"backend", "cuda"},
                    {"source", {{"name", "k.cu"}, {"text", source}}},
                    {"target", "sm_80"},
                    {"output", "cubin"}};
    const json body{{"key", "kc1-route-cuda-" + n}, {"spec", spec}};
    auto res =
        on_a->request(client::HttpMethod::kPost, "/v1/jobs", body.dump(), "application/json");
    ASSERT_TRUE(res.has_value());
    const json answer = json::parse(res->body);
    ASSERT_EQ(answer["status"], "queued") << answer.dump();
    ids.push_back(answer["job"]["id"]);
  }
  testing::RedisAdmin admin(redis.port());
  for (const std::string& id : ids) {
    const json job = finished(*on_b, id); // any node answers for any job
    EXPECT_EQ(job["state"], "succeeded") << job.dump(2) << a.log();
    EXPECT_EQ(admin.run({"HGET", "route:job:{" + id + "}", "node"}), "node-a");
  }
  EXPECT_EQ(compiles(*on_b), 0);
}

} // namespace
} // namespace kcache
