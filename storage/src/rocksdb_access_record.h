#pragma once
// The value of an "access" column family entry, and the RocksDB merge operator
// and compaction filter that maintain it. Internal to the RocksDB tier.

#include <rocksdb/compaction_filter.h>
#include <rocksdb/merge_operator.h>

#include <cstdint>
#include <optional>
#include <string>

namespace kcache::storage::detail {

// A full record is 32 bytes: size, created_ms, last_access_ms, hits.
struct AccessRecord {
  std::uint64_t size = 0;
  std::int64_t created_ms = 0;
  std::int64_t last_access_ms = 0;
  std::uint64_t hits = 0;

  std::string encode() const;
  static std::optional<AccessRecord> decode(std::string_view bytes);
};

// A touch is 16 bytes: last_access_ms and a number of hits to add. Merged onto
// a record it updates it; merged onto nothing (the key was removed meanwhile)
// it stays a lone touch, an orphan that the compaction filter drops.
struct Touch {
  std::int64_t last_access_ms = 0;
  std::uint64_t hits = 0;

  std::string encode() const;
  static std::optional<Touch> decode(std::string_view bytes);
};

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
