#include "test_bytes.h"

#include <kcache/storage/framed_store.h>
#include <kcache/storage/memory_store.h>
#include <kcache/storage/value_frame.h>

#include <gtest/gtest.h>

#include <chrono>

namespace kcache::storage {
namespace {

using kcache::testing::compressible_bytes;
using kcache::testing::hostile_frame;
using kcache::testing::random_bytes;

TEST(ValueFrame, RoundTrips) {
  for (const std::string& value : {std::string(), std::string("x"), random_bytes(1000),
                                   compressible_bytes(1 << 20), random_bytes(1 << 20)}) {
    const Bytes frame = encode_frame(value);
    auto back = decode_frame(frame);
    ASSERT_TRUE(back.has_value()) << back.error().message;
    EXPECT_EQ(*back, value);
  }
}

TEST(ValueFrame, CompressesOnlyWhenItPays) {
  const std::string text = compressible_bytes(64 << 10);
  EXPECT_LT(encode_frame(text).size(), text.size() / 4);
  const std::string noise = random_bytes(64 << 10);
  EXPECT_EQ(encode_frame(noise).size(), noise.size() + kFrameHeaderSize);
}

// The guarantee: decode never returns bytes other than those encoded. In an
// uncompressed frame every flipped bit must fail; in a zstd payload a flip may
// land on a bit the decoder ignores, and then the output is still the original.
TEST(ValueFrame, NoCorruptionEverYieldsDifferentBytes) {
  for (const std::string& value : {random_bytes(4096), compressible_bytes(4096)}) {
    const Bytes frame = encode_frame(value);
    const bool compressed = frame.size() < value.size();
    int detected = 0, probes = 0;
    for (std::size_t at = 0; at < frame.size(); at += std::max<std::size_t>(1, frame.size() / 97)) {
      if (at >= 6 && at < 8) {
        continue; // reserved bytes are not interpreted
      }
      Bytes bad = frame;
      bad[at] = static_cast<char>(bad[at] ^ 0x10);
      auto decoded = decode_frame(bad);
      ++probes;
      if (!decoded) {
        ++detected;
        EXPECT_EQ(decoded.error().code, StoreError::Code::kCorrupt);
        continue;
      }
      EXPECT_TRUE(compressed) << "flip at " << at << " of an uncompressed frame went unnoticed";
      EXPECT_EQ(*decoded, value) << "flip at " << at << " produced different bytes";
    }
    EXPECT_GE(detected, probes - 2);
  }
}

TEST(ValueFrame, TruncationAndGarbage) {
  const Bytes frame = encode_frame(random_bytes(1000));
  EXPECT_FALSE(decode_frame(frame.substr(0, frame.size() - 1)).has_value());
  EXPECT_FALSE(decode_frame(frame.substr(0, 10)).has_value());
  EXPECT_FALSE(decode_frame("").has_value());
  EXPECT_FALSE(decode_frame(std::string(100, 'K')).has_value());
}

TEST(ValueFrame, HugeClaimedSizeIsRefusedWithoutAllocating) {
  Bytes frame = encode_frame(compressible_bytes(4096));
  for (int i = 0; i < 8; ++i) {
    frame[8 + i] = '\xff'; // raw size = 2^64 - 1
  }
  auto decoded = decode_frame(frame);
  ASSERT_FALSE(decoded.has_value());
  EXPECT_NE(decoded.error().message.find("over the limit"), std::string::npos);
}

// Issue 13: a 76-byte Redis value claiming 4 GiB - 1 took 1.8 s and 4.1 GB
// of RSS to read. It is refused by the configured maximum first...
TEST(ValueFrame, HostileFrameIsRefusedByTheConfiguredMaximum) {
  const Bytes frame = hostile_frame(0xFFFFFFFFU, 0xFFFFFFFFU);
  EXPECT_EQ(frame.size(), 76U);
  auto decoded = decode_frame(frame);
  ASSERT_FALSE(decoded.has_value());
  EXPECT_EQ(decoded.error().code, StoreError::Code::kCorrupt);
  EXPECT_NE(decoded.error().message.find("over the limit of 1073741824"), std::string::npos)
      << decoded.error().message;
  auto small_max = decode_frame(encode_frame(compressible_bytes(4096)), nullptr, 4095);
  ASSERT_FALSE(small_max.has_value());
  EXPECT_NE(small_max.error().message.find("over the limit of 4095"), std::string::npos);
  EXPECT_TRUE(decode_frame(encode_frame(compressible_bytes(4096)), nullptr, 4096).has_value());
}

// ...and, under any maximum, by what its blocks can hold, before allocating.
TEST(ValueFrame, HostileFrameIsRefusedByItsBlocksBeforeAllocating) {
  const auto start = std::chrono::steady_clock::now();
  auto decoded = decode_frame(hostile_frame(0xFFFFFFFFU, 0xFFFFFFFFU), nullptr, 8ULL << 30);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(decoded.has_value());
  EXPECT_NE(decoded.error().message.find("cannot decompress to the recorded raw size"),
            std::string::npos)
      << decoded.error().message;
  // Zero-filling 4 GiB takes seconds; reading two block headers, microseconds.
  EXPECT_LT(took, std::chrono::milliseconds(50));
}

TEST(ValueFrame, DecompressedSizeOtherThanDeclaredIsCorrupt) {
  // The zstd header and the frame header disagree.
  auto disagree = decode_frame(hostile_frame(262144, 1000));
  ASSERT_FALSE(disagree.has_value());
  EXPECT_NE(disagree.error().message.find("content size"), std::string::npos);
  // Both say 200,000 (the blocks could hold it) but 262,144 bytes come out.
  auto longer = decode_frame(hostile_frame(200000, 200000));
  ASSERT_FALSE(longer.has_value());
  EXPECT_NE(longer.error().message.find("does not decompress to the recorded size"),
            std::string::npos)
      << longer.error().message;
  // Sizes right, content not the digest's: still corrupt, never returned.
  auto exact = decode_frame(hostile_frame(262144, 262144));
  ASSERT_FALSE(exact.has_value());
  EXPECT_NE(exact.error().message.find("SHA-256"), std::string::npos) << exact.error().message;
}

TEST(ValueFrame, TrailingBytesAfterTheZstdFrameAreCorrupt) {
  Bytes frame = encode_frame(compressible_bytes(64 << 10));
  ASSERT_EQ(frame[5], '\x01') << "expected a compressed frame";
  frame += "junk";
  for (int i = 0; i < 8; ++i) { // keep the payload size consistent
    frame[16 + i] = static_cast<char>(((frame.size() - kFrameHeaderSize) >> (8 * i)) & 0xFF);
  }
  EXPECT_FALSE(decode_frame(frame).has_value());
}

TEST(FramedStore, AHostileFrameIsAMissCountedAndDeleted) {
  FramedStore store(std::make_unique<MemoryStore>(64ULL << 20));
  ASSERT_TRUE(store.inner().put(Area::kAction, "k", hostile_frame(0xFFFFFFFFU, 0xFFFFFFFFU)));
  auto got = store.get(Area::kAction, "k");
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(store.counters().corrupt, 1U);
  EXPECT_FALSE(*store.inner().contains(Area::kAction, "k"));
}

TEST(FramedStore, TheMaximumValueSizeHoldsOnPutAndGet) {
  FrameOptions options;
  options.max_raw_size = 1000;
  FramedStore store(std::make_unique<MemoryStore>(64ULL << 20), options);
  auto put = store.put(Area::kCas, "big", random_bytes(1001));
  ASSERT_FALSE(put.has_value());
  EXPECT_EQ(put.error().code, StoreError::Code::kTooLarge);
  ASSERT_TRUE(store.put(Area::kCas, "fits", random_bytes(1000)).has_value());
  // Written by a node with a larger maximum: refused as corrupt, never allocated.
  ASSERT_TRUE(store.inner().put(Area::kAction, "other", encode_frame(random_bytes(1001))));
  EXPECT_FALSE(store.get(Area::kAction, "other")->has_value());
  EXPECT_EQ(store.counters().corrupt, 1U);
}

} // namespace
} // namespace kcache::storage
