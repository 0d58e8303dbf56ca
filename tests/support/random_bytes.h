#pragma once
// Incompressible values that a seed names, so a test can check what it reads
// back without keeping what it wrote.
//
// splitmix64, eight bytes per step: the tests generate hundreds of MiB under
// ASan at -O0, where std::mt19937_64 one byte per call cost 0.25 s per MiB
// (63 s of the full-disk test); this is 6 ms per MiB.

#include <cstdint>
#include <cstring>
#include <string>

namespace kcache::testing {

inline std::string random_bytes(std::size_t size, std::uint64_t seed = 1) {
  std::string out(size, '\0');
  // Each seed starts at an unrelated point of the sequence (seed * G alone
  // would make seed 1's bytes seed 0's shifted by one step).
  std::uint64_t state = (seed ^ 0x632BE59BD9B4E019ULL) * 0xD1B54A32D192ED03ULL;
  for (std::size_t i = 0; i < size; i += 8) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    std::memcpy(out.data() + i, &z, size - i < 8 ? size - i : 8);
  }
  return out;
}

} // namespace kcache::testing
