#include "disk_space.h"

#include <sys/statvfs.h>

#include <filesystem>

namespace kcache::storage::detail {

std::optional<std::uint64_t> free_disk_bytes(const std::string& path) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0) {
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
}

std::optional<std::uint64_t> disk_size_bytes(const std::string& path) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0) {
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(fs.f_blocks) * fs.f_frsize;
}

DirectoryBytes directory_bytes(const std::string& dir) {
  DirectoryBytes bytes;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code size_ec;
    // Files come and go while RocksDB runs: one that vanished counts nothing.
    if (entry.is_regular_file(size_ec)) {
      const std::uintmax_t size = size_ec ? 0 : entry.file_size(size_ec);
      const std::uint64_t counted = size_ec ? 0 : size;
      bytes.total += counted;
      if (entry.path().extension() == ".log") {
        bytes.wal += counted;
      }
    }
  }
  return bytes;
}

} // namespace kcache::storage::detail
