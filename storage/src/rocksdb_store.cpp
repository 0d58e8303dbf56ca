#include "disk_space.h"
#include "rocksdb_access_record.h"
#include "rocksdb_disk_guard.h"
#include "rocksdb_order_index.h"

#include <kcache/storage/rocksdb_store.h>

#include <rocksdb/db.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/options_util.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

namespace kcache::storage {

using detail::AccessRecord;

namespace {
constexpr const char* kActionFamily = "ac";
constexpr const char* kCasFamily = "cas";
constexpr const char* kAccessFamily = "access";
constexpr const char* kOrderFamily = "order";

std::string index_key(Area area, std::string_view key) {
  std::string out(1, static_cast<char>(area));
  out.append(key);
  return out;
}

bool is_no_space(const rocksdb::Status& s) {
  // Posix ENOSPC is IOError/kNoSpace; a background error keeps it as its subcode.
  return s.IsNoSpace() || s.ToString().find("No space left") != std::string::npos;
}

StoreError io_error(const rocksdb::Status& s, std::string_view what) {
  return StoreError{is_no_space(s) ? StoreError::Code::kNoSpace : StoreError::Code::kIo,
                    "rocksdb " + std::string(what) + ": " + s.ToString()};
}

StoreError no_space(std::string message) {
  return StoreError{StoreError::Code::kNoSpace, std::move(message)};
}

// The write-ahead log is bounded so that a memtable that fills slowly (the
// access family) cannot keep old logs alive: RocksDB flushes instead. A
// sixteenth of the capacity, and of the disk: a flush needs that room again.
std::uint64_t wal_limit(const RocksDbOptions& o, std::uint64_t disk_size) {
  return std::clamp<std::uint64_t>(std::min(o.capacity_bytes, disk_size) / 16, 256ULL << 10,
                                   64ULL << 20);
}

constexpr std::uint64_t kMiB = 1ULL << 20;

rocksdb::Slice slice(std::string_view s) {
  return {s.data(), s.size()};
}
} // namespace

struct RocksDbStore::Handles {
  std::shared_ptr<detail::OrphanTouchFilter> orphan_filter =
      std::make_shared<detail::OrphanTouchFilter>();
  std::shared_ptr<detail::DiskGuard> guard;
  std::unique_ptr<rocksdb::DB> db;
  rocksdb::ColumnFamilyHandle* action = nullptr;
  rocksdb::ColumnFamilyHandle* cas = nullptr;
  rocksdb::ColumnFamilyHandle* access = nullptr;
  rocksdb::ColumnFamilyHandle* order = nullptr; // null: opened read-only on a store without it
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
  std::error_code ec;
  std::filesystem::create_directories(options.path, ec);
  if (ec) {
    return tl::unexpected(
        StoreError{StoreError::Code::kIo, "rocksdb open " + options.path + ": " + ec.message()});
  }
  const std::uint64_t disk_size = detail::disk_size_bytes(options.path).value_or(UINT64_MAX);
  const std::uint64_t max_wal = wal_limit(options, disk_size);
  // By default the reserve covers flushing everything the WAL may hold.
  const std::uint64_t reserve = options.reserved_disk_bytes != 0
                                    ? options.reserved_disk_bytes
                                    : std::min<std::uint64_t>(max_wal + kMiB, disk_size / 8);
  handles->guard = std::make_shared<detail::DiskGuard>(options.path, reserve);
  // Recovery may need the reserve's room; it is taken again once open.
  handles->guard->release_reserve("at start-up");

  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.IncreaseParallelism(2);
  db_options.max_total_wal_size = max_wal;
  db_options.listeners.push_back(handles->guard);
  // The info log lives in the data directory and counts against its disk.
  db_options.max_log_file_size = 1ULL << 20;
  db_options.keep_log_file_num = 2;
  const std::uint64_t write_buffer = max_wal / 2;

  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);

  // Values arrive framed and zstd-compressed already: compressing again only
  // costs CPU. Large values go to blob files so compaction does not rewrite them.
  rocksdb::ColumnFamilyOptions values;
  values.compression = rocksdb::kNoCompression;
  values.enable_blob_files = true;
  values.min_blob_size = options.min_blob_size;
  values.blob_compression_type = rocksdb::kNoCompression;
  // No blob garbage collection in compactions: it rewrites live values,
  // needing as much free space again at moments admission cannot foresee
  // (RocksDB then met ENOSPC). A blob file goes once none of its values is
  // referenced; small files (one memtable's worth) make that come soon under
  // LRU eviction.
  values.enable_blob_garbage_collection = false;
  values.blob_file_size = write_buffer;
  values.write_buffer_size = write_buffer;
  values.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  rocksdb::ColumnFamilyOptions access;
  access.merge_operator = std::make_shared<detail::AccessMergeOperator>();
  access.compaction_filter = handles->orphan_filter.get();
  access.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  access.write_buffer_size = write_buffer;
  rocksdb::ColumnFamilyOptions order;
  order.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  order.write_buffer_size = write_buffer;
  rocksdb::ColumnFamilyOptions unused;
  unused.write_buffer_size = write_buffer;

  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, unused},
      {kActionFamily, values},
      {kCasFamily, values},
      {kAccessFamily, access},
      {kOrderFamily, order}};
  rocksdb::DB* raw = nullptr;
  // Recovery replays the WAL into memtables and flushes them: as much room
  // again as the WAL takes, plus the reserve. Without it, RocksDB would meet
  // ENOSPC mid-recovery; opened read-only, the data is still served.
  const std::optional<std::uint64_t> free = detail::free_disk_bytes(options.path);
  const std::uint64_t wal = detail::directory_bytes(options.path).wal;
  const std::uint64_t needed = wal + handles->guard->reserve_bytes();
  rocksdb::Status s;
  bool read_only = free && *free < needed;
  if (read_only && !std::filesystem::exists(std::filesystem::path(options.path) / "CURRENT")) {
    return tl::unexpected(no_space("rocksdb store at " + options.path + ": disk full (" +
                                   std::to_string(*free) + " bytes free), cannot create it"));
  }
  std::string why =
      read_only ? std::to_string(*free) + " bytes free, recovery needs " + std::to_string(needed)
                : std::string();
  if (!read_only) {
    s = rocksdb::DB::Open(rocksdb::DBOptions(db_options), options.path, families, &handles->all,
                          &raw);
    read_only = is_no_space(s);
    why = s.ToString();
  }
  if (read_only) {
    spdlog::error("rocksdb store at {}: the disk is full ({}); serving reads only, writes are "
                  "refused (507) until kcached restarts with free space",
                  options.path, why);
    handles->all.clear();
    // A store from before the order index has no such family, and a
    // read-only open cannot create it: list_top() is then unsupported.
    std::vector<std::string> existing;
    if (rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(db_options), options.path, &existing)
            .ok() &&
        std::find(existing.begin(), existing.end(), kOrderFamily) == existing.end()) {
      families.pop_back();
    }
    s = rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(db_options), options.path, families,
                                     &handles->all, &raw);
  }
  if (!s.ok()) {
    return tl::unexpected(io_error(s, "open " + options.path));
  }
  handles->db.reset(raw);
  handles->action = handles->all[1];
  handles->cas = handles->all[2];
  handles->access = handles->all[3];
  handles->order = handles->all.size() > 4 ? handles->all[4] : nullptr;

  if (!read_only) {
    handles->guard->hold_reserve(detail::free_disk_bytes(options.path).value_or(0));
  }
  auto store = std::make_unique<RocksDbStore>(OpenKey{}, options, std::move(handles), read_only);
  // Recover the size bound's running total and the entry count from the
  // metadata family.
  std::unique_ptr<rocksdb::Iterator> it(
      store->handles_->db->NewIterator(rocksdb::ReadOptions(), store->handles_->access));
  std::uint64_t total = 0;
  std::uint64_t entries[2] = {0, 0};
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (auto r = AccessRecord::decode(std::string_view(it->value().data(), it->value().size()))) {
      total += r->size;
      ++entries[it->key()[0] == static_cast<char>(Area::kCas) ? 1 : 0];
    }
  }
  store->total_bytes_ = total;
  store->entries_[0] = entries[0];
  store->entries_[1] = entries[1];
  Handles& h = *store->handles_;
  if (h.order != nullptr && !read_only) {
    if (auto built = detail::build_order_index(*h.db, h.access, h.order, options.path);
        !built.ok()) {
      spdlog::warn("rocksdb store at {}: order index not built ({}); sorted listings read every "
                   "entry and eviction sorts them",
                   options.path, built.ToString());
    }
  }
  store->order_index_ = h.order != nullptr && detail::order_index_built(*h.db, h.order);
  store->wal_bytes_ = detail::directory_bytes(options.path).wal;
  spdlog::info("rocksdb store at {}: {} bytes in use (and {} of WAL) of {}", options.path, total,
               store->wal_bytes_.load(), options.capacity_bytes);
  return store;
}

RocksDbStore::RocksDbStore(OpenKey /*key*/, RocksDbOptions options,
                           std::unique_ptr<Handles> handles, bool read_only)
    : options_(std::move(options)), handles_(std::move(handles)), read_only_(read_only) {}

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
  GetResult r = peek(area, key);
  if (r && r->has_value()) {
    touch(area, key);
  }
  return r;
}

GetResult RocksDbStore::peek(Area area, std::string_view key) {
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

void RocksDbStore::note_no_space(const std::string& why) {
  if (!out_of_space_.exchange(true)) {
    spdlog::error("rocksdb store at {}: out of disk space, writes are refused (answered 507) "
                  "while reads go on: {}",
                  options_.path, why);
  }
}

StoreError RocksDbStore::write_error(const rocksdb::Status& s, std::string_view what) {
  StoreError error = io_error(s, what);
  if (error.code == StoreError::Code::kNoSpace) {
    needs_resume_ = true;
    note_no_space(error.message);
  }
  return error;
}

Result<void> RocksDbStore::admit(std::uint64_t bytes) {
  if (read_only_) {
    return tl::unexpected(no_space("rocksdb store opened read-only: the disk was full at start"));
  }
  detail::DiskGuard& guard = *handles_->guard;
  std::optional<std::uint64_t> free = detail::free_disk_bytes(options_.path);
  if (!free) {
    return {};
  }
  if (!guard.holding() && guard.hold_reserve(*free)) {
    free = detail::free_disk_bytes(options_.path);
  }
  // The value goes to the WAL now and to a blob file when its memtable is
  // flushed, as does everything unflushed already; the reserve must stand.
  auto needed = [&](std::uint64_t unflushed) {
    return 2 * bytes + unflushed + (guard.holding() ? 0 : guard.reserve_bytes());
  };
  std::uint64_t unflushed = 0;
  handles_->db->GetAggregatedIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables, &unflushed);
  if (*free < needed(unflushed) && unflushed > 0 && *free > unflushed + kMiB) {
    // Flushing turns the WAL into blob files: the same bytes, once.
    if (auto ok = flush(); ok) {
      free = detail::free_disk_bytes(options_.path).value_or(0);
      handles_->db->GetAggregatedIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables,
                                             &unflushed);
    }
  }
  if (*free < needed(unflushed)) {
    note_no_space(std::to_string(*free) + " bytes free, a put of " + std::to_string(bytes) +
                  " needs " + std::to_string(needed(unflushed)));
    return tl::unexpected(no_space("rocksdb store: disk full (" + std::to_string(*free) +
                                   " bytes free, " + std::to_string(needed(unflushed)) +
                                   " needed)"));
  }
  if (needs_resume_.exchange(false) || guard.take_background_error()) {
    if (auto s = handles_->db->Resume(); !s.ok()) {
      needs_resume_ = true;
      return tl::unexpected(write_error(s, "resume after a full disk"));
    }
  }
  if (out_of_space_.exchange(false)) {
    spdlog::warn("rocksdb store at {}: disk space is back ({} bytes free), writes resume",
                 options_.path, *free);
  }
  return {};
}

Result<void> RocksDbStore::put(Area area, std::string_view key, std::string_view value) {
  if (auto ok = admit(value.size() + key.size()); !ok) {
    return ok;
  }
  {
    std::lock_guard lock(write_mu_);
    const std::string ikey = index_key(area, key);
    std::string old;
    std::optional<AccessRecord> before;
    const std::int64_t created = unix_now_ms();
    if (handles_->db->Get(rocksdb::ReadOptions(), handles_->access, ikey, &old).ok()) {
      before = AccessRecord::decode(old);
    }
    const AccessRecord record{value.size(), created, created, 0};
    rocksdb::WriteBatch batch;
    batch.Put(family(area), slice(key), slice(value));
    batch.Put(handles_->access, ikey, record.encode());
    if (order_index_) {
      if (before) {
        detail::delete_order_keys(batch, handles_->order, ikey, *before);
      }
      detail::put_order_keys(batch, handles_->order, ikey, record);
    }
    if (auto s = handles_->db->Write(rocksdb::WriteOptions(), &batch); !s.ok()) {
      return tl::unexpected(write_error(s, "put"));
    }
    total_bytes_ += value.size();
    total_bytes_ -= before ? before->size : 0;
    if (!before) {
      ++entries_[static_cast<std::size_t>(area)];
    }
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
  if (read_only_) {
    return tl::unexpected(no_space("rocksdb store opened read-only: the disk was full at start"));
  }
  std::lock_guard lock(write_mu_);
  const std::string ikey = index_key(area, key);
  std::string old;
  std::optional<AccessRecord> record;
  if (handles_->db->Get(rocksdb::ReadOptions(), handles_->access, ikey, &old).ok()) {
    record = AccessRecord::decode(old);
  }
  rocksdb::WriteBatch batch;
  batch.Delete(family(area), slice(key));
  batch.Delete(handles_->access, ikey);
  if (record && order_index_) {
    detail::delete_order_keys(batch, handles_->order, ikey, *record);
  }
  if (auto s = handles_->db->Write(rocksdb::WriteOptions(), &batch); !s.ok()) {
    return tl::unexpected(write_error(s, "remove"));
  }
  if (record) {
    total_bytes_ -= std::min<std::uint64_t>(record->size, total_bytes_.load());
    auto& count = entries_[static_cast<std::size_t>(area)];
    count -= std::min<std::uint64_t>(1, count.load());
  }
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
  if (pending.empty() || read_only_) {
    return {};
  }
  if (!order_index_) {
    // Blind merges: nothing else to keep in step. Recency is advisory:
    // losing the last second of it in a crash is fine, so no WAL.
    rocksdb::WriteBatch batch;
    for (const auto& [ikey, t] : pending) {
      batch.Merge(handles_->access, ikey, detail::Touch{t.last_access_ms, t.hits}.encode());
    }
    rocksdb::WriteOptions write;
    write.disableWAL = true;
    if (auto s = handles_->db->Write(write, &batch); !s.ok()) {
      return tl::unexpected(write_error(s, "flush access times"));
    }
    return {};
  }
  // The index keys move with the records, so each record is read first
  // (one MultiGet), under the lock that puts and removes take. A key removed
  // since its read is skipped, not left as an orphan touch. Written with the
  // WAL: a crash must not keep a record's new values without their index
  // keys (the families are flushed apart).
  std::vector<std::string> ikeys;
  ikeys.reserve(pending.size());
  for (const auto& entry : pending) {
    ikeys.push_back(entry.first);
  }
  std::vector<rocksdb::Slice> slices(ikeys.begin(), ikeys.end());
  std::vector<rocksdb::ColumnFamilyHandle*> families(ikeys.size(), handles_->access);
  std::lock_guard lock(write_mu_);
  std::vector<std::string> values;
  const std::vector<rocksdb::Status> statuses =
      handles_->db->MultiGet(rocksdb::ReadOptions(), families, slices, &values);
  rocksdb::WriteBatch batch;
  for (std::size_t i = 0; i < ikeys.size(); ++i) {
    if (!statuses[i].ok() && !statuses[i].IsNotFound()) {
      return tl::unexpected(io_error(statuses[i], "flush access times"));
    }
    const auto before = statuses[i].ok() ? AccessRecord::decode(values[i]) : std::nullopt;
    if (!before) {
      continue; // removed since it was read
    }
    const Touched& t = pending[ikeys[i]];
    AccessRecord after = *before;
    after.last_access_ms = std::max(after.last_access_ms, t.last_access_ms);
    after.hits += t.hits;
    batch.Put(handles_->access, ikeys[i], after.encode());
    detail::update_order_keys(batch, handles_->order, ikeys[i], *before, after);
  }
  if (auto s = handles_->db->Write(rocksdb::WriteOptions(), &batch); !s.ok()) {
    return tl::unexpected(write_error(s, "flush access times"));
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
  wal_bytes_ = detail::directory_bytes(options_.path).wal;
  if (accounted_bytes() <= options_.capacity_bytes) {
    return;
  }
  // The WAL is paid from the same budget: the values go down to what is left.
  const auto fraction = static_cast<std::uint64_t>(static_cast<double>(options_.capacity_bytes) *
                                                   options_.evict_to_fraction);
  const std::uint64_t wal = wal_bytes_.load();
  const std::uint64_t target = fraction > wal ? fraction - wal : 0;
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
  std::uint64_t evicted = 0;
  const auto evict = [&](std::string_view ikey) -> Result<void> {
    if (ikey.empty()) {
      return {};
    }
    if (auto ok = remove(static_cast<Area>(ikey[0]), ikey.substr(1)); !ok) {
      return ok;
    }
    ++evicted;
    return {};
  };
  if (order_index_) {
    // Least recently read first: the end of the last-access order (its
    // iterator keeps what it started from while entries are removed).
    std::unique_ptr<rocksdb::Iterator> it(
        handles_->db->NewIterator(rocksdb::ReadOptions(), handles_->order));
    // The last key before the next tag: no order key is a lone tag byte.
    it->SeekForPrev(
        std::string(1, static_cast<char>(detail::order_tag(ListOrder::kLastAccess) + 1)));
    for (; it->Valid() && total_bytes_.load() > target_bytes; it->Prev()) {
      const auto k = detail::parse_order_key(ListOrder::kLastAccess,
                                             std::string_view(it->key().data(), it->key().size()));
      if (!k) {
        break; // past the order's first key
      }
      if (auto ok = evict(k->ikey); !ok) {
        return tl::unexpected(ok.error());
      }
    }
    if (!it->status().ok()) {
      return tl::unexpected(io_error(it->status(), "scan for eviction"));
    }
  } else {
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
    for (const Candidate& c : candidates) {
      if (total_bytes_.load() <= target_bytes) {
        break;
      }
      if (auto ok = evict(c.ikey); !ok) {
        return tl::unexpected(ok.error());
      }
    }
  }
  evictions_.add(evicted);
  if (evicted > 0) {
    spdlog::debug("rocksdb store: evicted {} entries, {} bytes remain", evicted,
                  total_bytes_.load());
  }
  return evicted;
}

Result<std::vector<ObjectInfo>> RocksDbStore::list(const ListOptions& options) {
  std::vector<ObjectInfo> out;
  std::unique_ptr<rocksdb::Iterator> it(
      handles_->db->NewIterator(rocksdb::ReadOptions(), handles_->access));
  for (const Area area : {Area::kAction, Area::kCas}) {
    if ((options.area && *options.area != area) || (options.after && options.after->area > area)) {
      continue;
    }
    // A seek to the prefix, or past the cursor when it lies beyond it: a
    // page costs what it returns, however many entries the store holds.
    const std::string start = index_key(area, options.prefix);
    it->Seek(start);
    if (options.after && options.after->area == area) {
      if (const std::string after = index_key(area, options.after->key); after >= start) {
        it->Seek(after);
        if (it->Valid() && std::string_view(it->key().data(), it->key().size()) == after) {
          it->Next();
        }
      }
    }
    for (; it->Valid() && out.size() < options.limit; it->Next()) {
      const std::string_view ikey(it->key().data(), it->key().size());
      if (!ikey.starts_with(start)) {
        break;
      }
      const auto r = AccessRecord::decode(std::string_view(it->value().data(), it->value().size()));
      if (!r) {
        continue; // orphan touch
      }
      out.push_back(ObjectInfo{area, std::string(ikey.substr(1)), r->size, r->created_ms,
                               r->last_access_ms, r->hits});
    }
  }
  if (!it->status().ok()) {
    return tl::unexpected(io_error(it->status(), "list"));
  }
  std::lock_guard lock(touch_mu_);
  for (ObjectInfo& info : out) {
    add_pending_reads_locked(info);
  }
  return out;
}

void RocksDbStore::add_pending_reads_locked(ObjectInfo& info) const {
  // Looked up for the rows listed only: a small page costs a few lookups,
  // not a copy of every pending touch.
  if (const auto p = touched_.find(index_key(info.area, info.key)); p != touched_.end()) {
    info.last_access_ms = std::max(info.last_access_ms, p->second.last_access_ms);
    info.hits += p->second.hits;
  }
}

} // namespace kcache::storage

namespace kcache::storage {

Result<TopList> RocksDbStore::list_top(const TopListOptions& options) {
  if (!order_index_) {
    return tl::unexpected(StoreError{StoreError::Code::kUnsupported,
                                     "rocksdb store at " + options_.path + " has no order index"});
  }
  // Reads not flushed yet would be missing from the order and the rows.
  if (auto ok = flush_access_times(); !ok) {
    return tl::unexpected(ok.error());
  }
  // One snapshot for the index and the records it names: a record that moved
  // meanwhile is seen where the snapshot has it, not twice or not at all.
  rocksdb::ManagedSnapshot snapshot(handles_->db.get());
  rocksdb::ReadOptions read;
  read.snapshot = snapshot.snapshot();
  TopList out;
  out.entries = options.area ? entries_[static_cast<std::size_t>(*options.area)].load()
                             : entries_[0].load() + entries_[1].load();
  std::unique_ptr<rocksdb::Iterator> it(handles_->db->NewIterator(read, handles_->order));
  std::vector<std::uint64_t> chunk; // the index's value per key of ikeys
  std::vector<std::string> ikeys;
  // The records of a chunk of index keys, read with one MultiGet.
  const auto take_chunk = [&]() -> Result<void> {
    std::vector<rocksdb::Slice> slices(ikeys.begin(), ikeys.end());
    std::vector<rocksdb::ColumnFamilyHandle*> families(ikeys.size(), handles_->access);
    std::vector<std::string> values;
    const auto statuses = handles_->db->MultiGet(read, families, slices, &values);
    for (std::size_t i = 0; i < ikeys.size() && out.rows.size() < options.limit; ++i) {
      if (!statuses[i].ok() && !statuses[i].IsNotFound()) {
        return tl::unexpected(io_error(statuses[i], "list_top"));
      }
      const auto r = statuses[i].ok() ? AccessRecord::decode(values[i]) : std::nullopt;
      // An index key whose record is gone or says otherwise is stale
      // (kept in step by every write; skipped should one ever differ).
      if (!r || detail::order_value(*r, options.order) != chunk[i]) {
        continue;
      }
      out.rows.push_back(ObjectInfo{static_cast<Area>(ikeys[i][0]), ikeys[i].substr(1), r->size,
                                    r->created_ms, r->last_access_ms, r->hits});
    }
    chunk.clear();
    ikeys.clear();
    return {};
  };
  constexpr std::size_t kChunk = 256;
  for (it->Seek(std::string(1, detail::order_tag(options.order)));
       it->Valid() && out.rows.size() < options.limit; it->Next()) {
    const auto k = detail::parse_order_key(options.order,
                                           std::string_view(it->key().data(), it->key().size()));
    if (!k || k->ikey.empty()) {
      break; // the end of this order
    }
    if (options.area && static_cast<Area>(k->ikey[0]) != *options.area) {
      continue; // the other area: read past (its share of the order)
    }
    ikeys.emplace_back(k->ikey);
    chunk.push_back(k->value);
    // A chunk no larger than the rows still missing: a short page reads little.
    if (chunk.size() >= std::min(kChunk, options.limit - out.rows.size())) {
      if (auto ok = take_chunk(); !ok) {
        return tl::unexpected(ok.error());
      }
    }
  }
  if (!it->status().ok()) {
    return tl::unexpected(io_error(it->status(), "list_top"));
  }
  if (!chunk.empty() && out.rows.size() < options.limit) {
    if (auto ok = take_chunk(); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  return out;
}

Result<std::vector<std::optional<ObjectInfo>>>
RocksDbStore::describe(std::span<const ListCursor> entries) {
  std::vector<std::string> ikeys;
  ikeys.reserve(entries.size());
  for (const ListCursor& e : entries) {
    ikeys.push_back(index_key(e.area, e.key));
  }
  std::vector<rocksdb::Slice> slices(ikeys.begin(), ikeys.end());
  std::vector<rocksdb::ColumnFamilyHandle*> families(ikeys.size(), handles_->access);
  std::vector<std::string> values;
  const auto statuses = handles_->db->MultiGet(rocksdb::ReadOptions(), families, slices, &values);
  std::vector<std::optional<ObjectInfo>> out(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!statuses[i].ok() && !statuses[i].IsNotFound()) {
      return tl::unexpected(io_error(statuses[i], "describe"));
    }
    if (const auto r = statuses[i].ok() ? AccessRecord::decode(values[i]) : std::nullopt) {
      out[i] = ObjectInfo{entries[i].area, entries[i].key,    r->size,
                          r->created_ms,   r->last_access_ms, r->hits};
    }
  }
  std::lock_guard lock(touch_mu_);
  for (std::optional<ObjectInfo>& info : out) {
    if (info) {
      add_pending_reads_locked(*info);
    }
  }
  return out;
}

} // namespace kcache::storage
