#include "test_bytes.h"

#include <kcache/storage/value_frame.h>

#include <gtest/gtest.h>

namespace kcache::storage {
namespace {

using kcache::testing::compressible_bytes;
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

} // namespace
} // namespace kcache::storage
