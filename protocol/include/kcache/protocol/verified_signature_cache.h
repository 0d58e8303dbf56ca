#pragma once
// A per-process cache of action records whose signature verified (issue 14:
// verification <= 5% of a 64 KiB hit). Ed25519 verification is ~120 us; a
// record that is read again (kcached re-reading Redis, a trainer's repeated
// gets with verify_signatures) is then checked once per process.
//
// No weakening of the check:
// - The entry is found by SHA-256 over the lookup key and the record's exact
//   JSON bytes (length-prefixed). The signed message, the signature and the
//   key id are all functions of those bytes, so an entry binds everything the
//   signature covers; a cryptographic digest, because whoever can write Redis
//   chooses the bytes (a non-crypto hash could be collided on purpose).
// - The entry keeps the raw public key that verified it. A hit counts only
//   while the trusted set still holds that exact key under that id: a key
//   removed from the trusted set (revoked) is never honoured from the cache,
//   and the stale entry is dropped. Owners also clear() when they load a new
//   trusted set.
// - Only successes are cached: a refusal is checked again every time (a key
//   trusted later makes it good).
//
// Bounded by entries and bytes, least recently used first out. Thread-safe.

#include <kcache/protocol/record_signature.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kcache::protocol {

class VerifiedSignatureCache {
public:
  struct Limits {
    std::size_t max_entries = 65536;
    std::size_t max_bytes = std::size_t{32} << 20U;
  };
  struct Stats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    std::size_t entries = 0;
    std::size_t bytes = 0;
  };

  VerifiedSignatureCache() : VerifiedSignatureCache(Limits{}) {}
  explicit VerifiedSignatureCache(Limits limits) : limits_(limits) {}
  VerifiedSignatureCache(const VerifiedSignatureCache&) = delete;
  VerifiedSignatureCache& operator=(const VerifiedSignatureCache&) = delete;

  // verify_record_json(key, record_json, trusted), once per distinct
  // (key, record bytes) while the key that verified it stays trusted.
  tl::expected<VerifiedRecord, SignatureError>
  verify(std::string_view key, std::string_view record_json, const TrustedKeys& trusted);

  // Forgets every entry (a new trusted set was loaded).
  void clear();
  Stats stats() const;

private:
  using Digest = std::array<unsigned char, 32>;
  struct DigestHash {
    // The digest is already uniform: its first bytes are a good bucket hash.
    std::size_t operator()(const Digest& d) const;
  };
  struct Entry {
    std::string public_key; // raw 32 bytes of the key that verified it
    VerifiedRecord record;
    std::size_t bytes = 0;
    std::list<Digest>::iterator lru;
  };

  static Digest digest_of(std::string_view key, std::string_view record_json);
  std::optional<VerifiedRecord> find(const Digest& digest, const TrustedKeys& trusted);
  void insert(const Digest& digest, std::string public_key, const VerifiedRecord& record);
  void erase_locked(std::unordered_map<Digest, Entry, DigestHash>::iterator it);

  const Limits limits_;
  mutable std::mutex mu_;
  std::unordered_map<Digest, Entry, DigestHash> entries_;
  std::list<Digest> lru_; // front: most recently used
  std::size_t bytes_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

} // namespace kcache::protocol
