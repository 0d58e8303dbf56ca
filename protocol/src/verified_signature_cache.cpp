#include "openssl_handles.h"

#include <kcache/protocol/verified_signature_cache.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include <cstring>
#include <memory>

namespace kcache::protocol {

namespace {

// Versioned, so a later layout of the digested bytes never meets this one.
constexpr std::string_view kDigestTag = "kcache.verified-record-cache.v1";

// What an entry costs besides its strings: the map node, the LRU node, the
// entry's members.
constexpr std::size_t kEntryOverhead = 256;

void update_field(EVP_MD_CTX* ctx, std::string_view bytes) {
  std::array<unsigned char, 8> size{};
  std::uint64_t n = bytes.size();
  for (std::size_t i = size.size(); i-- > 0; n >>= 8U) {
    size[i] = static_cast<unsigned char>(n & 0xffU);
  }
  EVP_DigestUpdate(ctx, size.data(), size.size());
  EVP_DigestUpdate(ctx, bytes.data(), bytes.size());
}

std::size_t bytes_of(const VerifiedRecord& r) {
  std::size_t n =
      kEntryOverhead + r.key_id.size() + r.writer.size() + r.producer.size() + r.ns.size() + 32;
  for (const SignedOutput& o : r.outputs) {
    n += sizeof(SignedOutput) + o.name.size() + o.digest.size();
  }
  return n;
}

} // namespace

std::size_t VerifiedSignatureCache::DigestHash::operator()(const Digest& d) const {
  std::size_t h = 0;
  std::memcpy(&h, d.data(), sizeof(h));
  return h;
}

VerifiedSignatureCache::Digest VerifiedSignatureCache::digest_of(std::string_view key,
                                                                 std::string_view record_json) {
  Digest out{};
  MdCtxPtr ctx(EVP_MD_CTX_new());
  unsigned int size = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    ERR_clear_error();
    return out; // all zero: find() and insert() skip it
  }
  update_field(ctx.get(), kDigestTag);
  update_field(ctx.get(), key);
  update_field(ctx.get(), record_json);
  if (EVP_DigestFinal_ex(ctx.get(), out.data(), &size) != 1 || size != out.size()) {
    ERR_clear_error();
    return Digest{};
  }
  return out;
}

tl::expected<VerifiedRecord, SignatureError>
VerifiedSignatureCache::verify(std::string_view key, std::string_view record_json,
                               const TrustedKeys& trusted) {
  const Digest digest = digest_of(key, record_json);
  if (auto hit = find(digest, trusted)) {
    return std::move(*hit);
  }
  auto verified = verify_record_json(key, record_json, trusted);
  if (verified) {
    insert(digest, trusted.raw_public_key(verified->key_id), *verified);
  }
  return verified;
}

std::optional<VerifiedRecord> VerifiedSignatureCache::find(const Digest& digest,
                                                           const TrustedKeys& trusted) {
  const std::lock_guard lock(mu_);
  const auto it = entries_.find(digest);
  if (it == entries_.end() || digest == Digest{}) {
    ++misses_;
    return std::nullopt;
  }
  // The exact key that verified the entry must still be trusted under its id.
  const std::string current = trusted.raw_public_key(it->second.record.key_id);
  if (current.empty() || current != it->second.public_key) {
    erase_locked(it);
    ++misses_;
    return std::nullopt;
  }
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  ++hits_;
  return it->second.record;
}

void VerifiedSignatureCache::insert(const Digest& digest, std::string public_key,
                                    const VerifiedRecord& record) {
  const std::size_t bytes = bytes_of(record) + public_key.size();
  if (digest == Digest{} || public_key.empty() || bytes > limits_.max_bytes ||
      limits_.max_entries == 0) {
    return;
  }
  const std::lock_guard lock(mu_);
  if (const auto it = entries_.find(digest); it != entries_.end()) {
    erase_locked(it); // two threads verified the same record at once
  }
  while (!lru_.empty() &&
         (entries_.size() >= limits_.max_entries || bytes_ + bytes > limits_.max_bytes)) {
    erase_locked(entries_.find(lru_.back()));
  }
  lru_.push_front(digest);
  entries_.emplace(digest, Entry{std::move(public_key), record, bytes, lru_.begin()});
  bytes_ += bytes;
}

void VerifiedSignatureCache::erase_locked(
    std::unordered_map<Digest, Entry, DigestHash>::iterator it) {
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

void VerifiedSignatureCache::clear() {
  const std::lock_guard lock(mu_);
  entries_.clear();
  lru_.clear();
  bytes_ = 0;
}

VerifiedSignatureCache::Stats VerifiedSignatureCache::stats() const {
  const std::lock_guard lock(mu_);
  return Stats{hits_, misses_, entries_.size(), bytes_};
}

} // namespace kcache::protocol
