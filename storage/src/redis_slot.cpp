// Redis Cluster key -> hash slot, as the cluster spec defines it.
#include <kcache/storage/redis_client.h>

#include <array>

namespace kcache::storage {
namespace {

// CRC16-XMODEM (poly 0x1021, init 0, no reflection), table-driven.
constexpr std::array<std::uint16_t, 256> make_table() {
  std::array<std::uint16_t, 256> table{};
  for (unsigned i = 0; i < 256; ++i) {
    auto crc = static_cast<std::uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<std::uint16_t>((crc & 0x8000U) != 0 ? (crc << 1) ^ 0x1021U : crc << 1);
    }
    table[i] = crc;
  }
  return table;
}
constexpr std::array<std::uint16_t, 256> kTable = make_table();

} // namespace

std::uint16_t redis_crc16(std::string_view data) {
  std::uint16_t crc = 0;
  for (const char c : data) {
    const auto byte = static_cast<unsigned char>(c);
    crc = static_cast<std::uint16_t>((crc << 8) ^ kTable[((crc >> 8) ^ byte) & 0xFFU]);
  }
  return crc;
}

std::uint16_t redis_hash_slot(std::string_view key) {
  // Only the part between the first '{' and the first '}' after it, when
  // that part is not empty ("{}" hashes the whole key).
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<std::uint16_t>(redis_crc16(key) & 0x3FFFU);
}

} // namespace kcache::storage
