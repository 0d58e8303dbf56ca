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
} // namespace

std::string AccessRecord::encode() const {
  std::string out;
  out.reserve(24);
  put_u64(out, size);
  put_u64(out, static_cast<std::uint64_t>(created_ms));
  put_u64(out, static_cast<std::uint64_t>(last_access_ms));
  return out;
}

std::optional<AccessRecord> AccessRecord::decode(std::string_view bytes) {
  if (bytes.size() != 24) {
    return std::nullopt;
  }
  return AccessRecord{get_u64(bytes.data()), static_cast<std::int64_t>(get_u64(bytes.data() + 8)),
                      static_cast<std::int64_t>(get_u64(bytes.data() + 16))};
}

std::string encode_touch(std::int64_t last_access_ms) {
  std::string out;
  put_u64(out, static_cast<std::uint64_t>(last_access_ms));
  return out;
}

bool AccessMergeOperator::Merge(const rocksdb::Slice& /*key*/, const rocksdb::Slice* existing,
                                const rocksdb::Slice& value, std::string* new_value,
                                rocksdb::Logger* /*logger*/) const {
  auto last_access = [](const rocksdb::Slice& s) -> std::optional<std::int64_t> {
    if (s.size() == 8) {
      return static_cast<std::int64_t>(get_u64(s.data()));
    }
    if (auto r = AccessRecord::decode(std::string_view(s.data(), s.size()))) {
      return r->last_access_ms;
    }
    return std::nullopt;
  };
  const auto operand = last_access(value);
  if (!operand) {
    return false;
  }
  if (existing == nullptr) {
    new_value->assign(value.data(), value.size());
    return true;
  }
  if (auto record = AccessRecord::decode(std::string_view(existing->data(), existing->size()))) {
    record->last_access_ms = std::max(record->last_access_ms, *operand);
    *new_value = record->encode();
    return true;
  }
  const auto old = last_access(*existing);
  *new_value = encode_touch(std::max(old.value_or(0), *operand));
  return true;
}

bool OrphanTouchFilter::Filter(int /*level*/, const rocksdb::Slice& /*key*/,
                               const rocksdb::Slice& value, std::string* /*new_value*/,
                               bool* /*value_changed*/) const {
  return value.size() == 8; // true: drop
}

} // namespace kcache::storage::detail
