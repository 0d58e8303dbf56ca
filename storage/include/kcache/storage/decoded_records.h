#pragma once
// Action records already decoded, by their exact stored text. Decoding a
// record (JSON, its manifest, its signature block) was the largest cost of a
// cache hit; record_from_json is a pure function of the bytes, so the same
// bytes decode to the same record and the parse can be skipped. Only the
// decode is cached: the caller still checks the key, the signer's trust and
// everything else on every read, and shared tiers still verify signatures
// when they hand the bytes out. Bounded by bytes; when full it starts over.
// Thread-safe.

#include <kcache/storage/artifact_store.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kcache::storage {

class DecodedRecords {
public:
  explicit DecodedRecords(std::size_t capacity_bytes = std::size_t{16} << 20)
      : capacity_(capacity_bytes) {}

  // record_from_json(text), from the cache when these exact bytes were decoded before.
  Result<ActionRecord> decode(std::string_view text);

  std::size_t entries() const;

private:
  // Heterogeneous lookup: a string_view finds its string without a copy.
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const ActionRecord>, Hash, std::equal_to<>>
      by_text_;
  std::size_t bytes_ = 0;
};

} // namespace kcache::storage
