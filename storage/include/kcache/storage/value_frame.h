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
// The raw size is checked before anything is allocated: against the store's
// maximum value size, and against what the payload can decompress to at most,
// so a small hostile frame claiming gigabytes costs nothing.

#include <kcache/cachekey/sha256.h>
#include <kcache/storage/store.h>

#include <string_view>

namespace kcache::storage {

inline constexpr std::size_t kFrameHeaderSize = 56;
// The largest value a store keeps unless configured otherwise (StoreLimits in
// store_factory.h; kcached sets it to its largest request body).
inline constexpr std::uint64_t kDefaultMaxValueSize = 1ULL << 30;

struct FrameOptions {
  // Values below this size are stored uncompressed (zstd gains little there).
  std::size_t compress_min_size = 512;
  int zstd_level = 1; // same ratio as 3 on kernel-like data, 25% faster (storage_bench)
  // Larger values are refused on put (kTooLarge) and larger frames on get (corrupt).
  std::uint64_t max_raw_size = kDefaultMaxValueSize;
};

Bytes encode_frame(std::string_view value, const FrameOptions& options = {});
// Returns the verified raw value, or a kCorrupt error saying what is wrong.
// With `expected`, the value must also be the content of that digest (a CAS
// key): checked against the frame's verified digest, so it costs no hashing.
// A frame whose raw size is over `max_raw_size` is refused before allocating.
Result<Bytes> decode_frame(std::string_view frame, const cachekey::Digest* expected = nullptr,
                           std::uint64_t max_raw_size = kDefaultMaxValueSize);

} // namespace kcache::storage
