#include "temp_dir.h"

#include <kcache/protocol/json_text.h>
#include <kcache/protocol/record_signature.h>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <functional>

namespace kcache::protocol {
namespace {

using nlohmann::json;

RecordFields sample_fields() {
  return RecordFields{.key = "kc1-0123456789abcdef",
                      .ns = "team-a",
                      .writer = "team-a-ci",
                      .producer = "kcache-worker@node1",
                      .created_ms = 1'700'000'000'000,
                      .outputs = {{"kernel.cubin", std::string(64, 'a'), 4096},
                                  {"log.txt", std::string(64, 'b'), 12}},
                      .metadata = {{"compile_ms", "310"}, {"arch", "sm_90"}}};
}

// A record document as storage writes it, signed by `key`.
json signed_record(const SigningKey& key, const RecordFields& f = sample_fields()) {
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

SignatureFailure failure_of(std::string_view key, const json& record, const TrustedKeys& trusted) {
  auto verified = verify_record_json(key, json_text(record), trusted);
  EXPECT_FALSE(verified.has_value());
  return verified ? SignatureFailure::kMalformed : verified.error().failure;
}

struct Signed : ::testing::Test {
  SigningKey key = *SigningKey::generate();
  TrustedKeys trusted;
  void SetUp() override { trusted.add(key); }
};

TEST_F(Signed, RoundTripVerifiesAndSaysWhoSigned) {
  const RecordFields f = sample_fields();
  const json record = signed_record(key, f);
  EXPECT_EQ(record["signature"]["alg"], "ed25519");
  EXPECT_EQ(key.key_id().size(), 16U);
  EXPECT_EQ(record["signature"]["key_id"], key.key_id());
  EXPECT_EQ(record["signature"]["sig"].get<std::string>().size(), 88U); // 64 bytes in base64
  auto verified = verify_record_json(f.key, json_text(record), trusted);
  ASSERT_TRUE(verified.has_value()) << verified.error().message;
  EXPECT_EQ(verified->key_id, key.key_id());
  EXPECT_EQ(verified->writer, "team-a-ci");
  EXPECT_EQ(verified->producer, "kcache-worker@node1");
  EXPECT_EQ(verified->ns, "team-a");
  EXPECT_EQ(verified->created_ms, f.created_ms);
  auto parsed = record_fields_from_json(record);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, f);
}

TEST_F(Signed, EveryFieldOfEveryKindIsCovered) {
  const json good = signed_record(key);
  std::vector<std::pair<std::string, std::function<void(json&)>>> tamper = {
      {"producer", [](json& r) { r["producer"] = "trusted-ci"; }},
      {"writer", [](json& r) { r["writer"] = "admin"; }},
      {"namespace", [](json& r) { r["namespace"] = "team-b"; }},
      {"namespace removed", [](json& r) { r.erase("namespace"); }},
      {"created_ms", [](json& r) { r["created_ms"] = 1'700'000'000'001; }},
      {"output name", [](json& r) { r["outputs"][0]["name"] = "evil.cubin"; }},
      {"output digest", [](json& r) { r["outputs"][0]["digest"] = std::string(64, 'c'); }},
      {"output size", [](json& r) { r["outputs"][1]["size"] = 13; }},
      {"output order", [](json& r) { std::swap(r["outputs"][0], r["outputs"][1]); }},
      {"output dropped", [](json& r) { r["outputs"].erase(1); }},
      {"metadata value", [](json& r) { r["metadata"]["arch"] = "sm_80"; }},
      {"metadata added", [](json& r) { r["metadata"]["x"] = ""; }},
      {"signature bytes", [](json& r) {
         std::string sig = r["signature"]["sig"];
         sig[10] = sig[10] == 'A' ? 'B' : 'A';
         r["signature"]["sig"] = sig;
       }}};
  for (const auto& [what, change] : tamper) {
    json record = good;
    change(record);
    EXPECT_EQ(failure_of("kc1-0123456789abcdef", record, trusted), SignatureFailure::kBadSignature)
        << what;
  }
  // A genuine record copied under another key.
  json copied = good;
  copied["key"] = "kc1-fedcba9876543210";
  EXPECT_EQ(failure_of("kc1-fedcba9876543210", copied, trusted), SignatureFailure::kBadSignature);
  EXPECT_EQ(failure_of("kc1-fedcba9876543210", good, trusted), SignatureFailure::kBadSignature);
}

TEST_F(Signed, LengthPrefixesKeepFieldBoundaries) {
  RecordFields a = sample_fields();
  RecordFields b = a;
  a.writer = "ab";
  a.producer = "c";
  b.writer = "a";
  b.producer = "bc";
  EXPECT_NE(signing_message(a), signing_message(b));
  a.metadata = {{"k", "v=x"}};
  b.metadata = {{"k=v", "x"}};
  EXPECT_NE(signing_message(a), signing_message(b));
}

TEST_F(Signed, UnknownWrongAndRevokedKeys) {
  SigningKey other = *SigningKey::generate();
  ASSERT_NE(other.key_id(), key.key_id());
  EXPECT_EQ(failure_of("kc1-0123456789abcdef", signed_record(other), trusted),
            SignatureFailure::kUnknownKey);
  // A signature by another key that claims a trusted key's id.
  json claimed = signed_record(other);
  claimed["signature"]["key_id"] = key.key_id();
  EXPECT_EQ(failure_of("kc1-0123456789abcdef", claimed, trusted), SignatureFailure::kBadSignature);
  // Revoked: a reader that trusts only `other` now.
  TrustedKeys rotated;
  rotated.add(other);
  EXPECT_EQ(failure_of("kc1-0123456789abcdef", signed_record(key), rotated),
            SignatureFailure::kUnknownKey);
  EXPECT_TRUE(verify_record_json("kc1-0123456789abcdef", json_text(signed_record(other)), rotated));
}

TEST_F(Signed, UnsignedAndMalformed) {
  json record = signed_record(key);
  record.erase("signature");
  EXPECT_EQ(failure_of("kc1-0123456789abcdef", record, trusted), SignatureFailure::kUnsigned);
  record["signature"] = nullptr;
  EXPECT_EQ(failure_of("kc1-0123456789abcdef", record, trusted), SignatureFailure::kUnsigned);

  const json good = signed_record(key);
  const std::string sig = good["signature"]["sig"];
  std::vector<std::pair<std::string, std::function<void(json&)>>> bad = {
      {"sig not base64", [](json& r) { r["signature"]["sig"] = "not base64!"; }},
      {"sig whitespace", [&sig](json& r) { r["signature"]["sig"] = " " + sig.substr(1); }},
      {"sig short", [&sig](json& r) { r["signature"]["sig"] = sig.substr(0, 84); }},
      {"sig no padding", [&sig](json& r) { r["signature"]["sig"] = sig.substr(0, 86); }},
      {"sig not a string", [](json& r) { r["signature"]["sig"] = 5; }},
      {"alg", [](json& r) { r["signature"]["alg"] = "rsa"; }},
      {"key_id shape", [](json& r) { r["signature"]["key_id"] = "XYZ"; }},
      {"signature array", [](json& r) { r["signature"] = json::array(); }},
      {"writer type", [](json& r) { r["writer"] = 7; }},
      {"size type", [](json& r) { r["outputs"][0]["size"] = -1; }},
      {"outputs missing", [](json& r) { r.erase("outputs"); }},
      {"metadata value type", [](json& r) { r["metadata"]["n"] = 3; }},
      {"key missing", [](json& r) { r.erase("key"); }}};
  for (const auto& [what, change] : bad) {
    json record2 = good;
    change(record2);
    EXPECT_EQ(failure_of("kc1-0123456789abcdef", record2, trusted), SignatureFailure::kMalformed)
        << what;
  }
  auto not_json = verify_record_json("k", "{oops", trusted);
  ASSERT_FALSE(not_json.has_value());
  EXPECT_EQ(not_json.error().failure, SignatureFailure::kMalformed);
  EXPECT_EQ(failure_name(SignatureFailure::kUnsigned), "unsigned");
  EXPECT_EQ(failure_name(SignatureFailure::kUnknownKey), "unknown-key");
  EXPECT_EQ(failure_name(SignatureFailure::kBadSignature), "bad-signature");
  EXPECT_EQ(failure_name(SignatureFailure::kMalformed), "malformed");
}

TEST(Base64, RoundTripsAndIsStrict) {
  for (const std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    auto back = base64_decode(base64_encode(s));
    ASSERT_TRUE(back.has_value()) << s;
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode(std::string("\xff\xfe", 2)), "//4=");
  for (const std::string bad :
       {"Zm8", "Zm9=", "Z===", "Zm8=Zm8=", "Zm 8", "Zm8\n", "====", "Zg=A"}) {
    EXPECT_FALSE(base64_decode(bad).has_value()) << bad;
  }
}

TEST(SigningKeys, PemFilesRoundTripAndDirectoriesLoad) {
  testing::TempDir dir;
  const auto file = dir.path() / "signing.pem";
  auto created = SigningKey::load_or_generate(file);
  ASSERT_TRUE(created.has_value()) << created.error();
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  auto again = SigningKey::load_or_generate(file); // loaded, not regenerated
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_EQ(again->key_id(), created->key_id());
  EXPECT_FALSE(created->save(file).has_value()); // never overwrites a key

  // Public keys: one per file, two in one file, a directory of them.
  SigningKey b = *SigningKey::generate();
  SigningKey c = *SigningKey::generate();
  std::filesystem::create_directory(dir.path() / "trusted");
  std::ofstream(dir.path() / "trusted" / "a.pem") << created->public_pem();
  std::ofstream(dir.path() / "trusted" / "bc.pub") << b.public_pem() << c.public_pem();
  std::ofstream(dir.path() / "trusted" / "README") << "not a key";
  const std::vector<std::string> paths = {(dir.path() / "trusted").string()};
  auto trusted = TrustedKeys::load(paths);
  ASSERT_TRUE(trusted.has_value()) << trusted.error();
  EXPECT_EQ(trusted->size(), 3U);
  EXPECT_TRUE(trusted->contains(b.key_id()) && trusted->contains(c.key_id()));

  // A private key where a public one is expected is refused, naming the file.
  const std::vector<std::string> private_only = {file.string()};
  auto refused = TrustedKeys::load(private_only);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("signing.pem"), std::string::npos) << refused.error();
  const std::vector<std::string> missing = {(dir.path() / "nope.pem").string()};
  EXPECT_FALSE(TrustedKeys::load(missing).has_value());
  EXPECT_FALSE(SigningKey::from_pem(b.public_pem()).has_value());
  EXPECT_FALSE(SigningKey::from_pem("garbage").has_value());
  auto reread = SigningKey::from_pem(b.private_pem());
  ASSERT_TRUE(reread.has_value());
  EXPECT_EQ(reread->key_id(), b.key_id());
}

TEST(SigningKeys, NonEd25519KeysAreRefused) {
  // An EC P-256 public key (openssl genpkey -algorithm EC; pkey -pubout).
  const std::string ec_pub = "-----BEGIN PUBLIC KEY-----\n"
                             "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEjCEu9zyOqqWVB7i2qcv8MYj2ZxRO\n"
                             "z14f9qB3AAWfszO5vZJKoCus3ePZwdH9Ufh2X8cA/rleJrHTnYerSgqKug==\n"
                             "-----END PUBLIC KEY-----\n";
  TrustedKeys keys;
  auto added = keys.add_pem(ec_pub, "ec.pem");
  ASSERT_FALSE(added.has_value());
  EXPECT_EQ(added.error(), "ec.pem: a public key that is not Ed25519");
  EXPECT_EQ(keys.size(), 0U);
}

} // namespace
} // namespace kcache::protocol
