#pragma once
// A small tmpfs mounted for one test, so full-disk behaviour is real ENOSPC on
// a real filesystem. Mounting needs root (CAP_SYS_ADMIN); where it is refused
// the test skips with the reason. fill() takes the remaining space with a
// filler file, release() gives it back.

#include "../support/temp_dir.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace kcache::testing {

class TmpfsMount {
public:
  explicit TmpfsMount(std::uint64_t size_bytes) {
    const std::string options = "size=" + std::to_string(size_bytes);
    if (::mount("tmpfs", dir_.str().c_str(), "tmpfs", 0, options.c_str()) != 0) {
      error_ = "cannot mount a " + std::to_string(size_bytes >> 20) + " MiB tmpfs at " +
               dir_.str() + ": " + std::strerror(errno) +
               " (needs root or CAP_SYS_ADMIN); the full-disk test needs a small filesystem";
      return;
    }
    mounted_ = true;
  }
  ~TmpfsMount() {
    if (mounted_) {
      ::umount2(dir_.str().c_str(), MNT_DETACH);
    }
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  std::filesystem::path path() const { return dir_.path(); }

  std::uint64_t free_bytes() const {
    struct statvfs fs {};
    ::statvfs(dir_.str().c_str(), &fs);
    return static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  }
  // Writes a filler file until the filesystem is full (or `leave` bytes are left).
  void fill(std::uint64_t leave = 0) {
    const int fd = ::open(filler().c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const std::string chunk(64 << 10, 'f');
    while (fd >= 0 && free_bytes() > leave) {
      const std::uint64_t want = std::min<std::uint64_t>(chunk.size(), free_bytes() - leave);
      if (::write(fd, chunk.data(), want) <= 0) {
        break;
      }
    }
    if (fd >= 0) {
      ::close(fd);
    }
  }
  void release() {
    std::error_code ec;
    std::filesystem::remove(filler(), ec);
  }

private:
  std::filesystem::path filler() const { return dir_.path() / "filler"; }

  TempDir dir_;
  bool mounted_ = false;
  std::string error_;
};

} // namespace kcache::testing
