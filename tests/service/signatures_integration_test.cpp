// Signed action records end to end (issue 14): real kcached processes over
// one real redis-server. Whatever is written straight into Redis -- a record
// with a correct frame and content hash but no signature, a tampered
// signature, a field changed after signing, a key nobody trusts, a key that
// was revoked -- is never served by a kcached, on any route, and is counted;
// a genuine entry by node A is served by a node that trusts A's public key
// and refused by one that does not.

#include "kcached_process.h"
#include "redis_server.h"

#include <kcache/client/client.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/record_signature.h>
#include <kcache/storage/store_factory.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace kcache {
namespace {

using client::Client;
using client::HttpMethod;
using nlohmann::json;
using storage::Area;
using testing::KcachedProcess;

std::unique_ptr<Client> connect(const std::string& url) {
  client::ClientOptions o;
  o.url = url;
  o.timeout = std::chrono::milliseconds(5000);
  auto c = Client::create(o);
  EXPECT_TRUE(c.has_value());
  return std::move(*c);
}

// The public key of a kcached's data dir, as an operator gets it.
std::string public_key_of(const KcachedProcess& node) {
  std::string out;
  const int status =
      testing::run_command({testing::built_binary("kcached"), "--data-dir",
                            (node.dir().path() / "data").string(), "--print-public-key"},
                           out);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("BEGIN PUBLIC KEY"), std::string::npos) << out;
  return out;
}

double metric(Client& c, const std::string& series) {
  auto res = c.request(HttpMethod::kGet, "/metrics");
  EXPECT_TRUE(res.has_value());
  const std::string line = "\n" + series + " ";
  const auto at = res ? res->body.find(line) : std::string::npos;
  return at == std::string::npos ? -1 : std::stod(res->body.substr(at + line.size()));
}

double rejected(Client& c, const std::string& reason) {
  return metric(c, "kcache_signature_rejected_total{reason=\"" + reason + "\"}");
}

int status_of(Client& c, HttpMethod method, const std::string& target, std::string body = {}) {
  auto res = c.request(method, target, std::move(body), "application/json");
  EXPECT_TRUE(res.has_value());
  return res ? res->status : -1;
}

// Whether /v1/entries (what `kcache ls` shows) lists action record `key`.
bool listed(Client& c, const std::string& key) {
  auto res = c.request(HttpMethod::kGet, "/v1/entries?area=ac&prefix=" + key);
  EXPECT_TRUE(res.has_value() && res->status == 200);
  if (!res) {
    return false;
  }
  const json doc = json::parse(res->body);
  for (const json& e : doc.at("entries")) {
    if (e.at("key") == key) {
      return true;
    }
  }
  return false;
}

// Every read route a client has for `key`, each answering "not there".
void expect_never_served(Client& c, const std::string& key) {
  EXPECT_FALSE(listed(c, key)) << key; // omitted from listings, as GET refuses it
  EXPECT_EQ(status_of(c, HttpMethod::kGet, "/v1/artifacts/" + key), 404) << key;
  EXPECT_EQ(status_of(c, HttpMethod::kHead, "/v1/ac/" + key), 404) << key;
  EXPECT_EQ(status_of(c, HttpMethod::kGet, "/v1/ac/" + key), 404) << key;
  EXPECT_EQ(status_of(c, HttpMethod::kGet, "/v1/entries/" + key), 404) << key;
  auto got = c.get(key);
  ASSERT_TRUE(got.has_value()) << key;
  EXPECT_FALSE(got->has_value()) << key;
  EXPECT_FALSE(*c.exists(key)) << key;
  const std::vector<std::string> keys = {key};
  auto batch = c.batch_get(keys);
  ASSERT_TRUE(batch.has_value()) << key;
  ASSERT_EQ(batch->size(), 1U);
  EXPECT_FALSE((*batch)[0].has_value()) << key;
}

void expect_served(Client& c, const std::string& key, const std::string& data) {
  EXPECT_TRUE(listed(c, key)) << key;
  auto got = c.get(key);
  ASSERT_TRUE(got.has_value() && got->has_value()) << key;
  EXPECT_EQ((*got)->files.at(0).data, data);
  EXPECT_EQ(status_of(c, HttpMethod::kHead, "/v1/ac/" + key), 200) << key;
  EXPECT_EQ(status_of(c, HttpMethod::kGet, "/v1/ac/" + key), 200) << key;
  EXPECT_EQ(status_of(c, HttpMethod::kGet, "/v1/entries/" + key), 200) << key;
  const std::vector<std::string> keys = {key};
  auto batch = c.batch_get(keys);
  ASSERT_TRUE(batch.has_value() && batch->size() == 1U);
  EXPECT_TRUE((*batch)[0].has_value()) << key;
}

class Signatures : public ::testing::Test {
protected:
  Signatures()
      : redis_url_(redis_.url("namespace=signed")), node_a_({"--redis-url", redis_url_}),
        a_(connect(node_a_.url())) {
    std::filesystem::create_directory(trusted_dir_.path() / "keys");
    std::ofstream(trusted_dir_.path() / "keys" / "node-a.pem") << public_key_of(node_a_);
    // What an attacker with write access to Redis uses: the same framing kcached
    // reads, so every frame and content hash is correct.
    auto shared = storage::make_store(redis_url_);
    EXPECT_TRUE(shared.has_value());
    redis_store_ = std::move(*shared);
  }

  std::unique_ptr<KcachedProcess> node(std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--redis-url", redis_url_});
    return std::make_unique<KcachedProcess>(extra);
  }
  std::string trusted_dir() const { return (trusted_dir_.path() / "keys").string(); }

  std::string stored_record(const std::string& key) {
    auto text = redis_store_->get(Area::kAction, key);
    EXPECT_TRUE(text.has_value() && text->has_value()) << key;
    return text && *text ? **text : std::string();
  }
  void plant(const std::string& key, const json& record) {
    ASSERT_TRUE(redis_store_->put(Area::kAction, key, protocol::json_text(record)).has_value());
  }
  // Node A stores `key`; the test then rewrites what Redis holds.
  json genuine(const std::string& key, const std::string& data) {
    client::PutOptions options;
    options.producer = "node-a-ci";
    EXPECT_TRUE(a_->put(key, {{"out.bin", data}}, options).has_value());
    return json::parse(stored_record(key));
  }

  testing::RedisServer redis_;
  std::string redis_url_;
  KcachedProcess node_a_;
  std::unique_ptr<Client> a_;
  testing::TempDir trusted_dir_;
  std::unique_ptr<storage::Store> redis_store_;
};

TEST_F(Signatures, NodeAsEntriesAreServedWhereAIsTrustedOnly) {
  const json record = genuine("torch:team-a:shared", "from node a");
  ASSERT_TRUE(record.contains("signature")) << record.dump();
  EXPECT_EQ(record["signature"]["alg"], "ed25519");
  EXPECT_EQ(record["namespace"], "team-a");
  EXPECT_EQ(record["producer"], "node-a-ci");
  EXPECT_EQ(record["writer"], "anonymous"); // no tokens configured: the identity handlers see

  auto node_b = node({"--trusted-keys", trusted_dir()});
  auto b = connect(node_b->url());
  expect_served(*b, "torch:team-a:shared", "from node a");
  // The record is served as A signed it.
  auto ac = b->request(HttpMethod::kGet, "/v1/ac/torch:team-a:shared");
  ASSERT_TRUE(ac.has_value());
  EXPECT_EQ(json::parse(ac->body)["signature"], record["signature"]);
  EXPECT_EQ(rejected(*b, "unknown-key"), 0);
  // B checked A's record once (its listing) and read it from Redis again: a hit.
  EXPECT_GT(metric(*b, "kcache_signature_cache_total{result=\"miss\"}"), 0);
  EXPECT_GT(metric(*b, "kcache_signature_cache_total{result=\"hit\"}"), 0);

  auto node_c = node(); // trusts only itself
  auto c = connect(node_c->url());
  expect_never_served(*c, "torch:team-a:shared");
  EXPECT_GT(rejected(*c, "unknown-key"), 0);
  EXPECT_NE(node_c->log().find("refused (unknown-key)"), std::string::npos) << node_c->log();
  // Refused, not deleted: it is still A's entry for those who trust A.
  EXPECT_TRUE(redis_store_->get(Area::kAction, "torch:team-a:shared")->has_value());
  expect_served(*b, "torch:team-a:shared", "from node a");
}

TEST_F(Signatures, ForgedTamperedAndUnknownRecordsAreNeverServed) {
  auto node_b = node({"--trusted-keys", trusted_dir()});
  auto b = connect(node_b->url());

  // Forged: the attacker's own blob (a correct frame and SHA-256) and a record
  // naming it, without a signature.
  const std::string evil = "attacker's object";
  const json base = genuine("torch:team-a:base", "genuine bytes");
  const std::string evil_digest = [&] {
    json r = genuine("torch:team-a:evil-src", evil); // a blob in the CAS with its true digest
    return r["outputs"][0]["digest"].get<std::string>();
  }();
  json forged = base;
  forged.erase("signature");
  forged["key"] = "torch:team-a:forged";
  forged["outputs"][0]["digest"] = evil_digest;
  forged["outputs"][0]["size"] = evil.size();
  plant("torch:team-a:forged", forged);

  // Tampered signature bytes on a genuine record.
  json tampered_sig = genuine("torch:team-a:sig", "genuine");
  std::string sig = tampered_sig["signature"]["sig"];
  sig[5] = sig[5] == 'A' ? 'B' : 'A';
  tampered_sig["signature"]["sig"] = sig;
  plant("torch:team-a:sig", tampered_sig);

  // A field changed after signing: the producer rewritten to "trusted-ci" (the
  // issue's attack), and the output swapped for the attacker's blob.
  json producer = genuine("torch:team-a:producer", "genuine");
  producer["producer"] = "trusted-ci";
  plant("torch:team-a:producer", producer);
  json swapped = genuine("torch:team-a:swapped", "genuine");
  swapped["outputs"][0]["digest"] = evil_digest;
  swapped["outputs"][0]["size"] = evil.size();
  plant("torch:team-a:swapped", swapped);

  // Signed, correctly, by a key nobody trusts.
  const protocol::SigningKey attacker = *protocol::SigningKey::generate();
  json unknown = base;
  unknown["key"] = "torch:team-a:unknown";
  unknown["producer"] = "trusted-ci";
  unknown["outputs"][0]["digest"] = evil_digest;
  unknown["outputs"][0]["size"] = evil.size();
  auto fields = protocol::record_fields_from_json(unknown);
  ASSERT_TRUE(fields.has_value());
  unknown["signature"] = protocol::to_json(attacker.sign(*fields));
  plant("torch:team-a:unknown", unknown);

  for (const char* key : {"torch:team-a:forged", "torch:team-a:sig", "torch:team-a:producer",
                          "torch:team-a:swapped", "torch:team-a:unknown"}) {
    expect_never_served(*b, key);
  }
  EXPECT_GT(rejected(*b, "unsigned"), 0);
  EXPECT_GT(rejected(*b, "bad-signature"), 0);
  EXPECT_GT(rejected(*b, "unknown-key"), 0);
  // Node A's own view: the shared tier is checked there too (A's local tiers
  // hold its genuine records, so ask for the ones only Redis has).
  expect_never_served(*a_, "torch:team-a:forged");
  expect_never_served(*a_, "torch:team-a:unknown");
  // The genuine entries still are.
  expect_served(*b, "torch:team-a:base", "genuine bytes");
}

TEST_F(Signatures, ARevokedKeyIsNoLongerTrusted) {
  genuine("torch:team-a:old", "signed before the rotation");
  // Node A's key leaves the trusted set (the directory now holds another key).
  const protocol::SigningKey successor = *protocol::SigningKey::generate();
  std::filesystem::remove(trusted_dir_.path() / "keys" / "node-a.pem");
  std::ofstream(trusted_dir_.path() / "keys" / "successor.pem") << successor.public_pem();
  auto node_b = node({"--trusted-keys", trusted_dir()});
  auto b = connect(node_b->url());
  expect_never_served(*b, "torch:team-a:old");
  EXPECT_GT(rejected(*b, "unknown-key"), 0);
}

TEST_F(Signatures, ARevokedKeysRecordsAreNotServedFromANodesOwnCopies) {
  genuine("torch:team-a:copied", "read once while trusted");
  auto node_b = node({"--trusted-keys", trusted_dir()});
  auto b = connect(node_b->url());
  expect_served(*b, "torch:team-a:copied", "read once while trusted"); // now in B's own tiers
  std::filesystem::remove(trusted_dir_.path() / "keys" / "node-a.pem");
  std::ofstream(trusted_dir_.path() / "keys" / "successor.pem")
      << protocol::SigningKey::generate()->public_pem();
  ASSERT_EQ(node_b->terminate(), 0);
  node_b->start(); // same data dir: its RocksDB holds the copy
  b = connect(node_b->url());
  auto got = b->get("torch:team-a:copied");
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(status_of(*b, HttpMethod::kGet, "/v1/ac/torch:team-a:copied"), 404);
  EXPECT_EQ(status_of(*b, HttpMethod::kHead, "/v1/ac/torch:team-a:copied"), 404); // as GET
  EXPECT_FALSE(*b->exists("torch:team-a:copied"));
  EXPECT_EQ(status_of(*b, HttpMethod::kGet, "/v1/entries/torch:team-a:copied"), 404);
}

TEST_F(Signatures, RecordsAPutThroughTheAcRouteAreSignedByTheNode) {
  // PUT /v1/ac with a client's own (forged) signature: the node signs it anew.
  genuine("torch:team-a:blob-src", "blob");
  json record = json::parse(stored_record("torch:team-a:blob-src"));
  record["key"] = "torch:team-a:via-ac";
  record["signature"] = {{"alg", "ed25519"}, {"key_id", "0123456789abcdef"}, {"sig", "AAAA"}};
  auto put = a_->request(HttpMethod::kPut, "/v1/ac/torch:team-a:via-ac", record.dump(),
                         "application/json");
  ASSERT_TRUE(put.has_value());
  ASSERT_EQ(put->status, 201) << put->body;
  const json stored = json::parse(stored_record("torch:team-a:via-ac"));
  EXPECT_NE(stored["signature"]["key_id"], "0123456789abcdef");
  auto node_b = node({"--trusted-keys", trusted_dir()});
  auto b = connect(node_b->url());
  expect_served(*b, "torch:team-a:via-ac", "blob");
}

TEST_F(Signatures, StartUpRefusesAnUnusableTrustedKey) {
  std::ofstream(trusted_dir_.path() / "broken.pem") << "not a key";
  EXPECT_THROW(node({"--trusted-keys", (trusted_dir_.path() / "broken.pem").string()}),
               std::runtime_error);
  // The generated key file is private to kcached's user.
  const auto key_file = node_a_.dir().path() / "data" / "signing.pem";
  EXPECT_EQ(std::filesystem::status(key_file).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

} // namespace
} // namespace kcache
