#include "upload_spool.h"

#include <kcache/storage/chunked_blob.h>

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace kcache::service {

namespace {

constexpr std::string_view kFallbackPrefix = "upload-";

SpoolError io_error(const std::string& what, int err) {
  return {err == ENOSPC || err == EDQUOT ? SpoolError::Code::kNoSpace : SpoolError::Code::kIo,
          what + ": " + std::strerror(err)};
}

// An unnamed file in `dir`; where O_TMPFILE is unsupported (EOPNOTSUPP,
// EISDIR on old kernels), a named one unlinked at once.
int open_unnamed(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) {
    return fd;
  }
  std::string path = dir + "/" + std::string(kFallbackPrefix) + "XXXXXX";
  const int named = ::mkostemp(path.data(), O_CLOEXEC);
  if (named >= 0) {
    ::unlink(path.c_str());
  }
  return named;
}

} // namespace

tl::expected<void, std::string> UploadSpool::prepare_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return tl::unexpected("cannot create the upload spool dir " + dir + ": " + ec.message());
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().starts_with(kFallbackPrefix)) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
  return {};
}

tl::expected<std::unique_ptr<UploadSpool>, SpoolError>
UploadSpool::open(const std::string& dir, std::shared_ptr<SpoolQuota> quota, bool hashing) {
  const int fd = open_unnamed(dir);
  if (fd < 0) {
    return tl::unexpected(io_error("cannot open an upload spool file in " + dir, errno));
  }
  return std::make_unique<UploadSpool>(fd, std::move(quota), hashing);
}

UploadSpool::UploadSpool(int fd, std::shared_ptr<SpoolQuota> quota, bool hashing)
    : fd_(fd), quota_(std::move(quota)), hashing_(hashing) {}

UploadSpool::~UploadSpool() {
  ::close(fd_);
  quota_->release(reserved_);
}

bool UploadSpool::reserve(std::uint64_t bytes) {
  if (!quota_->try_reserve(bytes)) {
    return false;
  }
  reserved_ += bytes;
  return true;
}

std::optional<SpoolError> UploadSpool::lacks_room_for(std::uint64_t bytes) const {
  struct statvfs fs {};
  if (::fstatvfs(fd_, &fs) != 0) {
    return std::nullopt; // unknown: the writes will tell
  }
  const std::uint64_t free = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free >= bytes) {
    return std::nullopt;
  }
  return SpoolError{SpoolError::Code::kNoSpace,
                    "the upload spool's disk has " + std::to_string(free) +
                        " bytes free, the body is " + std::to_string(bytes)};
}

tl::expected<void, SpoolError> UploadSpool::append(std::string_view bytes) {
  const std::uint64_t after = written_ + bytes.size();
  if (after > reserved_ && !reserve(after - reserved_)) {
    return tl::unexpected(SpoolError{SpoolError::Code::kQuota,
                                     "the server's upload spool (" + std::to_string(quota_->cap()) +
                                         " bytes on disk) is full; retry later"});
  }
  if (hashing_) {
    hash_.update(bytes);
  }
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return tl::unexpected(io_error("writing the upload spool", errno));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  written_ = after;
  return {};
}

void UploadSpool::finish() {
  if (hashing_) {
    sha256_hex_ = cachekey::to_hex(hash_.finish());
  }
}

std::uint64_t UploadSpool::window() const {
  return storage::kChunkSize;
}

tl::expected<std::string_view, std::string> UploadSpool::next() {
  const std::uint64_t want = std::min<std::uint64_t>(storage::kChunkSize, written_ - read_at_);
  auto piece = read_at(read_at_, static_cast<std::size_t>(want));
  if (piece) {
    read_at_ += piece->size();
  }
  return piece;
}

tl::expected<std::string_view, std::string> UploadSpool::read_at(std::uint64_t at, std::size_t n) {
  if (at > written_ || n > written_ - at) {
    return tl::unexpected(std::string("reading the upload spool past its end"));
  }
  piece_.resize(n);
  std::size_t got = 0;
  while (got < piece_.size()) {
    const ssize_t r =
        ::pread(fd_, piece_.data() + got, piece_.size() - got, static_cast<off_t>(at + got));
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      const std::string why =
          r < 0 ? std::strerror(errno) : std::string("the spool file ended early");
      spdlog::error("reading an upload spool back: {}", why);
      return tl::unexpected("reading the upload spool: " + why);
    }
    got += static_cast<std::size_t>(r);
  }
  return std::string_view(piece_);
}

} // namespace kcache::service
