// RedisClient and RedisStore against a real 3-master Redis Cluster (the
// fixture starts it once for the suite): routing by hash slot, keys on every
// master, list over every master, get_many split by slot, and slots moved
// under a running client (MOVED after a resharding, ASK during one).
#include "../support/redis_cluster.h"
#include "../support/redis_server.h"

#include <kcache/storage/redis_client.h>
#include <kcache/storage/redis_store.h>
#include <kcache/storage/store_url.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

namespace kcache::storage {
namespace {

using kcache::testing::RedisAdmin;
using kcache::testing::RedisCluster;
using namespace std::chrono_literals;

class RedisClusterTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() { cluster_ = std::make_unique<RedisCluster>(); }
  static void TearDownTestSuite() { cluster_.reset(); }

  static RedisOptions options(const std::string& ns, const std::string& query = "") {
    auto url =
        StoreUrl::parse(cluster_->url("namespace=" + ns + (query.empty() ? "" : "&" + query)));
    EXPECT_TRUE(url.has_value());
    auto parsed = parse_redis_url(*url);
    EXPECT_TRUE(parsed.has_value()) << parsed.error().message;
    return *parsed;
  }
  // Another master than the one that owns `slot`.
  static int other_master(int slot) {
    const int owner = cluster_->owner_of(slot);
    for (const int port : cluster_->ports()) {
      if (port != owner) {
        return port;
      }
    }
    return owner;
  }

  // A key the master on `port` owns and one another master owns.
  static std::pair<std::string, std::string> keys_on_and_off(RedisClient& client, int port) {
    std::string on;
    std::string off;
    for (int i = 0; on.empty() || off.empty(); ++i) {
      const std::string k = client.key("k" + std::to_string(i));
      (cluster_->owner_of(redis_hash_slot(k)) == port ? on : off) = k;
    }
    return {on, off};
  }
  // One master paused (SIGSTOP) for the scope: it runs again whatever the test asserts.
  class PausedMaster {
  public:
    explicit PausedMaster(int port) : port_(port) { cluster_->pause(port_); }
    ~PausedMaster() { cluster_->resume(port_); }
    PausedMaster(const PausedMaster&) = delete;
    PausedMaster& operator=(const PausedMaster&) = delete;

  private:
    int port_;
  };

  static std::unique_ptr<RedisCluster> cluster_;
};
std::unique_ptr<RedisCluster> RedisClusterTest::cluster_;

TEST_F(RedisClusterTest, HashSlotsMatchClusterKeyslot) {
  RedisAdmin admin(cluster_->ports().front());
  for (const std::string key :
       {"123456789", "kcache:ac:kc1-abc", "kcache:q:{cuda-sm90}", "kcache:job:{42}", "foo{}{bar}",
        "foo{{bar}}zap", "a{b}{c}", "{", "}{x}", ""}) {
    EXPECT_EQ(admin.run({"CLUSTER", "KEYSLOT", key}), std::to_string(redis_hash_slot(key))) << key;
  }
}

TEST_F(RedisClusterTest, ClientRoutesKeysToEveryMaster) {
  auto client = RedisClient::create(options("route"));
  std::map<int, int> per_master;
  for (int i = 0; i < 60; ++i) {
    const std::string k = client->key("k" + std::to_string(i));
    auto set = client->run(k, {"SET", k, std::to_string(i)});
    ASSERT_TRUE(set.has_value()) << set.error().message;
    ASSERT_FALSE(set->is_error()) << set->str;
    // The key is on the master that owns its slot, read there directly.
    const int owner = cluster_->owner_of(redis_hash_slot(k));
    EXPECT_EQ(RedisAdmin(owner).run({"GET", k}), std::to_string(i));
    ++per_master[owner];
  }
  EXPECT_EQ(per_master.size(), 3U);
  EXPECT_TRUE(client->is_cluster());
  EXPECT_EQ(client->masters()->size(), 3U);

  // A pipeline and a script on one slot, kept together by a hash tag.
  const std::string job = client->key("job:{7}");
  const std::string seq = client->key("seq:{7}");
  auto replies = client->pipeline(job, {{"HSET", job, "state", "queued"}, {"INCR", seq}});
  ASSERT_TRUE(replies.has_value()) << replies.error().message;
  EXPECT_FALSE((*replies)[0].is_error()) << (*replies)[0].str;
  EXPECT_EQ((*replies)[1].integer, 1);
  auto script = client->eval("return redis.call('HGET', KEYS[1], ARGV[1]) .. redis.call('GET', "
                             "KEYS[2])",
                             {job, seq}, {"state"});
  ASSERT_TRUE(script.has_value()) << script.error().message;
  EXPECT_EQ(script->str, "queued1");
}

TEST_F(RedisClusterTest, StoreWorksAcrossSlots) {
  RedisStore store(options("store"));
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) {
    keys.push_back("kc1-" + std::to_string(i));
    ASSERT_TRUE(store.put(Area::kCas, keys.back(), std::string(i + 1, 'x')).has_value());
  }
  ASSERT_TRUE(store.put(Area::kAction, "kc1-manifest", "m").has_value());
  EXPECT_EQ(store.get(Area::kCas, "kc1-7")->value(), std::string(8, 'x'));
  EXPECT_TRUE(*store.contains(Area::kAction, "kc1-manifest"));

  std::vector<std::string> batch = {"kc1-3", "missing", "kc1-39", "kc1-0", "kc1-21"};
  auto got = store.get_many(Area::kCas, batch);
  ASSERT_EQ(got.size(), batch.size());
  EXPECT_EQ(got[0]->value(), "xxxx");
  EXPECT_FALSE(got[1]->has_value());
  EXPECT_EQ(got[2]->value().size(), 40U);
  EXPECT_EQ(got[3]->value(), "x");
  EXPECT_EQ(got[4]->value().size(), 22U);
  std::set<int> owners;
  for (const std::string& key : batch) {
    owners.insert(cluster_->owner_of(redis_hash_slot(store.redis_key(Area::kCas, key))));
  }
  EXPECT_GE(owners.size(), 2U); // the MGET really was split

  ListOptions cas;
  cas.area = Area::kCas;
  auto all = store.list(cas);
  ASSERT_TRUE(all.has_value()) << all.error().message;
  EXPECT_EQ(all->size(), 40U); // values on every master, the index on one
  cas.prefix = "kc1-1";
  auto some = store.list(cas);
  ASSERT_TRUE(some.has_value());
  EXPECT_EQ(some->size(), 11U); // kc1-1, kc1-10..19
  for (const ObjectInfo& info : *some) {
    EXPECT_EQ(info.size, std::stoul(info.key.substr(4)) + 1);
  }
  cas.prefix.clear();
  cas.limit = 5;
  EXPECT_EQ(store.list(cas)->size(), 5U);
  ListOptions both;
  EXPECT_EQ(store.list(both)->size(), 41U);
  auto biggest = store.list_top({ListOrder::kSize, 3, false, Area::kCas});
  ASSERT_TRUE(biggest.has_value()) << biggest.error().message;
  ASSERT_EQ(biggest->rows.size(), 3U);
  EXPECT_EQ(biggest->rows[0].key, "kc1-39");
  EXPECT_EQ(biggest->rows[2].key, "kc1-37");
  EXPECT_EQ(biggest->rows[2].size, 38U);

  ASSERT_TRUE(store.remove(Area::kCas, "kc1-7").has_value());
  EXPECT_FALSE(*store.contains(Area::kCas, "kc1-7"));
  EXPECT_FALSE(store.get(Area::kCas, "kc1-7")->has_value());
}

TEST_F(RedisClusterTest, MovedAfterAResharding) {
  RedisStore store(options("moved"));
  ASSERT_TRUE(store.put(Area::kAction, "kc1-moving", "before").has_value());
  const int slot = redis_hash_slot(store.redis_key(Area::kAction, "kc1-moving"));
  const int target = other_master(slot);
  cluster_->move_slot(slot, target); // the store's slot map is now stale
  ASSERT_EQ(cluster_->owner_of(slot), target);
  auto got = store.get(Area::kAction, "kc1-moving");
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_EQ(got->value(), "before");
  ASSERT_TRUE(store.put(Area::kAction, "kc1-moving", "after").has_value());
  EXPECT_EQ(RedisAdmin(target).run({"GET", store.redis_key(Area::kAction, "kc1-moving")}), "after");
  EXPECT_EQ(store.breaker_state(), protocol::CircuitBreaker::State::kClosed);
}

TEST_F(RedisClusterTest, AskDuringAMigration) {
  RedisStore store(options("ask"));
  // One slot (hash tag): one key moved early, one not yet, one new.
  const std::string moved = store.redis_key(Area::kCas, "{mig}moved");
  ASSERT_TRUE(store.put(Area::kCas, "{mig}moved", "m").has_value());
  ASSERT_TRUE(store.put(Area::kCas, "{mig}stays", "s").has_value());
  const int slot = redis_hash_slot(moved);
  const int source = cluster_->owner_of(slot);
  const int target = other_master(slot);
  cluster_->start_migration(slot, target);
  ASSERT_EQ(
      RedisAdmin(source).run({"MIGRATE", "127.0.0.1", std::to_string(target), moved, "0", "5000"}),
      "OK");
  auto got = store.get(Area::kCas, "{mig}moved"); // source: ASK -> target
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_EQ(got->value(), "m");
  EXPECT_EQ(store.get(Area::kCas, "{mig}stays")->value(), "s");    // still on the source
  ASSERT_TRUE(store.put(Area::kCas, "{mig}new", "n").has_value()); // ASK: goes to the target
  // Not on the source: it sends a reader of that key on to the target.
  EXPECT_TRUE(
      RedisAdmin(source).run({"GET", store.redis_key(Area::kCas, "{mig}new")}).starts_with("ASK "));
  cluster_->finish_migration(slot, target);
  for (const auto& [key, value] : std::map<std::string, std::string>{
           {"{mig}moved", "m"}, {"{mig}stays", "s"}, {"{mig}new", "n"}}) {
    auto after = store.get(Area::kCas, key);
    ASSERT_TRUE(after.has_value()) << after.error().message;
    EXPECT_EQ(after->value(), value) << key;
    EXPECT_EQ(RedisAdmin(target).run({"GET", store.redis_key(Area::kCas, key)}), value);
  }
}

TEST_F(RedisClusterTest, ConcurrentCallersWhileASlotMoves) {
  RedisStore store(options("busy"));
  // Every key in one slot (hash tag), moved while four threads use it.
  const int slot = redis_hash_slot(store.redis_key(Area::kCas, "{busy}"));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, &failures, t] {
      for (int i = 0; i < 100; ++i) {
        const std::string key = "{busy}" + std::to_string(t) + "-" + std::to_string(i);
        const std::string value = std::to_string(t * 1000 + i);
        auto got = store.put(Area::kCas, key, value).has_value() ? store.get(Area::kCas, key)
                                                                 : GetResult{};
        if (!got || !got->has_value() || **got != value) {
          ++failures;
        }
      }
    });
  }
  cluster_->move_slot(slot, other_master(slot));
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(failures.load(), 0);
  ListOptions busy;
  busy.prefix = "{busy}";
  EXPECT_EQ(store.list(busy)->size(), 400U);
}

// One master hangs (SIGSTOP): its keys fail fast once its own breaker has
// seen `breaker_failures` timeouts, while the other masters' keys are served
// at full speed all along. (With one breaker for the cluster, every success
// elsewhere reset its count, so it never opened and each call for the hung
// master's slots waited out the op timeout.) Resumed, the master is asked
// again after `breaker_open_ms`.
TEST_F(RedisClusterTest, AHungMasterFailsFastWhileTheOthersServe) {
  auto client = RedisClient::create(options("hung", "breaker_open_ms=3000&timeout_ms=500"));
  const int hung = cluster_->ports().back();
  const auto [on_hung, elsewhere] = keys_on_and_off(*client, hung);
  ASSERT_TRUE(client->run(on_hung, {"SET", on_hung, "h"}).has_value());
  ASSERT_TRUE(client->run(elsewhere, {"SET", elsewhere, "e"}).has_value());

  std::optional<PausedMaster> paused(hung);
  // At most the breaker's default threshold (3) of calls wait out the op
  // timeout (fewer when a slot-map refresh asked the hung master too).
  int timed_out = 0;
  for (;; ++timed_out) {
    ASSERT_LE(timed_out, 3) << "the hung master's breaker never opened";
    auto got = client->run(on_hung, {"GET", on_hung});
    ASSERT_FALSE(got.has_value());
    if (got.error().rejected) {
      break;
    }
    EXPECT_EQ(got.error().code, StoreError::Code::kTimeout) << got.error().message;
  }
  EXPECT_GE(timed_out, 1);
  EXPECT_EQ(client->breaker_state(), protocol::CircuitBreaker::State::kHalfOpen);
  for (int i = 0; i < 20; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto got = client->run(on_hung, {"GET", on_hung});
    ASSERT_FALSE(got.has_value());
    EXPECT_TRUE(got.error().rejected) << got.error().message;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 250ms) << "rejected without asking";
    start = std::chrono::steady_clock::now();
    auto ok = client->run(elsewhere, {"GET", elsewhere});
    ASSERT_TRUE(ok.has_value()) << ok.error().message;
    EXPECT_EQ(ok->str, "e");
    EXPECT_LT(std::chrono::steady_clock::now() - start, 250ms) << "the other masters unaffected";
  }
  paused.reset();
  std::this_thread::sleep_for(3100ms);
  auto back = client->run(on_hung, {"GET", on_hung});
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->str, "h");
  EXPECT_EQ(client->breaker_state(), protocol::CircuitBreaker::State::kClosed);
}

// In one request (RedisCallScope), a hung master costs one timeout: later
// calls to it fail at once, while calls to the other masters go on.
TEST_F(RedisClusterTest, AScopeSkipsOnlyTheMasterThatDidNotAnswer) {
  auto client = RedisClient::create(options("scoped", "breaker_failures=10&timeout_ms=300"));
  const int hung = cluster_->ports().back();
  const auto [on_hung, elsewhere] = keys_on_and_off(*client, hung);
  ASSERT_TRUE(client->run(elsewhere, {"SET", elsewhere, "e"}).has_value());
  const PausedMaster paused(hung);
  const RedisCallScope request;
  auto first = client->run(on_hung, {"GET", on_hung});
  ASSERT_FALSE(first.has_value());
  EXPECT_FALSE(first.error().rejected) << first.error().message;
  const auto start = std::chrono::steady_clock::now();
  auto again = client->run(on_hung, {"SET", on_hung, "h"});
  ASSERT_FALSE(again.has_value());
  EXPECT_TRUE(again.error().rejected) << again.error().message;
  auto ok = client->run(elsewhere, {"GET", elsewhere});
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  EXPECT_EQ(ok->str, "e");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 250ms);
}

TEST_F(RedisClusterTest, AStandaloneConfiguredClientFollowsMoved) {
  RedisOptions o = options("plain");
  o.cluster = false;
  auto client = RedisClient::create(o);
  EXPECT_FALSE(client->is_cluster());
  // A key another master owns: the first node answers MOVED.
  std::string k;
  for (int i = 0; k.empty(); ++i) {
    const std::string candidate = client->key("k" + std::to_string(i));
    if (cluster_->owner_of(redis_hash_slot(candidate)) != cluster_->ports().front()) {
      k = candidate;
    }
  }
  auto set = client->run(k, {"SET", k, "v"});
  ASSERT_TRUE(set.has_value()) << set.error().message;
  EXPECT_EQ(set->str, "OK");
  EXPECT_TRUE(client->is_cluster());
  EXPECT_EQ(client->run(k, {"GET", k})->str, "v");
}

TEST_F(RedisClusterTest, PublishReachesASubscriberOnAnotherNode) {
  RedisOptions o = options("events");
  auto client = RedisClient::create(o);
  const std::string channel = client->key("events");
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> got;
  auto subscription =
      RedisSubscription::start(o, {channel}, [&](std::string_view, std::string_view message) {
        const std::lock_guard lock(mu);
        got.emplace_back(message);
        cv.notify_all();
      });
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  bool delivered = false;
  while (!delivered && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(client->publish(channel, "job 1 done").has_value());
    std::unique_lock lock(mu);
    delivered = cv.wait_for(lock, 100ms, [&] { return !got.empty(); });
  }
  EXPECT_TRUE(delivered);
}

} // namespace
} // namespace kcache::storage
