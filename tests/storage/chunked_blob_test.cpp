// Large blobs stored as chunks (chunked_blob.h): written above the threshold,
// read back chunk by chunk, every chunk and the whole blob checked.

#include "../support/redis_server.h"
#include "../support/temp_dir.h"
#include "test_bytes.h"

#include <kcache/cachekey/sha256.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/framed_store.h>
#include <kcache/storage/maintenance.h>
#include <kcache/storage/memory_store.h>
#include <kcache/storage/redis_store.h>
#include <kcache/storage/rocksdb_store.h>

#include <gtest/gtest.h>

namespace kcache::storage {
namespace {

std::string hex(std::string_view bytes) {
  return cachekey::to_hex(cachekey::Sha256::of(bytes));
}

// Every piece a reader hands out, joined; or its error.
Result<std::string> drain(BlobReader reader, std::size_t* largest_piece = nullptr) {
  std::string out;
  while (true) {
    auto piece = reader.next();
    if (!piece) {
      return tl::unexpected(piece.error());
    }
    if (!piece->has_value()) {
      return out;
    }
    if (largest_piece != nullptr) {
      *largest_piece = std::max(*largest_piece, (*piece)->size());
    }
    out.append(**piece);
  }
}

std::size_t cas_entries(Store& store) {
  ListOptions cas;
  cas.area = Area::kCas;
  return store.list(cas)->size();
}

TEST(ChunkedBlob, LargeBlobsAreStoredAsChunksAndReadBackPieceByPiece) {
  MemoryStore memory(256 << 20);
  ArtifactStore store(memory);
  const std::string big = kcache::testing::random_bytes(5 * kChunkSize + 12345, 7);
  auto put = store.put("kc-large", {{"big.bin", big}, {"log.txt", "ok"}}, "test");
  ASSERT_TRUE(put.has_value()) << put.error().message;
  const OutputRef& out = put->outputs[0];
  EXPECT_EQ(out.digest, hex(big)); // the record names the whole blob
  EXPECT_EQ(out.size, big.size());
  ASSERT_EQ(out.chunks.size(), 6U);
  EXPECT_EQ(out.chunks[0].digest, hex(std::string_view(big).substr(0, kChunkSize)));
  EXPECT_EQ(out.chunks[5].size, 12345U);
  EXPECT_TRUE(put->outputs[1].chunks.empty()); // small files are stored whole
  EXPECT_EQ(cas_entries(memory), 7U);          // six chunks and the log; no whole copy
  EXPECT_FALSE(*memory.contains(Area::kCas, out.digest));

  std::size_t largest = 0;
  auto streamed = drain(store.reader(out), &largest);
  ASSERT_TRUE(streamed.has_value()) << streamed.error().message;
  EXPECT_EQ(*streamed, big);
  EXPECT_EQ(largest, kChunkSize); // one chunk held at a time

  auto got = store.get("kc-large"); // assembled for callers that need the bytes
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ((*got)->files[0].data, big);
  EXPECT_EQ((*got)->files[1].data, "ok");

  // The chunk list survives the record's JSON.
  auto parsed = record_from_json((*got)->record_json);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  EXPECT_EQ(parsed->outputs, put->outputs);

  // Stored again: the chunks are found, not written twice.
  ASSERT_TRUE(store.put("kc-large-2", {{"copy.bin", big}}, "test").has_value());
  EXPECT_EQ(cas_entries(memory), 7U);
}

TEST(ChunkedBlob, BlobsAtTheThresholdAndOldWholeEntriesReadAsBefore) {
  MemoryStore memory(256 << 20);
  ArtifactStore store(memory);
  const std::string edge = kcache::testing::random_bytes(kChunkThreshold, 3);
  auto put = store.put("kc-edge", {{"edge.bin", edge}}, "test");
  ASSERT_TRUE(put.has_value());
  EXPECT_TRUE(put->outputs[0].chunks.empty());
  EXPECT_TRUE(*memory.contains(Area::kCas, hex(edge)));

  // A large blob stored whole (before chunking existed) stays readable.
  const std::string old = kcache::testing::random_bytes(3 * kChunkSize, 4);
  ASSERT_TRUE(memory.put(Area::kCas, hex(old), old).has_value());
  ActionRecord record;
  record.key = "kc-old";
  record.outputs.push_back({"old.bin", hex(old), old.size(), {}});
  ASSERT_TRUE(store.put_record(record).has_value());
  auto got = store.get("kc-old");
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ((*got)->files[0].data, old);
  auto streamed = drain(store.reader((*got)->record.outputs[0]));
  ASSERT_TRUE(streamed.has_value());
  EXPECT_EQ(*streamed, old);
}

TEST(ChunkedBlob, RecordsWhoseChunksDisagreeWithTheirSizeAreCorrupt) {
  const std::string json = R"({"key":"kc-x","outputs":[{"name":"a","digest":")" +
                           std::string(64, 'a') + R"(","size":10,"chunks":[{"digest":")" +
                           std::string(64, 'b') + R"(","size":9}]}]})";
  EXPECT_FALSE(record_from_json(json).has_value());
}

// On Redis (a real redis-server): no value larger than a chunk and its frame.
TEST(ChunkedBlob, RedisKeepsNoValueLargerThanAChunk) {
  kcache::testing::RedisServer server;
  RedisOptions options;
  options.port = server.port();
  options.ns = "chunks";
  FramedStore redis(std::make_unique<RedisStore>(options));
  ArtifactStore store(redis);
  const std::string big = kcache::testing::random_bytes(6 * kChunkSize, 11);
  auto put = store.put("kc-redis", {{"big.bin", big}}, "test");
  ASSERT_TRUE(put.has_value()) << put.error().message;
  EXPECT_EQ(put->outputs[0].chunks.size(), 6U);
  ListOptions cas;
  cas.area = Area::kCas;
  auto listed = redis.list(cas);
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->size(), 6U);
  for (const ObjectInfo& info : *listed) {
    EXPECT_LE(info.size, kChunkSize + 1024) << info.key;
  }
  auto got = store.get("kc-redis");
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ((*got)->files[0].data, big);
}

// A chunk corrupted on disk: the framed tier drops it, the read fails before
// the last piece, ArtifactStore::get is a miss, and verify reports the record.
TEST(ChunkedBlob, ACorruptChunkInRocksDbFailsTheReadNeverReturnsWrongBytes) {
  kcache::testing::TempDir dir;
  RocksDbOptions options;
  options.path = dir.str();
  auto opened = RocksDbStore::open(options);
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  RocksDbStore* raw = opened->get();
  FramedStore framed(std::move(*opened));
  ArtifactStore store(framed);
  const std::string big = kcache::testing::random_bytes(4 * kChunkSize, 9);
  auto put = store.put("kc-rot", {{"big.bin", big}}, "test");
  ASSERT_TRUE(put.has_value()) << put.error().message;
  const ChunkRef& victim = put->outputs[0].chunks[2];
  auto frame = raw->get(Area::kCas, victim.digest);
  ASSERT_TRUE(frame.has_value() && frame->has_value());
  std::string flipped = **frame;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x40);
  ASSERT_TRUE(raw->put(Area::kCas, victim.digest, flipped).has_value());

  BlobReader reader = store.reader(put->outputs[0]);
  std::uint64_t handed_out = 0;
  Result<std::optional<std::string_view>> piece;
  while ((piece = reader.next()) && piece->has_value()) {
    handed_out += (*piece)->size();
  }
  ASSERT_FALSE(piece.has_value()) << "the blob read to its end";
  EXPECT_EQ(piece.error().code, StoreError::Code::kCorrupt);
  EXPECT_EQ(handed_out, 2 * kChunkSize);   // the chunks before the corrupt one
  EXPECT_FALSE(reader.next().has_value()); // and it stays failed

  auto got = store.get("kc-rot");
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->has_value()); // a miss, never the wrong bytes
  auto report = verify_entries(framed, {Area::kAction, "", /*repair=*/false});
  ASSERT_TRUE(report.has_value());
  ASSERT_EQ(report->problems.size(), 1U); // the dropped chunk leaves the record incomplete
}

// The whole blob's digest is checked too: chunks that are each sound but do
// not make up the blob (a memory tier holds no frames) fail before the end.
TEST(ChunkedBlob, ChunksThatDoNotMakeUpTheBlobFailBeforeTheLastPiece) {
  MemoryStore memory(256 << 20);
  const std::string big = kcache::testing::random_bytes(3 * kChunkSize, 5);
  auto chunks = put_blob(memory, hex(big), big);
  ASSERT_TRUE(chunks.has_value());
  ASSERT_EQ(chunks->size(), 3U);
  const std::string other = kcache::testing::random_bytes(kChunkSize, 6);
  ASSERT_TRUE(memory.put(Area::kCas, (*chunks)[2].digest, other).has_value());
  auto read = drain(BlobReader(memory, hex(big), big.size(), *chunks));
  ASSERT_FALSE(read.has_value());
  EXPECT_EQ(read.error().code, StoreError::Code::kCorrupt);
}

} // namespace
} // namespace kcache::storage
