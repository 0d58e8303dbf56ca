#include "test_bytes.h"

#include <kcache/storage/artifact_store.h>
#include <kcache/storage/framed_store.h>
#include <kcache/storage/memory_store.h>

#include <gtest/gtest.h>

namespace kcache::storage {
namespace {

cachekey::KeyManifest manifest(const std::string& salt) {
  return *cachekey::KeyBuilder()
              .ns("art")
              .graph_digest(std::string(64, 'e'))
              .hardware("cuda:sm_90a")
              .salt(salt)
              .build();
}

TEST(ArtifactStore, PutGetAndIdenticalBlobsStoredOnce) {
  MemoryStore memory(64 << 20);
  ArtifactStore store(memory);
  const std::string cubin = kcache::testing::random_bytes(50000);
  auto a = store.put(manifest("a"), {{"kernel.cubin", cubin}, {"log.txt", "ok"}}, "test",
                     {{"compile_ms", "12"}});
  auto b = store.put(manifest("b"), {{"kernel.cubin", cubin}}, "test");
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->outputs[0].digest, b->outputs[0].digest);
  ListOptions cas;
  cas.area = Area::kCas;
  EXPECT_EQ(memory.list(cas)->size(), 2U); // cubin once, plus the log

  auto got = store.get(manifest("a").key());
  ASSERT_TRUE(got.has_value() && got->has_value());
  const Artifact& art = **got;
  EXPECT_EQ(art.record.key, manifest("a").key());
  EXPECT_EQ(art.record.manifest, manifest("a"));
  EXPECT_EQ(art.record.metadata.at("compile_ms"), "12");
  ASSERT_EQ(art.files.size(), 2U);
  EXPECT_EQ(art.files[0].name, "kernel.cubin");
  EXPECT_EQ(art.files[0].data, cubin);
  EXPECT_FALSE(store.get(manifest("zzz").key())->has_value());
}

TEST(ArtifactStore, ClientKeysWithoutManifest) {
  MemoryStore memory(64 << 20);
  ArtifactStore store(memory);
  auto rec =
      store.put("fxgraph-abc123", {{"graph.pkl", "pickled"}}, "rank0", {{"hash_details", "x"}});
  ASSERT_TRUE(rec.has_value()) << rec.error().message;
  auto got = store.get("fxgraph-abc123");
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_FALSE((*got)->record.manifest.has_value());
  EXPECT_EQ((*got)->files.at(0).data, "pickled");
  EXPECT_FALSE(store.put("bad key/with slash", {}, "x").has_value());
  // A manifest that does not hash to the key is refused.
  ActionRecord wrong;
  wrong.key = "kc1-" + std::string(64, '0');
  wrong.manifest = manifest("a");
  wrong.producer = "x";
  EXPECT_FALSE(store.put(wrong, {}).has_value());
}

TEST(ArtifactStore, MissingOrMismatchedBlobIsAMissNeverAPartialArtifact) {
  MemoryStore memory(64 << 20);
  ArtifactStore store(memory);
  auto rec = store.put(manifest("a"), {{"k.cubin", "binary"}}, "test");
  ASSERT_TRUE(rec.has_value());
  const std::string digest = rec->outputs[0].digest;
  ASSERT_TRUE(memory.put(Area::kCas, digest, "other size").has_value());
  EXPECT_FALSE(store.get(rec->key)->has_value()) << "record and blob disagree on the size";
  ASSERT_TRUE(memory.remove(Area::kCas, digest).has_value());
  EXPECT_FALSE(store.get(rec->key)->has_value()) << "a missing blob is a miss";
}

// A shared tier may hold a well-formed frame whose content is not the blob its
// CAS key names (written by someone else). The frame's digest must match the key.
TEST(ArtifactStore, FrameUnderAnotherBlobsNameIsRefused) {
  FramedStore framed(std::make_unique<MemoryStore>(64 << 20));
  ArtifactStore store(framed);
  auto rec = store.put(manifest("a"), {{"k.cubin", "genuine"}}, "test");
  ASSERT_TRUE(rec.has_value());
  const std::string digest = rec->outputs[0].digest;
  ASSERT_TRUE(framed.inner().put(Area::kCas, digest, encode_frame("evil!!!")).has_value());
  EXPECT_FALSE(store.get(rec->key)->has_value());
  EXPECT_EQ(framed.counters().corrupt, 1U);
  EXPECT_FALSE(*framed.inner().contains(Area::kCas, digest)) << "deleted, like any corrupt value";
}

TEST(ArtifactStore, CorruptRecordIsAMissAndDeleted) {
  MemoryStore memory(64 << 20);
  ArtifactStore store(memory);
  const std::string key = manifest("a").key();
  ASSERT_TRUE(memory.put(Area::kAction, key, "{\"key\": 5}").has_value());
  EXPECT_FALSE(store.get(key)->has_value());
  EXPECT_FALSE(*memory.contains(Area::kAction, key));
  // A valid record stored under a different key is not served either.
  auto rec = store.put(manifest("b"), {}, "test");
  ASSERT_TRUE(rec.has_value());
  ASSERT_TRUE(memory.put(Area::kAction, key, record_to_json(*rec)).has_value());
  EXPECT_FALSE(store.get_record(key)->has_value());
}

} // namespace
} // namespace kcache::storage
