#pragma once
// Deterministic test payloads: incompressible (random) and compressible.

#include "random_bytes.h"

#include <cstdint>
#include <string>

namespace kcache::testing {

inline std::string compressible_bytes(std::size_t n) {
  std::string out;
  out.reserve(n);
  while (out.size() < n) {
    out += "ld.global.f32 %f1, [%rd1]; fma.rn.f32 %f2, %f1, %f3, %f4;\n";
  }
  out.resize(n);
  return out;
}

} // namespace kcache::testing

namespace kcache::testing {

// A value frame as issue 13's attacker built it: the 56-byte header and a
// 20-byte zstd payload (an empty raw block and two RLE blocks: 256 KiB at
// most) whose frame header and zstd content size both claim `claimed` bytes.
// `zstd_claimed` overrides the zstd frame's own content size.
inline std::string hostile_frame(std::uint32_t claimed, std::uint64_t frame_claimed) {
  auto le = [](std::uint64_t v, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) {
      out += static_cast<char>((v >> (8 * i)) & 0xFF);
    }
    return out;
  };
  std::string payload = le(0xFD2FB528U, 4); // zstd magic
  payload += '\xa0';                        // single segment, 4-byte content size
  payload += le(claimed, 4);
  payload += le(0, 3);                                     // raw block of 0 bytes
  payload += le((131072U << 3) | (1U << 1), 3) + "x";      // RLE block, 128 KiB
  payload += le((131072U << 3) | (1U << 1) | 1U, 3) + "x"; // last RLE block, 128 KiB
  std::string frame = "KCVF";
  frame += '\x01'; // version
  frame += '\x01'; // zstd
  frame += le(0, 2);
  frame += le(frame_claimed, 8);
  frame += le(payload.size(), 8);
  frame += std::string(32, '\0'); // the digest is never reached
  return frame + payload;
}

} // namespace kcache::testing
