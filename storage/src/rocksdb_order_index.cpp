#include "rocksdb_order_index.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

namespace kcache::storage::detail {

namespace {

constexpr std::size_t kValueBytes = 8;
constexpr std::size_t kBuildBatch = 16384; // entries per write batch while building

rocksdb::Slice slice(std::string_view s) {
  return {s.data(), s.size()};
}

} // namespace

std::uint64_t order_value(const AccessRecord& record, ListOrder order) {
  return storage::order_value(
      ObjectInfo{
          Area::kAction, {}, record.size, record.created_ms, record.last_access_ms, record.hits},
      order);
}

char order_tag(ListOrder order) {
  switch (order) {
  case ListOrder::kSize:
    return 's';
  case ListOrder::kCreated:
    return 'c';
  case ListOrder::kLastAccess:
    return 'a';
  case ListOrder::kHits:
    return 'h';
  }
  return '?';
}

std::string order_key(ListOrder order, std::uint64_t value, std::string_view ikey) {
  std::string out;
  out.reserve(1 + kValueBytes + ikey.size());
  out.push_back(order_tag(order));
  const std::uint64_t inverted = ~value; // largest value first
  for (int shift = 56; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((inverted >> shift) & 0xff));
  }
  out.append(ikey);
  return out;
}

std::optional<OrderKey> parse_order_key(ListOrder order, std::string_view key) {
  if (key.size() < 1 + kValueBytes + 1 || key[0] != order_tag(order)) {
    return std::nullopt;
  }
  std::uint64_t inverted = 0;
  for (std::size_t i = 0; i < kValueBytes; ++i) {
    inverted = (inverted << 8) | static_cast<unsigned char>(key[1 + i]);
  }
  return OrderKey{~inverted, key.substr(1 + kValueBytes)};
}

void put_order_keys(rocksdb::WriteBatch& batch, rocksdb::ColumnFamilyHandle* family,
                    std::string_view ikey, const AccessRecord& record) {
  for (const ListOrder order : kAllOrders) {
    batch.Put(family, order_key(order, order_value(record, order), ikey), rocksdb::Slice());
  }
}

void delete_order_keys(rocksdb::WriteBatch& batch, rocksdb::ColumnFamilyHandle* family,
                       std::string_view ikey, const AccessRecord& record) {
  for (const ListOrder order : kAllOrders) {
    batch.Delete(family, order_key(order, order_value(record, order), ikey));
  }
}

void update_order_keys(rocksdb::WriteBatch& batch, rocksdb::ColumnFamilyHandle* family,
                       std::string_view ikey, const AccessRecord& before,
                       const AccessRecord& after) {
  for (const ListOrder order : kAllOrders) {
    const std::uint64_t was = order_value(before, order);
    const std::uint64_t is = order_value(after, order);
    if (was != is) {
      batch.Delete(family, order_key(order, was, ikey));
      batch.Put(family, order_key(order, is, ikey), rocksdb::Slice());
    }
  }
}

bool order_index_built(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* order) {
  std::string mark;
  return db.Get(rocksdb::ReadOptions(), order, slice(kOrderIndexBuiltKey), &mark).ok();
}

rocksdb::Status build_order_index(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* access,
                                  rocksdb::ColumnFamilyHandle* order, const std::string& path) {
  if (order_index_built(db, order)) {
    return rocksdb::Status::OK();
  }
  // A build cut short left some keys: start over (every tag sorts after the mark's 0 byte).
  if (auto s = db.DeleteRange(rocksdb::WriteOptions(), order, rocksdb::Slice("\x01", 1),
                              rocksdb::Slice("\xff", 1));
      !s.ok()) {
    return s;
  }
  const auto started = std::chrono::steady_clock::now();
  auto last_log = started;
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(rocksdb::ReadOptions(), access));
  rocksdb::WriteBatch batch;
  std::size_t in_batch = 0;
  std::uint64_t indexed = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const auto record =
        AccessRecord::decode(std::string_view(it->value().data(), it->value().size()));
    if (!record) {
      continue; // an orphan touch: no entry
    }
    put_order_keys(batch, order, std::string_view(it->key().data(), it->key().size()), *record);
    ++indexed;
    if (++in_batch == kBuildBatch) {
      if (auto s = db.Write(rocksdb::WriteOptions(), &batch); !s.ok()) {
        return s;
      }
      batch.Clear();
      in_batch = 0;
      if (const auto now = std::chrono::steady_clock::now();
          now - last_log >= std::chrono::seconds(5)) {
        spdlog::info("rocksdb store at {}: building the order index, {} entries so far", path,
                     indexed);
        last_log = now;
      }
    }
  }
  if (!it->status().ok()) {
    return it->status();
  }
  batch.Put(order, slice(kOrderIndexBuiltKey), rocksdb::Slice());
  if (auto s = db.Write(rocksdb::WriteOptions(), &batch); !s.ok()) {
    return s;
  }
  if (indexed > 0) {
    spdlog::info("rocksdb store at {}: order index built over {} entries in {} ms", path, indexed,
                 std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started)
                     .count());
  }
  return rocksdb::Status::OK();
}

} // namespace kcache::storage::detail
