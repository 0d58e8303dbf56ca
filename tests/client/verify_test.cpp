// Client-side verification of artifacts (verify.h), without a daemon: records
// signed here, files matched against their outputs, each refusal by reason.
#include <kcache/cachekey/sha256.h>
#include <kcache/client/verify.h>
#include <kcache/protocol/json_text.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kcache::client {
namespace {

using nlohmann::json;
using protocol::RecordFields;
using protocol::SigningKey;
using protocol::TrustedKeys;

std::string digest(std::string_view data) {
  return cachekey::to_hex(cachekey::Sha256::of(data));
}

// An artifact as kcached serves it, its record signed by `key`.
Artifact signed_artifact(const SigningKey& key, std::vector<File> files,
                         std::string producer = "kcache-worker") {
  RecordFields f{.key = "kc1-abc",
                 .ns = "",
                 .writer = "team-a-ci",
                 .producer = std::move(producer),
                 .created_ms = 1'700'000'000'000,
                 .outputs = {},
                 .metadata = {{"arch", "sm_90"}}};
  json outputs = json::array();
  for (const File& file : files) {
    f.outputs.push_back({file.name, digest(file.data), file.data.size()});
    outputs.push_back(
        {{"name", file.name}, {"digest", digest(file.data)}, {"size", file.data.size()}});
  }
  const json record{{"key", f.key},
                    {"namespace", f.ns},
                    {"writer", f.writer},
                    {"producer", f.producer},
                    {"created_ms", f.created_ms},
                    {"outputs", outputs},
                    {"metadata", f.metadata},
                    {"signature", protocol::to_json(key.sign(f))}};
  return Artifact{f.key, protocol::json_text(record), std::move(files)};
}

Rejection reason_of(const Artifact& artifact, const TrustedKeys& trusted) {
  auto verified = verify_artifact(artifact, trusted);
  EXPECT_FALSE(verified.has_value());
  return verified ? Rejection::kMalformed : verified.error().reason;
}

struct Verify : ::testing::Test {
  SigningKey key = *SigningKey::generate();
  TrustedKeys trusted;
  void SetUp() override { trusted.add(key); }
};

TEST_F(Verify, AGenuineArtifactVerifiesAndSaysWhoWroteIt) {
  const Artifact a = signed_artifact(key, {{"kernel.cubin", "ELF..."}, {"log.txt", "ok"}});
  auto verified = verify_artifact(a, trusted);
  ASSERT_TRUE(verified.has_value()) << verified.error().message;
  EXPECT_EQ(verified->key_id, key.key_id());
  EXPECT_EQ(verified->writer, "team-a-ci");
  EXPECT_EQ(verified->producer, "kcache-worker");
}

TEST_F(Verify, FilesThatAreNotTheRecordsAreAContentMismatch) {
  Artifact swapped = signed_artifact(key, {{"value", "genuine pickle"}});
  swapped.files[0].data = "evil pickle!!!"; // the same size, other bytes
  EXPECT_EQ(reason_of(swapped, trusted), Rejection::kContentMismatch);
  Artifact longer = signed_artifact(key, {{"value", "genuine"}});
  longer.files[0].data += "x";
  EXPECT_EQ(reason_of(longer, trusted), Rejection::kContentMismatch);
  Artifact extra = signed_artifact(key, {{"value", "genuine"}});
  extra.files.push_back({"payload.so", "\x7f"
                                       "ELF"});
  EXPECT_EQ(reason_of(extra, trusted), Rejection::kContentMismatch);
  Artifact missing = signed_artifact(key, {{"a", "1"}, {"b", "2"}});
  missing.files.pop_back();
  EXPECT_EQ(reason_of(missing, trusted), Rejection::kContentMismatch);
  Artifact renamed = signed_artifact(key, {{"a", "1"}, {"b", "2"}});
  renamed.files[1].name = "a"; // "a" twice, "b" never
  EXPECT_EQ(reason_of(renamed, trusted), Rejection::kContentMismatch);
}

TEST_F(Verify, SignatureFailuresKeepTheirReason) {
  Artifact unsigned_one = signed_artifact(key, {{"value", "v"}});
  json doc = json::parse(unsigned_one.record_json);
  doc.erase("signature");
  unsigned_one.record_json = doc.dump();
  EXPECT_EQ(reason_of(unsigned_one, trusted), Rejection::kUnsigned);

  Artifact forged = signed_artifact(key, {{"value", "v"}});
  doc = json::parse(forged.record_json);
  doc["producer"] = "trusted-ci"; // the forgery
  forged.record_json = doc.dump();
  EXPECT_EQ(reason_of(forged, trusted), Rejection::kBadSignature);

  const SigningKey attacker = *SigningKey::generate();
  EXPECT_EQ(reason_of(signed_artifact(attacker, {{"value", "v"}}), trusted),
            Rejection::kUnknownKey);

  Artifact elsewhere = signed_artifact(key, {{"value", "v"}});
  elsewhere.key = "kc1-other"; // a genuine record served under another key
  EXPECT_EQ(reason_of(elsewhere, trusted), Rejection::kBadSignature);

  Artifact garbage = signed_artifact(key, {{"value", "v"}});
  garbage.record_json = "not json";
  EXPECT_EQ(reason_of(garbage, trusted), Rejection::kMalformed);
}

TEST_F(Verify, TheVerifierCountsAndRefusedArtifactsAreMisses) {
  Verifier verifier(std::move(trusted));
  EXPECT_TRUE(verifier.screen(signed_artifact(key, {{"value", "v"}})).has_value());
  EXPECT_FALSE(verifier.screen(std::nullopt).has_value()); // a miss stays a miss, uncounted
  const SigningKey attacker = *SigningKey::generate();
  EXPECT_FALSE(verifier.screen(signed_artifact(attacker, {{"value", "v"}})).has_value());
  const VerificationStats stats = verifier.stats();
  EXPECT_TRUE(stats.enabled);
  EXPECT_EQ(stats.verified, 1U);
  EXPECT_EQ(stats.rejected_total(), 1U);
  EXPECT_EQ(stats.rejected[static_cast<std::size_t>(Rejection::kUnknownKey)], 1U);
  EXPECT_NE(stats.last_rejection.find("kc1-abc: unknown-key"), std::string::npos)
      << stats.last_rejection;
}

TEST_F(Verify, ARepeatedGetSkipsEd25519ButStillHashesTheFiles) {
  Verifier verifier(std::move(trusted));
  const Artifact genuine = signed_artifact(key, {{"value", "v"}});
  EXPECT_TRUE(verifier.screen(genuine).has_value());
  EXPECT_TRUE(verifier.screen(genuine).has_value());
  // The same (cached) record with other bytes beside it: still refused.
  Artifact swapped = genuine;
  swapped.files[0].data = "w";
  EXPECT_FALSE(verifier.screen(swapped).has_value());
  const VerificationStats stats = verifier.stats();
  EXPECT_EQ(stats.verified, 2U);
  EXPECT_EQ(stats.rejected[static_cast<std::size_t>(Rejection::kContentMismatch)], 1U);
  EXPECT_EQ(stats.cache_misses, 1U);
  EXPECT_EQ(stats.cache_hits, 2U);
}

} // namespace
} // namespace kcache::client
