#pragma once
// Incompressible values that a seed names, so a test can check what it reads
// back without keeping what it wrote.

#include <cstdint>
#include <random>
#include <string>

namespace kcache::testing {

inline std::string random_bytes(std::size_t size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(size, '\0');
  for (char& ch : out) {
    ch = static_cast<char>(rng() & 0xFF);
  }
  return out;
}

} // namespace kcache::testing
