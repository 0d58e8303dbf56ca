// Issue 14 item 3 for kc1- keys, against a real kcached: a job submitted with
// its key's manifest is checked against the manifest's namespace (not "*"),
// and the record it publishes carries the manifest (so it is in that
// namespace, as a PUT's would be), also after a restart (the journal) and
// when another cluster node runs it (the Redis stream).

#include "kcached_process.h"
#include "redis_server.h"
#include "scrape_metric.h"
#include "strong_token.h"

#include <kcache/cachekey/key_manifest.h>
#include <kcache/cachekey/sha256.h>
#include <kcache/client/client.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

namespace kcache {
namespace {

using client::Client;
using nlohmann::json;
using testing::KcachedProcess;
using testing::strong_token;
using Clock = std::chrono::steady_clock;

std::string worker_binary() {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  return env != nullptr && *env != '\0' ? env : testing::built_binary("kcache-worker");
}

// scripts/test points KCACHE_WORKER_BINARY at a release worker; a sanitized
// one cannot run under an address-space limit.
std::vector<std::string> worker_args(std::vector<std::string> extra = {}) {
  const bool release = std::getenv("KCACHE_WORKER_BINARY") != nullptr;
  std::vector<std::string> args = {"--worker-binary", worker_binary(), "--worker-memory",
                                   release ? "4GiB" : "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::string token_entry(const std::string& name, const std::string& roles) {
  return "[[tokens]]\nname = \"" + name + "\"\nsha256 = \"" +
         cachekey::to_hex(cachekey::Sha256::of(strong_token(name))) + "\"\n" + roles + "\n";
}

std::vector<std::string> scoped_args(const testing::TempDir& dir,
                                     std::vector<std::string> extra = {}) {
  const std::string path = (dir.path() / "kcached.toml").string();
  std::ofstream(path) << token_entry("admin", "role = \"admin\"")
                      << token_entry("a-writer", "roles = { \"team-a/*\" = \"write\" }")
                      << token_entry("a-reader", "roles = { \"team-a/*\" = \"read\" }");
  extra.insert(extra.begin(), {"--config", path});
  return worker_args(std::move(extra));
}

std::unique_ptr<Client> connect(const std::string& url, const std::string& who = "") {
  client::ClientOptions o;
  o.url = url;
  o.token = who.empty() ? "" : strong_token(who);
  o.timeout = std::chrono::milliseconds(10000);
  auto c = Client::create(o);
  EXPECT_TRUE(c.has_value());
  return std::move(*c);
}

cachekey::KeyManifest manifest_in(const std::string& ns, const std::string& salt = "") {
  auto m = cachekey::KeyBuilder()
               .ns(ns)
               .graph_digest(std::string(64, 'd'))
               .hardware("cpu")
               .salt(salt)
               .build();
  EXPECT_TRUE(m.has_value());
  return *m;
}

std::string quick_spec(const std::string& tag) {
  return json{{"backend", "cpp"},
              {"source",
               {{"name", "kernel.cpp"},
                {"text", "extern \"C\" int manifest_job() { return 14; } // " + tag}}},
              {"options", {"-O1", "-std=c++20"}},
              {"target", "x86-64-v2"},
              {"output", "object"}}
      .dump();
}

// A compile that takes about `steps` / 1e6 seconds of clang's time.
std::string slow_spec(long steps, const std::string& tag) {
  return json{{"backend", "cpp"},
              {"source", {{"name", "kernel.cpp"}, {"text", R"(
constexpr long spin(long n) { long s = 0; for (long i = 0; i < n; ++i) s += i % 7; return s; }
constexpr long value = spin(SPIN);
extern "C" long get_value() { return value; } // )" + tag}}},
              {"options",
               {"-fconstexpr-steps=2147483647", "-DSPIN=" + std::to_string(steps), "-std=c++20"}},
              {"target", "x86-64-v2"},
              {"output", "object"}}
      .dump();
}

// The stored record's JSON (namespace, manifest) as `c` may read it.
json record_of(Client& c, const std::string& key) {
  auto text = c.record(key);
  EXPECT_TRUE(text.has_value()) << key << ": " << text.error().message;
  return text ? json::parse(*text) : json();
}

class ScopedJobs : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<testing::TempDir>();
    kcached_ = std::make_unique<KcachedProcess>(scoped_args(*dir_));
  }
  static void TearDownTestSuite() {
    kcached_.reset();
    dir_.reset();
  }
  static std::unique_ptr<testing::TempDir> dir_;
  static std::unique_ptr<KcachedProcess> kcached_;
};
std::unique_ptr<testing::TempDir> ScopedJobs::dir_;
std::unique_ptr<KcachedProcess> ScopedJobs::kcached_;

TEST_F(ScopedJobs, AManifestOfTheWritersNamespacePublishesUnderItsKey) {
  auto writer = connect(kcached_->url(), "a-writer");
  const cachekey::KeyManifest m = manifest_in("team-a/train");
  const std::string key = m.key();
  auto submitted = writer->submit(key, quick_spec("own"), 0, cachekey::manifest_to_json(m));
  ASSERT_TRUE(submitted.has_value()) << submitted.error().message;
  ASSERT_TRUE(submitted->job.has_value()) << submitted->status << ": " << submitted->message;
  EXPECT_TRUE(submitted->client_key_refused.empty()) << submitted->client_key_refused;
  EXPECT_NE(std::find(submitted->published_under.begin(), submitted->published_under.end(), key),
            submitted->published_under.end());
  auto done = writer->job(submitted->job->id, std::chrono::seconds(120));
  ASSERT_TRUE(done.has_value()) << done.error().message;
  ASSERT_EQ(done->state, client::JobState::kSucceeded) << done->error_message;

  // What a PUT with the manifest would have made: team-a's readers read it.
  auto reader = connect(kcached_->url(), "a-reader");
  auto hit = reader->get(key);
  ASSERT_TRUE(hit.has_value()) << hit.error().message;
  EXPECT_TRUE(hit->has_value()) << kcached_->log();
  const json record = record_of(*reader, key);
  EXPECT_EQ(record.value("namespace", ""), "team-a/train") << record.dump();
  EXPECT_EQ(record["manifest"].value("namespace", ""), "team-a/train");
  EXPECT_EQ(record.value("writer", ""), "a-writer");
  // The job is team-a's too: its readers see it.
  EXPECT_TRUE(reader->job(submitted->job->id).has_value());

  // Without a key, the manifest names it.
  const cachekey::KeyManifest named = manifest_in("team-a/train", "named");
  auto by_manifest = writer->submit("", quick_spec("named"), 0, cachekey::manifest_to_json(named));
  ASSERT_TRUE(by_manifest.has_value()) << by_manifest.error().message;
  EXPECT_TRUE(by_manifest->client_key_refused.empty()) << by_manifest->client_key_refused;
  EXPECT_NE(std::find(by_manifest->published_under.begin(), by_manifest->published_under.end(),
                      named.key()),
            by_manifest->published_under.end());
}

TEST_F(ScopedJobs, AnotherNamespacesManifestPublishesUnderTheCompileKeyOnly) {
  auto writer = connect(kcached_->url(), "a-writer");
  const cachekey::KeyManifest m = manifest_in("team-b/train");
  auto submitted = writer->submit(m.key(), quick_spec("b"), 0, cachekey::manifest_to_json(m));
  ASSERT_TRUE(submitted.has_value()) << submitted.error().message;
  ASSERT_TRUE(submitted->job.has_value()) << submitted->status << ": " << submitted->message;
  const std::string compile_key = submitted->job->compile_key;
  EXPECT_EQ(submitted->published_under, std::vector<std::string>{compile_key});
  EXPECT_NE(submitted->client_key_refused.find("team-b/train"), std::string::npos)
      << submitted->client_key_refused;
  auto done = writer->job(submitted->job->id, std::chrono::seconds(120));
  ASSERT_TRUE(done.has_value()) << done.error().message;
  ASSERT_EQ(done->state, client::JobState::kSucceeded) << done->error_message;
  auto admin = connect(kcached_->url(), "admin");
  auto under_key = admin->get(m.key());
  ASSERT_TRUE(under_key.has_value());
  EXPECT_FALSE(under_key->has_value()) << "nothing under team-b's key";
  auto under_compile_key = admin->get(compile_key);
  ASSERT_TRUE(under_compile_key.has_value());
  EXPECT_TRUE(under_compile_key->has_value());
}

TEST_F(ScopedJobs, AManifestThatDoesNotHashToTheKeyIsRefused) {
  auto writer = connect(kcached_->url(), "a-writer");
  const std::string key = manifest_in("team-a/train", "one").key();
  const std::string other = cachekey::manifest_to_json(manifest_in("team-a/train", "two"));
  auto refused = writer->submit(key, quick_spec("mismatch"), 0, other);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().http_status, 400);
  EXPECT_NE(refused.error().message.find("not to the key"), std::string::npos)
      << refused.error().message;
  // Nor is a manifest under a key of another kind, or one that is no manifest.
  auto named = writer->submit("torch:team-a:k", quick_spec("named"), 0, other);
  ASSERT_FALSE(named.has_value());
  EXPECT_EQ(named.error().http_status, 400);
  auto malformed = writer->submit(key, quick_spec("malformed"), 0, R"({"namespace": 1})");
  ASSERT_FALSE(malformed.has_value());
  EXPECT_EQ(malformed.error().http_status, 400) << malformed.error().message;
}

// A queued job keeps its manifest in the journal: after kill -9 and a
// restart it publishes under its key with it.
TEST(ScopedJobsJournal, TheManifestSurvivesARestart) {
  testing::TempDir dir;
  KcachedProcess kcached(scoped_args(dir, {"--workers", "1"}));
  auto writer = connect(kcached.url(), "a-writer");
  auto blocker = writer->submit("", slow_spec(1'500'000, "blocker"));
  ASSERT_TRUE(blocker.has_value()) << blocker.error().message;
  const cachekey::KeyManifest m = manifest_in("team-a/train", "journal");
  auto queued = writer->submit(m.key(), quick_spec("journal"), 0, cachekey::manifest_to_json(m));
  ASSERT_TRUE(queued.has_value()) << queued.error().message;
  ASSERT_EQ(queued->status, "queued") << queued->message;
  kcached.kill();
  kcached.start();
  writer = connect(kcached.url(), "a-writer");
  auto done = writer->job(queued->job->id, std::chrono::seconds(60));
  ASSERT_TRUE(done.has_value()) << done.error().message << kcached.log();
  ASSERT_EQ(done->state, client::JobState::kSucceeded) << done->json;
  auto reader = connect(kcached.url(), "a-reader");
  auto hit = reader->get(m.key());
  ASSERT_TRUE(hit.has_value()) << hit.error().message;
  EXPECT_TRUE(hit->has_value()) << kcached.log();
  EXPECT_EQ(record_of(*reader, m.key()).value("namespace", ""), "team-a/train");
}

// Cluster mode: the job travels through the Redis stream; the node that runs
// it (not the one it was submitted to) stores the record with its manifest.
TEST(ScopedJobsCluster, TheManifestTravelsThroughTheStream) {
  testing::RedisServer redis;
  testing::TempDir keys;
  const std::string signing = (keys.path() / "signing.pem").string();
  std::string out;
  testing::run_command({testing::built_binary("kcached"), "--print-public-key", "--signing-key",
                        signing, "--data-dir", (keys.path() / "unused").string()},
                       out);
  auto node = [&](const std::string& id) {
    return worker_args({"--redis-url", redis.url("namespace=mq"), "--signing-key", signing,
                        "--cluster", "--workers", "1", "--node-id", id});
  };
  KcachedProcess a(node("submitter"));
  auto ca = connect(a.url());
  // Node 1's only worker is busy with this until the test cancels it.
  auto blocker = ca->submit("", slow_spec(60'000'000, "cluster-blocker"));
  ASSERT_TRUE(blocker.has_value() && blocker->job.has_value()) << a.log();
  for (auto deadline = Clock::now() + std::chrono::seconds(15); Clock::now() < deadline;) {
    auto job = ca->job(blocker->job->id);
    if (job && job->state == client::JobState::kRunning) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  KcachedProcess b(node("runner"));
  auto cb = connect(b.url());
  const cachekey::KeyManifest m = manifest_in("team-a/train", "cluster");
  auto submitted = ca->submit(m.key(), quick_spec("cluster"), 0, cachekey::manifest_to_json(m));
  ASSERT_TRUE(submitted.has_value() && submitted->job.has_value()) << a.log();
  auto done = ca->job(submitted->job->id, std::chrono::seconds(60));
  ASSERT_TRUE(done.has_value()) << done.error().message;
  EXPECT_EQ(done->state, client::JobState::kSucceeded) << done->json << a.log() << b.log();
  EXPECT_EQ(testing::scrape_metric(*cb, R"(kcache_compiles_total{result="succeeded"})"), 1)
      << "the second node ran it" << b.log();
  const json record = record_of(*cb, m.key());
  EXPECT_EQ(record.value("namespace", ""), "team-a/train") << record.dump();
  EXPECT_EQ(record["manifest"].value("namespace", ""), "team-a/train");
  (void)ca->cancel(blocker->job->id);
}

} // namespace
} // namespace kcache
