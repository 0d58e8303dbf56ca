#pragma once
// Keeps RocksDB from meeting a full disk. RocksDB stops writing after an
// ENOSPC until resumed, and the librocksdb builds we run with assertions on
// abort in some of those paths (a WAL or MANIFEST writer reused after its
// error): the daemon then died at every start. So the RocksDB tier
//   - admits a put only when the disk has room for it, for flushing what is
//     in the memtables, and for a reserve (RocksDbStore::admit);
//   - holds the reserve as a file (a ballast) in the data directory, and
//     deletes it before a flush or compaction when the disk filled from
//     outside meanwhile, so that RocksDB's own writes still fit;
//   - re-creates the ballast once there is room again.
// Internal to the storage library.

#include <rocksdb/listener.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace kcache::storage::detail {

class DiskGuard final : public rocksdb::EventListener {
public:
  DiskGuard(std::string dir, std::uint64_t reserve_bytes);

  std::uint64_t reserve_bytes() const { return reserve_bytes_; }
  bool holding() const { return holding_.load(); }
  // Creates the ballast when the disk has room for it and more; true if held.
  bool hold_reserve(std::uint64_t free_bytes);
  // Deletes the ballast (at start-up, recovery may need the room).
  void release_reserve(const char* why);

  // RocksDB calls these on its own threads before it writes files.
  void OnFlushBegin(rocksdb::DB* db, const rocksdb::FlushJobInfo& info) override;
  void OnCompactionBegin(rocksdb::DB* db, const rocksdb::CompactionJobInfo& info) override;
  void OnBackgroundError(rocksdb::BackgroundErrorReason reason, rocksdb::Status* error) override;

  // A background write failed (kept until a put resumes the database).
  bool take_background_error() { return background_error_.exchange(false); }

private:
  void release_if_short(rocksdb::DB* db, const char* before);

  const std::string dir_;
  const std::string ballast_;
  const std::uint64_t reserve_bytes_;
  std::atomic<bool> holding_{false};
  std::atomic<bool> background_error_{false};
};

} // namespace kcache::storage::detail
