#include <kcache/storage/chunked_blob.h>

#include <spdlog/spdlog.h>

namespace kcache::storage {

namespace {

// Writes one CAS entry unless the store already has it.
Result<void> put_once(Store& store, std::string_view digest, std::string_view data) {
  auto present = store.contains(Area::kCas, digest);
  if (present && *present) {
    return {};
  }
  return store.put(Area::kCas, digest, data);
}

} // namespace

Result<std::vector<ChunkRef>> put_blob(Store& store, std::string_view digest,
                                       std::string_view data) {
  std::vector<ChunkRef> chunks;
  if (data.size() <= kChunkThreshold) {
    if (auto ok = put_once(store, digest, data); !ok) {
      return tl::unexpected(ok.error());
    }
    return chunks;
  }
  chunks.reserve((data.size() + kChunkSize - 1) / kChunkSize);
  for (std::size_t at = 0; at < data.size(); at += kChunkSize) {
    auto chunk = put_chunk(store, data.substr(at, kChunkSize));
    if (!chunk) {
      return tl::unexpected(chunk.error());
    }
    chunks.push_back(std::move(*chunk));
  }
  return chunks;
}

Result<ChunkRef> put_chunk(Store& store, std::string_view data) {
  ChunkRef chunk{cachekey::to_hex(cachekey::Sha256::of(data)), data.size()};
  if (auto ok = put_once(store, chunk.digest, data); !ok) {
    return tl::unexpected(ok.error());
  }
  return chunk;
}

BlobReader::BlobReader(Store& store, std::string digest, std::uint64_t size,
                       std::vector<ChunkRef> chunks)
    : store_(store), digest_(std::move(digest)), size_(size), chunks_(std::move(chunks)) {
  if (!chunks_.empty()) {
    whole_.emplace();
  }
}

Result<std::optional<std::string_view>> BlobReader::fail(std::string why) {
  failed_ = true;
  piece_.clear();
  spdlog::warn("CAS blob {}: {}", digest_, why);
  return tl::unexpected(StoreError{StoreError::Code::kCorrupt, "blob " + digest_ + ": " + why});
}

Result<bool> BlobReader::present() {
  if (chunks_.empty()) {
    return store_.contains(Area::kCas, digest_);
  }
  for (const ChunkRef& chunk : chunks_) {
    auto found = store_.contains(Area::kCas, chunk.digest);
    if (!found || !*found) {
      return found;
    }
  }
  return true;
}

Result<std::optional<std::string_view>> BlobReader::next() {
  piece_.clear(); // the previous piece goes before the next is read
  if (failed_) {
    return tl::unexpected(
        StoreError{StoreError::Code::kCorrupt, "blob " + digest_ + ": read failed"});
  }
  if (done_) {
    return std::optional<std::string_view>{};
  }
  const bool whole = chunks_.empty();
  const std::string& key = whole ? digest_ : chunks_[index_].digest;
  const std::uint64_t expected = whole ? size_ : chunks_[index_].size;
  auto got = store_.get(Area::kCas, key);
  if (!got) {
    failed_ = true;
    return tl::unexpected(got.error());
  }
  if (!got->has_value()) {
    return fail(whole ? "missing" : "chunk " + key + " missing");
  }
  piece_ = std::move(**got);
  if (piece_.size() != expected) {
    return fail((whole ? "" : "chunk " + key + " ") + "has " + std::to_string(piece_.size()) +
                " bytes, its record says " + std::to_string(expected));
  }
  if (whole) {
    // Bound to its digest when read from a persisted tier, hashed when put.
    done_ = true;
    return std::optional<std::string_view>{piece_};
  }
  whole_->update(piece_);
  if (++index_ == chunks_.size()) {
    done_ = true;
    // The last piece is handed out only once the whole blob is known good.
    if (cachekey::to_hex(whole_->finish()) != digest_) {
      return fail("its chunks do not hash to the blob's digest");
    }
  }
  return std::optional<std::string_view>{piece_};
}

} // namespace kcache::storage
