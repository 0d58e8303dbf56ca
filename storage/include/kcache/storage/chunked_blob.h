#pragma once
// Large CAS blobs stored as chunks, read back one chunk at a time.
//
// A blob over kChunkThreshold is written as kChunkSize pieces, each an
// ordinary CAS entry of its own (framed, compressed and bound to its digest
// like any blob, on every tier: memory, RocksDB, Redis), and its record's
// output lists them (OutputRef::chunks) beside the whole blob's digest. A
// reader then holds one chunk at a time instead of the whole blob (and
// kcached streams it: a connection holds a chunk, not the artifact), and no
// tier is asked to keep a value larger than a chunk. Smaller blobs, and
// blobs stored whole before chunking existed, are read as before.
//
// Integrity: every chunk is verified against its digest by the framed tier
// that returns it, its size against the list, and the whole blob's SHA-256 is
// computed as the chunks go by and checked before the last chunk is handed
// out: a corrupt or missing chunk ends the read with an error, so a streamed
// response stops short of its Content-Length instead of completing wrong.

#include <kcache/cachekey/sha256.h>
#include <kcache/storage/store.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::storage {

struct ChunkRef {
  std::string digest; // sha256 hex of the chunk
  std::uint64_t size = 0;
  friend bool operator==(const ChunkRef&, const ChunkRef&) = default;
};

// Blobs up to this size are stored whole; a reader holds at most this much of one blob.
inline constexpr std::size_t kChunkThreshold = 2 << 20;
// 4 KiB under 1 MiB: a chunk, framed (header + SHA-256) and stored as a Redis
// string, then fits jemalloc's 1 MiB size class instead of spilling into the
// 1.25 MiB one (25% of Redis memory wasted per chunk; docs/SCALING.md).
inline constexpr std::size_t kChunkSize = (1 << 20) - (4 << 10);

// Stores `data` under its digest (whole) or as chunks (over the threshold);
// returns the chunk list, empty for a blob stored whole. Entries already
// present are not written again.
Result<std::vector<ChunkRef>> put_blob(Store& store, std::string_view digest,
                                       std::string_view data);

// Stores one chunk of a blob read piece by piece (an upload spooled to disk),
// unless present; put_blob's step. Returns the chunk's reference.
Result<ChunkRef> put_chunk(Store& store, std::string_view data);

// Reads one blob (whole or chunked) piece by piece.
class BlobReader {
public:
  // `digest` and `size` as the record lists them; `chunks` empty: stored whole.
  BlobReader(Store& store, std::string digest, std::uint64_t size, std::vector<ChunkRef> chunks);

  // The next piece (valid until the next call), std::nullopt once the whole
  // blob has been handed out. A missing, corrupt or mis-sized piece, or a
  // whole-blob digest mismatch, is an error (kCorrupt), never a short blob.
  Result<std::optional<std::string_view>> next();

  // True when every piece the blob needs is present (a miss otherwise).
  Result<bool> present();

private:
  Result<std::optional<std::string_view>> fail(std::string why);

  Store& store_;
  std::string digest_;
  std::uint64_t size_;
  std::vector<ChunkRef> chunks_;
  std::size_t index_ = 0;
  bool done_ = false;
  bool failed_ = false;                   // every later call fails too
  std::optional<cachekey::Sha256> whole_; // chunked only
  Bytes piece_;
};

} // namespace kcache::storage
