#pragma once
// Deterministic test payloads: incompressible (random) and compressible.

#include <cstdint>
#include <random>
#include <string>

namespace kcache::testing {

inline std::string random_bytes(std::size_t n, std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t v = rng();
    for (std::size_t j = 0; j < 8 && i + j < n; ++j) {
      out[i + j] = static_cast<char>((v >> (8 * j)) & 0xFF);
    }
  }
  return out;
}

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
