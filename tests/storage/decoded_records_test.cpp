// Records decoded by their exact bytes (decoded_records.h): a cached decode is
// the decode of those bytes and nothing more; what a read checks besides the
// decode (the key, the signer's trust, the blobs) is checked on every read.

#include <kcache/storage/artifact_store.h>
#include <kcache/storage/decoded_records.h>
#include <kcache/storage/memory_store.h>
#include <kcache/storage/record_signer.h>

#include <gtest/gtest.h>

#include <atomic>

namespace kcache::storage {
namespace {

ActionRecord record(const std::string& key, const std::string& digest) {
  ActionRecord r;
  r.key = key;
  r.outputs.push_back(OutputRef{"kernel.cubin", digest, 10, {}});
  r.producer = "test";
  r.created_ms = 1700000000000;
  r.metadata = {{"compile_ms", "12"}};
  return r;
}

TEST(DecodedRecords, DecodesAsRecordFromJsonAndKeepsTheDecode) {
  DecodedRecords cache;
  const std::string text = record_to_json(record("k1", std::string(64, 'a')));
  auto first = cache.decode(text);
  auto second = cache.decode(text);
  auto plain = record_from_json(text);
  ASSERT_TRUE(first && second && plain);
  EXPECT_EQ(cache.entries(), 1U);
  for (const ActionRecord* r : {&*first, &*second}) {
    EXPECT_EQ(r->key, plain->key);
    EXPECT_EQ(r->outputs, plain->outputs);
    EXPECT_EQ(r->metadata, plain->metadata);
    EXPECT_EQ(r->created_ms, plain->created_ms);
  }
}

TEST(DecodedRecords, OtherBytesAreAnotherRecord) {
  DecodedRecords cache;
  const std::string a = record_to_json(record("k1", std::string(64, 'a')));
  const std::string b = record_to_json(record("k1", std::string(64, 'b')));
  ASSERT_EQ(cache.decode(a)->outputs[0].digest, std::string(64, 'a'));
  EXPECT_EQ(cache.decode(b)->outputs[0].digest, std::string(64, 'b'));
  EXPECT_EQ(cache.decode(a)->outputs[0].digest, std::string(64, 'a'));
  EXPECT_EQ(cache.entries(), 2U);
}

TEST(DecodedRecords, FailuresAreNotKept) {
  DecodedRecords cache;
  EXPECT_FALSE(cache.decode("{\"key\":"));
  EXPECT_FALSE(cache.decode("{\"key\":"));
  EXPECT_EQ(cache.entries(), 0U);
}

TEST(DecodedRecords, StartsOverWhenFull) {
  DecodedRecords cache(64 << 10);
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(
        cache.decode(record_to_json(record("k" + std::to_string(i), std::string(64, 'c')))));
  }
  EXPECT_GT(cache.entries(), 0U);
  EXPECT_LT(cache.entries(), 200U);
}

// Signs nothing; trusts records while `trusted` holds.
class SwitchSigner final : public RecordSigner {
public:
  void sign(ActionRecord& /*record*/) const override {}
  bool still_trusted(const ActionRecord& /*record*/) const override { return trusted; }
  std::atomic<bool> trusted{true};
};

TEST(DecodedRecords, AnOverwrittenOrDeletedRecordIsNeverServedFromTheDecode) {
  MemoryStore memory(64 << 20);
  ArtifactStore store(memory);
  ASSERT_TRUE(store.put("key-1", {{"kernel.cubin", "first"}}, "test"));
  auto got = store.get("key-1");
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->files.at(0).data, "first");
  ASSERT_TRUE(store.put("key-1", {{"kernel.cubin", "second"}}, "test"));
  got = store.get("key-1");
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->files.at(0).data, "second");
  ASSERT_TRUE(memory.remove(Area::kAction, "key-1"));
  got = store.get("key-1");
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->has_value());
}

TEST(DecodedRecords, ARecordStoredUnderAnotherKeyIsStillRefused) {
  MemoryStore memory(64 << 20);
  ArtifactStore store(memory);
  const std::string text = record_to_json(record("key-a", std::string(64, 'a')));
  ASSERT_TRUE(memory.put(Area::kAction, "key-a", text));
  ASSERT_TRUE(store.get_record("key-a")); // decoded and kept
  ASSERT_TRUE(memory.put(Area::kAction, "key-b", text));
  auto other = store.get_record("key-b");
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->has_value());
}

TEST(DecodedRecords, TrustIsAskedOnEveryRead) {
  MemoryStore memory(64 << 20);
  SwitchSigner signer;
  ArtifactStore store(memory, &signer);
  ASSERT_TRUE(store.put("key-1", {{"kernel.cubin", "bytes"}}, "test"));
  ASSERT_TRUE(store.get("key-1")->has_value());
  signer.trusted = false;
  EXPECT_FALSE(store.get("key-1")->has_value());
  signer.trusted = true;
  EXPECT_TRUE(store.get("key-1")->has_value());
}

} // namespace
} // namespace kcache::storage
