#include "zstd_bound.h"

#include <array>

namespace kcache::storage::detail {
namespace {

constexpr std::uint32_t kZstdMagic = 0xFD2FB528U;
constexpr std::uint64_t kMaxBlockSize = 128ULL << 10;
constexpr std::array<std::size_t, 4> kDictIdBytes = {0, 1, 2, 4};

std::uint32_t le(std::string_view bytes, std::size_t at, std::size_t n) {
  std::uint32_t v = 0;
  for (std::size_t i = n; i-- > 0;) {
    v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  }
  return v;
}

} // namespace

std::optional<std::uint64_t> zstd_decompressed_bound(std::string_view payload) {
  if (payload.size() < 5 || le(payload, 0, 4) != kZstdMagic) {
    return std::nullopt;
  }
  const auto descriptor = static_cast<unsigned char>(payload[4]);
  const unsigned content_size_flag = descriptor >> 6;
  const bool single_segment = ((descriptor >> 5) & 1U) != 0;
  const bool checksum = ((descriptor >> 2) & 1U) != 0;
  std::size_t content_size_bytes = std::array<std::size_t, 4>{0, 2, 4, 8}[content_size_flag];
  if (content_size_flag == 0 && single_segment) {
    content_size_bytes = 1;
  }
  std::size_t at =
      5 + (single_segment ? 0 : 1) + kDictIdBytes[descriptor & 3U] + content_size_bytes;
  std::uint64_t bound = 0;
  for (bool last = false; !last;) {
    if (at + 3 > payload.size()) {
      return std::nullopt;
    }
    const std::uint32_t header = le(payload, at, 3);
    at += 3;
    last = (header & 1U) != 0;
    const std::uint32_t size = header >> 3;
    switch ((header >> 1) & 3U) {
    case 0: // raw: `size` bytes, copied
      at += size;
      bound += size;
      break;
    case 1: // RLE: one byte, repeated `size` times
      at += 1;
      bound += size;
      break;
    case 2: // compressed: `size` bytes in, at most one block out
      at += size;
      bound += kMaxBlockSize;
      break;
    default:
      return std::nullopt;
    }
    if (at > payload.size()) {
      return std::nullopt;
    }
  }
  if (at + (checksum ? 4 : 0) != payload.size()) {
    return std::nullopt; // trailing bytes: a second frame or garbage
  }
  return bound;
}

} // namespace kcache::storage::detail
