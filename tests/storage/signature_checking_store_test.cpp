// Signed action records in storage (issue 14): ArtifactStore signs what it
// stores, SignatureCheckingStore serves a shared tier's records only with a
// valid signature by a trusted key, and make_tiered_store puts the check on
// the shared tier only.

#include "../support/redis_server.h"
#include "../support/temp_dir.h"

#include <kcache/protocol/json_text.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/memory_store.h>
#include <kcache/storage/record_signer.h>
#include <kcache/storage/signature_checking_store.h>
#include <kcache/storage/store_factory.h>
#include <kcache/storage/tiered_store.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace kcache::storage {
namespace {

using nlohmann::json;
using protocol::SignatureFailure;
using protocol::SigningKey;
using protocol::TrustedKeys;

std::shared_ptr<const TrustedKeys> trusting(std::initializer_list<const SigningKey*> keys) {
  auto trusted = std::make_shared<TrustedKeys>();
  for (const SigningKey* key : keys) {
    trusted->add(*key);
  }
  return trusted;
}

std::string namespace_of(const ActionRecord& record) {
  return record.manifest ? record.manifest->ns : "from-key";
}

TEST(RecordSigning, ArtifactStoreSignsWhatItStoresAndDropsForeignSignatures) {
  const SigningKey key = *SigningKey::generate();
  const KeyRecordSigner signer(key, namespace_of);
  MemoryStore memory(64 << 20);
  ArtifactStore store(memory, &signer);
  auto stored =
      store.put("torch:team-a:k1", {{"graph.pkl", "pickled"}}, "rank0", {{"n", "1"}}, "team-a-ci");
  ASSERT_TRUE(stored.has_value()) << stored.error().message;
  ASSERT_TRUE(stored->signature.has_value());
  EXPECT_EQ(stored->signature->key_id, key.key_id());
  EXPECT_EQ(stored->writer, "team-a-ci");
  EXPECT_EQ(stored->ns, "from-key");

  const std::string text = **memory.get(Area::kAction, "torch:team-a:k1");
  const json doc = json::parse(text);
  EXPECT_EQ(doc["writer"], "team-a-ci");
  EXPECT_EQ(doc["namespace"], "from-key");
  EXPECT_EQ(doc["signature"]["key_id"], key.key_id());
  auto verified = protocol::verify_record_json("torch:team-a:k1", text, *trusting({&key}));
  ASSERT_TRUE(verified.has_value()) << verified.error().message;
  EXPECT_EQ(verified->writer, "team-a-ci");
  EXPECT_EQ(verified->producer, "rank0");

  // Read back: the record keeps its origin; re-serialized, it still verifies.
  auto record = store.get_record("torch:team-a:k1");
  ASSERT_TRUE(record.has_value() && record->has_value());
  EXPECT_EQ((*record)->signature, stored->signature);
  EXPECT_TRUE(
      protocol::verify_record_json("torch:team-a:k1", record_to_json(**record), *trusting({&key})));

  // A record that arrives signed by someone else is signed anew by this node.
  const SigningKey other = *SigningKey::generate();
  ActionRecord foreign = **record;
  foreign.key = "torch:team-a:k2";
  foreign.signature = other.sign(signed_fields(foreign));
  auto resigned = store.put_record(foreign);
  ASSERT_TRUE(resigned.has_value());
  EXPECT_EQ(resigned->signature->key_id, key.key_id());

  // Without a signer (tools, tests): unsigned, and any given signature dropped.
  ArtifactStore unsigned_store(memory);
  auto plain = unsigned_store.put_record(foreign);
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->signature.has_value());
  EXPECT_FALSE(json::parse(**memory.get(Area::kAction, "torch:team-a:k2")).contains("signature"));
}

TEST(RecordSigning, ARevokedKeysRecordsLeaveTheLocalTiersToo) {
  const SigningKey own = *SigningKey::generate();
  const SigningKey other = *SigningKey::generate();
  MemoryStore local(64 << 20);
  // A record of `other`'s, verified when it came from the shared tier.
  const KeyRecordSigner other_signer(other);
  ASSERT_TRUE(ArtifactStore(local, &other_signer).put("k-other", {{"a", "1"}}, "ci").has_value());
  ASSERT_TRUE(ArtifactStore(local).put("k-unsigned", {{"a", "2"}}, "old").has_value());

  const KeyRecordSigner trusting_other(own, {}, trusting({&other}));
  ArtifactStore before(local, &trusting_other);
  EXPECT_TRUE(before.get("k-other")->has_value());
  ASSERT_TRUE(before.put("k-own", {{"a", "3"}}, "ci").has_value());

  const KeyRecordSigner revoked(own, {}, trusting({}));
  ArtifactStore after(local, &revoked);
  EXPECT_FALSE(after.get("k-other")->has_value());
  EXPECT_FALSE(after.get_record("k-other")->has_value());
  EXPECT_TRUE(after.get("k-own")->has_value());                  // its own key always
  EXPECT_TRUE(after.get("k-unsigned")->has_value());             // written before signing
  EXPECT_TRUE(local.get(Area::kAction, "k-other")->has_value()); // kept, not deleted
}

TEST(RecordSigning, MalformedSignatureMemberDoesNotMakeALocalRecordCorrupt) {
  auto record =
      record_from_json(R"({"key":"k","outputs":[],"producer":"p","created_ms":1,"metadata":{},)"
                       R"("signature":{"alg":"rsa","key_id":"x","sig":"y"}})");
  ASSERT_TRUE(record.has_value()) << record.error().message;
  EXPECT_FALSE(record->signature.has_value());
}

class SignatureCheckingStoreTest : public ::testing::Test {
protected:
  SignatureCheckingStoreTest() {
    auto inner = std::make_unique<MemoryStore>(64 << 20);
    shared_ = inner.get();
    checked_ = std::make_unique<SignatureCheckingStore>(
        std::move(inner), SignatureCheck{trusting({&trusted_key_}), rejections_, nullptr});
  }

  // What another writer of the shared tier leaves there.
  void plant(const std::string& key, const std::string& record_text) {
    ASSERT_TRUE(shared_->put(Area::kAction, key, record_text).has_value());
  }
  std::string signed_by(const SigningKey& key, const std::string& record_key) {
    const KeyRecordSigner signer(key);
    MemoryStore scratch(1 << 20);
    ArtifactStore store(scratch, &signer);
    EXPECT_TRUE(store.put(record_key, {{"a.bin", "abc"}}, "ci", {}, "writer-a").has_value());
    return **scratch.get(Area::kAction, record_key);
  }

  SigningKey trusted_key_ = *SigningKey::generate();
  SigningKey unknown_key_ = *SigningKey::generate();
  std::shared_ptr<SignatureRejections> rejections_ = std::make_shared<SignatureRejections>();
  MemoryStore* shared_ = nullptr;
  std::unique_ptr<SignatureCheckingStore> checked_;
};

TEST_F(SignatureCheckingStoreTest, ServesOnlyRecordsSignedByATrustedKey) {
  plant("good", signed_by(trusted_key_, "good"));
  plant("unknown", signed_by(unknown_key_, "unknown"));
  json forged = json::parse(signed_by(unknown_key_, "forged"));
  forged.erase("signature");
  plant("forged", protocol::json_text(forged));
  json tampered = json::parse(signed_by(trusted_key_, "tampered"));
  tampered["producer"] = "trusted-ci";
  plant("tampered", protocol::json_text(tampered));
  plant("garbage", "{not json");
  // A genuine record copied under another key.
  plant("copied", signed_by(trusted_key_, "good"));

  EXPECT_TRUE(checked_->get(Area::kAction, "good")->has_value());
  EXPECT_TRUE(*checked_->contains(Area::kAction, "good"));
  for (const char* key : {"unknown", "forged", "tampered", "garbage", "copied"}) {
    EXPECT_FALSE(checked_->get(Area::kAction, key)->has_value()) << key;
    EXPECT_FALSE(*checked_->contains(Area::kAction, key)) << key;
    // Never deleted: another node may trust what this one does not.
    EXPECT_TRUE(shared_->get(Area::kAction, key)->has_value()) << key;
  }
  const std::vector<std::string> keys = {"good", "forged", "missing", "tampered"};
  std::vector<GetResult> many = checked_->get_many(Area::kAction, keys);
  ASSERT_EQ(many.size(), 4U);
  EXPECT_TRUE(many[0]->has_value());
  EXPECT_FALSE(many[1]->has_value());
  EXPECT_FALSE(many[2]->has_value());
  EXPECT_FALSE(many[3]->has_value());

  // get + contains for five keys, then two in the batch.
  EXPECT_EQ(rejections_->count(SignatureFailure::kUnknownKey), 2U);
  EXPECT_EQ(rejections_->count(SignatureFailure::kUnsigned), 3U);
  EXPECT_EQ(rejections_->count(SignatureFailure::kBadSignature), 5U); // tampered, copied
  EXPECT_EQ(rejections_->count(SignatureFailure::kMalformed), 2U);
  EXPECT_EQ(rejections_->total(), 12U);
  // Logged once per key.
  EXPECT_FALSE(rejections_->first_time("forged"));
  EXPECT_TRUE(rejections_->first_time("never-seen"));
}

TEST_F(SignatureCheckingStoreTest, ServableListingsOmitWhatGetWouldRefuse) {
  plant("good", signed_by(trusted_key_, "good"));
  plant("unknown", signed_by(unknown_key_, "unknown"));
  json forged = json::parse(signed_by(trusted_key_, "forged"));
  forged.erase("signature");
  plant("forged", protocol::json_text(forged));
  plant("copied", signed_by(trusted_key_, "good"));
  ASSERT_TRUE(shared_->put(Area::kCas, std::string(64, 'a'), "blob").has_value());

  // gc and verify see everything stored.
  EXPECT_EQ(checked_->list({})->size(), 5U);
  ListOptions servable;
  servable.servable_only = true;
  auto listed = checked_->list(servable);
  ASSERT_TRUE(listed.has_value());
  std::vector<std::string> keys;
  for (const ObjectInfo& info : *listed) {
    keys.push_back(std::string(area_name(info.area)) + "/" + info.key);
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"ac/good", "cas/" + std::string(64, 'a')}));
  servable.area = Area::kAction;
  EXPECT_EQ(checked_->list(servable)->size(), 1U);
  EXPECT_EQ(rejections_->total(), 0U); // rejections count reads, not listings

  // A page short of its limit only at the end: omitted records are made up
  // for from further on ("copied" and "forged" sort before "good").
  servable.limit = 1;
  auto page = checked_->list(servable);
  ASSERT_TRUE(page.has_value());
  ASSERT_EQ(page->size(), 1U);
  EXPECT_EQ(page->front().key, "good");
  servable.after = ListCursor{Area::kAction, "good"};
  EXPECT_TRUE(checked_->list(servable)->empty());
}

TEST_F(SignatureCheckingStoreTest, CasBlobsAndWritesPassThrough) {
  ASSERT_TRUE(checked_->put(Area::kCas, std::string(64, 'a'), "blob").has_value());
  EXPECT_EQ(**checked_->get(Area::kCas, std::string(64, 'a')), "blob");
  EXPECT_TRUE(*checked_->contains(Area::kCas, std::string(64, 'a')));
  EXPECT_EQ(rejections_->total(), 0U);
  ASSERT_TRUE(checked_->remove(Area::kCas, std::string(64, 'a')).has_value());
  EXPECT_FALSE(*checked_->contains(Area::kCas, std::string(64, 'a')));
}

TEST_F(SignatureCheckingStoreTest, ARejectedRecordIsAMissInTheTiersCounters) {
  auto counted = std::make_unique<SignatureCheckingStore>(
      make_store("memory://?capacity=1MiB").value(),
      SignatureCheck{trusting({&trusted_key_}), {}, nullptr});
  auto& tier = *counted;
  ASSERT_TRUE(tier.put(Area::kAction, "forged", R"({"key":"forged","outputs":[]})").has_value());
  ASSERT_TRUE(tier.put(Area::kAction, "good", signed_by(trusted_key_, "good")).has_value());
  EXPECT_FALSE(tier.get(Area::kAction, "forged")->has_value());
  EXPECT_TRUE(tier.get(Area::kAction, "good")->has_value());
  EXPECT_EQ(tier.counters().hits, 1U);
  EXPECT_EQ(tier.counters().misses, 1U);
}

TEST_F(SignatureCheckingStoreTest, ARecordReadAgainIsVerifiedOnceAndARevokedKeyIsNotCached) {
  const auto verified = std::make_shared<protocol::VerifiedSignatureCache>();
  auto inner = std::make_unique<MemoryStore>(1 << 20);
  MemoryStore& shared = *inner;
  SignatureCheckingStore trusting_store(std::move(inner),
                                        SignatureCheck{trusting({&trusted_key_}), {}, verified});
  ASSERT_TRUE(shared.put(Area::kAction, "good", signed_by(trusted_key_, "good")).has_value());
  EXPECT_TRUE(trusting_store.get(Area::kAction, "good")->has_value());
  EXPECT_TRUE(*trusting_store.contains(Area::kAction, "good"));
  EXPECT_TRUE(trusting_store.get(Area::kAction, "good")->has_value());
  EXPECT_EQ(verified->stats().misses, 1U);
  EXPECT_EQ(verified->stats().hits, 2U);

  // The same bytes rewritten by hand under the same key: checked again, refused.
  std::string forged = **shared.get(Area::kAction, "good");
  forged.replace(forged.find("writer-a"), 8, "writer-b");
  ASSERT_TRUE(shared.put(Area::kAction, "good", forged).has_value());
  EXPECT_FALSE(trusting_store.get(Area::kAction, "good")->has_value());
  EXPECT_EQ(verified->stats().hits, 2U);

  // Same cache, a trusted set without the key (revoked): refused, not a hit.
  ASSERT_TRUE(shared.put(Area::kAction, "good", signed_by(trusted_key_, "good")).has_value());
  EXPECT_TRUE(trusting_store.get(Area::kAction, "good")->has_value());
  const auto hits = verified->stats().hits;
  auto inner_b = std::make_unique<MemoryStore>(1 << 20);
  ASSERT_TRUE(inner_b->put(Area::kAction, "good", **shared.get(Area::kAction, "good")).has_value());
  SignatureCheckingStore revoked(std::move(inner_b),
                                 SignatureCheck{trusting({&unknown_key_}), rejections_, verified});
  EXPECT_FALSE(revoked.get(Area::kAction, "good")->has_value());
  EXPECT_EQ(rejections_->count(SignatureFailure::kUnknownKey), 1U);
  EXPECT_EQ(verified->stats().hits, hits);
}

// The daemon's stack: memory and RocksDB (this node's) over Redis (shared).
class SignedTiersTest : public ::testing::Test {
protected:
  Result<TieredStack> node(const testing::TempDir& dir,
                           std::shared_ptr<const TrustedKeys> trusted) {
    const std::vector<std::string> urls = {"memory://?capacity=8MiB",
                                           "rocksdb://" + dir.str() + "?capacity=64MiB",
                                           redis_.url("namespace=signed")};
    const SignatureCheck check{std::move(trusted), rejections_, nullptr};
    return make_tiered_store(urls, {}, &check);
  }

  testing::RedisServer redis_;
  testing::TempDir dir_a_, dir_b_, dir_c_;
  SigningKey key_a_ = *SigningKey::generate();
  std::shared_ptr<SignatureRejections> rejections_ = std::make_shared<SignatureRejections>();
};

TEST_F(SignedTiersTest, OnlyTheSharedTierIsCheckedAndVerifiedRecordsAreBackfilled) {
  auto a = node(dir_a_, trusting({&key_a_}));
  ASSERT_TRUE(a.has_value()) << a.error().message;
  ASSERT_EQ(a->tiers.size(), 3U);
  EXPECT_EQ(dynamic_cast<SignatureCheckingStore*>(a->tiers[0]), nullptr);
  EXPECT_EQ(dynamic_cast<SignatureCheckingStore*>(a->tiers[1]), nullptr);
  EXPECT_NE(dynamic_cast<SignatureCheckingStore*>(a->tiers[2]), nullptr);
  EXPECT_EQ(a->tiers[2]->name(), "redis");

  const KeyRecordSigner signer_a(key_a_);
  ArtifactStore node_a(*a->store, &signer_a);
  ASSERT_TRUE(node_a.put("torch:team-a:k", {{"out.bin", "bytes"}}, "ci", {}, "team-a").has_value());

  // Node B trusts A: the record comes from Redis once, then from its own tiers.
  auto b = node(dir_b_, trusting({&key_a_}));
  ASSERT_TRUE(b.has_value());
  ArtifactStore node_b(*b->store);
  auto got = node_b.get("torch:team-a:k");
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ((*got)->files.at(0).data, "bytes");
  EXPECT_EQ((*got)->record.writer, "team-a");
  ASSERT_TRUE(node_b.get("torch:team-a:k")->has_value());
  EXPECT_EQ(b->tiers[2]->counters().hits, 2U); // the record and its blob, once
  EXPECT_EQ(b->tiers[0]->counters().hits, 2U); // the second read: memory
  EXPECT_EQ(rejections_->total(), 0U);

  // Node C trusts another key only: a miss, counted, Redis left as it was.
  const SigningKey key_c = *SigningKey::generate();
  auto c = node(dir_c_, trusting({&key_c}));
  ASSERT_TRUE(c.has_value());
  ArtifactStore node_c(*c->store);
  auto refused = node_c.get("torch:team-a:k");
  ASSERT_TRUE(refused.has_value());
  EXPECT_FALSE(refused->has_value());
  EXPECT_FALSE(*c->store->contains(Area::kAction, "torch:team-a:k"));
  EXPECT_EQ(rejections_->count(SignatureFailure::kUnknownKey), 2U);
  EXPECT_TRUE(node_b.get("torch:team-a:k")->has_value());
}

} // namespace
} // namespace kcache::storage
