#pragma once
// The "order" column family of the RocksDB tier: per entry, one key per
// ListOrder that sorts it by that value, largest first. list_top() then reads
// the first keys of an order instead of every entry, and eviction reads the
// least recently used from the end of the last-access order. Internal to the
// RocksDB tier, which keeps the index in step with the "access" family under
// its write lock, in the same write batches.
//
// A key: [order tag][8 bytes, big-endian, of ~value][area][entry key]. The
// inverted value sorts largest first; ties fall to (area, key), as
// comes_before() orders them.

#include "rocksdb_access_record.h"

#include <kcache/storage/store.h>

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kcache::storage::detail {

inline constexpr ListOrder kAllOrders[] = {ListOrder::kSize, ListOrder::kCreated,
                                           ListOrder::kLastAccess, ListOrder::kHits};

// Written once the index holds every entry; an index without it (a store
// from before the index, or a build cut short) is rebuilt at open.
inline constexpr std::string_view kOrderIndexBuiltKey{"\x00index-v1", 9};

std::uint64_t order_value(const AccessRecord& record, ListOrder order);
// The first byte of every key of `order`.
char order_tag(ListOrder order);
// `ikey` is the access family's key: the area byte, then the entry key.
std::string order_key(ListOrder order, std::uint64_t value, std::string_view ikey);

struct OrderKey {
  std::uint64_t value = 0;
  std::string_view ikey; // the access family's key (area byte + entry key)
};
// Nullopt for a key of another order or a malformed one.
std::optional<OrderKey> parse_order_key(ListOrder order, std::string_view key);

// Adds the index keys of `record` (an entry stored under `ikey`) to `batch`.
void put_order_keys(rocksdb::WriteBatch& batch, rocksdb::ColumnFamilyHandle* family,
                    std::string_view ikey, const AccessRecord& record);
// Removes them.
void delete_order_keys(rocksdb::WriteBatch& batch, rocksdb::ColumnFamilyHandle* family,
                       std::string_view ikey, const AccessRecord& record);
// Moves the keys of the orders whose value differs between `before` and `after`.
void update_order_keys(rocksdb::WriteBatch& batch, rocksdb::ColumnFamilyHandle* family,
                       std::string_view ikey, const AccessRecord& before,
                       const AccessRecord& after);

// Fills the index from the access family when it is not marked built: drops
// what a cut-short build left, writes every entry's keys in batches, then the
// mark. Logs its progress on large stores.
rocksdb::Status build_order_index(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* access,
                                  rocksdb::ColumnFamilyHandle* order, const std::string& path);
// Whether the index is marked built.
bool order_index_built(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* order);

} // namespace kcache::storage::detail
