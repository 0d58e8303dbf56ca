#pragma once
// SHA-256 through OpenSSL's EVP interface, plus hex helpers.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kcache::cachekey {

using Digest = std::array<std::uint8_t, 32>;

// Incremental hasher. Move-only; each instance owns one EVP_MD_CTX.
class Sha256 {
public:
  Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  ~Sha256();

  Sha256& update(std::string_view bytes);
  // Finishes the hash; the hasher must not be used afterwards.
  Digest finish();

  static Digest of(std::string_view bytes);

private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

std::string to_hex(const Digest& digest);
// Parses 64 lowercase or uppercase hex digits.
std::optional<Digest> digest_from_hex(std::string_view hex);

} // namespace kcache::cachekey
