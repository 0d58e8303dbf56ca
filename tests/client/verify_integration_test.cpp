// End-to-end verification against a real kcached (issue 14): a client that
// trusts the daemon's signing key gets genuine entries, from every route that
// returns artifacts; a client that trusts another key (the daemon, or whoever
// wrote into its tiers, is not who the trainer trusts) gets misses for the
// very same entries, counted by reason, and never their bytes.

#include "kcached_process.h"
#include "redis_server.h"
#include "temp_dir.h"

#include <kcache/client/client.h>
#include <kcache/protocol/record_signature.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kcache {
namespace {

using client::Client;
using client::Rejection;
using nlohmann::json;
using testing::KcachedProcess;
using testing::TempDir;

std::vector<std::string> worker_args() {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  const bool release = env != nullptr && *env != '\0';
  return {"--worker-binary", release ? env : testing::built_binary("kcache-worker"),
          "--worker-memory", release ? "4GiB" : "0"};
}

std::string write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

// kcached's public key: it generates data_dir/signing.pem on its first start.
std::string daemon_public_key(const KcachedProcess& kcached, const std::filesystem::path& to) {
  auto key = protocol::SigningKey::load(kcached.dir().path() / "data" / "signing.pem");
  EXPECT_TRUE(key.has_value()) << (key ? "" : key.error());
  return key ? write_file(to, key->public_pem()) : "";
}

std::unique_ptr<Client> client_for(const KcachedProcess& kcached, bool verify,
                                   std::vector<std::string> trusted = {}) {
  client::ClientOptions o;
  o.url = kcached.url();
  o.timeout = std::chrono::milliseconds(60000);
  o.verify_signatures = verify;
  o.trusted_keys = std::move(trusted);
  auto c = Client::create(std::move(o));
  EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().message);
  return c ? std::move(*c) : nullptr;
}

const json kSpec{{"backend", "cpp"},
                 {"source", {{"name", "k.cpp"}, {"text", "extern \"C\" int k() { return 7; }\n"}}},
                 {"name_expressions", {"k"}},
                 {"options", {"-O1"}},
                 {"target", "x86-64-v2"},
                 {"output", "shared"}};

class VerifyEndToEnd : public ::testing::Test {
protected:
  void SetUp() override {
    writer_ = client_for(kcached_, false);
    ASSERT_TRUE(writer_);
    ASSERT_TRUE(writer_->put("kc1-verify-a", {{"value", "genuine bytes"}}));
    ASSERT_TRUE(writer_->put("kc1-verify-b",
                             {{"kernel.so", std::string(70000, 'k')}, {"log.txt", "built"}}));
    daemon_key_ = daemon_public_key(kcached_, dir_.path() / "daemon.pem");
    auto other = protocol::SigningKey::generate();
    ASSERT_TRUE(other.has_value());
    other_key_ = write_file(dir_.path() / "other.pem", other->public_pem());
  }

  TempDir dir_;
  KcachedProcess kcached_{worker_args()};
  std::unique_ptr<Client> writer_;
  std::string daemon_key_;
  std::string other_key_; // a key the daemon never signed with
};

TEST_F(VerifyEndToEnd, GenuineEntriesVerifyOnEveryRoute) {
  auto trainer = client_for(kcached_, true, {daemon_key_});
  ASSERT_TRUE(trainer);
  auto a = trainer->get("kc1-verify-a");
  ASSERT_TRUE(a.has_value()) << a.error().message;
  ASSERT_TRUE(a->has_value()) << trainer->verification().last_rejection;
  EXPECT_EQ((*a)->files.at(0).data, "genuine bytes");
  auto waited = trainer->get("kc1-verify-b", std::chrono::milliseconds(100));
  ASSERT_TRUE(waited.has_value() && waited->has_value()) << trainer->verification().last_rejection;
  EXPECT_EQ((*waited)->files.size(), 2U);
  const std::vector<std::string> keys = {"kc1-verify-a", "kc1-verify-missing", "kc1-verify-b"};
  auto batch = trainer->batch_get(keys);
  ASSERT_TRUE(batch.has_value()) << batch.error().message;
  EXPECT_TRUE((*batch)[0].has_value());
  EXPECT_FALSE((*batch)[1].has_value());
  EXPECT_TRUE((*batch)[2].has_value());
  const client::VerificationStats stats = trainer->verification();
  EXPECT_TRUE(stats.enabled);
  EXPECT_EQ(stats.verified, 4U);
  EXPECT_EQ(stats.rejected_total(), 0U) << stats.last_rejection;
}

TEST_F(VerifyEndToEnd, EntriesSignedByAKeyTheTrainerDoesNotTrustAreMisses) {
  // The daemon serves them as valid (signed by its own key); to a trainer
  // that does not trust that key they are what a forger's entries are.
  auto trainer = client_for(kcached_, true, {other_key_});
  ASSERT_TRUE(trainer);
  auto a = trainer->get("kc1-verify-a");
  ASSERT_TRUE(a.has_value()) << a.error().message;
  EXPECT_FALSE(a->has_value());
  auto waited = trainer->get("kc1-verify-b", std::chrono::milliseconds(100));
  ASSERT_TRUE(waited.has_value());
  EXPECT_FALSE(waited->has_value());
  const std::vector<std::string> keys = {"kc1-verify-a", "kc1-verify-b"};
  auto batch = trainer->batch_get(keys);
  ASSERT_TRUE(batch.has_value()) << batch.error().message;
  EXPECT_FALSE((*batch)[0].has_value());
  EXPECT_FALSE((*batch)[1].has_value());
  const client::VerificationStats stats = trainer->verification();
  EXPECT_EQ(stats.verified, 0U);
  EXPECT_EQ(stats.rejected_total(), 4U);
  // unknown-key once kcached signs; unsigned from a kcached that does not.
  EXPECT_EQ(stats.rejected[static_cast<std::size_t>(Rejection::kUnknownKey)] +
                stats.rejected[static_cast<std::size_t>(Rejection::kUnsigned)],
            4U)
      << stats.last_rejection;
  // Without verification the same entries are served: the refusal is the client's.
  auto plain = writer_->get("kc1-verify-a");
  ASSERT_TRUE(plain.has_value() && plain->has_value());
}

TEST_F(VerifyEndToEnd, GetOrCompileVerifiesWhatItReturns) {
  client::CompileRequest request;
  request.key = "kc1-verify-compiled";
  request.spec_json = kSpec.dump();
  request.wait_timeout = std::chrono::milliseconds(60000);
  auto untrusting = client_for(kcached_, true, {other_key_});
  ASSERT_TRUE(untrusting);
  auto refused = untrusting->get_or_compile(request);
  ASSERT_TRUE(refused.has_value()) << refused.error().message;
  EXPECT_FALSE(refused->artifact.has_value());
  EXPECT_NE(refused->kind, client::CompileOutcome::Kind::kCompiled);
  EXPECT_GE(untrusting->verification().rejected_total(), 1U);

  auto trainer = client_for(kcached_, true, {daemon_key_});
  ASSERT_TRUE(trainer);
  auto hit = trainer->get_or_compile(request);
  ASSERT_TRUE(hit.has_value()) << hit.error().message;
  ASSERT_TRUE(hit->artifact.has_value()) << trainer->verification().last_rejection;
  EXPECT_EQ(hit->kind, client::CompileOutcome::Kind::kHit);
  EXPECT_EQ(trainer->verification().verified, 1U);
}

// The forgery through the shared tier: an attacker's node (its own
// key) writes into the cluster's Redis, and a node that was told to trust
// that key (misconfigured, or the key leaked) serves the entry as valid. A
// trainer that trusts only the genuine node's key still refuses it, while the
// genuine node's own entries verify through the same daemon.
TEST(VerifyThroughRedis, AnEntryPlantedByAnotherKeyIsRefusedByTheTrainer) {
  TempDir dir;
  auto genuine = protocol::SigningKey::generate();
  auto attacker = protocol::SigningKey::generate();
  ASSERT_TRUE(genuine && attacker);
  ASSERT_TRUE(genuine->save(dir.path() / "genuine.pem"));
  ASSERT_TRUE(attacker->save(dir.path() / "attacker.pem"));
  const std::string genuine_pub = write_file(dir.path() / "genuine.pub", genuine->public_pem());
  const std::string attacker_pub = write_file(dir.path() / "attacker.pub", attacker->public_pem());
  testing::RedisServer redis;
  const std::string redis_url = redis.url("namespace=verify&timeout_ms=500");
  KcachedProcess node({"--redis-url", redis_url, "--signing-key",
                       (dir.path() / "genuine.pem").string(), "--trusted-keys", attacker_pub});
  KcachedProcess rogue(
      {"--redis-url", redis_url, "--signing-key", (dir.path() / "attacker.pem").string()});

  ASSERT_TRUE(client_for(rogue, false)->put("kc1-planted", {{"value", "evil pickle"}}));
  ASSERT_TRUE(client_for(node, false)->put("kc1-genuine", {{"value", "good pickle"}}));
  // The node serves the planted entry from Redis: it trusts the attacker's key.
  auto served = client_for(node, false)->get("kc1-planted");
  ASSERT_TRUE(served.has_value() && served->has_value());

  auto trainer = client_for(node, true, {genuine_pub});
  auto planted = trainer->get("kc1-planted");
  ASSERT_TRUE(planted.has_value()) << planted.error().message;
  EXPECT_FALSE(planted->has_value());
  const std::vector<std::string> keys = {"kc1-planted", "kc1-genuine"};
  auto batch = trainer->batch_get(keys);
  ASSERT_TRUE(batch.has_value()) << batch.error().message;
  EXPECT_FALSE((*batch)[0].has_value());
  ASSERT_TRUE((*batch)[1].has_value()) << trainer->verification().last_rejection;
  EXPECT_EQ((*batch)[1]->files.at(0).data, "good pickle");
  const client::VerificationStats stats = trainer->verification();
  EXPECT_EQ(stats.rejected[static_cast<std::size_t>(Rejection::kUnknownKey)], 2U);
  EXPECT_EQ(stats.verified, 1U);
  EXPECT_NE(stats.last_rejection.find(attacker->key_id()), std::string::npos)
      << stats.last_rejection;
}

// `kcache show KEY` prints who wrote an entry and whose key signed it, and
// whether that key is among --trusted-keys; `kcache get` with trusted keys
// refuses an entry they did not sign.
TEST_F(VerifyEndToEnd, TheCliShowsTheOriginAndWhetherItVerifies) {
  const std::string cli = testing::built_binary("kcache");
  auto origin = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {cli, "--url", kcached_.url(), "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {"show", "kc1-verify-a"});
    std::string out;
    EXPECT_EQ(testing::run_command(argv, out), 0) << out;
    return json::parse(out).at("origin");
  };
  const json unchecked = origin({});
  EXPECT_EQ(unchecked.at("verification"), "not checked");
  EXPECT_EQ(unchecked.at("writer"), "anonymous"); // no tokens configured
  EXPECT_EQ(unchecked.at("key_id").get<std::string>().size(), 16U);
  EXPECT_GT(unchecked.at("signed_ms").get<std::int64_t>(), 0);
  const json verified = origin({"--trusted-keys", other_key_ + ":" + daemon_key_});
  EXPECT_EQ(verified.at("verification"), "verified");
  EXPECT_EQ(verified.at("key_id"), unchecked.at("key_id"));
  EXPECT_EQ(origin({"--trusted-keys", other_key_}).at("verification"), "unknown-key");

  std::string out;
  EXPECT_EQ(
      testing::run_command(
          {cli, "--url", kcached_.url(), "--trusted-keys", other_key_, "get", "kc1-verify-a"}, out),
      4); // refused, not "not found"
  EXPECT_EQ(out, "");
  EXPECT_EQ(testing::run_command({cli, "--url", kcached_.url(), "--trusted-keys", daemon_key_,
                                  "get", "kc1-verify-a"},
                                 out),
            0);
  EXPECT_EQ(out, "genuine bytes");
}

TEST_F(VerifyEndToEnd, VerificationWithoutAUsableKeyIsRefusedAtCreate) {
  client::ClientOptions o;
  o.url = kcached_.url();
  o.verify_signatures = true;
  EXPECT_FALSE(Client::create(o).has_value()); // no trusted_keys
  o.trusted_keys = {(dir_.path() / "absent.pem").string()};
  EXPECT_FALSE(Client::create(o).has_value());
  o.trusted_keys = {write_file(dir_.path() / "garbage.pem", "not a key")};
  EXPECT_FALSE(Client::create(o).has_value());
}

} // namespace
} // namespace kcache
