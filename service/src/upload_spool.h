#pragma once
// A request body spooled to an unnamed file under the data dir instead of
// memory (issue 13: three 500 MB uploads held 1.5 GB of RSS when buffered).
// HttpServer writes a raw-byte upload's body here piece by piece as it
// arrives, hashing it (SHA-256) on the way; the route then reads it back one
// chunk at a time and stores it as chunks (chunked_blob.h), so an upload costs
// the daemon a read buffer and one chunk whatever its size.
//
// The file is opened O_TMPFILE (never has a name; where the file system lacks
// it, created and unlinked at once), so it vanishes when the fd closes: on
// success, on error and on a disconnect alike, and after a crash. Its bytes
// count against a SpoolQuota shared by all uploads (limits.spool_disk).

#include <kcache/cachekey/sha256.h>
#include <kcache/service/piece_body.h>

#include <tl/expected.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kcache::service {

// Spool bytes on disk across all uploads, under a cap.
class SpoolQuota {
public:
  explicit SpoolQuota(std::uint64_t cap) : cap_(cap) {}
  bool try_reserve(std::uint64_t bytes) {
    std::uint64_t used = used_.load();
    do {
      if (used + bytes > cap_) {
        return false;
      }
    } while (!used_.compare_exchange_weak(used, used + bytes));
    return true;
  }
  void release(std::uint64_t bytes) { used_.fetch_sub(bytes); }
  std::uint64_t used() const { return used_.load(); }
  std::uint64_t cap() const { return cap_; }

private:
  const std::uint64_t cap_;
  std::atomic<std::uint64_t> used_{0};
};

struct SpoolError {
  // kQuota: the spool quota is spent (503, retry later); kNoSpace: the disk
  // is full (507); kIo: anything else (500).
  enum class Code { kQuota, kNoSpace, kIo };
  Code code = Code::kIo;
  std::string message;
};

class UploadSpool final : public BodySource {
public:
  // Creates `dir` when missing and removes files a fallback spool left there
  // (a crash between its create and unlink). Called once at start.
  static tl::expected<void, std::string> prepare_dir(const std::string& dir);
  // `hashing`: whether append() hashes the body (a CAS blob's is checked
  // against its URL; an artifact's parts are hashed file by file later).
  static tl::expected<std::unique_ptr<UploadSpool>, SpoolError>
  open(const std::string& dir, std::shared_ptr<SpoolQuota> quota, bool hashing = true);

  UploadSpool(int fd, std::shared_ptr<SpoolQuota> quota, bool hashing);
  ~UploadSpool() override; // closes the fd (the file goes) and gives back its quota
  UploadSpool(const UploadSpool&) = delete;
  UploadSpool& operator=(const UploadSpool&) = delete;

  // Reserves quota ahead of the bytes (a known Content-Length at once).
  bool reserve(std::uint64_t bytes);
  // kNoSpace when the spool's file system has less than `bytes` free now, so
  // a body of known length is refused on its head (507) instead of midway.
  std::optional<SpoolError> lacks_room_for(std::uint64_t bytes) const;
  // Appends, hashing; reserves whatever the bytes need beyond the reservation.
  tl::expected<void, SpoolError> append(std::string_view bytes);
  // After the last append: the body's SHA-256 as 64 hex digits (when hashing).
  void finish();
  const std::string& sha256_hex() const { return sha256_hex_; }

  // `n` bytes from offset `at` (valid until the next read; fails past the
  // end), for a parts body parsed in place (spooled_parts.h).
  tl::expected<std::string_view, std::string> read_at(std::uint64_t at, std::size_t n);

  // BodySource: the spooled bytes read back from the start, in pieces of at
  // most storage::kChunkSize (so the store gets one chunk at a time).
  std::uint64_t size() const override { return written_; }
  std::uint64_t window() const override;
  tl::expected<std::string_view, std::string> next() override;

private:
  int fd_;
  std::shared_ptr<SpoolQuota> quota_;
  bool hashing_;
  std::uint64_t reserved_ = 0;
  std::uint64_t written_ = 0;
  std::uint64_t read_at_ = 0;
  cachekey::Sha256 hash_;
  std::string sha256_hex_;
  std::string piece_;
};

} // namespace kcache::service
