#pragma once
// What a directory costs on disk and what its filesystem has left, for the
// RocksDB tier's admission and capacity checks. Internal to the storage library.

#include <cstdint>
#include <optional>
#include <string>

namespace kcache::storage::detail {

// Bytes an unprivileged writer may still use on the filesystem holding `path`;
// empty when statvfs fails (then no admission check is made).
std::optional<std::uint64_t> free_disk_bytes(const std::string& path);
// The size of that filesystem; empty when statvfs fails.
std::optional<std::uint64_t> disk_size_bytes(const std::string& path);

// The sizes of the regular files in `dir` (not recursive): for a RocksDB
// directory `total` is SST and blob files, WAL, MANIFEST and info logs, and
// `wal` the write-ahead logs alone (*.log; the info log is "LOG").
struct DirectoryBytes {
  std::uint64_t total = 0;
  std::uint64_t wal = 0;
};
DirectoryBytes directory_bytes(const std::string& dir);

} // namespace kcache::storage::detail
