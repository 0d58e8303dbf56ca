#pragma once
// The value of an "access" column family entry, and the RocksDB merge operator
// and compaction filter that maintain it. Internal to the RocksDB tier.

#include <rocksdb/compaction_filter.h>
#include <rocksdb/merge_operator.h>

#include <cstdint>
#include <optional>
#include <string>

namespace kcache::storage::detail {

// A full record is 24 bytes: size, created_ms, last_access_ms (little-endian).
// A lone 8-byte value is a touch (last_access_ms) merged onto a key that no
// longer has a record: an orphan, dropped by the compaction filter.
struct AccessRecord {
  std::uint64_t size = 0;
  std::int64_t created_ms = 0;
  std::int64_t last_access_ms = 0;

  std::string encode() const;
  static std::optional<AccessRecord> decode(std::string_view bytes);
};

std::string encode_touch(std::int64_t last_access_ms);

// Merges touches into records: last access becomes the maximum seen.
class AccessMergeOperator final : public rocksdb::AssociativeMergeOperator {
public:
  bool Merge(const rocksdb::Slice& key, const rocksdb::Slice* existing, const rocksdb::Slice& value,
             std::string* new_value, rocksdb::Logger* logger) const override;
  const char* Name() const override { return "kcache.AccessMergeOperator"; }
};

class OrphanTouchFilter final : public rocksdb::CompactionFilter {
public:
  bool Filter(int level, const rocksdb::Slice& key, const rocksdb::Slice& value,
              std::string* new_value, bool* value_changed) const override;
  const char* Name() const override { return "kcache.OrphanTouchFilter"; }
};

} // namespace kcache::storage::detail
