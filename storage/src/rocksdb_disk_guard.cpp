#include "rocksdb_disk_guard.h"

#include "disk_space.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

namespace kcache::storage::detail {

DiskGuard::DiskGuard(std::string dir, std::uint64_t reserve_bytes)
    : dir_(std::move(dir)), ballast_(dir_ + "/KCACHE_RESERVE"), reserve_bytes_(reserve_bytes) {}

bool DiskGuard::hold_reserve(std::uint64_t free_bytes) {
  if (holding_.load() || reserve_bytes_ == 0) {
    return holding_.load();
  }
  if (free_bytes < 2 * reserve_bytes_) {
    return false;
  }
  const int fd = ::open(ballast_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return false;
  }
  // Allocated blocks, not a sparse file: the room is really taken.
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(reserve_bytes_));
  ::close(fd);
  if (rc != 0) {
    std::remove(ballast_.c_str());
    return false;
  }
  holding_ = true;
  return true;
}

void DiskGuard::release_reserve(const char* why) {
  if (std::remove(ballast_.c_str()) == 0 && holding_.exchange(false)) {
    spdlog::warn("rocksdb store at {}: released its {} byte disk reserve {}", dir_, reserve_bytes_,
                 why);
  }
  holding_ = false;
}

void DiskGuard::release_if_short(rocksdb::DB* db, const char* before) {
  if (!holding_.load()) {
    return;
  }
  const std::optional<std::uint64_t> free = free_disk_bytes(dir_);
  std::uint64_t unflushed = 0;
  db->GetAggregatedIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables, &unflushed);
  // What a flush writes, with room to spare; a compaction writes less than
  // its inputs, which are at most a memtable's worth here.
  if (free && *free < unflushed + reserve_bytes_ / 2) {
    release_reserve(before);
  }
}

void DiskGuard::OnFlushBegin(rocksdb::DB* db, const rocksdb::FlushJobInfo& /*info*/) {
  release_if_short(db, "before a flush: the disk is nearly full");
}

void DiskGuard::OnCompactionBegin(rocksdb::DB* db, const rocksdb::CompactionJobInfo& /*info*/) {
  release_if_short(db, "before a compaction: the disk is nearly full");
}

void DiskGuard::OnBackgroundError(rocksdb::BackgroundErrorReason /*reason*/,
                                  rocksdb::Status* error) {
  background_error_ = true;
  spdlog::error("rocksdb store at {}: background error, writes stop until it is resumed: {}", dir_,
                error->ToString());
}

} // namespace kcache::storage::detail
