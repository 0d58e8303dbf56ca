// Cluster-wide leases and the node registry (issue 15 parts 2 and 3):
// RedisLeaseTable directly (two tables = two nodes), then real kcached nodes
// in cluster mode with ranks asking different nodes. Each test runs on a
// standalone redis-server (.../Standalone) and on a real 3-master Redis
// Cluster (.../RedisCluster), where a lease's keys share its hash tag, so
// every script runs on one slot, whichever master owns it.

#include "kcached_process.h"
#include "redis_suite.h"
#include "temp_dir.h"

#include <kcache/client/client.h>
#include <kcache/protocol/record_signature.h>
#include <kcache/service/lease_table_redis.h>
#include <kcache/service/metrics.h>
#include <kcache/service/node_registry.h>
#include <kcache/storage/redis_client.h>
#include <kcache/storage/store_url.h>

#include <gtest/gtest.h>

#include <atomic>
#include <charconv>
#include <future>
#include <set>
#include <thread>

namespace kcache {
namespace {

using service::LeaseTable;
using service::RedisLeaseTable;
using testing::KcachedProcess;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

class RedisLeases : public testing::RedisSuite {
protected:
  storage::RedisOptions options() {
    auto url = storage::StoreUrl::parse(redis().url("namespace=" + ns() + "&timeout_ms=300"));
    return *storage::parse_redis_url(*url);
  }
  // The key under which a lease on `key` lives (its hash slot picks the master).
  std::string lease_key(const std::string& key) { return ns() + ":lease:{" + key + "}"; }
};

INSTANTIATE_TEST_SUITE_P(, RedisLeases, testing::RedisKinds(), testing::RedisKindName);

// The fencing counter of a Redis-granted token "r<seq>.<nonce>".
long long sequence_of(const std::string& token) {
  long long seq = 0;
  std::from_chars(token.data() + 1, token.data() + token.size(), seq);
  return seq;
}

// Runs `done` into a future the test can wait on.
struct Wake {
  std::promise<Clock::time_point> promise;
  std::future<Clock::time_point> future = promise.get_future();
  std::function<void()> callback() {
    return [this] { promise.set_value(Clock::now()); };
  }
};

TEST_P(RedisLeases, OneHolderAcrossNodesWithGrowingFencingTokens) {
  const auto options = this->options();
  auto client_a = storage::RedisClient::create(options);
  auto client_b = storage::RedisClient::create(options);
  RedisLeaseTable node_a(*client_a, options), node_b(*client_b, options);

  const auto first = node_a.acquire("kc1-graph", "rank0", 10s);
  ASSERT_TRUE(first.granted);
  EXPECT_TRUE(first.token.starts_with(RedisLeaseTable::kTokenPrefix)) << first.token;
  const auto second = node_b.acquire("kc1-graph", "rank1", 10s);
  EXPECT_FALSE(second.granted);
  EXPECT_EQ(second.holder, "rank0");
  EXPECT_GT(second.expires_in, 5s);
  EXPECT_TRUE(node_b.held("kc1-graph"));

  // Only the token renews or releases, on any node.
  EXPECT_FALSE(node_b.renew("kc1-graph", first.token + "x", 10s));
  EXPECT_TRUE(node_b.renew("kc1-graph", first.token, 10s));
  EXPECT_FALSE(node_b.release("kc1-graph", "r999.bogus"));
  EXPECT_TRUE(node_b.release("kc1-graph", first.token));
  EXPECT_FALSE(node_a.held("kc1-graph"));

  // The next holder's token fences the old one out.
  const auto third = node_b.acquire("kc1-graph", "rank1", 10s);
  ASSERT_TRUE(third.granted);
  EXPECT_GT(sequence_of(third.token), sequence_of(first.token));
  EXPECT_FALSE(node_a.renew("kc1-graph", first.token, 10s));
  EXPECT_FALSE(node_a.release("kc1-graph", first.token));
  EXPECT_TRUE(node_a.held("kc1-graph"));
}

TEST_P(RedisLeases, AnExpiredLeaseGoesToTheNextAsker) {
  const auto options = this->options();
  auto client = storage::RedisClient::create(options);
  RedisLeaseTable table(*client, options);
  const auto stalled = table.acquire("kc1-x", "stalled-rank", 150ms);
  ASSERT_TRUE(stalled.granted);
  std::this_thread::sleep_for(300ms);
  const auto next = table.acquire("kc1-x", "rank2", 10s);
  EXPECT_TRUE(next.granted);
  EXPECT_FALSE(table.renew("kc1-x", stalled.token, 10s)) << "a stalled holder cannot come back";
}

TEST_P(RedisLeases, APutOnOneNodeWakesTheWaitersOfAnother) {
  const auto options = this->options();
  auto client_a = storage::RedisClient::create(options);
  auto client_b = storage::RedisClient::create(options);
  // Polling slower than the test's bound: the wake must come from the event.
  RedisLeaseTable node_a(*client_a, options),
      node_b(*client_b, options, service::RedisLeaseOptions{.poll_interval = 10s});
  ASSERT_TRUE(node_a.acquire("kc1-y", "rank0", 30s).granted);
  std::this_thread::sleep_for(200ms); // the subscription is connected

  Wake woken;
  node_b.wait_for_put("kc1-y", Clock::now() + 20s, woken.callback());
  ASSERT_EQ(woken.future.wait_for(300ms), std::future_status::timeout) << "waits for the put";
  const auto put_at = Clock::now();
  node_a.notify_put("kc1-y");
  ASSERT_EQ(woken.future.wait_for(5s), std::future_status::ready);
  EXPECT_LT(woken.future.get() - put_at, 2s);
  EXPECT_FALSE(node_b.held("kc1-y")) << "a put ends the lease cluster-wide";
}

TEST_P(RedisLeases, WithoutEventsPollingEndsTheWaitWhenTheLeaseEnds) {
  const auto options = this->options();
  auto client_a = storage::RedisClient::create(options);
  auto client_b = storage::RedisClient::create(options);
  storage::RedisOptions no_subscription = options;
  no_subscription.host.clear();
  RedisLeaseTable node_a(*client_a, options),
      node_b(*client_b, no_subscription, service::RedisLeaseOptions{.poll_interval = 100ms});
  const auto lease = node_a.acquire("kc1-z", "rank0", 30s);
  ASSERT_TRUE(lease.granted);
  Wake woken;
  node_b.wait_for_put("kc1-z", Clock::now() + 20s, woken.callback());
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(node_a.release("kc1-z", lease.token));
  ASSERT_EQ(woken.future.wait_for(3s), std::future_status::ready);
}

// Redis down (a cluster: the master that owns the lease's slot).
TEST_P(RedisLeases, RedisDownFailsOpenToNodeLocalLeases) {
  const auto options = this->options();
  auto client = storage::RedisClient::create(options);
  RedisLeaseTable table(*client, options);
  if (testing::RedisCluster* cluster = redis().cluster()) {
    redis().aim_at(cluster->owner_of(storage::redis_hash_slot(lease_key("kc1-down"))));
  }
  redis().kill();
  const auto start = Clock::now();
  const auto lease = table.acquire("kc1-down", "rank0", 10s);
  ASSERT_TRUE(lease.granted);
  EXPECT_FALSE(lease.token.starts_with(RedisLeaseTable::kTokenPrefix)) << "a local lease";
  EXPECT_FALSE(table.acquire("kc1-down", "rank1", 10s).granted) << "single-flight on this node";
  EXPECT_TRUE(table.renew("kc1-down", lease.token, 10s));
  Wake woken;
  table.wait_for_put("kc1-down", Clock::now() + 20s, woken.callback());
  table.notify_put("kc1-down");
  ASSERT_EQ(woken.future.wait_for(2s), std::future_status::ready);
  EXPECT_LT(Clock::now() - start, 5s) << "an outage costs deadlines, not hangs";
}

// Many keys, so that on the cluster their leases land on every master.
TEST_P(RedisLeases, EveryKeysLeaseWorksWhereverItsSlotIs) {
  const auto options = this->options();
  auto client_a = storage::RedisClient::create(options);
  auto client_b = storage::RedisClient::create(options);
  RedisLeaseTable node_a(*client_a, options), node_b(*client_b, options);
  std::set<int> masters;
  for (int i = 0; i < 12; ++i) {
    const std::string key = "kc1-graph-" + std::to_string(i);
    if (testing::RedisCluster* cluster = redis().cluster()) {
      masters.insert(cluster->owner_of(storage::redis_hash_slot(lease_key(key))));
    }
    const auto lease = node_a.acquire(key, "rank0", 10s);
    ASSERT_TRUE(lease.granted) << key;
    EXPECT_TRUE(lease.token.starts_with(RedisLeaseTable::kTokenPrefix)) << lease.token;
    EXPECT_FALSE(node_b.acquire(key, "rank1", 10s).granted) << key;
    EXPECT_TRUE(node_b.renew(key, lease.token, 10s)) << key;
    Wake woken;
    node_b.wait_for_put(key, Clock::now() + 10s, woken.callback());
    node_a.notify_put(key);
    ASSERT_EQ(woken.future.wait_for(5s), std::future_status::ready) << key;
    EXPECT_FALSE(node_b.held(key)) << key;
  }
  if (on_cluster()) {
    EXPECT_EQ(masters.size(), 3U) << "the keys spread over every master";
  }
}

class NodeRegistry : public RedisLeases {};
INSTANTIATE_TEST_SUITE_P(, NodeRegistry, testing::RedisKinds(), testing::RedisKindName);

TEST_P(NodeRegistry, NodesHeartbeatAndADeadOneDropsOut) {
  const auto options = this->options();
  auto client = storage::RedisClient::create(options);
  service::MetricsRegistry metrics;
  auto node = [&](const std::string& id) {
    return std::make_unique<service::NodeRegistry>(
        *client, 100ms,
        [id] {
          service::NodeInfo info;
          info.id = id;
          info.address = "10.0.0.1:7070";
          info.capabilities = {"cpp", "triton"};
          info.workers = 2;
          return info;
        },
        metrics);
  };
  auto a = node("node-a");
  auto b = node("node-b");
  std::this_thread::sleep_for(300ms);
  auto listed = a->list();
  ASSERT_TRUE(listed.has_value()) << listed.error();
  ASSERT_EQ(listed->size(), 2U);
  EXPECT_EQ((*listed)[0].id, "node-a");
  EXPECT_EQ((*listed)[1].id, "node-b");
  EXPECT_EQ((*listed)[1].capabilities, (std::vector<std::string>{"cpp", "triton"}));
  EXPECT_EQ((*listed)[1].workers, 2U);
  EXPECT_GT((*listed)[1].heartbeat_ms, 0);
  EXPECT_NE(metrics.render().find("kcache_cluster_nodes 2"), std::string::npos);

  b.reset(); // a clean stop removes its entry at once
  listed = a->list();
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->size(), 1U);
}

class ClusterLeases : public testing::RedisSuite {};
INSTANTIATE_TEST_SUITE_P(, ClusterLeases, testing::RedisKinds(), testing::RedisKindName);

// Real nodes: ranks on two kcached take one lease; one compiles, three hit.
TEST_P(ClusterLeases, FourRanksOnTwoNodesOneProducesThreeHit) {
  const std::string redis_url = redis().url("namespace=" + ns());
  // One signing key for the cluster: each node serves the other's records.
  testing::TempDir keys;
  const std::string key_file = (keys.path() / "cluster.pem").string();
  ASSERT_TRUE(protocol::SigningKey::generate()->save(key_file).has_value());
  KcachedProcess node_a(
      {"--redis-url", redis_url, "--cluster", "--node-id", "node-a", "--signing-key", key_file});
  KcachedProcess node_b(
      {"--redis-url", redis_url, "--cluster", "--node-id", "node-b", "--signing-key", key_file});
  std::vector<std::unique_ptr<client::Client>> ranks;
  for (int i = 0; i < 4; ++i) {
    client::ClientOptions o;
    o.url = (i % 2 == 0 ? node_a : node_b).url();
    o.timeout = 5s;
    ranks.push_back(std::move(*client::Client::create(o)));
  }
  std::vector<client::Lease> leases(4);
  std::vector<std::thread> askers;
  for (int i = 0; i < 4; ++i) {
    askers.emplace_back([&, i] {
      auto lease = ranks[i]->acquire_lease("kc1-shared-graph", 30s, "rank" + std::to_string(i));
      ASSERT_TRUE(lease.has_value()) << lease.error().message;
      leases[i] = *lease;
    });
  }
  for (std::thread& t : askers) {
    t.join();
  }
  int holder = -1;
  for (int i = 0; i < 4; ++i) {
    if (leases[i].granted) {
      ASSERT_EQ(holder, -1) << "two ranks hold the lease";
      holder = i;
    }
  }
  ASSERT_NE(holder, -1);
  for (int i = 0; i < 4; ++i) {
    if (i != holder) {
      EXPECT_EQ(leases[i].holder, "rank" + std::to_string(holder));
    }
  }

  // The three others wait in get on their own node; the holder puts on its own.
  std::vector<std::future<client::Result<std::optional<client::Artifact>>>> waits;
  for (int i = 0; i < 4; ++i) {
    if (i != holder) {
      waits.push_back(std::async(std::launch::async,
                                 [&, i] { return ranks[i]->get("kc1-shared-graph", 20s); }));
    }
  }
  std::this_thread::sleep_for(500ms);
  const auto put_at = Clock::now();
  ASSERT_TRUE(ranks[holder]->put("kc1-shared-graph", {{"value", "compiled once"}}).has_value());
  for (auto& wait : waits) {
    auto got = wait.get();
    ASSERT_TRUE(got.has_value()) << got.error().message;
    ASSERT_TRUE(got->has_value()) << "every waiter hits";
    EXPECT_EQ((*got)->files.front().data, "compiled once");
  }
  EXPECT_LT(Clock::now() - put_at, 5s);

  // `kcache nodes` on either node lists both.
  std::string out;
  ASSERT_EQ(
      testing::run_command({testing::built_binary("kcache"), "--url", node_b.url(), "nodes"}, out),
      0)
      << out;
  EXPECT_NE(out.find("node-a"), std::string::npos) << out;
  EXPECT_NE(out.find("node-b"), std::string::npos) << out;
  EXPECT_NE(out.find("2 nodes"), std::string::npos) << out;
  ASSERT_EQ(testing::run_command(
                {testing::built_binary("kcache"), "--url", node_a.url(), "--json", "nodes"}, out),
            0)
      << out;
  EXPECT_NE(out.find("\"heartbeat_ms\""), std::string::npos) << out;
}

TEST(ClusterLeasesNoRedis, NodesAnswers404OutsideClusterMode) {
  KcachedProcess kcached;
  std::string out;
  // Exit status 1: not found (the reason goes to stderr).
  EXPECT_EQ(
      testing::run_command({testing::built_binary("kcache"), "--url", kcached.url(), "nodes"}, out),
      1)
      << out;
  client::ClientOptions o;
  o.url = kcached.url();
  auto c = client::Client::create(o);
  auto nodes = (*c)->nodes();
  ASSERT_FALSE(nodes.has_value());
  EXPECT_EQ(nodes.error().http_status, 404);
  EXPECT_NE(nodes.error().message.find("not in cluster mode"), std::string::npos)
      << nodes.error().message;
}

} // namespace
} // namespace kcache
