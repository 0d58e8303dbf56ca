// `kcache token new`: mints a bearer token for kcached's config. The token is
// 32 random bytes (256 bits) from OpenSSL's CSPRNG, base64url without padding
// (43 characters, safe in an HTTP header); the config keeps only its SHA-256.

#include "cli.h"

#include <kcache/cachekey/sha256.h>

#include <openssl/rand.h>

#include <array>
#include <cstdio>
#include <string>

namespace kcache::cli {

namespace {

std::string base64url(const unsigned char* data, std::size_t size) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::uint32_t bits = 0;
  int count = 0;
  for (std::size_t i = 0; i < size; ++i) {
    bits = (bits << 8) | data[i];
    count += 8;
    while (count >= 6) {
      count -= 6;
      out += kAlphabet[(bits >> count) & 0x3f];
    }
  }
  if (count > 0) {
    out += kAlphabet[(bits << (6 - count)) & 0x3f];
  }
  return out;
}

} // namespace

int cmd_token_new(Cli& /*cli*/) {
  std::array<unsigned char, 32> random{};
  if (RAND_bytes(random.data(), static_cast<int>(random.size())) != 1) {
    std::fputs("kcache: OpenSSL's random generator failed\n", stderr);
    return kFailed;
  }
  const std::string token = base64url(random.data(), random.size());
  std::printf("token:  %s\n", token.c_str());
  std::printf("# for kcached's config ([[tokens]]); give the token to its holder only:\n");
  std::printf("sha256 = \"%s\"\n", cachekey::to_hex(cachekey::Sha256::of(token)).c_str());
  return kOk;
}

} // namespace kcache::cli
