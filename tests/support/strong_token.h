#pragma once
// Bearer tokens for tests: kcached refuses tokens under 128 bits of
// estimated entropy (service/tokens.h), so tests use these: 64 hex digits,
// the same for the same name in every run (readable in a failing test's log).

#include <cstdint>
#include <string>
#include <string_view>

namespace kcache::testing {

inline std::string strong_token(std::string_view name) {
  // FNV-1a of the name seeds splitmix64: no crypto needed, only spread.
  std::uint64_t state = 1469598103934665603ULL;
  for (const char c : name) {
    state = (state ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int word = 0; word < 4; ++word) {
    state += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    for (int i = 0; i < 16; ++i) {
      out += kHex[(z >> (60 - 4 * i)) & 0xf];
    }
  }
  return out;
}

} // namespace kcache::testing
