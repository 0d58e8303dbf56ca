#pragma once
// An unambiguous byte encoding for hashing: every item is a one-byte type tag,
// an 8-byte big-endian length and the payload, so no two different sequences of
// items can produce the same bytes. Every digest in a key is built with it;
// changing it changes every key and must bump kKeySchemaVersion.

#include <kcache/cachekey/sha256.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace kcache::cachekey {

class CanonicalWriter {
public:
  CanonicalWriter& tag(std::string_view label) { return item('T', label); }
  CanonicalWriter& str(std::string_view value) { return item('S', value); }
  CanonicalWriter& u64(std::uint64_t value);
  CanonicalWriter& i64(std::int64_t value);
  CanonicalWriter& boolean(bool value);
  // NaNs are canonicalised to one bit pattern; -0.0 and 0.0 stay distinct
  // because some ops (division, copysign) tell them apart.
  CanonicalWriter& f64(double value);
  CanonicalWriter& digest(const Digest& value);
  // Announces a list of `count` items that follow.
  CanonicalWriter& list(std::uint64_t count);

  const std::string& bytes() const { return out_; }
  Digest sha256() const { return Sha256::of(out_); }

private:
  CanonicalWriter& item(char type, std::string_view payload);
  void append_u64(std::uint64_t value);
  std::string out_;
};

} // namespace kcache::cachekey
