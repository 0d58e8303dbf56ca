#pragma once
// The embedded node-local tier on RocksDB. Needs no server.
//
// - Column families: "ac" and "cas" hold values (BlobDB keeps large ones in
//   blob files, out of the LSM), "access" holds per-entry metadata (size,
//   created, last access, hits), "order" an index of the entries by each of
//   those (rocksdb_order_index.h): list_top() and eviction read it from an
//   end instead of every entry.
// - Capacity is bounded with LRU-by-access eviction. Reads do not write: they
//   mark the key as touched in memory, and touches are flushed as one batch
//   (records and index moved together) every interval or batch size.
// - A value RocksDB reports as corrupt (bad block or blob checksum) is a miss;
//   it is deleted and counted.
// - Capacity counts the values and the write-ahead log (bounded by
//   max_total_wal_size, so memtables are flushed instead of the WAL growing).
// - A full disk never reaches RocksDB: a put that would leave less free space
//   than pending flushes need plus `reserved_disk_bytes` is refused with
//   kNoSpace (logged once per episode), and reads keep working. Should RocksDB
//   still fail for lack of space, the error is kNoSpace and the database is
//   resumed once space is back. A start on a full disk opens read-only.

#include <kcache/storage/store.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
class Status;
} // namespace rocksdb

namespace kcache::storage {

struct RocksDbOptions {
  std::string path;
  std::uint64_t capacity_bytes = 10ULL << 30;
  // Eviction goes down to this fraction of the capacity, so it runs rarely.
  double evict_to_fraction = 0.9;
  std::uint64_t min_blob_size = 4096;
  std::uint64_t block_cache_bytes = 64ULL << 20;
  std::chrono::milliseconds access_flush_interval{1000};
  std::size_t access_flush_batch = 4096;
  // Disk space held back for RocksDB's own writes (flushes, compactions,
  // recovery), beyond what admitted puts need; 0: enough to flush a full WAL
  // (max_total_wal_size, a sixteenth of the capacity or disk, at most 64 MiB).
  std::uint64_t reserved_disk_bytes = 0;
};

class StoreUrl;
// rocksdb:///var/lib/kcache?capacity=10GiB&min_blob_size=4096
Result<RocksDbOptions> parse_rocksdb_url(const StoreUrl& url);

class RocksDbStore final : public Store {
public:
  static Result<std::unique_ptr<RocksDbStore>> open(const RocksDbOptions& options);
  ~RocksDbStore() override;

  std::string name() const override { return "rocksdb"; }
  GetResult get(Area area, std::string_view key) override;
  GetResult peek(Area area, std::string_view key) override;
  Result<void> put(Area area, std::string_view key, std::string_view value) override;
  Result<bool> contains(Area area, std::string_view key) override;
  Result<void> remove(Area area, std::string_view key) override;
  Result<std::vector<ObjectInfo>> list(const ListOptions& options) override;
  // kUnsupported when opened read-only on a store without the index.
  Result<TopList> list_top(const TopListOptions& options) override;
  Result<std::vector<std::optional<ObjectInfo>>>
  describe(std::span<const ListCursor> entries) override;
  std::vector<GetResult> get_many(Area area, std::span<const std::string> keys) override;
  CounterSnapshot counters() const override {
    return {.corrupt = corrupt_.load(), .evictions = evictions_.load()};
  }
  StoreUsage usage() const override {
    return {accounted_bytes(), capacity_bytes(), entries_[0].load() + entries_[1].load()};
  }

  std::uint64_t size_bytes() const { return total_bytes_.load(); }
  // What counts against the capacity: the values plus the write-ahead log.
  std::uint64_t accounted_bytes() const { return total_bytes_.load() + wal_bytes_.load(); }
  // True when the disk was full at start-up: reads only (until restarted).
  bool read_only() const { return read_only_; }
  std::uint64_t capacity_bytes() const { return options_.capacity_bytes; }
  // Writes pending access times now (also done on a timer and on close).
  Result<void> flush_access_times();
  // Flushes memtables to SST/blob files (tests, shutdown, backups).
  Result<void> flush();
  // Evicts least recently accessed entries until at most target_bytes remain.
  Result<std::uint64_t> evict_to(std::uint64_t target_bytes);

  struct Handles; // RocksDB handles, defined in the .cpp
  // Only open() can make the key, so only open() constructs a store.
  class OpenKey {
    friend class RocksDbStore;
    OpenKey() = default;
  };
  RocksDbStore(OpenKey, RocksDbOptions options, std::unique_ptr<Handles> handles, bool read_only);

private:
  rocksdb::ColumnFamilyHandle* family(Area area) const;
  void touch(Area area, std::string_view key);
  // Adds the reads not flushed yet to a listed row (touch_mu_ held).
  void add_pending_reads_locked(ObjectInfo& info) const;
  void maybe_evict();
  void drop_corrupt(Area area, std::string_view key, const std::string& why);
  // kNoSpace when the write of `bytes` could fill the disk; resumes RocksDB
  // once space is back after a failure.
  Result<void> admit(std::uint64_t bytes);
  StoreError write_error(const rocksdb::Status& s, std::string_view what);
  void note_no_space(const std::string& why);

  RocksDbOptions options_;
  std::unique_ptr<Handles> handles_;
  const bool read_only_;
  std::atomic<std::uint64_t> total_bytes_{0};
  std::atomic<std::uint64_t> entries_[2] = {0, 0}; // per Area
  bool order_index_ = false;                       // the order family is there and built
  std::atomic<std::uint64_t> wal_bytes_{0};        // measured after each put
  std::atomic<bool> out_of_space_{false};          // a no-space episode, logged once
  std::atomic<bool> needs_resume_{false};          // RocksDB itself failed a write for space
  EventCounter corrupt_;
  EventCounter evictions_;
  // Orders puts, removes and touch flushes: each reads an entry's record and
  // writes it with its index keys in one batch.
  std::mutex write_mu_;
  std::mutex evict_mu_;
  std::mutex touch_mu_;
  struct Touched {
    std::int64_t last_access_ms = 0;
    std::uint64_t hits = 0;
  };
  std::unordered_map<std::string, Touched> touched_; // index key -> reads since the last flush
  std::chrono::steady_clock::time_point last_touch_flush_ = std::chrono::steady_clock::now();
};

} // namespace kcache::storage
