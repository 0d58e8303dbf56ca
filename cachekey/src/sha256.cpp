#include <kcache/cachekey/sha256.h>

#include <openssl/evp.h>

#include <stdexcept>

namespace kcache::cachekey {
namespace {

// Fetched once: OpenSSL 3 looks the algorithm up on every EVP_sha256() use,
// which cost as much as hashing a graph node (key_bench). Immutable after
// the first call, and never freed (it lives as long as the library).
const EVP_MD* sha256_md() {
  static const EVP_MD* const md = [] {
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched != nullptr ? fetched : EVP_sha256();
  }();
  return md;
}

} // namespace

struct Sha256::Ctx {
  struct Free {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> md{EVP_MD_CTX_new()};
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  // Allocation failure inside OpenSSL is the only way this fails.
  if (!ctx_->md || EVP_DigestInit_ex(ctx_->md.get(), sha256_md(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL: cannot initialise SHA-256");
  }
}
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;
Sha256::~Sha256() = default;

Sha256& Sha256::update(std::string_view bytes) {
  EVP_DigestUpdate(ctx_->md.get(), bytes.data(), bytes.size());
  return *this;
}

Digest Sha256::finish() {
  Digest out{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_->md.get(), out.data(), &len);
  return out;
}

Digest Sha256::of(std::string_view bytes) {
  Digest out{};
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), out.data(), &len, sha256_md(), nullptr);
  return out;
}

std::string to_hex(const Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(digest.size() * 2, '0');
  for (std::size_t i = 0; i < digest.size(); ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xF];
  }
  return out;
}

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}
} // namespace

std::optional<Digest> digest_from_hex(std::string_view hex) {
  Digest out{};
  if (hex.size() != out.size() * 2) {
    return std::nullopt;
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_value(hex[2 * i]);
    const int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return std::nullopt;
    }
    out[i] = static_cast<std::uint8_t>((hi << 4) | lo);
  }
  return out;
}

} // namespace kcache::cachekey
