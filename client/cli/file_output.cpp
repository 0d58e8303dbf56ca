#include "file_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

namespace kcache::cli {

namespace {

std::string failure(const std::string& what, const std::string& path, int error) {
  return "cannot " + what + " " + path + ": " + std::strerror(error);
}

// Closes the descriptor and removes the temporary file unless released.
class TempFile {
public:
  TempFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    if (!path_.empty()) {
      ::unlink(path_.c_str());
    }
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }
  void release() { path_.clear(); }

private:
  int fd_;
  std::string path_;
};

} // namespace

tl::expected<void, std::string> write_file_atomically(const std::string& path,
                                                      std::string_view data) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  std::string temp_name = (dir / ("." + target.filename().string() + ".kcache-XXXXXX")).string();
  const int fd = ::mkstemp(temp_name.data());
  if (fd < 0) {
    return tl::unexpected(failure("write", path, errno));
  }
  TempFile temp(fd, temp_name);
  // mkstemp makes 0600; a written file gets the usual mode (0666 & ~umask).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(temp.fd(), 0666 & ~mask) != 0) {
    return tl::unexpected(failure("write", path, errno));
  }
  for (std::size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(temp.fd(), data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return tl::unexpected(failure("write", path, errno));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(temp.fd()) != 0 || temp.close() != 0) {
    return tl::unexpected(failure("write", path, errno));
  }
  if (::rename(temp.path().c_str(), path.c_str()) != 0) {
    return tl::unexpected(failure("write", path, errno));
  }
  temp.release();
  return {};
}

} // namespace kcache::cli
