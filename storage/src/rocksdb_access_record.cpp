#include "rocksdb_access_record.h"

#include <algorithm>

namespace kcache::storage::detail {
namespace {
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
}
std::uint64_t get_u64(const char* in) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(in[i]);
  }
  return v;
}
std::string_view view(const rocksdb::Slice& s) {
  return {s.data(), s.size()};
}
} // namespace

std::string AccessRecord::encode() const {
  std::string out;
  out.reserve(32);
  put_u64(out, size);
  put_u64(out, static_cast<std::uint64_t>(created_ms));
  put_u64(out, static_cast<std::uint64_t>(last_access_ms));
  put_u64(out, hits);
  return out;
}

std::optional<AccessRecord> AccessRecord::decode(std::string_view bytes) {
  if (bytes.size() != 32) {
    return std::nullopt;
  }
  return AccessRecord{get_u64(bytes.data()), static_cast<std::int64_t>(get_u64(bytes.data() + 8)),
                      static_cast<std::int64_t>(get_u64(bytes.data() + 16)),
                      get_u64(bytes.data() + 24)};
}

std::string Touch::encode() const {
  std::string out;
  out.reserve(16);
  put_u64(out, static_cast<std::uint64_t>(last_access_ms));
  put_u64(out, hits);
  return out;
}

std::optional<Touch> Touch::decode(std::string_view bytes) {
  if (bytes.size() != 16) {
    return std::nullopt;
  }
  return Touch{static_cast<std::int64_t>(get_u64(bytes.data())), get_u64(bytes.data() + 8)};
}

bool AccessMergeOperator::Merge(const rocksdb::Slice& /*key*/, const rocksdb::Slice* existing,
                                const rocksdb::Slice& value, std::string* new_value,
                                rocksdb::Logger* /*logger*/) const {
  const auto touch = Touch::decode(view(value));
  if (!touch) {
    return false; // only touches are merged; records are written with Put
  }
  if (existing == nullptr) {
    *new_value = touch->encode();
    return true;
  }
  if (auto record = AccessRecord::decode(view(*existing))) {
    record->last_access_ms = std::max(record->last_access_ms, touch->last_access_ms);
    record->hits += touch->hits;
    *new_value = record->encode();
    return true;
  }
  if (auto earlier = Touch::decode(view(*existing))) {
    *new_value =
        Touch{std::max(earlier->last_access_ms, touch->last_access_ms), earlier->hits + touch->hits}
            .encode();
    return true;
  }
  return false;
}

bool OrphanTouchFilter::Filter(int /*level*/, const rocksdb::Slice& /*key*/,
                               const rocksdb::Slice& value, std::string* /*new_value*/,
                               bool* /*value_changed*/) const {
  return value.size() == 16; // a touch with no record under it: drop
}

} // namespace kcache::storage::detail
