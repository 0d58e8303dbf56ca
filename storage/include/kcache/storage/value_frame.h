#pragma once
// The frame every persisted value carries, verified on every read:
//
//   offset size  field
//        0    4  magic "KCVF"
//        4    1  format version (1)
//        5    1  compression (0 none, 1 zstd)
//        6    2  reserved, zero
//        8    8  raw size, little-endian
//       16    8  payload size, little-endian
//       24   32  SHA-256 of the raw (uncompressed) value
//       56    -  payload
//
// Any mismatch (magic, version, sizes, decompression, digest) is a decode error.

#include <kcache/cachekey/sha256.h>
#include <kcache/storage/store.h>

#include <string_view>

namespace kcache::storage {

inline constexpr std::size_t kFrameHeaderSize = 56;
// Refuse to decompress into more than this (a corrupt size must not OOM us).
inline constexpr std::uint64_t kMaxFrameRawSize = 4ULL << 30;

struct FrameOptions {
  // Values below this size are stored uncompressed (zstd gains little there).
  std::size_t compress_min_size = 512;
  int zstd_level = 1; // same ratio as 3 on kernel-like data, 25% faster (storage_bench)
};

Bytes encode_frame(std::string_view value, const FrameOptions& options = {});
// Returns the verified raw value, or a kCorrupt error saying what is wrong.
// With `expected`, the value must also be the content of that digest (a CAS
// key): checked against the frame's verified digest, so it costs no hashing.
Result<Bytes> decode_frame(std::string_view frame, const cachekey::Digest* expected = nullptr);

} // namespace kcache::storage
