#include "zstd_bound.h"

#include <kcache/cachekey/sha256.h>
#include <kcache/storage/value_frame.h>

#include <zstd.h>

#include <cstring>

namespace kcache::storage {
namespace {

constexpr char kMagic[4] = {'K', 'C', 'V', 'F'};
constexpr std::uint8_t kVersion = 1;
constexpr std::uint8_t kCompressionNone = 0;
constexpr std::uint8_t kCompressionZstd = 1;

void put_u64_le(char* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  }
}

std::uint64_t get_u64_le(const char* in) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(in[i]);
  }
  return v;
}

tl::unexpected<StoreError> corrupt(std::string what) {
  return tl::unexpected(
      StoreError{StoreError::Code::kCorrupt, "corrupt value: " + std::move(what)});
}

} // namespace

Bytes encode_frame(std::string_view value, const FrameOptions& options) {
  Bytes frame(kFrameHeaderSize, '\0');
  std::uint8_t compression = kCompressionNone;
  if (value.size() >= options.compress_min_size) {
    frame.resize(kFrameHeaderSize + ZSTD_compressBound(value.size()));
    const std::size_t n =
        ZSTD_compress(frame.data() + kFrameHeaderSize, frame.size() - kFrameHeaderSize,
                      value.data(), value.size(), options.zstd_level);
    // Keep the compressed form only when it saves at least 1/16.
    if (ZSTD_isError(n) == 0 && n + value.size() / 16 < value.size()) {
      frame.resize(kFrameHeaderSize + n);
      compression = kCompressionZstd;
    }
  }
  if (compression == kCompressionNone) {
    frame.resize(kFrameHeaderSize);
    frame.append(value);
  }
  std::memcpy(frame.data(), kMagic, 4);
  frame[4] = static_cast<char>(kVersion);
  frame[5] = static_cast<char>(compression);
  put_u64_le(frame.data() + 8, value.size());
  put_u64_le(frame.data() + 16, frame.size() - kFrameHeaderSize);
  const cachekey::Digest digest = cachekey::Sha256::of(value);
  std::memcpy(frame.data() + 24, digest.data(), digest.size());
  return frame;
}

Result<Bytes> decode_frame(std::string_view frame, const cachekey::Digest* expected,
                           std::uint64_t max_raw_size) {
  if (frame.size() < kFrameHeaderSize) {
    return corrupt("shorter than the frame header (" + std::to_string(frame.size()) + " bytes)");
  }
  if (std::memcmp(frame.data(), kMagic, 4) != 0) {
    return corrupt("bad magic");
  }
  if (static_cast<std::uint8_t>(frame[4]) != kVersion) {
    return corrupt("unknown frame version " + std::to_string(static_cast<std::uint8_t>(frame[4])));
  }
  const auto compression = static_cast<std::uint8_t>(frame[5]);
  const std::uint64_t raw_size = get_u64_le(frame.data() + 8);
  const std::uint64_t payload_size = get_u64_le(frame.data() + 16);
  if (payload_size != frame.size() - kFrameHeaderSize) {
    return corrupt("payload size " + std::to_string(payload_size) + " but " +
                   std::to_string(frame.size() - kFrameHeaderSize) + " bytes present");
  }
  if (raw_size > max_raw_size) {
    return corrupt("raw size " + std::to_string(raw_size) + " over the limit of " +
                   std::to_string(max_raw_size));
  }
  const std::string_view payload = frame.substr(kFrameHeaderSize);
  Bytes raw;
  if (compression == kCompressionNone) {
    if (raw_size != payload_size) {
      return corrupt("raw and payload sizes differ in an uncompressed frame");
    }
    raw.assign(payload);
  } else if (compression == kCompressionZstd) {
    // Both read only zstd's headers: a frame that cannot hold raw_size bytes
    // is refused before the buffer is allocated.
    if (ZSTD_getFrameContentSize(payload.data(), payload.size()) != raw_size) {
      return corrupt("zstd frame's content size is not the recorded raw size");
    }
    const std::optional<std::uint64_t> bound = detail::zstd_decompressed_bound(payload);
    if (!bound || *bound < raw_size) {
      return corrupt("zstd payload cannot decompress to the recorded raw size " +
                     std::to_string(raw_size));
    }
    raw.resize(raw_size);
    const std::size_t n = ZSTD_decompress(raw.data(), raw.size(), payload.data(), payload.size());
    if (ZSTD_isError(n) != 0 || n != raw_size) {
      return corrupt("zstd payload does not decompress to the recorded size");
    }
  } else {
    return corrupt("unknown compression " + std::to_string(compression));
  }
  const cachekey::Digest digest = cachekey::Sha256::of(raw);
  if (std::memcmp(frame.data() + 24, digest.data(), digest.size()) != 0) {
    return corrupt("SHA-256 mismatch");
  }
  if (expected != nullptr && *expected != digest) {
    return corrupt("content is not the blob its key names");
  }
  return raw;
}

} // namespace kcache::storage
