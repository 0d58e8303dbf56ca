#include <kcache/cachekey/canonical_writer.h>

#include <bit>
#include <cmath>
#include <limits>

namespace kcache::cachekey {

void CanonicalWriter::append_u64(std::uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out_.push_back(static_cast<char>((value >> shift) & 0xFF));
  }
}

CanonicalWriter& CanonicalWriter::item(char type, std::string_view payload) {
  out_.push_back(type);
  append_u64(payload.size());
  out_.append(payload);
  return *this;
}

CanonicalWriter& CanonicalWriter::u64(std::uint64_t value) {
  out_.push_back('U');
  append_u64(8);
  append_u64(value);
  return *this;
}

CanonicalWriter& CanonicalWriter::i64(std::int64_t value) {
  out_.push_back('I');
  append_u64(8);
  append_u64(static_cast<std::uint64_t>(value));
  return *this;
}

CanonicalWriter& CanonicalWriter::boolean(bool value) {
  out_.push_back('B');
  append_u64(1);
  out_.push_back(value ? '\1' : '\0');
  return *this;
}

CanonicalWriter& CanonicalWriter::f64(double value) {
  if (std::isnan(value)) {
    value = std::numeric_limits<double>::quiet_NaN();
  }
  out_.push_back('F');
  append_u64(8);
  append_u64(std::bit_cast<std::uint64_t>(value));
  return *this;
}

CanonicalWriter& CanonicalWriter::digest(const Digest& value) {
  return item('D', std::string_view(reinterpret_cast<const char*>(value.data()), value.size()));
}

CanonicalWriter& CanonicalWriter::list(std::uint64_t count) {
  out_.push_back('L');
  append_u64(8);
  append_u64(count);
  return *this;
}

} // namespace kcache::cachekey
