#include "rocksdb_access_record.h"

#include <kcache/storage/rocksdb_store.h>

#include <rocksdb/db.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/options_util.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace kcache::storage {

using detail::AccessRecord;

namespace {
constexpr const char* kActionFamily = "ac";
constexpr const char* kCasFamily = "cas";
constexpr const char* kAccessFamily = "access";

std::string index_key(Area area, std::string_view key) {
  std::string out(1, static_cast<char>(area));
  out.append(key);
  return out;
}

StoreError io_error(const rocksdb::Status& s, std::string_view what) {
  return StoreError{StoreError::Code::kIo, "rocksdb " + std::string(what) + ": " + s.ToString()};
}

rocksdb::Slice slice(std::string_view s) {
  return {s.data(), s.size()};
}
} // namespace

struct RocksDbStore::Handles {
  std::shared_ptr<detail::OrphanTouchFilter> orphan_filter =
      std::make_shared<detail::OrphanTouchFilter>();
  std::unique_ptr<rocksdb::DB> db;
  rocksdb::ColumnFamilyHandle* action = nullptr;
  rocksdb::ColumnFamilyHandle* cas = nullptr;
  rocksdb::ColumnFamilyHandle* access = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> all;

  ~Handles() {
    if (!db) {
      return;
    }
    for (auto* h : all) {
      db->DestroyColumnFamilyHandle(h);
    }
    if (auto s = db->Close(); !s.ok()) {
      spdlog::warn("rocksdb close: {}", s.ToString());
    }
  }
};

Result<std::unique_ptr<RocksDbStore>> RocksDbStore::open(const RocksDbOptions& options) {
  auto handles = std::make_unique<Handles>();

  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.IncreaseParallelism(2);

  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);

  // Values arrive framed and zstd-compressed already: compressing again only
  // costs CPU. Large values go to blob files so compaction does not rewrite them.
  rocksdb::ColumnFamilyOptions values;
  values.compression = rocksdb::kNoCompression;
  values.enable_blob_files = true;
  values.min_blob_size = options.min_blob_size;
  values.blob_compression_type = rocksdb::kNoCompression;
  values.enable_blob_garbage_collection = true;
  values.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  rocksdb::ColumnFamilyOptions access;
  access.merge_operator = std::make_shared<detail::AccessMergeOperator>();
  access.compaction_filter = handles->orphan_filter.get();
  access.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {kActionFamily, values},
      {kCasFamily, values},
      {kAccessFamily, access}};
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status s = rocksdb::DB::Open(rocksdb::DBOptions(db_options), options.path,
                                              families, &handles->all, &raw);
  if (!s.ok()) {
    return tl::unexpected(io_error(s, "open " + options.path));
  }
  handles->db.reset(raw);
  handles->action = handles->all[1];
  handles->cas = handles->all[2];
  handles->access = handles->all[3];

  auto store = std::make_unique<RocksDbStore>(OpenKey{}, options, std::move(handles));
  // Recover the size bound's running total from the metadata family.
  std::unique_ptr<rocksdb::Iterator> it(
      store->handles_->db->NewIterator(rocksdb::ReadOptions(), store->handles_->access));
  std::uint64_t total = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (auto r = AccessRecord::decode(std::string_view(it->value().data(), it->value().size()))) {
      total += r->size;
    }
  }
  store->total_bytes_ = total;
  spdlog::info("rocksdb store at {}: {} bytes in use of {}", options.path, total,
               options.capacity_bytes);
  return store;
}

RocksDbStore::RocksDbStore(OpenKey /*key*/, RocksDbOptions options,
                           std::unique_ptr<Handles> handles)
    : options_(std::move(options)), handles_(std::move(handles)) {}

RocksDbStore::~RocksDbStore() {
  if (auto ok = flush_access_times(); !ok) {
    spdlog::warn("rocksdb store: access times not saved: {}", ok.error().message);
  }
}

rocksdb::ColumnFamilyHandle* RocksDbStore::family(Area area) const {
  return area == Area::kAction ? handles_->action : handles_->cas;
}

void RocksDbStore::drop_corrupt(Area area, std::string_view key, const std::string& why) {
  corrupt_.add();
  spdlog::warn("rocksdb store: corrupt {} entry '{}' deleted: {}", area_name(area), key, why);
  if (auto ok = remove(area, key); !ok) {
    spdlog::warn("rocksdb store: could not delete corrupt entry: {}", ok.error().message);
  }
}

GetResult RocksDbStore::get(Area area, std::string_view key) {
  rocksdb::PinnableSlice value;
  const rocksdb::Status s =
      handles_->db->Get(rocksdb::ReadOptions(), family(area), slice(key), &value);
  if (s.IsNotFound()) {
    return std::optional<Bytes>{};
  }
  if (s.IsCorruption()) {
    drop_corrupt(area, key, s.ToString());
    return std::optional<Bytes>{};
  }
  if (!s.ok()) {
    return tl::unexpected(io_error(s, "get"));
  }
  touch(area, key);
  return std::optional<Bytes>{Bytes(value.data(), value.size())};
}

std::vector<GetResult> RocksDbStore::get_many(Area area, std::span<const std::string> keys) {
  std::vector<rocksdb::ColumnFamilyHandle*> families(keys.size(), family(area));
  std::vector<rocksdb::Slice> slices;
  slices.reserve(keys.size());
  for (const std::string& key : keys) {
    slices.emplace_back(key);
  }
  std::vector<std::string> values;
  const std::vector<rocksdb::Status> statuses =
      handles_->db->MultiGet(rocksdb::ReadOptions(), families, slices, &values);
  std::vector<GetResult> out;
  out.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const rocksdb::Status& s = statuses[i];
    if (s.ok()) {
      touch(area, keys[i]);
      out.emplace_back(std::optional<Bytes>{std::move(values[i])});
    } else if (s.IsNotFound() || s.IsCorruption()) {
      if (s.IsCorruption()) {
        drop_corrupt(area, keys[i], s.ToString());
      }
      out.emplace_back(std::optional<Bytes>{});
    } else {
      out.emplace_back(tl::unexpected(io_error(s, "multiget")));
    }
  }
  return out;
}

Result<void> RocksDbStore::put(Area area, std::string_view key, std::string_view value) {
  {
    std::lock_guard lock(write_mu_);
    const std::string ikey = index_key(area, key);
    std::string old;
    std::uint64_t old_size = 0;
    std::int64_t created = unix_now_ms();
    if (handles_->db->Get(rocksdb::ReadOptions(), handles_->access, ikey, &old).ok()) {
      if (auto r = AccessRecord::decode(old)) {
        old_size = r->size;
      }
    }
    rocksdb::WriteBatch batch;
    batch.Put(family(area), slice(key), slice(value));
    batch.Put(handles_->access, ikey, AccessRecord{value.size(), created, created, 0}.encode());
    if (auto s = handles_->db->Write(rocksdb::WriteOptions(), &batch); !s.ok()) {
      return tl::unexpected(io_error(s, "put"));
    }
    total_bytes_ += value.size();
    total_bytes_ -= old_size;
  }
  maybe_evict();
  return {};
}

Result<bool> RocksDbStore::contains(Area area, std::string_view key) {
  std::string record;
  const auto s =
      handles_->db->Get(rocksdb::ReadOptions(), handles_->access, index_key(area, key), &record);
  if (s.IsNotFound()) {
    return false;
  }
  if (!s.ok()) {
    return tl::unexpected(io_error(s, "contains"));
  }
  return AccessRecord::decode(record).has_value();
}

Result<void> RocksDbStore::remove(Area area, std::string_view key) {
  std::lock_guard lock(write_mu_);
  const std::string ikey = index_key(area, key);
  std::string record;
  std::uint64_t size = 0;
  if (handles_->db->Get(rocksdb::ReadOptions(), handles_->access, ikey, &record).ok()) {
    if (auto r = AccessRecord::decode(record)) {
      size = r->size;
    }
  }
  rocksdb::WriteBatch batch;
  batch.Delete(family(area), slice(key));
  batch.Delete(handles_->access, ikey);
  if (auto s = handles_->db->Write(rocksdb::WriteOptions(), &batch); !s.ok()) {
    return tl::unexpected(io_error(s, "remove"));
  }
  total_bytes_ -= std::min<std::uint64_t>(size, total_bytes_.load());
  return {};
}

void RocksDbStore::touch(Area area, std::string_view key) {
  const auto now = std::chrono::steady_clock::now();
  bool flush_now = false;
  {
    std::lock_guard lock(touch_mu_);
    Touched& t = touched_[index_key(area, key)];
    t.last_access_ms = unix_now_ms();
    ++t.hits;
    flush_now = touched_.size() >= options_.access_flush_batch ||
                now - last_touch_flush_ >= options_.access_flush_interval;
  }
  if (flush_now) {
    if (auto ok = flush_access_times(); !ok) {
      spdlog::warn("rocksdb store: {}", ok.error().message);
    }
  }
}

Result<void> RocksDbStore::flush_access_times() {
  std::unordered_map<std::string, Touched> pending;
  {
    std::lock_guard lock(touch_mu_);
    pending.swap(touched_);
    last_touch_flush_ = std::chrono::steady_clock::now();
  }
  if (pending.empty()) {
    return {};
  }
  rocksdb::WriteBatch batch;
  for (const auto& [ikey, t] : pending) {
    batch.Merge(handles_->access, ikey, detail::Touch{t.last_access_ms, t.hits}.encode());
  }
  // Recency is advisory: losing the last second of it in a crash is fine.
  rocksdb::WriteOptions write;
  write.disableWAL = true;
  if (auto s = handles_->db->Write(write, &batch); !s.ok()) {
    return tl::unexpected(io_error(s, "flush access times"));
  }
  return {};
}

Result<void> RocksDbStore::flush() {
  if (auto ok = flush_access_times(); !ok) {
    return ok;
  }
  rocksdb::FlushOptions fo;
  if (auto s = handles_->db->Flush(fo, handles_->all); !s.ok()) {
    return tl::unexpected(io_error(s, "flush"));
  }
  return {};
}

void RocksDbStore::maybe_evict() {
  if (total_bytes_.load() <= options_.capacity_bytes) {
    return;
  }
  const auto target = static_cast<std::uint64_t>(static_cast<double>(options_.capacity_bytes) *
                                                 options_.evict_to_fraction);
  if (auto evicted = evict_to(target); !evicted) {
    spdlog::warn("rocksdb store: eviction failed: {}", evicted.error().message);
  }
}

Result<std::uint64_t> RocksDbStore::evict_to(std::uint64_t target_bytes) {
  std::unique_lock evict_lock(evict_mu_, std::try_to_lock);
  if (!evict_lock.owns_lock()) {
    return 0; // another thread is evicting already
  }
  if (auto ok = flush_access_times(); !ok) {
    return tl::unexpected(ok.error());
  }
  struct Candidate {
    std::int64_t last_access_ms;
    std::string ikey;
  };
  std::vector<Candidate> candidates;
  std::unique_ptr<rocksdb::Iterator> it(
      handles_->db->NewIterator(rocksdb::ReadOptions(), handles_->access));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (auto r = AccessRecord::decode(std::string_view(it->value().data(), it->value().size()))) {
      candidates.push_back({r->last_access_ms, it->key().ToString()});
    }
  }
  if (!it->status().ok()) {
    return tl::unexpected(io_error(it->status(), "scan for eviction"));
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.last_access_ms < b.last_access_ms;
  });
  std::uint64_t evicted = 0;
  for (const Candidate& c : candidates) {
    if (total_bytes_.load() <= target_bytes) {
      break;
    }
    const auto area = static_cast<Area>(c.ikey[0]);
    if (auto ok = remove(area, std::string_view(c.ikey).substr(1)); !ok) {
      return tl::unexpected(ok.error());
    }
    ++evicted;
  }
  evictions_.add(evicted);
  if (evicted > 0) {
    spdlog::debug("rocksdb store: evicted {} entries, {} bytes remain", evicted,
                  total_bytes_.load());
  }
  return evicted;
}

Result<std::vector<ObjectInfo>> RocksDbStore::list(const ListOptions& options) {
  std::unordered_map<std::string, Touched> pending;
  {
    std::lock_guard lock(touch_mu_);
    pending = touched_;
  }
  std::vector<ObjectInfo> out;
  std::unique_ptr<rocksdb::Iterator> it(
      handles_->db->NewIterator(rocksdb::ReadOptions(), handles_->access));
  for (const Area area : {Area::kAction, Area::kCas}) {
    if (options.area && *options.area != area) {
      continue;
    }
    const std::string start = index_key(area, options.prefix);
    for (it->Seek(start); it->Valid() && out.size() < options.limit; it->Next()) {
      const std::string_view ikey(it->key().data(), it->key().size());
      if (!ikey.starts_with(start)) {
        break;
      }
      const auto r = AccessRecord::decode(std::string_view(it->value().data(), it->value().size()));
      if (!r) {
        continue; // orphan touch
      }
      std::int64_t last = r->last_access_ms;
      std::uint64_t hits = r->hits;
      if (const auto p = pending.find(std::string(ikey)); p != pending.end()) {
        last = std::max(last, p->second.last_access_ms);
        hits += p->second.hits;
      }
      out.push_back(
          ObjectInfo{area, std::string(ikey.substr(1)), r->size, r->created_ms, last, hits});
    }
  }
  if (!it->status().ok()) {
    return tl::unexpected(io_error(it->status(), "list"));
  }
  return out;
}

} // namespace kcache::storage
