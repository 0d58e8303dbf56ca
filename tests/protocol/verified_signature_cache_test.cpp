#include <kcache/protocol/json_text.h>
#include <kcache/protocol/verified_signature_cache.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kcache::protocol {
namespace {

using nlohmann::json;

RecordFields fields_for(const std::string& key, const std::string& writer = "team-a-ci") {
  return RecordFields{.key = key,
                      .ns = "team-a",
                      .writer = writer,
                      .producer = "kcache-worker@node1",
                      .created_ms = 1'700'000'000'000,
                      .outputs = {{"kernel.cubin", std::string(64, 'a'), 4096}},
                      .metadata = {{"arch", "sm_90"}}};
}

json record_json(const RecordFields& f, const SigningKey& key) {
  json outputs = json::array();
  for (const SignedOutput& o : f.outputs) {
    outputs.push_back({{"name", o.name}, {"digest", o.digest}, {"size", o.size}});
  }
  return json{{"key", f.key},
              {"namespace", f.ns},
              {"writer", f.writer},
              {"producer", f.producer},
              {"created_ms", f.created_ms},
              {"outputs", outputs},
              {"metadata", f.metadata},
              {"signature", to_json(key.sign(f))}};
}

std::string signed_text(const std::string& key, const SigningKey& signer) {
  return json_text(record_json(fields_for(key), signer));
}

struct VerifiedCache : ::testing::Test {
  SigningKey key = *SigningKey::generate();
  TrustedKeys trusted;
  VerifiedSignatureCache cache;
  void SetUp() override { trusted.add(key); }
};

TEST_F(VerifiedCache, ARepeatedRecordIsVerifiedOnce) {
  const std::string text = signed_text("kc1-a", key);
  auto first = cache.verify("kc1-a", text, trusted);
  ASSERT_TRUE(first) << first.error().message;
  auto again = cache.verify("kc1-a", text, trusted);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->key_id, key.key_id());
  EXPECT_EQ(again->writer, "team-a-ci");
  ASSERT_EQ(again->outputs.size(), 1U);
  EXPECT_EQ(again->outputs[0].size, 4096U);
  const auto stats = cache.stats();
  EXPECT_EQ(stats.misses, 1U);
  EXPECT_EQ(stats.hits, 1U);
  EXPECT_EQ(stats.entries, 1U);
  EXPECT_GT(stats.bytes, 0U);
}

TEST_F(VerifiedCache, OtherBytesOrAnotherKeyAreCheckedAgain) {
  const std::string text = signed_text("kc1-a", key);
  ASSERT_TRUE(cache.verify("kc1-a", text, trusted));
  // The genuine record copied under another key: not a hit, and refused.
  auto copied = cache.verify("kc1-b", text, trusted);
  ASSERT_FALSE(copied);
  EXPECT_EQ(copied.error().failure, SignatureFailure::kBadSignature);
  // One field rewritten with the genuine signature kept: not a hit, refused.
  json forged = record_json(fields_for("kc1-a"), key);
  forged["writer"] = "trusted-ci";
  auto tampered = cache.verify("kc1-a", json_text(forged), trusted);
  ASSERT_FALSE(tampered);
  EXPECT_EQ(tampered.error().failure, SignatureFailure::kBadSignature);
  // The same record spelt differently (whitespace) is other bytes: verified
  // again (and good), never matched to the first entry.
  auto respelt = cache.verify("kc1-a", record_json(fields_for("kc1-a"), key).dump(2), trusted);
  ASSERT_TRUE(respelt);
  EXPECT_EQ(cache.stats().hits, 0U);
  EXPECT_EQ(cache.stats().entries, 2U);
}

TEST_F(VerifiedCache, ARevokedKeyIsNotHonouredFromTheCache) {
  const std::string text = signed_text("kc1-a", key);
  ASSERT_TRUE(cache.verify("kc1-a", text, trusted));
  TrustedKeys without; // the key revoked: another trusted set
  const SigningKey other = *SigningKey::generate();
  without.add(other);
  auto revoked = cache.verify("kc1-a", text, without);
  ASSERT_FALSE(revoked);
  EXPECT_EQ(revoked.error().failure, SignatureFailure::kUnknownKey);
  EXPECT_EQ(cache.stats().hits, 0U);
  EXPECT_EQ(cache.stats().entries, 0U); // the stale entry went with it
  // Trusted again: verified again (not from a stale entry).
  ASSERT_TRUE(cache.verify("kc1-a", text, trusted));
  EXPECT_EQ(cache.stats().misses, 3U);
}

TEST_F(VerifiedCache, RefusalsAreNotCached) {
  json unsigned_record = record_json(fields_for("kc1-a"), key);
  unsigned_record.erase("signature");
  for (int i = 0; i < 2; ++i) {
    auto r = cache.verify("kc1-a", json_text(unsigned_record), trusted);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().failure, SignatureFailure::kUnsigned);
  }
  const SigningKey stranger = *SigningKey::generate();
  const std::string by_stranger = signed_text("kc1-a", stranger);
  EXPECT_FALSE(cache.verify("kc1-a", by_stranger, trusted));
  TrustedKeys later; // a key trusted later makes the same bytes good
  later.add(stranger);
  EXPECT_TRUE(cache.verify("kc1-a", by_stranger, later));
  EXPECT_EQ(cache.stats().hits, 0U);
  EXPECT_EQ(cache.stats().entries, 1U);
}

TEST_F(VerifiedCache, BoundedByEntriesLeastRecentlyUsedFirst) {
  VerifiedSignatureCache small(
      VerifiedSignatureCache::Limits{.max_entries = 2, .max_bytes = 1 << 20});
  const std::string a = signed_text("kc1-a", key);
  const std::string b = signed_text("kc1-b", key);
  const std::string c = signed_text("kc1-c", key);
  ASSERT_TRUE(small.verify("kc1-a", a, trusted));
  ASSERT_TRUE(small.verify("kc1-b", b, trusted));
  ASSERT_TRUE(small.verify("kc1-a", a, trusted)); // a is now the most recent
  ASSERT_TRUE(small.verify("kc1-c", c, trusted)); // evicts b
  EXPECT_EQ(small.stats().entries, 2U);
  const auto before = small.stats().hits;
  ASSERT_TRUE(small.verify("kc1-a", a, trusted));
  EXPECT_EQ(small.stats().hits, before + 1);
  ASSERT_TRUE(small.verify("kc1-b", b, trusted));
  EXPECT_EQ(small.stats().hits, before + 1); // b was evicted: a miss
}

TEST_F(VerifiedCache, BoundedByBytesAndClearable) {
  ASSERT_TRUE(cache.verify("kc1-a", signed_text("kc1-a", key), trusted));
  const std::size_t one = cache.stats().bytes;
  VerifiedSignatureCache small(
      VerifiedSignatureCache::Limits{.max_entries = 100, .max_bytes = one + one / 2});
  for (const char* k : {"kc1-a", "kc1-b", "kc1-c"}) {
    ASSERT_TRUE(small.verify(k, signed_text(k, key), trusted));
    EXPECT_EQ(small.stats().entries, 1U);
    EXPECT_LE(small.stats().bytes, one + one / 2);
  }
  cache.clear();
  EXPECT_EQ(cache.stats().entries, 0U);
  EXPECT_EQ(cache.stats().bytes, 0U);
  VerifiedSignatureCache none(VerifiedSignatureCache::Limits{.max_entries = 0, .max_bytes = 0});
  ASSERT_TRUE(none.verify("kc1-a", signed_text("kc1-a", key), trusted));
  EXPECT_EQ(none.stats().entries, 0U);
}

} // namespace
} // namespace kcache::protocol
